"""Numpy arrays packed as Arrow binary values (one value per row), read
back without a Python object per row: the transport of the stages that
ship many small numbers as a few rows (continual-distinct's cell chunks,
distinct-count's matched items). pyarrow and numpy only; no pyspark."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def binary_values(column: pa.Array | pa.ChunkedArray, dtype) -> tuple[np.ndarray, np.ndarray]:
    """(every row's values concatenated, as ``dtype``; how many values each
    row holds) of a binary column whose values are packed ``dtype`` arrays.
    Read from the column's offsets and data buffers (sliced arrays too);
    an empty or null value holds none."""
    dtype = np.dtype(dtype)
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    values, counts = [], []
    for chunk in chunks:
        offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int32)[chunk.offset:chunk.offset + len(chunk) + 1] \
            if len(chunk) else np.zeros(1, dtype=np.int32)
        counts.append(np.diff(offsets) // dtype.itemsize)
        start, stop = int(offsets[0]), int(offsets[-1])
        data = chunk.buffers()[2]
        if data is not None and stop > start:
            values.append(np.frombuffer(data, dtype=dtype, count=(stop - start) // dtype.itemsize, offset=start))
    value = np.concatenate(values) if values else np.zeros(0, dtype=dtype)
    count = np.concatenate(counts).astype(np.int64) if counts else np.zeros(0, dtype=np.int64)
    return value, count
