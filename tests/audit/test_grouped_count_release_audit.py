"""Audit of the grouped count-release (issue 24): ONE release on the
composite key (group, item), a person's budget shared by all their groups.

Worst case of the grouping: the added person y holds the same item in
several groups and, after the per-person group cap m = MAX_GROUPS = 2, moves
the counts of two (group, item) pairs at once. D: k persons holding item
``a`` in groups g0, g1, g2; D + y: y holds ``a`` in the same three groups.
The pair counts of D and D + y come from the real Spark stage of the release
(:func:`dp_spark.stages.groups.cap_groups` with m = 2, the composite key
:meth:`dp_spark.stages.group_items.Composite.edges`, then the bounded
baseline's :func:`dp_spark.stages.item_counts.bounded_item_counts` with
``max_items`` = 2): the test checks that exactly two pairs differ, each by 1.

Mechanism audited: the bounded baseline's count step (``method="bounded"``),
the exact discrete Gaussian of
:func:`dp_spark.mechanisms.count_release.keyed_noisy_counts` at the σ_c of
:func:`dp_spark.mechanisms.count_release.bounded_plan` (ℓ2 sensitivity
√max_items over all groups together). One keyed draw per distinct item is
one independent run, so TRIALS runs per input are 2·TRIALS items. Event:
the sum of y's two noisy pair counts at least the sum on D + t (the sum is
the likelihood-ratio statistic of the two shifted counts), t over a small
grid, α split over it. Claimed: the count step's ρ_c-zCDP converted to
(ε, δ') with δ' = 0.01, as tests/audit/test_pcr_audit.py claims it.

Power (the planted bug): the composite key's ℓ2 sensitivity halved
(:func:`dp_spark.mechanisms.count_release.bounded.gaussian_sigma_for`
monkeypatched to calibrate for Δ₂²/4, i.e. σ_c halved — the mistake of
counting a person's pairs as if they sat in one group at half the
sensitivity): the same event and trial count must prove a leak above the
claimed ε.

PCR (the default method) is audited per round in tests/audit/test_pcr_audit.py:
its selection and count need only that every pair count moves by at most 1,
all in the same direction, which the composite key keeps
(tests/spark/test_group_items.py).
"""

from __future__ import annotations

import numpy as np
from pyspark.sql import types as T

from dp_spark.accounting import ZCDP
from dp_spark.mechanisms.count_release import bounded as bounded_module
from dp_spark.mechanisms.count_release import bounded_plan, keyed_noisy_counts, noise_key
from dp_spark.stages.edges import GROUP, ITEM, PERSON
from dp_spark.stages.group_items import GROUP_INDEX, Composite
from dp_spark.stages.groups import cap_groups
from dp_spark.stages.item_counts import bounded_item_counts
from tests.audit.stats import ALPHA, assert_detects, two_sided_lower_bound

TRIALS = 20_000
RHO, DELTA, MAX_ITEMS, MAX_GROUPS = 1.0, 1e-6, 2, 2
DELTA_PRIME = 0.01
GROUPS = ("g0", "g1", "g2")
#: The composite key of the three groups' run (string items).
KEYED = Composite(GROUPS, T.StringType(), False)
K = 30  # persons of D, each holding `a` in every group
Y = 10**6
THRESHOLDS = (2, 3, 4)


def _pair_counts(spark, rows) -> dict[str, int]:
    """Pair -> count of distinct persons after the release's stage (cap to m
    groups, composite key, bounded to max_items pairs per person)."""
    df = spark.createDataFrame(rows, f"{PERSON} long, {ITEM} string, {GROUP} string, {GROUP_INDEX} int")
    counts = bounded_item_counts(KEYED.edges(cap_groups(df, MAX_GROUPS)), MAX_ITEMS, salt=7).collect()
    return {r[ITEM]: int(r["count"]) for r in counts}


def _neighbours(spark) -> tuple[np.ndarray, np.ndarray]:
    """The counts of y's two moved pairs on D + y and on D (real stage)."""
    base = [(p, "a", g, j) for p in range(K) for j, g in enumerate(GROUPS)]
    added = [(Y, "a", g, j) for j, g in enumerate(GROUPS)]
    without, with_y = _pair_counts(spark, base), _pair_counts(spark, base + added)
    moved = sorted(c for c in with_y if with_y[c] != without.get(c, 0))
    assert len(moved) == MAX_GROUPS  # y is capped to m groups: m pairs move ...
    assert all(with_y[c] == without[c] + 1 for c in moved)  # ... each by exactly 1
    return np.array([with_y[c] for c in moved]), np.array([without[c] for c in moved])


def _noisy_sums(counts: np.ndarray, sigma: float, rng, tag: str) -> np.ndarray:
    """TRIALS independent runs of the count step on the two pairs: the sum
    of their noisy counts per run (one keyed draw per distinct item)."""
    items = [f"{tag}{j}:{i}" for j in range(TRIALS) for i in range(len(counts))]
    noisy = keyed_noisy_counts(items, np.tile(counts, TRIALS), sigma=sigma, key=noise_key(rng))
    return noisy.reshape(TRIALS, len(counts)).sum(axis=1)


def _claim(plan) -> tuple[float, float]:
    claimed = ZCDP(plan.count_cost.rho, 0.0).to_approx(DELTA_PRIME)
    return claimed.epsilon, claimed.delta


def _bound(spark, seed: int, delta: float) -> float:
    """The empirical ε lower bound of the count step (the plan as the module
    computes it now: the real one, or the monkeypatched broken one)."""
    plan = bounded_plan(RHO, DELTA, MAX_ITEMS)
    on_d_y, on_d = _neighbours(spark)
    rng = np.random.default_rng(seed)
    sums_y, sums = _noisy_sums(on_d_y, plan.count_sigma, rng, "y"), _noisy_sums(on_d, plan.count_sigma, rng, "d")
    base = int(on_d.sum())
    return max(two_sided_lower_bound(int((sums_y >= base + t).sum()), TRIALS, int((sums >= base + t).sum()),
                                     TRIALS, delta, alpha=ALPHA / len(THRESHOLDS)) for t in THRESHOLDS)


def test_a_person_in_two_groups_moves_the_grouped_counts_by_at_most_e_eps(spark, audit_record, monkeypatch):
    plan = bounded_plan(RHO, DELTA, MAX_ITEMS)
    claimed, delta = _claim(plan)
    audit_record("grouped count-release (bounded): person in 2 groups", claimed, _bound(spark, 41, delta), TRIALS, delta)
    real = bounded_module.gaussian_sigma_for
    monkeypatch.setattr(bounded_module, "gaussian_sigma_for", lambda l2_squared, rho: real(l2_squared / 4, rho))
    assert bounded_plan(RHO, DELTA, MAX_ITEMS).count_sigma < plan.count_sigma  # the bug is planted
    assert_detects("grouped count-release, composite key's sensitivity halved", claimed, _bound(spark, 42, delta))
