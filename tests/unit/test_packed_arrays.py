"""dp_spark.summaries.packed_arrays: numpy arrays packed as Arrow binary
values read back from the buffers (no pyspark)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

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
