"""Flip cells packed in chunks: how the continual-distinct stage moves cells (no noise).

The Spark stage (``dp_spark.stages.continual``) runs the per-item kernels of
:mod:`dp_spark.summaries.continual_distinct` on item shards and sums each shard's (step, level)
cells over the shards. A shard's cells travel packed in one Arrow row per *chunk* of the cell key
range, not one Spark row per cell (chosen by measurement: benchmarks/results/2026-11-26-continual-packed-chunks.md):

- key of cell (step, level): (step − 1)·(J + 2) + level, in 0..T·(J + 2) − 1; with G groups a cell
  of group g at step t has the virtual step g·T + t, so keys run over 0..G·T·(J + 2) − 1 and groups
  never meet;
- chunk c holds the keys c·span .. (c + 1)·span − 1 (:class:`CellChunks`, from public parameters
  only);
- a row: ``chunk`` (int32), ``cell_key`` (the keys' offsets in the chunk, little-endian int32,
  sorted), ``delta`` and ``cross`` (the cells' sums, little-endian int64), as binary values.

:func:`sum_chunk_rows` adds rows of the same chunk cell by cell (exact int64), one row per chunk, so
after the sum every cell sits in one row: at most T·(J + 2) cells. Cells of disjoint item sets add
up (:func:`dp_spark.summaries.continual_distinct.flip_cells`), so the result does not depend on how
items were sharded or rows routed (tested). Pure numpy and pyarrow; everything here is NON-PRIVATE."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dp_spark.summaries.continual_distinct import flip_cells, flip_events
from dp_spark.summaries.packed_arrays import binary_values

CHUNK = "chunk"
CELL_KEY = "cell_key"
DELTA = "delta"
CROSS = "cross"

#: Chunks per partition of the chunk sum: chunks are hash-partitioned, so a
#: few per partition even out the load.
CHUNKS_PER_PARTITION = 8

CHUNK_ARROW = pa.schema([(CHUNK, pa.int32()), (CELL_KEY, pa.binary()), (DELTA, pa.binary()), (CROSS, pa.binary())])
_KEY_DTYPE, _SUM_DTYPE = np.dtype("<i4"), np.dtype("<i8")
_EMPTY = np.zeros(0, np.int64)


@dataclass(frozen=True)
class CellChunks:
    """How (step, level) cells of ``groups`` groups are keyed and cut into
    ``chunks`` chunks of ``span`` keys (module docstring); public
    parameters only."""

    tree_horizon: int
    max_level: int
    chunks: int
    groups: int = 1

    @property
    def width(self) -> int:
        return self.max_level + 2

    @property
    def span(self) -> int:
        return -(-self.groups * self.tree_horizon * self.width // self.chunks)

    def keys(self, step: np.ndarray, level: np.ndarray) -> np.ndarray:
        """The key of each (step, level) cell."""
        return (np.asarray(step, np.int64) - 1) * self.width + np.asarray(level, np.int64)

    def cells(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(step, level) of each key (the virtual step g·T + t of a group's cell)."""
        return keys // self.width + 1, keys % self.width

    def group_cells(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(group, step, level) of each key, step in 1..T."""
        virtual, level = self.cells(keys)
        return (virtual - 1) // self.tree_horizon, (virtual - 1) % self.tree_horizon + 1, level


def cell_chunks(tree_horizon: int, max_level: int, partitions: int, groups: int = 1) -> CellChunks:
    """The chunking for a sum in ``partitions`` partitions: CHUNKS_PER_PARTITION chunks per
    partition, at most one per cell. Offsets inside a chunk must fit int32 (ValueError otherwise)."""
    total = int(groups) * int(tree_horizon) * (int(max_level) + 2)
    chunks = max(1, min(CHUNKS_PER_PARTITION * int(partitions), total))
    layout = CellChunks(int(tree_horizon), int(max_level), chunks, int(groups))
    if layout.span >= 2**31:
        raise ValueError("a chunk of the cell keys must fit int32 offsets; raise the partitions")
    return layout


def chunk_rows(layout: CellChunks, keys: np.ndarray, delta: np.ndarray, cross: np.ndarray) -> pa.RecordBatch:
    """Cells with sorted, unique ``keys`` → one Arrow row per non-empty chunk."""
    chunk = keys // layout.span
    bounds = np.flatnonzero(np.diff(chunk)) + 1
    starts = np.concatenate(([0], bounds)).tolist()
    ends = np.concatenate((bounds, [keys.shape[0]])).tolist()
    ids, local, deltas, crosses = [], [], [], []
    for lo, hi in zip(starts, ends):
        c = int(chunk[lo])
        ids.append(c)
        local.append((keys[lo:hi] - c * layout.span).astype(_KEY_DTYPE).tobytes())
        deltas.append(np.asarray(delta[lo:hi]).astype(_SUM_DTYPE).tobytes())
        crosses.append(np.asarray(cross[lo:hi]).astype(_SUM_DTYPE).tobytes())
    arrays = [pa.array(ids, pa.int32()), pa.array(local, pa.binary()), pa.array(deltas, pa.binary()),
              pa.array(crosses, pa.binary())]
    return pa.RecordBatch.from_arrays(arrays, schema=CHUNK_ARROW)


def item_codes(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Equal items → equal int64 codes: one Arrow hash dictionary for all chunks, so codes agree
    across batches."""
    encoded = pc.dictionary_encode(column)
    chunks = encoded.chunks if isinstance(encoded, pa.ChunkedArray) else [encoded]
    parts = [chunk.indices.to_numpy(zero_copy_only=False) for chunk in chunks]
    return np.concatenate(parts).astype(np.int64, copy=False) if parts else _EMPTY


def shard_chunk_rows(step: np.ndarray, codes: np.ndarray, op: np.ndarray, order: np.ndarray | None,
                     layout: CellChunks, groups: np.ndarray | None = None) -> pa.RecordBatch | None:
    """One item shard's events (all events of each of its items; ``order``, ``groups`` optional,
    None is group 0) → its flip cells as chunk rows (None when no item flips). An item's events in
    two groups are two items (group, item), so groups never interact; a flip of group g at step t
    sits at g·T + t."""
    if groups is not None:
        width = int(codes.max()) + 1 if codes.shape[0] else 1
        codes = np.asarray(groups, np.int64) * width + codes  # the virtual item (group, item)
    flips = flip_events(step, codes, op, order)
    if groups is not None:
        flips = dataclasses.replace(flips, time=flips.item // width * layout.tree_horizon + flips.time)
    cell_step, level, delta, cross = flip_cells(flips, layout.max_level)
    if cell_step.shape[0] == 0:
        return None
    return chunk_rows(layout, layout.keys(cell_step, level), delta, cross)  # flip_cells: sorted, unique


def unpack(table: pa.Table | pa.RecordBatch, layout: CellChunks) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(keys, delta, cross) of every cell in chunk rows, int64 (repeats kept)."""
    local, per_row = binary_values(table.column(CELL_KEY), _KEY_DTYPE)
    if local.shape[0] == 0:
        return _EMPTY, _EMPTY, _EMPTY
    chunk = np.asarray(table.column(CHUNK).to_numpy(), dtype=np.int64)
    keys = local.astype(np.int64) + np.repeat(chunk * layout.span, per_row)
    return (keys, binary_values(table.column(DELTA), _SUM_DTYPE)[0].astype(np.int64),
            binary_values(table.column(CROSS), _SUM_DTYPE)[0].astype(np.int64))


def add_cells(keys: np.ndarray, delta: np.ndarray, cross: np.ndarray):
    """Cells with equal keys added (exact int64); keys sorted and unique."""
    if keys.shape[0] == 0:
        return keys, delta, cross
    order = np.argsort(keys, kind="stable")
    keys, delta, cross = keys[order], delta[order], cross[order]
    starts = np.concatenate(([0], np.flatnonzero(np.diff(keys)) + 1))
    return keys[starts], np.add.reduceat(delta, starts), np.add.reduceat(cross, starts)


def sum_chunk_rows(table: pa.Table | pa.RecordBatch, layout: CellChunks) -> pa.RecordBatch | None:
    """Chunk rows (any shards, any order) → one row per chunk, each cell's
    delta and cross added over the rows (None when there are no cells)."""
    keys, delta, cross = add_cells(*unpack(table, layout))
    return chunk_rows(layout, keys, delta, cross) if keys.shape[0] else None
