"""Per-item state of the streaming continual-distinct query (Spark side, no noise).

``applyInPandasWithState`` grouped by item keeps each item's count and
flippancy. Per micro-batch (one step) the item's events are applied with
the stream rules (``dp_spark.summaries.continual_distinct.count_after``);
if its end-of-step existence changed, the item emits the (level, delta,
cross) cell of that flip (``flip_cells``, the batch stage's kernel), summed
per level into the step's column of ``StreamSummaries``.

Bad values (an op other than ±1, a null or non-finite time) are dropped per
event, as in the batch stage: a per-row filter keeps a subset of each item's
own events, so the item-level sensitivity is unchanged and a bad value never
fails a step. Rows here are NON-PRIVATE; only O(log T) sums per step reach
the driver.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pandas as pd
from pyspark.sql import types as T

from dp_spark.stages.python_worker import worker_pass
from dp_spark.summaries.continual_distinct import FlipEvents, count_after, flip_cells

LEVEL = "level"
DELTA = "delta"
CROSS = "cross"
ORDER = "order_key"
OP = "op"

OUTPUT_SCHEMA = T.StructType(
    [
        T.StructField(LEVEL, T.IntegerType()),
        T.StructField(DELTA, T.LongType()),
        T.StructField(CROSS, T.LongType()),
    ]
)
STATE_SCHEMA = T.StructType([T.StructField("count", T.LongType()), T.StructField("flips", T.LongType())])
_COLUMNS = [f.name for f in OUTPUT_SCHEMA.fields]


def _frame(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=_COLUMNS).astype(
        {LEVEL: "int32", DELTA: "int64", CROSS: "int64"}
    )


def item_step(count: int, flips: int, ops, order, max_level: int) -> tuple[int, int, tuple | None]:
    """One item's step: new (count, flips) and its flip cell row or None."""
    new_count = count_after(count, ops, order)
    if (new_count > 0) == (count > 0):
        return new_count, flips, None
    flips += 1
    flip = FlipEvents(
        item=np.zeros(1, dtype=np.int64),
        time=np.ones(1, dtype=np.int64),
        up=np.array([new_count > 0]),
        index=np.array([flips], dtype=np.int64),
    )
    _, level, delta, cross = flip_cells(flip, max_level)
    return new_count, flips, (int(level[0]), int(delta[0]), int(cross[0]))


def make_update(max_level: int, has_order: bool):
    """The ``applyInPandasWithState`` function for trees with levels 0..max_level
    (:func:`~dp_spark.stages.python_worker.worker_pass`)."""

    def update(key, batches: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
        frames = [b for b in batches if len(b)]
        if not frames:
            return
        pdf = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        ops = pdf[OP].to_numpy(dtype=np.float64, na_value=np.nan)
        good = (ops == 1.0) | (ops == -1.0)  # bad events are dropped (already filtered in Spark)
        order = None
        if has_order:
            order = pdf[ORDER].to_numpy(dtype=np.float64, na_value=np.nan)
            good &= np.isfinite(order)
            order = order[good]
        if not good.any():
            return
        count, flips = state.get if state.exists else (0, 0)
        count, flips, row = item_step(int(count), int(flips), ops[good].astype(np.int64), order, max_level)
        state.update((count, flips))
        if row is not None:
            yield _frame([row])

    return worker_pass(update)  # the modules settled out of the collector's way first (python_worker)
