"""DP Set Union mechanism layer (numpy only): policies, thresholds, noise.

Gopi et al., "Differentially Private Set Union" (ICML 2020). The property
tests check, on random neighbouring data sets (one person added), the two
facts the privacy proof needs — (S) ℓ1 / ℓ2 sensitivity of the summed shard
histograms and (T) the weight of the items only the added person holds — and
a negative control (the paper's Greedy policy, Appendix E) shows the checker
catches a violation. Statistical tests use fixed seeds and tolerances of
about 4.5 standard deviations.
"""

from __future__ import annotations

import dataclasses
import math
import pickle
import subprocess
import sys

import numpy as np
import pytest
from scipy import integrate, stats

from dp_spark.errors import ParameterError
from dp_spark.mechanisms.set_union import (
    HELD_SUPPORT,
    POLICIES,
    SEQUENTIAL,
    ThresholdStep,
    UNIT_BITS,
    SetUnionPlan,
    analytic_gaussian_sigma,
    build_histogram,
    derive_randomness,
    gaussian_mechanism_delta,
    laplace_isf,
    person_units,
    person_weight,
    plan_set_union,
    policy_gaussian_update,
    policy_greedy_update,
    policy_laplace_update,
    release_mask,
    rho_count,
    rho_gaussian,
    rho_laplace,
    shard_cutoff,
    update_histogram,
)
from dp_spark.noise.rng import StreamRoot
from dp_spark.mechanisms.set_union.gaussian_grid import ROW_ROOT, plan_gaussian_grid
from dp_spark.mechanisms.set_union.laplace_grid import grid_scale
from dp_spark.noise import make_rng
from dp_spark.plans.set_union import ALPHA_LIMIT, MAX_ITEMS_LIMIT, PARTITIONS_LIMIT, SHARDS_LIMIT
from dp_spark.plans.set_union import plan as release_plan

TOL = 1e-9


def csr(sets):
    indptr = np.concatenate(([0], np.cumsum([len(s) for s in sets]))).astype(np.int64)
    codes = np.array([c for s in sets for c in s], dtype=np.int64)
    return indptr, codes


def hist(sets, n_items, policy, gamma=None):
    return build_histogram(*csr(sets), n_items, policy, gamma)


# ------------------------------------------------------------- hand-worked

A, B, C = 0, 1, 2
PEOPLE = [[A, B], [B, C], [B]]


def test_count_hand_example():
    assert hist(PEOPLE, 3, "count").tolist() == [1.0, 3.0, 1.0]


def test_weighted_laplace_hand_example():
    assert hist(PEOPLE, 3, "weighted-laplace") == pytest.approx([0.5, 2.0, 0.5])


def test_weighted_gaussian_hand_example():
    r = 1 / math.sqrt(2)
    assert hist(PEOPLE, 3, "weighted-gaussian") == pytest.approx([r, 2 * r + 1, r])


def test_policy_laplace_hand_example():
    # Γ = 1. [a,b]: gaps 1,1 -> +1/2 each. [a,b,c]: gaps .5,.5,1 (sum 2 > 1) ->
    # water level 1/3 each. [a,c]: gaps 1/6, 2/3 (sum 5/6 <= 1) -> both reach Γ.
    h = hist([[A, B], [A, B, C], [A, C]], 3, "policy-laplace", gamma=1.0)
    assert h.tolist() == [1.0, 0.5 + 1 / 3, 1.0]  # reached items are exactly Γ
    # Partial fill: gaps .1, 1, 1 -> a reaches Γ (uses .1), the rest .45 each.
    w = np.array([0.9, 0.0, 0.0])
    policy_laplace_update(w, np.array([A, B, C]), 1.0)
    assert w == pytest.approx([1.0, 0.45, 0.45])
    # Items at Γ are inactive: the whole budget goes to the others.
    w = np.array([1.0, 0.0, 0.0])
    policy_laplace_update(w, np.array([A, B, C]), 1.0)
    assert w == pytest.approx([1.0, 0.5, 0.5])


def test_policy_gaussian_hand_example():
    # Γ = 1. [a,b]: gap (1,1), Z = √2 -> +1/√2 each. [a,c]: gap (1-1/√2, 1),
    # Z > 1 -> + gap/Z. [a]: remaining gap < 1 -> a reaches Γ.
    r = 1 / math.sqrt(2)
    g = np.array([1 - r, 1.0])
    z = float(np.linalg.norm(g))
    h = hist([[A, B], [A, C]], 3, "policy-gaussian", gamma=1.0)
    assert h == pytest.approx([r + g[0] / z, r, 1 / z])
    h = hist([[A, B], [A, C], [A]], 3, "policy-gaussian", gamma=1.0)
    assert h[A] == 1.0


def water_fill_reference(weights, codes, gamma, budget=1.0):
    """The paper's loop (Section 3 / reference code): sort the gaps, fill the
    smallest to Γ while the budget lasts, then split what is left."""
    w = weights.copy()
    gaps = {int(c): gamma - w[c] for c in codes if w[c] < gamma}
    order = sorted(gaps, key=gaps.get)
    left = budget
    for i, c in enumerate(order):
        rest = order[i:]
        cost = gaps[c] * len(rest)
        if cost < left:
            step = gaps[c]
            for r in rest:
                w[r] += step
                gaps[r] -= step
            left -= cost
        else:
            for r in rest:
                w[r] += left / len(rest)
            break
    return w


def test_policy_laplace_matches_the_papers_loop():
    rng = np.random.default_rng(5)
    for _ in range(500):
        n = int(rng.integers(1, 12))
        gamma = float(rng.uniform(0.2, 4))
        w = rng.uniform(0, gamma, n) * (rng.random(n) < 0.7)
        codes = rng.choice(n, int(rng.integers(1, n + 1)), replace=False)
        mine = w.copy()
        policy_laplace_update(mine, codes, gamma)
        assert mine == pytest.approx(water_fill_reference(w, codes, gamma), abs=1e-12)
        assert np.sum(mine - w) <= 1 + TOL and np.all(mine <= gamma)


def test_policy_gaussian_step_is_a_move_toward_the_cutoff():
    rng = np.random.default_rng(6)
    for _ in range(300):
        n = int(rng.integers(1, 12))
        gamma = float(rng.uniform(0.2, 4))
        w = rng.uniform(0, gamma, n)
        codes = rng.choice(n, int(rng.integers(1, n + 1)), replace=False)
        new = w.copy()
        policy_gaussian_update(new, codes, gamma)
        step = new - w
        gap = np.zeros(n)
        gap[codes] = gamma - w[codes]
        assert np.linalg.norm(step) <= 1 + TOL and np.all(new <= gamma)
        # parallel to the gap vector, length min(1, |gap|)
        assert np.linalg.norm(step) == pytest.approx(min(1.0, np.linalg.norm(gap)), abs=1e-12)
        if np.linalg.norm(gap) > 0:
            assert step == pytest.approx(gap * np.linalg.norm(step) / np.linalg.norm(gap), abs=1e-12)


def test_sequential_policies_need_a_cutoff_and_known_names():
    indptr, codes = csr([[0]])
    with pytest.raises(ParameterError):
        build_histogram(indptr, codes, 1, "policy-laplace")
    with pytest.raises(ParameterError):
        build_histogram(indptr, codes, 1, "greedy")


# ------------------------------------------------ sensitivity on neighbours

def sharded_histogram(persons, sets, n_items, policy, gamma, shards, shard_of, order_of):
    """Reference of the Spark layout: person p in shard shard_of[p], visited
    in increasing order_of[p] inside the shard; shard histograms added."""
    total = np.zeros(n_items)
    for s in range(shards):
        members = sorted((p for p in persons if shard_of[p] == s), key=lambda p: order_of[p])
        total += hist([sets[p] for p in members], n_items, policy, gamma)
    return total


def greedy_update_hist(sets, start, gamma):
    """The paper's Greedy policy (Appendix E), which has UNBOUNDED sensitivity:
    fill the smallest gaps to Γ one by one until the budget 1 is spent."""
    w = np.array(start, dtype=np.float64)
    for s in sets:
        gaps = sorted((gamma - w[c], c) for c in s if w[c] < gamma)
        left = 1.0
        for gap, c in gaps:
            if gap < left:
                w[c] += gap
                left -= gap
            else:
                w[c] += left
                break
    return w


def check_neighbours(h1, h2, policy, max_items):
    """Facts (S) and (T) for H1 (with the extra person) and H2 (without).
    Returns the list of violated facts (empty when both hold)."""
    bad = []
    diff = h1 - h2
    if policy == "count":
        if np.abs(diff).sum() > max_items + TOL or np.abs(diff).max(initial=0) > 1 + TOL:
            bad.append("S")
    elif policy.endswith("laplace"):
        if np.abs(diff).sum() > 1 + TOL:
            bad.append("S")
    elif np.sqrt(np.dot(diff, diff)) > 1 + TOL:
        bad.append("S")
    s1, s2 = h1 > 0, h2 > 0
    if np.any(s2 & ~s1):
        bad.append("support")
    new = s1 & ~s2
    t = int(new.sum())
    if t:
        cap = {"count": 1.0}.get(policy, 1 / t if policy.endswith("laplace") else 1 / math.sqrt(t))
        if t > max_items or np.any(h1[new] > cap + TOL):
            bad.append("T")
    return bad


def random_case(rng, max_items):
    n_items = int(rng.integers(3, 25))
    n_persons = int(rng.integers(2, 30))
    sets = {}
    for p in range(n_persons):
        k = int(rng.integers(1, max_items + 1))
        # Zipf-ish popularity, so items overlap and the cutoff is reached
        pool = np.minimum(rng.zipf(1.5, 4 * k) - 1, n_items - 1)
        sets[p] = list(dict.fromkeys(pool.tolist()))[:k]
    return n_items, sets


def random_sharded_case(rng, shards, case=random_case):
    """One random neighbour test's input: (max_items, n_items, sets, persons, shard_of, order_of),
    each person's shard and order a fixed function of its id, drawn in that order from ``rng``."""
    max_items = int(rng.integers(1, 6))
    n_items, sets = case(rng, max_items)
    persons = list(sets)
    shard_of = {p: int(rng.integers(0, shards)) for p in persons}
    order_of = {p: float(rng.random()) for p in persons}
    return max_items, n_items, sets, persons, shard_of, order_of


@pytest.mark.parametrize("policy", [p for p in POLICIES if p not in HELD_SUPPORT])  # greedy: its own (T),
@pytest.mark.parametrize("shards", [1, 3])  # tests/unit/test_set_union_greedy.py
def test_sensitivity_and_new_item_weights_on_random_neighbours(policy, shards):
    rng = np.random.default_rng(100 + POLICIES.index(policy) + 10 * shards)
    new_items = reached = 0
    for case in range(150):
        max_items, n_items, sets, persons, shard_of, order_of = random_sharded_case(rng, shards)
        gamma = float(rng.uniform(0.3, 3.0)) if policy in SEQUENTIAL else None
        extra = persons[int(rng.integers(0, len(persons)))]
        h1 = sharded_histogram(persons, sets, n_items, policy, gamma, shards, shard_of, order_of)
        h2 = sharded_histogram([p for p in persons if p != extra], sets, n_items, policy, gamma,
                               shards, shard_of, order_of)
        assert check_neighbours(h1, h2, policy, max_items) == [], (policy, case)
        new_items += int(np.sum((h1 > 0) & (h2 == 0)) > 0)
        reached += int(gamma is not None and np.any(h1 == gamma))
    # the cases exercise what the facts are about: new items, and the cutoff
    assert new_items >= 20
    assert policy not in SEQUENTIAL or reached >= 20


def test_the_checker_catches_the_greedy_policy():
    # Appendix E's counterexample: person i holds only u1; the 20 persons after
    # i hold u1 and u2; before i, H[u1] < H[u2] < 1 + H[u1]. Greedy feeds the
    # item closest to Γ: with i that is u1 for everyone after, without i u2 —
    # the difference grows with the number of later persons.
    gamma, u1, u2 = 50.0, 0, 1
    start = [0.0, 0.5]
    after = [[u1, u2]] * 20
    h1 = greedy_update_hist([[u1]] + after, start, gamma)
    h2 = greedy_update_hist(after, start, gamma)
    assert np.abs(h1 - h2).sum() > 20
    assert "S" in check_neighbours(h1, h2, "policy-laplace", 2)
    # …while Policy Laplace on the same neighbours keeps sensitivity 1.
    for policy in SEQUENTIAL:
        p1 = update_histogram(np.array(start), *csr([[u1]] + after), policy, gamma)
        p2 = update_histogram(np.array(start), *csr(after), policy, gamma)
        assert check_neighbours(p1, p2, policy, 2) == []


# ------------------------------------ fixed-point units (additive policies)

ONE = 1 << UNIT_BITS


def test_person_units_are_the_exact_increment_rounded_down():
    for n in list(range(1, 5001)) + [2**20 + 1, 10**6 + 3, 2**31 - 1]:
        assert person_units("count", n) == ONE
        u = person_units("weighted-laplace", n)
        assert n * u <= ONE < n * (u + 1)  # ⌊2^30/n⌋: ℓ1 norm of the person ≤ 1
        g = person_units("weighted-gaussian", n)
        assert n * g * g <= ONE * ONE < n * (g + 1) ** 2  # ⌊2^30/√n⌋: ℓ2 norm ≤ 1
        assert person_weight("weighted-gaussian", n) == g * 2.0**-UNIT_BITS
    # Rounding to nearest instead would break the ℓ2 bound: the floor is needed.
    nearest = [n for n in range(1, 200) if n * round(ONE / math.sqrt(n)) ** 2 > ONE * ONE]
    assert nearest
    for bad in [("weighted-laplace", 0), ("policy-laplace", 3)]:
        with pytest.raises(ParameterError):
            person_units(*bad)


def test_float_increments_would_depend_on_the_summation_order():
    # Why whole units: the same float increments 1/√n added in two orders
    # differ in the last bits (a Spark sum over a shuffle has no fixed order);
    # the integer units give one value in every order.
    sizes = np.random.default_rng(2).integers(1, 60, 2000).tolist()
    floats = [1 / math.sqrt(n) for n in sizes]
    assert sum(floats) != sum(reversed(floats))
    units = [person_units("weighted-gaussian", n) for n in sizes]
    assert sum(units) == sum(reversed(units))


@pytest.mark.parametrize("policy", ["count", "weighted-laplace", "weighted-gaussian"])
def test_additive_units_keep_the_facts_exactly_in_any_order(policy):
    """(S) and (T) in exact integer arithmetic (no tolerance) on random
    neighbours, and the histogram bit for bit the same for any person order."""
    rng = np.random.default_rng(300 + POLICIES.index(policy))
    new_cases = tight = 0
    for case in range(150):
        max_items = int(rng.integers(1, 9))
        n_items, sets = random_case(rng, max_items)
        persons = list(sets)
        extra = persons[int(rng.integers(0, len(persons)))]
        h1 = hist([sets[p] for p in persons], n_items, policy)
        shuffled = [persons[i] for i in rng.permutation(len(persons))]
        assert np.array_equal(h1, hist([sets[p] for p in shuffled], n_items, policy))
        h2 = hist([sets[p] for p in persons if p != extra], n_items, policy)
        u1, u2 = h1 * ONE, h2 * ONE
        assert np.array_equal(u1, np.floor(u1)) and np.array_equal(u2, np.floor(u2))  # whole units
        d = [int(a) - int(b) for a, b in zip(u1, u2)]  # Python ints: exact
        new = np.flatnonzero((u1 > 0) & (u2 == 0)).tolist()
        t = len(new)
        if policy == "count":
            assert max(map(abs, d)) <= ONE and sum(map(abs, d)) <= max_items * ONE
            assert all(int(u1[i]) == ONE for i in new)
        elif policy == "weighted-laplace":
            assert sum(map(abs, d)) <= ONE
            assert all(int(u1[i]) * t <= ONE for i in new)
            tight += sum(map(abs, d)) == ONE
        else:
            assert sum(x * x for x in d) <= ONE * ONE
            assert all(int(u1[i]) ** 2 * t <= ONE * ONE for i in new)
        new_cases += t > 0
    assert new_cases >= 20
    assert policy != "weighted-laplace" or tight >= 20  # the bound is attained: the check can fail


# ----------------------------------------------------------- thresholds

DELTAS = [1e-3, 0.01, 0.05, 0.2]


@pytest.mark.parametrize("delta", DELTAS)
@pytest.mark.parametrize("max_items", [1, 7, 50])
def test_laplace_thresholds_match_the_papers_formulas(delta, max_items):
    eps = 1.5
    paper = max(1 / t + (1 / eps) * math.log(1 / (2 * (1 - (1 - delta) ** (1 / t))))
                for t in range(1, max_items + 1))
    assert rho_laplace(eps, delta, max_items) == pytest.approx(paper, rel=1e-9)
    paper_count = 1 + (max_items / eps) * math.log(1 / (2 * (1 - (1 - delta) ** (1 / max_items))))
    assert rho_count(eps, delta, max_items) == pytest.approx(paper_count, rel=1e-9)


@pytest.mark.parametrize("delta", DELTAS)
@pytest.mark.parametrize("max_items", [1, 7, 50])
def test_gaussian_threshold_matches_the_papers_formula(delta, max_items):
    sigma = 1.7
    paper = max(1 / math.sqrt(t) + sigma * stats.norm.ppf((1 - delta / 2) ** (1 / t))
                for t in range(1, max_items + 1))
    assert rho_gaussian(sigma, delta, max_items) == pytest.approx(paper, rel=1e-9)


def test_tiny_delta_does_not_underflow():
    delta = math.exp(-10)
    for policy in POLICIES:
        plan = plan_set_union(3.0, delta, 300, policy)
        assert math.isfinite(plan.rho) and plan.rho > 1
    tiny = plan_set_union(1.0, 1e-300, 10, "policy-gaussian")
    assert math.isfinite(tiny.rho)


def test_laplace_quantile_is_exact_on_both_sides():
    for p in [1e-12, 0.01, 0.3, 0.5, 0.7, 0.99]:
        x = float(laplace_isf(2.0, p))
        tail = 0.5 * math.exp(-x / 2.0) if x >= 0 else 1 - 0.5 * math.exp(x / 2.0)
        assert tail == pytest.approx(p, rel=1e-9)


@pytest.mark.parametrize("eps, delta", [(0.5, 1e-6), (1.0, 1e-5), (3.0, math.exp(-10) / 2), (8.0, 0.01)])
def test_analytic_gaussian_sigma_is_the_smallest_private_sigma(eps, delta):
    sigma = analytic_gaussian_sigma(eps, delta)
    assert gaussian_mechanism_delta(sigma, eps) <= delta
    assert gaussian_mechanism_delta(sigma * (1 - 1e-6), eps) > delta
    if eps < 1:  # never worse than the classical calibration
        assert sigma <= math.sqrt(2 * math.log(1.25 / delta)) / eps


@pytest.mark.parametrize("sigma, eps", [(0.8, 1.0), (2.0, 0.5), (1.3, 3.0)])
def test_gaussian_privacy_profile_against_numerical_integration(sigma, eps):
    # δ(ε) = ∫ max(0, p(x) − e^ε q(x)) dx for p = N(1, σ²), q = N(0, σ²).
    p, q = stats.norm(1.0, sigma), stats.norm(0.0, sigma)
    value, _ = integrate.quad(lambda x: max(0.0, p.pdf(x) - math.exp(eps) * q.pdf(x)), -30, 30,
                              points=[0.5 + eps * sigma**2], limit=200)
    assert gaussian_mechanism_delta(sigma, eps) == pytest.approx(value, rel=1e-6, abs=1e-12)


def test_plan_constants():
    lap = plan_set_union(2.0, 1e-4, 10, "policy-laplace", alpha=3.0)
    # the exact grid's scale: β cells with e^(1/β) − 1 <= ε/2^20, a relative ~ε·2^-21 above 1/ε
    assert lap.noise == "laplace" and lap.grid_bits == 20 and lap.gamma == pytest.approx(lap.rho + 3.0 * lap.scale)
    assert lap.scale == math.ldexp(float(grid_scale(2.0, 1.0)), -20) and 0.5 < lap.scale < 0.5 * (1 + 2.0 * 2.0**-20)
    assert (lap.noise_delta, lap.threshold_delta) == (0.0, 1e-4)
    gau = plan_set_union(2.0, 1e-4, 10, "policy-gaussian")
    # the exact grid's: s cells with s² >= Δ²/(2ρ_n), Δ = 2^40 + ⌈√(2^63)⌉, ρ_n-zCDP giving (2, 5e-5)
    grid = plan_gaussian_grid("policy-gaussian", 2.0, 1e-4, 10)
    assert gau.grid_bits == grid.grid_bits == 40 and gau.norm == "l2"
    assert (gau.scale, gau.rho) == (math.ldexp(grid.sigma, -40), math.ldexp(grid.threshold, -40))
    assert gau.sensitivity == pytest.approx(1 + ROW_ROOT * 2.0**-40, rel=1e-15)
    assert gau.scale**2 >= gau.sensitivity**2 / (2 * grid.noise_rho) > analytic_gaussian_sigma(2.0, 5e-5) ** 2
    assert gau.noise_delta + gau.threshold_delta == pytest.approx(1e-4)
    cnt = plan_set_union(2.0, 1e-4, 10, "count")
    assert 5.0 < cnt.scale < 5.0 * (1 + 2.0 * 2.0**-20) and cnt.sensitivity == 10 and cnt.gamma is None
    assert plan_set_union(2.0, 1e-4, 10, "weighted-gaussian").gamma is None
    for plan in (lap, gau, cnt):  # the error statement's helpers invert each other
        assert plan.release_probability(plan.weight_for(0.95)) == pytest.approx(0.95)


def test_shard_cutoff():
    assert shard_cutoff(5.0, 1) == shard_cutoff(5.0, 1, "full") == 5.0  # one shard: the paper
    assert shard_cutoff(5.0, 4) == 2.5 and shard_cutoff(5.0, 4, "full") == 5.0
    with pytest.raises(ParameterError, match="shard_cutoff must be one of"):
        shard_cutoff(5.0, 4, "half")
    with pytest.raises(ParameterError, match="shards must be a whole number"):
        shard_cutoff(5.0, 0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon": 0.0}, {"epsilon": -1.0}, {"epsilon": float("inf")}, {"epsilon": "1"},
        {"delta": 0.0}, {"delta": 1.0}, {"delta": -0.1},
        {"max_items": 0}, {"max_items": 2.5}, {"max_items": True},
        {"alpha": -0.5}, {"alpha": float("nan")},
        {"method": "greedy"}, {"method": None},
        {"shards": 0}, {"shards": 2.0}, {"partitions": 0}, {"partitions": True},
        {"shard_cutoff": "half"}, {"count": "yes"}, {"seed": -1},
    ],
)
def test_bad_parameters(kwargs):
    # The release's plan is the one home of its parameter checks.
    args = {"epsilon": 1.0, "delta": 1e-6, "max_items": 10, "method": "policy-gaussian", "alpha": 2.0}
    release_plan(**args)  # the base case is accepted: each refusal below is the changed parameter's
    args.update(kwargs)
    with pytest.raises(ParameterError, match=next(iter(kwargs))):
        release_plan(**args)


@pytest.mark.parametrize(
    "kwargs, says",
    [
        ({"max_items": 10**12}, "max_items must be a whole number from 1 to 100,000 \\(Δ0 sizes"),
        ({"max_items": MAX_ITEMS_LIMIT + 1}, "from 1 to 100,000"),
        ({"alpha": 1e6}, "at most 1000"),
        # refused by the plan's range (checks.EPSILON_RANGE) before the constants are computed
        ({"epsilon": 1e-320, "method": "policy-laplace"}, "epsilon must lie in \\[1e-06, 50\\]"),
        ({"epsilon": 1e-320, "method": "count"}, "epsilon must lie in \\[1e-06, 50\\]"),
    ],
)
def test_parameters_beyond_the_public_limits_are_refused_up_front(kwargs, says):
    # Before: max_items = 1e12 allocated a 1e12-element array (MemoryError).
    args = {"epsilon": 1.0, "delta": 1e-6, "max_items": 10, "method": "policy-gaussian", "alpha": 2.0}
    args.update(kwargs)
    with pytest.raises(ParameterError, match=says) as info:
        release_plan(**args)
    assert "\n" not in str(info.value)
    release_plan(**{**args, **{k: v for k, v in {"max_items": MAX_ITEMS_LIMIT, "alpha": ALPHA_LIMIT,
                                               "epsilon": 1.0}.items() if k in kwargs}})


def test_shards_and_partitions_limits():
    base = {"epsilon": 1.0, "delta": 1e-6}
    assert release_plan(**base, shards=SHARDS_LIMIT)["shards"] == SHARDS_LIMIT
    with pytest.raises(ParameterError, match="from 1 to 4,096 .*one Spark task"):
        release_plan(**base, shards=SHARDS_LIMIT + 1)
    assert release_plan(**base, partitions=PARTITIONS_LIMIT)["partitions"] == PARTITIONS_LIMIT
    with pytest.raises(ParameterError, match="partitions must be a whole number from 1 to 100,000"):
        release_plan(**base, partitions=10**9)
    assert release_plan(**base, partitions=None)["partitions"] is None
    with pytest.raises(ParameterError, match="shards must be a whole number from 1 to 4,096"):
        release_plan(**base, method="count", shards=10**9)  # checked for every method


def test_release_plan_is_the_mechanism_plan_and_its_split():
    # The plan's budget split names the mechanism's constants and adds up
    # to the guarantee; default shards are fixed (8) for sequential methods.
    from dp_spark.plans.set_union import mechanism_plan

    for method in POLICIES:
        p = release_plan(epsilon=2.0, delta=1e-4, method=method, max_items=10, alpha=3.0)
        numeric = mechanism_plan(p)
        # the mechanism runs at the calibrated δ: the float 1e-4 is above the
        # decimal 0.0001 charged, so the float below it (issue 22)
        assert numeric == plan_set_union(2.0, math.nextafter(1e-4, 0.0), 10, method, 3.0)
        assert (p.guarantee.epsilon, p.guarantee.delta) == (2.0, 1e-4)
        (noise_label, noise), (threshold_label, threshold) = p.steps
        assert (noise.epsilon, noise.delta) == (2.0, numeric.noise_delta)
        assert (threshold.epsilon, threshold.delta) == (0.0, numeric.threshold_delta)
        assert f"{numeric.scale:.4g}" in noise_label and f"{numeric.rho:.4g}" in threshold_label
        assert p["method"] == method and ("shards" in p.parameters) == (method in SEQUENTIAL)
        if method in SEQUENTIAL:
            assert p["shards"] == 8 and p["shard_cutoff"] == "scaled"
    split = p.spend().ledger
    assert [label for label, _ in split] == [label for label, _ in p.steps]


# ----------------------------------------------- noise, threshold, generators

def extra_person_release_rate(policy, max_items, t, trials, seed, eps=1.0, delta=0.1):
    """Empirical P[any of the extra person's t unique items is released] and
    the exact prediction. The extra person sits among others (sharing no item
    with them) in a sequential order; their unique items' weights come from
    the kernel."""
    plan = plan_set_union(eps, delta, max_items, policy)
    others = [[0, 1], [1, 2], [0, 2], [2]] * 5
    mine = list(range(10, 10 + t))
    h = hist(others[:7] + [mine] + others[7:], 10 + t, policy, plan.gamma)
    w = h[10:]
    rng = make_rng(seed)
    released = release_mask(np.tile(w, trials), plan, rng).reshape(trials, t).any(axis=1)
    per_item = np.array([plan.release_probability(x) for x in w])
    return released.mean(), 1 - np.prod(1 - per_item), plan, w


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("max_items, t", [(1, 1), (4, 4), (4, 2)])
def test_an_item_only_one_person_holds_is_released_with_probability_at_most_delta(policy, max_items, t):
    trials = 40_000
    rate, exact, plan, w = extra_person_release_rate(policy, max_items, t, trials, seed=7)
    bound = plan.delta if plan.noise == "laplace" else plan.delta / 2
    sd = math.sqrt(bound * (1 - bound) / trials)
    assert exact <= bound * (1 + 1e-9)  # the threshold's guarantee, exactly
    assert rate <= bound + 4.5 * sd
    assert abs(rate - exact) <= 4.5 * math.sqrt(exact * (1 - exact) / trials) + 1e-9
    if max_items == 1 or (policy == "count" and t == max_items):  # tight: the test can fail
        if plan.noise == "gaussian":  # a grid of 2^-40: a cell moves the tail by a relative ~2^-40
            assert exact == pytest.approx(bound, rel=1e-6)
        else:  # the grid's threshold is the least integer up to its one cell of slack: two cells lower fails
            lower = dataclasses.replace(plan, rho=plan.rho - math.ldexp(2.0, -plan.grid_bits))
            assert 1 - np.prod([1 - lower.release_probability(x) for x in w]) > bound


def test_the_statistical_check_fails_for_a_wrong_threshold():
    # Count with Δ0 = 4 but ρ computed for one item (the max over t ignored):
    # four new items clear it with probability ≈ 1 − (1 − δ)^4, far above δ.
    good = plan_set_union(1.0, 0.1, 4, "count")
    bad = SetUnionPlan(**{**good.__dict__, "rho": 1 + float(laplace_isf(good.scale, 0.1))})
    rng = make_rng(3)
    released = release_mask(np.ones(4 * 20_000), bad, rng).reshape(-1, 4).any(axis=1)
    assert released.mean() > 0.1 + 0.1


def test_release_mask_never_releases_items_outside_the_support():
    plan = SetUnionPlan("count", 1.0, 0.1, 1, 2.0, "laplace", 1.0, -100.0, None, 1.0, "l1", 0.0, 0.1, 20)
    mask = release_mask(np.array([0.0, 0.0, 1.0, -1.0]), plan, make_rng(1))
    assert mask.tolist() == [False, False, True, False]
    off_grid = dataclasses.replace(plan, grid_bits=None)  # Laplace noise in floats is refused
    with pytest.raises(ParameterError):
        release_mask(np.array([1.0]), off_grid, make_rng(1))


def test_partition_generators_are_reproducible_and_distinct():
    root = StreamRoot(12345, (1,))
    a = root.stream(3).random(5)
    assert np.array_equal(a, StreamRoot(12345, (1,)).stream(3).random(5))
    assert not np.array_equal(a, root.stream(4).random(5))
    # bucket b's generator is the root's child with spawn key (..., b)
    child = np.random.SeedSequence(12345, spawn_key=(1,)).spawn(4)[3]
    assert np.array_equal(a, np.random.Generator(np.random.PCG64(child)).random(5))


def test_randomness_comes_from_the_os_unless_seeded():
    s1, r1 = derive_randomness(make_rng(9))
    s2, r2 = derive_randomness(make_rng(9))
    assert (s1, r1) == (s2, r2)
    s3, r3 = derive_randomness(make_rng())
    s4, r4 = derive_randomness(make_rng())
    assert r3 != r4 and s3 != s4
    assert 0 <= s3 < 2**62
    # a generator seeded with a sequence of ints works too (benchmarks do that)
    seq_rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([1, 2, 3])))
    _, root = derive_randomness(seq_rng)
    assert root.stream(0).random() == root.stream(0).random()


def test_threshold_step_is_release_mask_with_the_bucket_generator():
    # What the Spark stage runs per noise bucket: the bucket's generator, all its items in one call,
    # exactly one draw an item: release_mask's draws.
    plan = plan_set_union(1.0, 0.05, 3, "policy-laplace")
    root = StreamRoot(424242, (0,))
    weights = np.linspace(0.0, 2 * plan.rho, 600)
    step = pickle.loads(pickle.dumps(ThresholdStep(plan, root)))  # it travels to the executors
    for bucket in (0, 5):
        got = step(bucket, weights.size)(weights)
        want = release_mask(weights, plan, root.stream(bucket))
        assert np.array_equal(got, want) and 0 < got.sum() < len(got)
    assert not np.array_equal(step(0, 600)(weights), step(1, 600)(weights))  # buckets draw independently
    unseeded = pickle.loads(pickle.dumps(ThresholdStep(plan, derive_randomness(make_rng(), seeded=False)[1])))
    first = unseeded(0, 600)(weights)  # a re-run task (retry, speculative or zombie attempt) draws the same
    assert np.array_equal(first, unseeded(0, 600)(weights)) and not np.array_equal(first, unseeded(1, 600)(weights))


def test_an_unseeded_root_is_a_key_drawn_from_the_release_generator():
    # The key comes from the release's generator (so a keyed ledger run is marked drawn first) and only
    # from it: two releases with the same generator state get the same key, other states other keys.
    salt, root = derive_randomness(make_rng(9), seeded=False)
    assert not root.seeded and root.entropy is None and root.spawn_key == () and 0 < root.secret < 2**256
    assert salt == derive_randomness(make_rng(9))[0] and derive_randomness(make_rng(9))[1].seeded
    assert derive_randomness(make_rng(9), seeded=False)[1] == root
    assert derive_randomness(make_rng(10), seeded=False)[1].secret != root.secret
    assert pickle.loads(pickle.dumps(root)) == root and str(root.secret) not in repr(root)
    assert root.stream(0).random() == root.stream(0).random() != root.stream(1).random()


def test_mechanism_layer_imports_neither_pyspark_nor_pandas():
    code = ("import sys, dp_spark.mechanisms.set_union; "
            "bad = [m for m in ('pyspark', 'pandas') if m in sys.modules]; "
            "sys.exit(1 if bad else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@pytest.mark.parametrize("policy", [p for p in SEQUENTIAL if p != "policy-greedy"])  # greedy: one step both
def test_scalar_person_loop_equals_the_numpy_updates(policy):
    # update_histogram runs the sequential policies on Python floats (speed);
    # the numpy updates are the reference: same weights on random shards.
    rng = np.random.default_rng(5)
    step = {"policy-laplace": policy_laplace_update, "policy-gaussian": policy_gaussian_update,
            "policy-greedy": policy_greedy_update}[policy]
    for _ in range(200):
        n_items, gamma = int(rng.integers(1, 30)), float(rng.uniform(0.2, 6.0))
        sets = [rng.choice(n_items, int(rng.integers(0, min(n_items, 12) + 1)), replace=False)
                for _ in range(int(rng.integers(1, 40)))]
        start = rng.uniform(0, gamma * 1.2, n_items) * (rng.random(n_items) < 0.5)
        want = start.copy()
        for codes in sets:
            step(want, codes.astype(np.int64), gamma)
        indptr = np.concatenate(([0], np.cumsum([len(x) for x in sets]))).astype(np.int64)
        flat = np.concatenate(sets).astype(np.int64) if sets else np.zeros(0, np.int64)
        got = update_histogram(start.copy(), indptr, flat, policy, gamma)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
        assert (got <= max(gamma, start.max())).all()


def test_gaussian_scalar_step_is_bit_for_bit_the_filtered_rule():
    # the fast path keeps items already at Γ (gap 0.0): the same bits as dropping them first (the
    # filtered rule, which the loop ran before and still runs for weights above Γ), on states that hold
    # many weights exactly at Γ, zeros and tiny gaps, and persons of 1 to 30 items
    from dp_spark.summaries.set_union import _filtered_gaussian_step, _gaussian_step

    rng = np.random.default_rng(17)
    for _ in range(300):
        n_items, gamma = int(rng.integers(1, 40)), float(rng.choice([0.25, 1.0, 3.7, 12.831697953847002]))
        start = rng.uniform(0, gamma, n_items)
        start[rng.random(n_items) < 0.3] = gamma
        start[rng.random(n_items) < 0.2] = 0.0
        start[rng.random(n_items) < 0.1] = np.nextafter(gamma, 0.0)
        fast, slow = start.tolist(), start.tolist()
        for _ in range(int(rng.integers(1, 30))):
            codes = rng.choice(n_items, int(rng.integers(1, min(n_items, 30) + 1)), replace=False).tolist()
            budget = float(rng.choice([1.0, 0.5, 1e-3]))
            _gaussian_step(fast, codes, gamma, budget)
            _filtered_gaussian_step(slow, codes, gamma, budget)
            assert [x.hex() for x in fast] == [x.hex() for x in slow]
    above = [5.0, 1.0]  # a weight above Γ (not the kernels' invariant) takes the filtering path
    _gaussian_step(above, [0, 1], 2.0)
    assert above[0] == 5.0 and 1.0 < above[1] <= 2.0
