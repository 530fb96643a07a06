"""Audit of the grouped set-union (issue 24): ONE set union on the composite
key (group, item), a person's Δ0 and budget shared by all their groups.

Worst case of the grouping: the added person y holds the same item in two
groups, (g0, a) and (g1, a). D: k persons holding both pairs. The persons'
restricted sets come from the real Spark stage (the composite key
:meth:`dp_spark.stages.group_items.Composite.edges`, then
:func:`dp_spark.stages.set_union.restricted_sets` with Δ0 = 4); the
weighted-Laplace kernel builds the histograms of D and D + y and
:func:`dp_spark.mechanisms.set_union.release_mask` adds the noise and applies
ρ, TRIALS times per input. Event: both of y's pairs released (and its
complement the other way round); claim ε (the noise step's δ is 0 for
Laplace), grid of k as in tests/audit/test_set_union_audit.py.

Power: the broken variant is the mistake the composite key avoids — one set
union per group, each at the full ε, so y adds weight 1 in each group
instead of 1/2 to each pair (ℓ1 sensitivity 2 for the grouped output): the
same event must prove a leak above ε.
"""

from __future__ import annotations

import numpy as np
from pyspark.sql import types as T

from dp_spark.mechanisms.set_union import build_histogram, plan_set_union, release_mask
from dp_spark.stages.edges import GROUP, ITEM, PERSON
from dp_spark.stages.group_items import GROUP_INDEX, Composite
from dp_spark.stages.set_union import restricted_sets
from tests.audit.stats import ALPHA, assert_detects, two_sided_lower_bound

TRIALS = 200_000
EPSILON, DELTA, MAX_ITEMS = 1.0, 0.1, 4
METHOD = "weighted-laplace"
Y = 10**6
#: The composite key of the two groups' run (string items).
KEYED = Composite(("g0", "g1"), T.StringType(), False)


def _sets(spark, rows, grouped: bool) -> list[list[str]]:
    """Every person's restricted set: on the composite key (the release), or
    per group on the plain item (the broken per-group run), person order."""
    df = spark.createDataFrame(rows, f"{PERSON} long, {ITEM} string, {GROUP} string, {GROUP_INDEX} int")
    if grouped:
        sets = restricted_sets(KEYED.edges(df), MAX_ITEMS, salt=7).collect()
        return [list(r["items"]) for r in sorted(sets, key=lambda r: r[PERSON])]
    out = []
    for g in ("g0", "g1"):  # one set union per group: the item, tagged with its group only to index the histogram
        sets = restricted_sets(df.where(df[GROUP] == g).drop(GROUP, GROUP_INDEX), MAX_ITEMS, salt=7).collect()
        out += [[f"{g}/{i}" for i in r["items"]] for r in sorted(sets, key=lambda r: r[PERSON])]
    return out


def _histogram(sets, codes: dict) -> np.ndarray:
    sizes = [len(s) for s in sets]
    indptr = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    flat = np.array([codes[c] for s in sets for c in s], dtype=np.int64)
    return build_histogram(indptr, flat, len(codes), METHOD, None)


def _both_released(weights, plan, rng) -> int:
    tiled = np.tile(np.asarray(weights, dtype=np.float64), TRIALS)
    return int(release_mask(tiled, plan, rng).reshape(TRIALS, len(weights)).all(axis=1).sum())


def _bound(spark, plan, grouped: bool, seed: int) -> float:
    grid = range(1, int(np.ceil(plan.rho)) + 2)
    best = 0.0
    for k in grid:
        base = [(p, "a", g, j) for p in range(k) for j, g in enumerate(("g0", "g1"))]
        added = [(Y, "a", g, j) for j, g in enumerate(("g0", "g1"))]
        without, with_y = _sets(spark, base, grouped), _sets(spark, base + added, grouped)
        codes = {c: n for n, c in enumerate(sorted({c for s in with_y for c in s}))}
        assert len(codes) == 2  # y's two pairs, both held by the k others too
        rng = np.random.default_rng([seed, k])
        hit_y = _both_released(_histogram(with_y, codes), plan, rng)
        hit = _both_released(_histogram(without, codes), plan, rng)
        best = max(best, two_sided_lower_bound(hit_y, TRIALS, hit, TRIALS, plan.noise_delta, alpha=ALPHA / len(grid)))
    return best


def test_a_person_in_two_groups_moves_the_grouped_union_by_at_most_e_eps(spark, audit_record):
    plan = plan_set_union(EPSILON, DELTA, MAX_ITEMS, METHOD)
    bound = _bound(spark, plan, grouped=True, seed=500)
    audit_record("grouped set-union: person in two groups", plan.epsilon, bound, TRIALS, delta=plan.noise_delta)
    assert bound >= 0.75 * plan.epsilon  # the event is sharp: nearly tight
    assert_detects("grouped set-union run per group at the full ε", plan.epsilon,
                   _bound(spark, plan, grouped=False, seed=500))
