"""Grouped continual-distinct (issue 24): the per-group budget's proof, checked
on random neighbours (numpy only; the Spark stage's cap and cells are checked
against these references in tests/spark/test_grouped_continual.py).

An item's events are capped to the m first of its own groups in a fixed
public order (here a hash of (item, group), as the Spark stage's xxhash64);
each group's stream is then an ungrouped stream. On the release's relation
(any subset of one item's events removed) at most 2m groups' streams change,
each by a subset or item-removal pair, so every group's counter at ρ/(2m)
composes to ρ; "bounded" (trees only) at ρ/m, because the changed groups'
tree-node vectors add up to ℓ2² ≤ m·4·w·L; on whole-item removal only m
groups change (:mod:`dp_spark.mechanisms.continual_distinct.groups`).
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_spark.accounting.exact import exact
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.continual_distinct import budget_split, node_sums, num_levels, stream_summaries
from dp_spark.mechanisms.continual_distinct.groups import (
    group_factor,
    group_rho,
    grouped_budget_split,
    grouped_label,
    merged_records,
)
from dp_spark.noise.records import NoiseDraw

GROUPS = 4


def _order(item: int, group: int) -> tuple[int, int]:
    """A fixed public order of (item, group): a function of the pair only."""
    return zlib.crc32(f"{item}|{group}".encode()), group


def capped(events, m):
    """Each item's events in the m first of its own groups (the per-item cap)."""
    kept = {}
    for item in {e[1] for e in events}:
        groups = sorted({e[4] for e in events if e[1] == item}, key=lambda g: _order(item, g))
        kept[item] = set(groups[:m])
    return [e for e in events if e[4] in kept[e[1]]]


def per_group(events, horizon):
    """Every group's StreamSummaries of the (capped) events."""
    out = []
    for g in range(GROUPS):
        mine = [e for e in events if e[4] == g]
        if mine:
            times, items, ops, order, _ = zip(*mine)
            out.append(stream_summaries(times, items, ops, horizon, order=order))
        else:
            out.append(stream_summaries([], [], [], horizon))
    return out


def _changed(x, y) -> bool:
    return bool((x.z != y.z).any() or (x.z_truncated != y.z_truncated).any() or (x.over_counts != y.over_counts).any())


@st.composite
def grouped_neighbours(draw):
    horizon = draw(st.sampled_from([2, 4, 8, 16]))
    n_items = draw(st.integers(1, 5))
    events = draw(st.lists(
        st.tuples(st.integers(1, horizon), st.integers(0, n_items - 1), st.sampled_from([-1, 1]),
                  st.integers(0, 3), st.integers(0, GROUPS - 1)),
        min_size=1, max_size=60))
    item = draw(st.sampled_from(sorted({e[1] for e in events})))
    whole = draw(st.booleans())
    keep = [(not whole and draw(st.booleans())) if e[1] == item else True for e in events]
    m = draw(st.integers(1, GROUPS))
    return horizon, events, [e for e, k in zip(events, keep) if k], whole, m


@settings(max_examples=400, deadline=None)
@given(grouped_neighbours())
def test_a_neighbour_changes_at_most_2m_groups_each_within_the_ungrouped_bounds(case):
    """Random subset (and whole-item) neighbours, capped per item: at most 2m
    groups change (m on whole-item removal); each changed group's counts and
    sparse-vector queries move by ≤ 1 and its trees by the subset relation's
    ℓ2² ≤ 4·w·L; over all changed groups the trees move by ℓ2² ≤ m·4·w·L
    (m·w·L on whole-item removal): the bounded method's ρ/m."""
    horizon, events, neighbour, whole, m = case
    xs, ys = per_group(capped(events, m), horizon), per_group(capped(neighbour, m), horizon)
    levels = num_levels(xs[0].horizon)
    changed = [g for g in range(GROUPS) if _changed(xs[g], ys[g])]
    assert len(changed) <= (m if whole else 2 * m)
    # only GROUPS groups exist: the factor min(2m, G) bounds the changed counters (min(m, G) on whole removal)
    assert len(changed) <= (min(m, GROUPS) if whole else group_factor("auto", m, GROUPS))
    for j, w in enumerate(xs[0].flippancy_bounds):
        total = 0.0
        for g in changed:
            x, y = xs[g], ys[g]
            tree = sum(float(np.sum((a - b) ** 2)) for a, b in zip(node_sums(x.z_truncated[j]),
                                                                    node_sums(y.z_truncated[j])))
            assert tree <= 4 * w * levels
            total += tree
            assert np.max(np.abs(x.over_counts[j] - y.over_counts[j])) <= 1
        assert total <= m * (1 if whole else 4) * w * levels
        assert total <= group_factor("bounded", m, GROUPS) * (1 if whole else 4) * w * levels  # ρ/min(m, G)
    for g in changed:
        assert np.max(np.abs(np.cumsum(xs[g].z) - np.cumsum(ys[g].z))) <= 1


def test_removing_some_of_an_items_events_can_change_2m_groups():
    """Why ρ/(2m) and not ρ/m for the sparse vector and the recompute counts:
    m = 1, item 0 in groups a and b with a first in the public order; removing
    its a-events keeps b instead, and both groups' counts move by 1 at once."""
    a, b = sorted(range(GROUPS), key=lambda g: _order(0, g))[:2]
    events = [(1, 0, 1, 0, a), (1, 0, 1, 0, b)]
    neighbour = [e for e in events if e[4] == b]
    xs, ys = per_group(capped(events, 1), 4), per_group(capped(neighbour, 1), 4)
    moved = [g for g in range(GROUPS) if _changed(xs[g], ys[g])]
    assert sorted(moved) == sorted([a, b])
    counts = [abs(int(np.cumsum(xs[g].z)[0] - np.cumsum(ys[g].z)[0])) for g in moved]
    assert counts == [1, 1]  # ℓ2² = 2 for one released step: twice one group's


@pytest.mark.parametrize("m", [1, 2, 5])
def test_each_groups_budget_and_the_grouped_split_never_exceed_rho(m):
    rho = 0.7
    for method in ("auto", "adaptive", "baseline"):
        assert group_factor(method, m) == 2 * m
        assert exact(group_rho(rho, method, m)) * 2 * m <= exact(rho)
    assert group_factor("bounded", m) == m
    assert exact(group_rho(rho, "bounded", m)) * m <= exact(rho)
    for method, w in (("auto", None), ("adaptive", None), ("baseline", None), ("bounded", 4)):
        factor = group_factor(method, m)
        parts = budget_split(method, group_rho(rho, method, m), 64, 0.05, w)
        split = grouped_budget_split(parts, factor)
        assert sum((exact(p) for _, p in split), exact(0)) <= exact(rho)
        assert [label for label, _ in split] == [grouped_label(label, factor) for label, _ in parts]
    with pytest.raises(ParameterError):
        group_factor("auto", 0)


@pytest.mark.parametrize("m, n_groups, factor, bounded", [
    (1, 5, 2, 1), (2, 3, 3, 2), (3, 3, 3, 3), (5, 2, 2, 2), (1, 1, 1, 1), (4, 10, 8, 4)])
def test_the_factor_never_exceeds_the_number_of_groups(m, n_groups, factor, bounded):
    """min(2m, G) (min(m, G) for bounded): only G counters exist; G unknown
    (None): the sound 2m / m."""
    rho = 0.7
    for method in ("auto", "adaptive", "baseline"):
        assert group_factor(method, m, n_groups) == factor
        assert group_factor(method, m) == 2 * m
        assert exact(group_rho(rho, method, m, n_groups)) * factor <= exact(rho)
    assert group_factor("bounded", m, n_groups) == bounded and group_factor("bounded", m) == m
    assert exact(group_rho(rho, "bounded", m, n_groups)) * bounded <= exact(rho)
    with pytest.raises(ParameterError):
        group_factor("auto", m, 0)


def test_the_plan_uses_the_number_of_public_keys():
    from dp_spark.plans.continual_distinct import plan

    three = plan(rho=1.2, horizon=8, group_by="g", groups=["a", "b", "c"], max_groups=2)
    assert three["group_budget_factor"] == 3 and three["rho_per_group"] == pytest.approx(0.4)
    assert sum(exact(c.rho) for _, c in three.steps) <= exact(1.2)
    assert any("ρ/3 = ρ/min(4, 3)" in n for n in three.notes)
    many = plan(rho=1.2, horizon=8, group_by="g", groups=[f"k{i}" for i in range(9)], max_groups=2)
    assert many["group_budget_factor"] == 4
    assert plan(rho=1.2, horizon=8, group_by="g", groups=["a", "b", "c"], max_groups=5,
                method="bounded", max_flippancy=2)["group_budget_factor"] == 3


def test_the_groups_records_merge_into_one_per_identical_draw():
    one = NoiseDraw("trees", "discrete-gaussian", scale=2.0, std=2.0, sensitivity=1.0, draws=3, target="t")
    other = NoiseDraw("svt", "sparse-vector", scale=4.0, std=None, sensitivity=1.0, draws=1, target="s")
    merged = merged_records([(one, other), (one,), (one,)], 2)
    assert [(r.step, r.draws) for r in merged] == [(grouped_label("trees", 2), 9), (grouped_label("svt", 2), 1)]
