"""dp_spark.summaries.packed_arrays: numpy arrays packed as Arrow binary
values read back from the buffers (no pyspark)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from dp_spark.summaries.packed_arrays import binary_values


def test_binary_values_read_every_row_of_a_column_a_slice_and_a_chunked_array():
    """Every row's values concatenated and the count per row, also for a
    sliced array (non-zero offset), empty rows, an empty slice and a
    ChunkedArray of several chunks."""
    parts = [np.arange(3, dtype=np.int64), np.empty(0, dtype=np.int64), np.array([-5, 9], dtype=np.int64),
             np.array([1 << 62], dtype=np.int64)]
    column = pa.array([p.tobytes() for p in parts], pa.binary())
    values, counts = binary_values(column, np.int64)
    assert values.tolist() == [0, 1, 2, -5, 9, 1 << 62] and counts.tolist() == [3, 0, 2, 1]
    values, counts = binary_values(column.slice(1, 2), np.int64)
    assert values.tolist() == [-5, 9] and counts.tolist() == [0, 2]
    values, counts = binary_values(column.slice(1, 1), np.int64)
    assert values.tolist() == [] and counts.tolist() == [0]
    assert binary_values(column.slice(4), np.int64)[1].tolist() == []
    rounds = pa.array([np.array([1, 2], dtype=np.int32).tobytes(), np.array([3], dtype=np.int32).tobytes()])
    assert binary_values(rounds.slice(1), np.int32)[0].tolist() == [3]
    chunked = pa.chunked_array([column.slice(0, 2), column.slice(2)])
    values, counts = binary_values(chunked, np.int64)
    assert values.tolist() == [0, 1, 2, -5, 9, 1 << 62] and counts.tolist() == [3, 0, 2, 1]
    assert binary_values(pa.chunked_array([], pa.binary()), np.int64)[0].dtype == np.int64


def _reference(column, dtype) -> tuple[list, list]:
    """binary_values by a copy of every value (to_pylist): the slow, obvious reading."""
    rows = column.to_pylist()
    arrays = [np.frombuffer(v, dtype=dtype) if v is not None else np.zeros(0, dtype=dtype) for v in rows]
    return [x for a in arrays for x in a.tolist()], [len(a) for a in arrays]


@pytest.mark.parametrize("arrow_type", [pa.binary(), pa.large_binary()])
def test_binary_values_read_both_offset_widths_in_slices_chunks_and_nulls(arrow_type):
    """Issue 35: under spark.sql.execution.arrow.useLargeVarTypes Spark hands
    packed columns to Python as large_binary (int64 offsets). Read as int32
    offsets they gave wrong rows (or none); every row is read right for both
    widths, for random values, slices, several chunks and nulls."""
    rng = np.random.default_rng(35)
    for trial in range(40):
        dtype = np.dtype([np.int32, np.int64][trial % 2])
        sizes = rng.integers(0, 6, int(rng.integers(0, 12)))
        rows = [rng.integers(-(1 << 40), 1 << 40, s).astype(dtype).tobytes() for s in sizes]
        rows = [None if rng.random() < 0.2 else r for r in rows]
        column = pa.array(rows, arrow_type)
        lo = int(rng.integers(0, len(rows) + 1))
        part = column.slice(lo, int(rng.integers(0, len(rows) - lo + 1)))
        cut = int(rng.integers(0, len(part) + 1))
        chunked = pa.chunked_array([part.slice(0, cut), part.slice(cut), column], arrow_type)
        for col in (column, part, chunked):
            values, counts = binary_values(col, dtype)
            assert values.dtype == dtype and counts.dtype == np.int64
            assert (values.tolist(), counts.tolist()) == _reference(col, dtype)


@pytest.mark.parametrize("arrow_type", [pa.binary(), pa.large_binary()])
def test_a_null_that_spans_bytes_holds_no_values(arrow_type):
    """Arrow lets a null's offsets span bytes: they are not values of any row."""
    width = np.int32 if arrow_type == pa.binary() else np.int64
    data = np.array([1, 2, 3, 4], dtype=np.int64)
    offsets = np.array([0, 8, 24, 32], dtype=width)
    validity = pa.array([True, False, True]).buffers()[1]
    column = pa.Array.from_buffers(arrow_type, 3, [validity, pa.py_buffer(offsets.tobytes()),
                                                   pa.py_buffer(data.tobytes())], null_count=1)
    values, counts = binary_values(column, np.int64)
    assert values.tolist() == [1, 4] and counts.tolist() == [1, 0, 1]
    values, counts = binary_values(column.slice(1), np.int64)
    assert values.tolist() == [4] and counts.tolist() == [0, 1]


def test_large_binary_is_read_like_binary_and_empty_columns_of_both_widths():
    parts = [np.arange(3, dtype=np.int64), np.empty(0, dtype=np.int64), np.array([-5, 9], dtype=np.int64)]
    small = pa.array([p.tobytes() for p in parts], pa.binary())
    large = small.cast(pa.large_binary())
    assert large.type == pa.large_binary()
    for lo in range(4):
        got_small, got_large = binary_values(small.slice(lo), np.int64), binary_values(large.slice(lo), np.int64)
        assert got_small[0].tolist() == got_large[0].tolist() and got_small[1].tolist() == got_large[1].tolist()
    assert binary_values(large, np.int64)[0].tolist() == [0, 1, 2, -5, 9]
    for arrow_type in (pa.binary(), pa.large_binary()):
        values, counts = binary_values(pa.chunked_array([], arrow_type), np.int32)
        assert values.dtype == np.int32 and values.shape == (0,) and counts.shape == (0,)
        values, counts = binary_values(pa.array([], arrow_type), np.int64)
        assert values.shape == (0,) and counts.shape == (0,)


@pytest.mark.parametrize("arrow_type", [pa.string(), pa.large_string(), pa.binary_view(), pa.binary(8), pa.int64()])
def test_any_other_column_type_is_refused(arrow_type):
    """Only binary and large_binary hold packed arrays: another type (e.g. a
    view type or fixed-size binary, which a future Spark setting might hand
    over) is refused by name instead of being read with the wrong layout."""
    values = [b"\x01\x00\x00\x00\x00\x00\x00\x00"] if arrow_type != pa.int64() else [1]
    if arrow_type in (pa.string(), pa.large_string()):
        values = ["12345678"]
    column = pa.array(values, arrow_type)
    with pytest.raises(TypeError, match="binary or large_binary"):
        binary_values(column, np.int64)
    with pytest.raises(TypeError, match="binary or large_binary"):
        binary_values(pa.chunked_array([column]), np.int64)
    with pytest.raises(TypeError, match="binary or large_binary"):
        binary_values(pa.chunked_array([], arrow_type), np.int64)


@pytest.mark.parametrize("arrow_type", [pa.binary(), pa.large_binary()])
def test_a_value_that_is_not_whole_items_is_refused(arrow_type):
    with pytest.raises(ValueError, match="multiple of 8 bytes"):
        binary_values(pa.array([b"\x00" * 8, b"\x00" * 5], arrow_type), np.int64)
