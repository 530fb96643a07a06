"""The continual-distinct release's public limits and the parameter checks
that need no data (Jain et al. 2023), shared by the plan
(:mod:`dp_spark.plans.continual_distinct`, which re-exports them) and the
Spark stage (:mod:`dp_spark.stages.continual`). Nothing here imports pyspark."""

from __future__ import annotations

import datetime as _dt
import numbers

import numpy as np

from dp_spark import checks
from dp_spark.errors import ParameterError

MAX_HORIZON_LOG2 = 22
MAX_HORIZON = 1 << MAX_HORIZON_LOG2  # 4,194,304 steps: ~2.4 GB of driver arrays (driver_bytes)
DRIVER_BYTES_PER_CELL = 24  # summaries + mechanism arrays per (step, level) cell, measured
MAX_SHARDS = 10_000  # each shard is one Python task emitting its own (step, level) cells

HORIZON_REQUIRED = (
    "horizon is required: the number of steps T to release (horizon= / --horizon). It sizes the "
    "series, the trees and the noise, so it must be public and is never taken from the data; "
    "events after step T are dropped."
)


def next_power_of_two(n: int) -> int:
    """Smallest power of two >= n (n >= 1)."""
    return 1 << (int(n) - 1).bit_length()


def driver_bytes(horizon: int) -> int:
    """Approximate driver memory (bytes) of the summaries and mechanism arrays:
    DRIVER_BYTES_PER_CELL · T · (log2 T + 2), T the tree horizon. The collected
    flip cells come on top."""
    tree = next_power_of_two(horizon)
    return DRIVER_BYTES_PER_CELL * tree * (tree.bit_length() + 1)


def _horizon_cap_text() -> str:
    return (
        f"at most 2^{MAX_HORIZON_LOG2} = {MAX_HORIZON:,} steps (the driver holds about "
        f"{DRIVER_BYTES_PER_CELL}·T·(log2 T + 2) bytes of per-step arrays, "
        f"{driver_bytes(MAX_HORIZON) / 1e9:.1f} GB at the cap)"
    )


def validate_horizon(horizon) -> int:
    """The horizon, checked before any data is read: REQUIRED, a whole number
    in 1..MAX_HORIZON."""
    if horizon is None:
        raise ParameterError(HORIZON_REQUIRED)
    horizon = checks.integer(horizon, "horizon", 1, None, " (the number of steps)")
    if horizon > MAX_HORIZON:
        raise ParameterError(f"horizon must be {_horizon_cap_text()}; got {horizon!r}. Use a coarser step_size.")
    return horizon


def validate_shards(shards) -> int | None:
    """``shards`` (None: the default) in 1..MAX_SHARDS, before any data is read."""
    return checks.at_most(shards, "shards", MAX_SHARDS, "each shard is one Python task that emits its own "
                          "(step, level) cells, so work and shuffle grow with the shard count", none_ok=True)


def validate_mapping_parameters(origin, step_size) -> None:
    """Checks of origin / step_size that need no data; their meaning for a
    column kind is checked by the stage's ``time_mapping``."""
    if step_size is not None:
        checks.positive(step_size, "step_size")
    if origin is not None and (isinstance(origin, (bool, np.bool_))
                               or not isinstance(origin, (str, _dt.date, numbers.Real, np.number))):
        raise ParameterError(f"origin must be a number, an ISO date/time string or a datetime; got {origin!r}.")
    if origin is not None and not isinstance(origin, (str, _dt.date)):
        checks.number(origin, "origin")


#: Grouped runs: public keys × tree horizon, limited to the ungrouped cap on one series' steps (the
#: same driver memory as the largest ungrouped run, e.g. 1,024 keys at 4,096 steps).
MAX_GROUPED_STEPS = MAX_HORIZON


def validate_grouped_size(n_groups: int, horizon: int) -> None:
    """Refuse, from the public keys and the horizon alone (before anything is
    read or spent), groups × tree horizon above MAX_GROUPED_STEPS."""
    cells = int(n_groups) * next_power_of_two(horizon)
    if cells > MAX_GROUPED_STEPS:
        raise ParameterError(
            f"groups × steps: {int(n_groups):,} public keys × {next_power_of_two(horizon):,} steps (the tree "
            f"horizon) = {cells:,}; at most {MAX_GROUPED_STEPS:,} (the driver holds every group's per-step "
            "summaries and runs every group's mechanism). Use fewer keys or a coarser step_size."
        )
