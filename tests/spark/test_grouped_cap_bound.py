"""The joint choice of the group cap m and the bound l (issue 24,
``max_groups=None``): the one-pass counts at every cap candidate
(:func:`dp_spark.stages.groups.cap_candidates` + the grouped kernel) and the
sensitivity of the joint scores q_{m,l} = Σ_g (c_{g,m,l} − margin(m, l)) on
random add/remove-one-person neighbours: every score moves in [0, m·l] when a
person is added, all in the same direction (what GEM's max(Δ, Δ')
denominators need); and the capped rows of each candidate are exactly
``cap_groups`` at that cap."""

from __future__ import annotations

import numpy as np
import pytest

from dp_spark.mechanisms.distinct_count.cap_bound import cap_candidates as caps_for, joint_margins, joint_scores
from dp_spark.releases.grouped_distinct_count import joint_counts
from dp_spark.releases.groups import GROUP_INDEX
from dp_spark.settings.distinct_count import bound_candidates
from dp_spark.stages.distinct import grouped_greedy_counts
from dp_spark.stages.edges import GROUP
from dp_spark.stages.groups import cap_candidates, cap_groups

SCHEMA = "person long, item string, group string"
KEYS = [f"g{j}" for j in range(5)]


def random_rows(rng, persons, groups=5, items=10):
    rows = []
    for p in persons:
        for _ in range(int(rng.integers(1, 14))):
            rows.append((int(p), f"i{rng.integers(items)}", f"g{rng.integers(groups)}"))
    return rows


def restricted(spark, rows):
    edges = spark.createDataFrame(rows, SCHEMA)
    keys = spark.createDataFrame([(k, i) for i, k in enumerate(KEYS)], f"{GROUP} string, {GROUP_INDEX} int")
    return edges.join(keys, on=GROUP)


@pytest.mark.parametrize("seed", range(4))
def test_joint_scores_move_in_0_to_m_l_all_in_one_direction(spark, seed):
    rng = np.random.default_rng(700 + seed)
    max_bound, shards = 16, int(rng.integers(1, 3))
    persons = rng.choice(10_000, size=int(rng.integers(8, 25)), replace=False)
    y, others = persons[0], persons[1:]
    base = random_rows(rng, others)
    added = random_rows(rng, [y])
    caps, cands = caps_for(len(KEYS)), bound_candidates(max_bound)
    assert caps == [1, 2, 4, 5]
    without = joint_counts(restricted(spark, base), caps, len(KEYS), max_bound, shards, cands)
    with_y = joint_counts(restricted(spark, base + added), caps, len(KEYS), max_bound, shards, cands)
    # per (m, g, l): 0..l, and per m at most m groups move
    diff = with_y - without
    assert (diff >= 0).all() and (diff <= np.asarray(cands)[None, None, :]).all()
    for k, m in enumerate(caps):
        assert len(np.flatnonzero(diff[k].any(axis=1))) <= m
    # the scores: every move in [0, m·l] (adding y), so all in the same direction; removing y is the reverse
    margins = joint_margins(caps, cands, 0.05, "laplace", 0.5)
    q0, sens = joint_scores(without, caps, cands, margins)
    q1, sens1 = joint_scores(with_y, caps, cands, margins)
    assert (sens == sens1).all() and (sens == np.outer(caps, cands).ravel()).all()
    moves = q1 - q0
    assert (moves >= 0).all() and (moves <= sens).all()
    assert moves.any() or not added  # the test is not vacuous: y has rows, some score moved


def test_each_candidate_is_cap_groups_at_that_cap_and_counts_match(spark):
    rng = np.random.default_rng(11)
    df = restricted(spark, random_rows(rng, rng.choice(1000, size=20, replace=False)))
    caps = [1, 2, 4]
    replicated = cap_candidates(df, caps, len(KEYS))
    cols = ["person", "item", GROUP, GROUP_INDEX]
    for k, m in enumerate(caps):
        part = replicated.where((replicated[GROUP_INDEX] >= k * len(KEYS))
                                & (replicated[GROUP_INDEX] < (k + 1) * len(KEYS)))
        shifted = cap_groups(df, m).withColumn(GROUP_INDEX, (cap_groups(df, m)[GROUP_INDEX] + k * len(KEYS)))
        assert sorted(map(tuple, part.select(cols).collect())) == sorted(map(tuple, shifted.select(cols).collect()))
    # the pass's counts at cap k = the kernel on cap_groups(m_k) with the index shifted by k·G (same virtual names)
    cands = bound_candidates(16)
    at = joint_counts(df, caps, len(KEYS), 16, 2, cands)
    for k, m in enumerate(caps):
        capped = cap_groups(df, m)
        alone = grouped_greedy_counts(capped.withColumn(GROUP_INDEX, capped[GROUP_INDEX] + k * len(KEYS)), 16, 2,
                                      len(caps) * len(KEYS), cands)
        assert (at[k] == alone[k * len(KEYS):(k + 1) * len(KEYS)]).all()
    # the first candidate's virtual names are cap_groups(1)'s own: equal to the release's stage at m = 1
    assert (at[0] == grouped_greedy_counts(cap_groups(df, 1), 16, 2, len(KEYS), cands)).all()


def test_batches_when_caps_times_keys_exceed_the_kernels_groups(spark, monkeypatch):
    """More virtual groups than the kernel holds: the caps go in several
    passes, with the same counts as one pass over the batch's own names."""
    import dp_spark.stages.distinct as distinct

    rng = np.random.default_rng(5)
    df = restricted(spark, random_rows(rng, rng.choice(1000, size=15, replace=False)))
    caps, cands = [1, 2, 4, 5], bound_candidates(4)
    calls = []
    real = distinct.grouped_greedy_counts

    def spy(edge_df, max_bound, shards, groups, candidates):
        calls.append(groups)
        return real(edge_df, max_bound, shards, groups, candidates)

    monkeypatch.setattr(distinct, "GROUP_INDEX_BITS", 3)  # 8 virtual groups: one cap (5 keys) per pass
    monkeypatch.setattr(distinct, "grouped_greedy_counts", spy)
    at = joint_counts(df, caps, len(KEYS), 4, 1, cands)
    assert calls == [5, 5, 5, 5] and at.shape == (4, 5, len(cands))
    for k, m in enumerate(caps):
        assert (at[k] == real(cap_groups(df, m), 4, 1, len(KEYS), cands)).all()
