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
groups change (:mod:`dp_spark.mechanisms.continual_distinct.mechanisms`, "Groups").
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_spark.accounting.exact import exact
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.continual_distinct import budget_split, node_sums, num_levels, stream_summaries
from dp_spark.mechanisms.continual_distinct.mechanisms import (
    group_factor,
    group_rho,
    grouped_budget_split,
    grouped_label,
    merged_records,
)
from dp_spark.noise.records import NoiseDraw
from dp_spark.mechanisms.continual_distinct.factorized import sensitivity2 as factorized_sensitivity2
from dp_spark.mechanisms.continual_distinct.factorized import sqrt_int_coefficients, toeplitz_int

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


@settings(max_examples=300, deadline=None)
@given(grouped_neighbours())
def test_a_neighbour_costs_the_factorized_counters_at_most_their_group_factor(case):
    """The factorized counter's grouped factor (mechanisms "Groups"): on random capped subset and
    whole-item neighbours, the changed groups' integer strategies Ř z_w move by Σ_g ‖ŘΔ_g‖² ≤
    factor·B exactly (each group calibrated to B = the subset bound, so that is factor groups'
    worth of ρ_g), with factor = group_factor(..., counter="factorized") at G = 4 keys and unknown G."""
    horizon, events, neighbour, whole, m = case
    xs, ys = per_group(capped(events, m), horizon), per_group(capped(neighbour, m), horizon)
    r = sqrt_int_coefficients(horizon)
    for j, w in enumerate(xs[0].flippancy_bounds):
        calibrated = factorized_sensitivity2(horizon, w, "subset")
        total = 0
        for g in range(GROUPS):
            delta = toeplitz_int(r, xs[g].z_truncated[j]).astype(object) - toeplitz_int(r, ys[g].z_truncated[j])
            moved = sum(int(v) ** 2 for v in delta)
            assert moved <= calibrated
            total += moved
        for n_groups in (GROUPS, None):
            factor = group_factor("bounded", m, n_groups, counter="factorized", horizon=horizon, flippancy_bound=w)
            assert total <= factor * calibrated


def test_the_factorized_counter_needs_more_than_m_at_w_1():
    """Why the factorized counter does not reuse the tree's factor m: m = 1, w = 1, item 0 in groups
    a and b (a first); removing its a-events keeps b instead, so both groups move by an item-removal
    pair, ‖ŘΔ‖² = U each, and 2U > B (the subset bound V = 2·S(T/2) < 2·S(T) = 2U): more than one
    group's worth. The factor is 2 there, and m at w = 2."""
    horizon = 16
    a, b = sorted(range(GROUPS), key=lambda g: _order(0, g))[:2]
    events = [(1, 0, 1, 0, a), (1, 0, 1, 0, b)]
    neighbour = [e for e in events if e[4] == b]
    xs, ys = per_group(capped(events, 1), horizon), per_group(capped(neighbour, 1), horizon)
    r = sqrt_int_coefficients(horizon)
    moved = [sum(int(v) ** 2 for v in toeplitz_int(r, xs[g].z_truncated[0]).astype(object)
                 - toeplitz_int(r, ys[g].z_truncated[0])) for g in (a, b)]
    removal, calibrated = factorized_sensitivity2(horizon, 1, "item-removal"), factorized_sensitivity2(horizon, 1)
    assert moved == [removal, removal] and sum(moved) > calibrated
    assert group_factor("bounded", 1, counter="factorized", horizon=horizon, flippancy_bound=1) == 2
    assert group_factor("bounded", 3, counter="factorized", horizon=horizon, flippancy_bound=2) == 3
    assert group_factor("bounded", 3, 2, counter="factorized", horizon=horizon, flippancy_bound=1) == 2


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


# -- issue 35: each grouped step charged at least what it spends, the steps within ρ --------------------

#: ρ values whose float divisions and products round the wrong way (found by the property test below on
#: the old rounding, float_down(factor·p)), and the usual suspects.
ADVERSARIAL_RHO = [1 / 3, 0.1, 0.7, 1e-9, 1e-12, 0.30000000000000004, 2.0 / 3.0, 49.99999999999999, 1.2]


def _charged_chain(rho, method, m, n_groups, horizon=16, w=4):
    """(factor, the per-group parts, the exact σ² and ℓ2² sensitivity of each part's noise, the grouped
    split as the plan charges it) at ρ."""
    from fractions import Fraction

    from dp_spark.mechanisms.continual_distinct.mechanisms import adaptive_plan, recompute_plan
    from dp_spark.mechanisms.continual_distinct.relations import sensitivity_factor
    from dp_spark.mechanisms.continual_distinct.tree import sigma2_for_flippancy

    factor = group_factor(method, m, n_groups)
    rho_g = group_rho(rho, method, m, n_groups)
    parts = budget_split(method, rho_g, horizon, 0.05, w if method == "bounded" else None)
    kappa, levels = sensitivity_factor("subset"), num_levels(horizon)
    if method == "bounded":
        noise = [(sigma2_for_flippancy(horizon, rho_g, w), Fraction(kappa * w * levels))]
    elif method == "baseline":
        rp = recompute_plan(horizon, rho_g, 0.05)
        noise = [(rp.sigma2, Fraction(rp.releases))]
    elif method == "adaptive":  # each level's counter as the grouped run draws it ("best": factorized or tree)
        from dp_spark.mechanisms.continual_distinct.factorized import DEFAULT_BITS, sensitivity2

        ap = adaptive_plan(horizon, num_levels(horizon) - 1, rho_g, 0.05, counter="best")
        assert "factorized" in ap.counters
        trees = [(ap.sigma2[j], Fraction(sensitivity2(horizon, 1 << j), 4**DEFAULT_BITS))
                 if ap.counter(j) == "factorized" else
                 (sigma2_for_flippancy(horizon, ap.rho_tree, 1 << j), Fraction(kappa * (1 << j) * levels))
                 for j in range(ap.max_level + 1)]
        noise = [None] * (len(parts) - len(trees)) + trees  # the sparse vector's part first (no Gaussian)
    else:
        noise = [None] * len(parts)
    return factor, parts, noise, grouped_budget_split(parts, factor, rho), grouped_budget_split(parts, factor)


def _check_chain(rho, method, m, n_groups):
    factor, parts, noise, split, unbounded = _charged_chain(rho, method, m, n_groups)
    for (label, part), (_, charged), (_, alone), sigma in zip(parts, split, unbounded, noise):
        assert exact(charged) >= factor * exact(part), (rho, method, label)  # never charged less than spent
        assert exact(alone) >= factor * exact(part), (rho, method, label)
        if sigma is not None:  # σ² >= Δ²/(2·c/factor): at least the exact-real calibration to the charged share
            sigma2, l2sq = sigma
            assert sigma2 >= l2sq * factor / (2 * exact(charged)), (rho, method, label)
    assert sum((exact(c) for _, c in split), exact(0)) <= exact(rho)
    assert sum((exact(c) for _, c in unbounded), exact(0)) <= exact(rho)
    # the last share is capped with the remainder: nothing of ρ is left but the float rounding of the last
    left = exact(rho) - sum((exact(c) for _, c in split), exact(0))
    last = split[-1][1]
    assert left < exact(math.nextafter(last, math.inf)) - exact(last)


@pytest.mark.parametrize("rho", ADVERSARIAL_RHO)
@pytest.mark.parametrize("method", ["auto", "adaptive", "baseline", "bounded"])
@pytest.mark.parametrize("m, n_groups", [(1, None), (3, None), (2, 3), (5, 7), (3, 5)])
def test_each_grouped_step_is_charged_at_least_what_it_spends(rho, method, m, n_groups):
    """Issue 35: factor·p_i rounded UP (the old float_down charged some
    steps less than their noise spends: 3·ρ_g for ρ = 1/3), the steps sum
    within ρ exactly, the last capped with the remainder, and every σ² is
    at least the exact-real calibration to its charged share."""
    _check_chain(rho, method, m, n_groups)


@settings(max_examples=300, deadline=None)
@given(rho=st.floats(min_value=1e-12, max_value=50.0, allow_nan=False, allow_infinity=False),
       method=st.sampled_from(["adaptive", "baseline", "bounded"]), m=st.integers(1, 6),
       n_groups=st.one_of(st.none(), st.integers(1, 12)))
def test_the_grouped_chain_holds_for_any_rho(rho, method, m, n_groups):
    _check_chain(rho, method, m, n_groups)


def test_a_split_that_does_not_fit_its_total_is_refused():
    """Parts summing to the whole ρ/factor leave no room for rounding up:
    refused (public parameters only), never charged below what they spend."""
    parts = [("a", 1 / 3), ("b", 1 / 3), ("c", 1 / 3)]
    with pytest.raises(ParameterError, match="does not fit|exceed its total"):
        grouped_budget_split(parts, 3, 1.0)


@pytest.mark.parametrize("rho", ADVERSARIAL_RHO)
def test_a_power_of_two_factor_needs_no_rounding_room(rho):
    """factor 1, 2, 4, …: factor·p is a float, so ρ_g is ρ/factor itself
    (m = 1 "bounded": the full ρ) and the steps sum to ρ; another factor
    gives up at most a few ulps."""
    assert group_rho(rho, "bounded", 1) == rho
    for m in (1, 2, 4):
        assert exact(group_rho(rho, "auto", m)) * 2 * m == exact(rho)
    three = group_rho(rho, "bounded", 3)
    assert exact(rho) / 3 - exact(three) <= 4 * (exact(math.nextafter(three, math.inf)) - exact(three))
