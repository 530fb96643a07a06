"""Numpy arrays packed as Arrow binary values (one array per row), read back without a Python object
per row: the transport of the stages that ship many small numbers as a few rows. pyarrow and numpy
only; NON-PRIVATE values, transport only.

Spark hands a binary column to Python as ``binary`` (int32 offsets) or, under
``spark.sql.execution.arrow.useLargeVarTypes=true`` (a user's session setting, left as it is), as
``large_binary`` (int64 offsets): both are read. Any other type is refused, never guessed at."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

#: The Arrow types a packed column may have, and the width of their offsets.
OFFSET_TYPES = {pa.binary(): np.dtype("<i4"), pa.large_binary(): np.dtype("<i8")}


def offset_dtype(arrow_type: pa.DataType) -> np.dtype:
    """The offsets' dtype of a packed column's Arrow type (int32 for
    ``binary``, int64 for ``large_binary``); a TypeError for any other."""
    try:
        return OFFSET_TYPES[arrow_type]
    except KeyError:
        raise TypeError(f"packed arrays are read from Arrow binary or large_binary columns, not {arrow_type}") \
            from None


def binary_values(column: pa.Array | pa.ChunkedArray, dtype) -> tuple[np.ndarray, np.ndarray]:
    """(every row's values concatenated as ``dtype``; how many values each row holds) of a binary or
    large_binary column of packed ``dtype`` arrays, read from the offsets and data buffers (sliced
    and chunked arrays too); an empty or null value holds none. TypeError for any other column type;
    ValueError for a value whose length is not a whole number of ``dtype`` items."""
    dtype = np.dtype(dtype)
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    offset_dtype(column.type)  # an empty chunked array is refused by type too
    values, counts = [], []
    for chunk in chunks:
        value, count = _chunk_values(chunk, dtype)
        values.append(value)
        counts.append(count)
    value = np.concatenate(values) if values else np.zeros(0, dtype=dtype)
    count = np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64)
    return value, count


def _chunk_values(chunk: pa.Array, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """:func:`binary_values` of one array."""
    width = offset_dtype(chunk.type)
    if not len(chunk):
        return np.zeros(0, dtype=dtype), np.zeros(0, dtype=np.int64)
    _, offset_buffer, data = chunk.buffers()
    offsets = np.frombuffer(offset_buffer, dtype=width, count=len(chunk) + 1,
                            offset=chunk.offset * width.itemsize).astype(np.int64)
    lengths = np.diff(offsets)
    valid = None
    if chunk.null_count:  # a null's offsets may still span bytes (Arrow allows it): they are not values
        valid = chunk.is_valid().to_numpy(zero_copy_only=False)
        lengths[~valid] = 0
    if (lengths % dtype.itemsize).any():
        raise ValueError(f"a packed value's length is not a multiple of {dtype.itemsize} bytes ({dtype})")
    start, stop = int(offsets[0]), int(offsets[-1])
    if data is None or stop <= start:
        return np.zeros(0, dtype=dtype), lengths // dtype.itemsize
    raw = np.frombuffer(data, dtype=np.uint8, count=stop - start, offset=start)
    if valid is not None:
        raw = raw[np.repeat(valid, np.diff(offsets))]
    return raw.view(dtype), lengths // dtype.itemsize
