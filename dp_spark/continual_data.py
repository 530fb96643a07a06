"""Built-in data for continual-distinct: a synthetic insert/delete stream.

``synthetic_stream`` generates an event table ``(time: long, item: string, op: int)`` with Spark built-in
functions on ``spark.range`` (never through the driver). Item i gets a target flippancy f_i in
1..``max_flippancy`` (item 0 exactly ``max_flippancy`` when it fits the horizon; the others 1 + ⌊U^exponent
· max_flippancy⌋ with U a fixed hash of the seed and i, so most items flip rarely) and flips at the distinct
steps among f_i pseudo-random steps (item 0: evenly spaced), alternating insert and delete, so its flippancy
is at most f_i. To exercise the stream rules, items i ≡ 1 mod 4 have each event doubled and items i ≡ 2 mod
4 each delete doubled; neither changes existence or flippancy.

Times are step numbers 1..``horizon`` (the release's default time mapping). The seed makes the table
reproducible; it is demo data, not a privacy mechanism.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING

from dp_spark.errors import ParameterError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

DEFAULT_HORIZON = 1024
DEFAULT_MAX_FLIPPANCY = 16
ROWS_PER_PARTITION = 500_000


def _whole(value, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ParameterError(f"{name} must be a whole number >= {minimum}; got {value!r}.")
    return int(value)


def _unit_hash(*columns):
    """A uniform-looking number in [0, 1) from a fixed hash of the columns."""
    from pyspark.sql import functions as F

    return F.pmod(F.xxhash64(*columns), F.lit(1 << 53)).cast("double") / F.lit(float(1 << 53))


def expected_events(items: int, max_flippancy: int, exponent: float = 2.0) -> float:
    """Roughly how many events ``synthetic_stream`` makes (for sizing)."""
    # E[f] = sum over m = 1..W of P(f >= m) = 1 - ((m - 1) / W)^(1/exponent)
    mean_flips = sum(1.0 - ((m - 1) / max_flippancy) ** (1.0 / exponent) for m in range(1, max_flippancy + 1))
    return items * mean_flips * 1.3  # doubled events of items 1 and 2 mod 4


def items_for_events(events: int, max_flippancy: int, exponent: float = 2.0) -> int:
    """How many items give about ``events`` events."""
    return max(1, int(round(events / expected_events(1, max_flippancy, exponent))))


def synthetic_stream(
    spark,
    items: int = 10_000,
    horizon: int = DEFAULT_HORIZON,
    max_flippancy: int = DEFAULT_MAX_FLIPPANCY,
    exponent: float = 2.0,
    seed: int = 7,
) -> DataFrame:
    """A ``(time, item, op)`` event table with maximum flippancy <= ``max_flippancy`` (module docstring), of
    about ``expected_events(items, max_flippancy)`` rows; item 0 reaches flippancy ``min(max_flippancy,
    horizon)``."""
    from pyspark.sql import functions as F

    items = _whole(items, "items")
    horizon = _whole(horizon, "horizon")
    max_flippancy = _whole(max_flippancy, "max_flippancy")
    seed = _whole(seed, "seed", 0)
    if isinstance(exponent, bool) or not isinstance(exponent, numbers.Real) or not exponent > 0:
        raise ParameterError(f"exponent must be a number > 0; got {exponent!r}.")
    partitions = max(1, -(-int(expected_events(items, max_flippancy, exponent)) // ROWS_PER_PARTITION))
    base = spark.range(0, items, 1, partitions)
    top = min(max_flippancy, horizon)
    u = _unit_hash(F.lit(seed), F.lit(0), F.col("id"))
    target = F.least(F.lit(top), F.lit(1) + F.floor(F.pow(u, F.lit(float(exponent))) * F.lit(max_flippancy)))
    target = F.when(F.col("id") == 0, F.lit(top)).otherwise(target).cast("int")
    random_steps = F.transform(
        F.sequence(F.lit(1), target),
        lambda k: (F.pmod(F.xxhash64(F.lit(seed), F.lit(1), F.col("id"), k), F.lit(horizon)) + 1).cast("long"),
    )
    spaced = F.transform(F.sequence(F.lit(1), target), lambda k: (k * F.lit(horizon // top)).cast("long"))
    steps = F.array_sort(F.array_distinct(F.when(F.col("id") == 0, spaced).otherwise(random_steps)))
    flips = base.select("id", F.posexplode(steps).alias("k", "time"))
    op = F.when(F.col("k") % 2 == 0, F.lit(1)).otherwise(F.lit(-1))
    copies = (
        F.when(F.col("id") % 4 == 1, F.lit(2))
        .when((F.col("id") % 4 == 2) & (F.col("k") % 2 == 1), F.lit(2))
        .otherwise(F.lit(1))
    )
    events = flips.select("id", "time", op.alias("op"), copies.alias("copies"))
    events = events.select("id", "time", "op", F.explode(F.sequence(F.lit(1), F.col("copies"))).alias("_c"))
    return events.select(
        F.col("time").cast("long").alias("time"),
        F.concat(F.lit("i"), F.col("id").cast("string")).alias("item"),
        F.col("op").cast("int").alias("op"),
    )
