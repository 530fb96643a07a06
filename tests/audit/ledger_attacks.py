"""What the ledger's audits share (tests/audit/test_ledger_audit.py, the
averaging attack of issue 21; tests/audit/test_retry_attack.py, the retry
attack of issue 35): the neighbouring tables, the memoized Spark stage, a
fresh ledger per attack, the event and the power check's fresh draws.

Neighbours: D = 100 persons, each with its own item; D' = D plus one person
with a new item (101 distinct items). The release is
``distinct_count(ε = 1, max_bound = 1, shards = 1)``: one candidate bound,
so the count gets discrete Laplace noise of scale 2 (ε/2 = 0.5 on it). The
event is S = {median of the outputs an attacker sees under one key >= 100.5}.
"""

from __future__ import annotations

import numpy as np
import pytest

from dp_spark.accounting import PureDP
from dp_spark.ledger import open_ledger
from dp_spark.mechanisms.distinct_count import release_from_counts

EPSILON = 1.0
THRESHOLD = 100.5


@pytest.fixture
def tables(spark, tmp_path):
    """D (100 distinct items) and D' (101) as Parquet files."""
    paths = {}
    for n in (100, 101):
        path = tmp_path / f"items-{n}.parquet"
        spark.createDataFrame([(i, f"item-{i}") for i in range(n)], "person_id long, item string") \
            .coalesce(1).write.parquet(str(path))
        paths[n] = str(path)
    return paths


@pytest.fixture
def memoized_stage(monkeypatch):
    """The Spark stage (no noise) computed once per input, then reused."""
    from dp_spark.releases import distinct_count as release

    real, cache = release._bounded_counts, {}

    def once(edge_df, plan, epsilon_pre, rng, persons=None):
        key = tuple(sorted(edge_df.inputFiles()))
        if key not in cache:
            cache[key] = real(edge_df, plan, epsilon_pre, rng, persons)
        counts, how, noise = cache[key]
        return counts.copy(), dict(how), list(noise)

    monkeypatch.setattr(release, "_bounded_counts", once)


def fresh_ledger(tmp_path, name: str, trials: int) -> str:
    """A new ledger whose budget "b" holds one ε = 1 charge per trial (run key)."""
    path = tmp_path / f"{name}.db"
    with open_ledger(path, create=True) as led:
        led.create_budget("b", PureDP(EPSILON * trials))
    return str(path)


def hits(medians: list[float]) -> int:
    return sum(m >= THRESHOLD for m in medians)


def fresh_noise_medians(count: int, trials: int, n: int, seed: int) -> list[float]:
    """The broken variant (a ledger that lets each run under a key draw
    anew), at the mechanism: the median of n fresh draws, per trial."""
    rng = np.random.default_rng(seed)
    return [float(np.median([release_from_counts(np.array([count]), EPSILON, 0.05, rng)["estimate"]
                             for _ in range(n)])) for _ in range(trials)]
