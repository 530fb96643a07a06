"""Policy Greedy DP Set Union (Carvalho, Wang, Gondara, AAAI 2022), numpy only.

The update against the reference code's loop, the privacy facts of
:mod:`dp_spark.mechanisms.set_union.greedy` on random add-one-person
neighbours (ℓ1 sensitivity 1 with H' ≥ H; the items only the added person
keeps weigh ≤ 1 in total), the threshold ρ against its definition, and the
counterexamples that decide what is shipped: ordering by the current weight,
the positive-weight support and an ℓ2 budget each break a fact.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dp_spark.mechanisms.set_union import (
    HELD_SUPPORT,
    SEQUENTIAL,
    build_histogram,
    greedy_failure,
    plan_set_union,
    policy_greedy_update,
    release_mask,
    rho_greedy,
    rho_laplace,
    update_histogram,
)
from dp_spark.accounting.exact import ratio_up
from dp_spark.mechanisms.set_union.greedy import GREEDY_MARGIN
from dp_spark.mechanisms.set_union.laplace_grid import greedy_grid_threshold, grid_scale
from dp_spark.plans.set_union import Params
from dp_spark.plans.set_union import plan as release_plan
from tests.unit.test_set_union import random_sharded_case

TOL = 1e-9
GREEDY = "policy-greedy"


def csr(sets):
    indptr = np.concatenate(([0], np.cumsum([len(s) for s in sets]))).astype(np.int64)
    codes = np.array([c for s in sets for c in s], dtype=np.int64)
    return indptr, codes


def greedy_hist(sets, n_items, gamma, start=None):
    weights = np.zeros(n_items) if start is None else np.array(start, dtype=np.float64)
    return update_histogram(weights, *csr(sets), GREEDY, gamma)


def reference_update(weights, codes, gamma):
    """The reference code's loop (``dpsu_gw.py``): keep the items below Γ in
    the given order; fill each to Γ while its cost is below the budget, else
    add the rest of the budget and stop."""
    w = weights.copy()
    selected = [int(c) for c in codes if w[c] < gamma]
    i, budget = 0, 1.0
    while i < len(selected) and budget > 0:
        cost = gamma - w[selected[i]]
        step = cost if cost < budget else budget  # the whole cost, or the rest and stop
        w[selected[i]] += step
        budget -= step
        i += 1
    return w


# ------------------------------------------------------------- the update

def test_greedy_hand_example():
    # Γ = 1.5, items in the person's order. [a, b]: a costs 1.5 > 1 -> a = 1.
    # [a, b]: a costs .5 -> a = Γ, b gets .5. [b, a, c]: b costs 1 -> b = Γ
    # exactly with nothing left; a is at Γ (skipped), c stays 0.
    a, b, c = 0, 1, 2
    h = greedy_hist([[a, b], [a, b], [b, a, c]], 3, 1.5)
    assert h.tolist() == [1.5, 1.5, 0.0]
    # the order is the person's, not the weights': the first listed item gets the budget
    w = np.array([0.0, 1.4, 0.0])
    policy_greedy_update(w, np.array([a, b]), 1.5)
    assert w.tolist() == [1.0, 1.4, 0.0]


def test_greedy_matches_the_reference_loop():
    rng = np.random.default_rng(11)
    for _ in range(2000):
        n = int(rng.integers(1, 10))
        gamma = float(rng.uniform(0.2, 4))
        w = rng.uniform(0, gamma * 1.2, n) * (rng.random(n) < 0.6)
        codes = rng.choice(n, int(rng.integers(1, n + 1)), replace=False)
        mine = w.copy()
        policy_greedy_update(mine, codes, gamma)
        want = reference_update(w, codes, gamma)
        assert mine == pytest.approx(want, abs=1e-12)
        step = mine - w
        assert step.min() >= 0 and step.sum() <= 1 + TOL
        assert np.all(mine <= np.maximum(w, gamma))


def test_greedy_is_the_first_in_order_allocation():
    # Brute force on a grid: among all increments a with 0 <= a_j <= gap_j and
    # Σ a <= 1 (multiples of 1/8), greedy is the lexicographic maximum in the
    # person's order.
    rng = np.random.default_rng(12)
    eighth = np.arange(0, 9) / 8
    for _ in range(200):
        k = int(rng.integers(1, 4))
        gamma = float(rng.integers(1, 12)) / 8
        start = rng.integers(0, 12, k) / 8
        gaps = np.maximum(gamma - start, 0)
        best = None
        for a in np.array(np.meshgrid(*([eighth] * k), indexing="ij")).reshape(k, -1).T:
            if np.all(a <= gaps + 1e-12) and a.sum() <= 1 + 1e-12:
                if best is None or tuple(a) > tuple(best):
                    best = a
        w = start.astype(np.float64)
        policy_greedy_update(w, np.arange(k), gamma)
        assert w - start == pytest.approx(best, abs=1e-12)


# ------------------------------------------------ facts (S) and (T) on neighbours

def sharded(persons, sets, n_items, gamma, shards, shard_of, order_of):
    total = np.zeros(n_items)
    for s in range(shards):
        members = sorted((p for p in persons if shard_of[p] == s), key=lambda p: order_of[p])
        total += greedy_hist([sets[p] for p in members], n_items, gamma)
    return total


def greedy_facts(h1, h2, held1, held2, max_items, gamma):
    """Violated facts of the proof (step (2), (3)) for H1 with person y and
    H2 without, ``held*`` the kept items (the candidate sets)."""
    bad = []
    diff = h1 - h2
    if diff.min(initial=0) < -TOL:
        bad.append("monotone")
    if np.abs(diff).sum() > 1 + TOL:
        bad.append("S")
    if np.any(h2[~held2] != 0) or np.any(held2 & ~held1):
        bad.append("support")
    new = held1 & ~held2
    if new.sum() > max_items or h1[new].sum() > 1 + TOL or np.any(h1[new] > min(1.0, gamma) + TOL):
        bad.append("T")
    return bad


def random_case(rng, max_items):
    n_items = int(rng.integers(3, 25))
    sets = {}
    for p in range(int(rng.integers(2, 30))):
        k = int(rng.integers(1, max_items + 1))
        pool = np.minimum(rng.zipf(1.5, 4 * k) - 1, n_items - 1)
        sets[p] = [int(x) for x in rng.permutation(list(dict.fromkeys(pool.tolist())))[:k]]
    return n_items, sets


@pytest.mark.parametrize("shards", [1, 3])
def test_sensitivity_and_new_items_on_random_neighbours(shards):
    rng = np.random.default_rng(400 + shards)
    cascades = new_cases = 0
    for case in range(600):
        max_items, n_items, sets, persons, shard_of, order_of = random_sharded_case(rng, shards, random_case)
        gamma = float(rng.choice([rng.uniform(0.2, 1.0), rng.uniform(1.0, 3.0)]))
        y = persons[int(rng.integers(0, len(persons)))]
        others = [p for p in persons if p != y]
        h1 = sharded(persons, sets, n_items, gamma, shards, shard_of, order_of)
        h2 = sharded(others, sets, n_items, gamma, shards, shard_of, order_of)
        held1, held2 = np.zeros(n_items, bool), np.zeros(n_items, bool)
        for p in persons:
            held1[sets[p]] = True
            if p != y:
                held2[sets[p]] = True
        assert greedy_facts(h1, h2, held1, held2, max_items, gamma) == [], case
        new_cases += int((held1 & ~held2).any())
        # items of positive weight only with y that y does not hold: the cascade
        positive_new = (h1 > 0) & (h2 == 0)
        positive_new[sets[y]] = False
        cascades += int(positive_new.any())
    assert new_cases >= 50
    assert cascades >= 1  # why the candidates are the kept items, not the positive weights


def test_a_cascade_makes_many_positive_weight_items_depend_on_one_person():
    # Earlier persons (the same in both runs) left a_1 at Γ − 3/2 and a_k at
    # Γ − (1 − 2^-k). y adds 1 to a_1. Later person z_1 holds [a_1, u_1], z_k
    # [a_(k−1), a_k, u_k]: without y, z_k's budget ends on a_k; with y, a_(k−1)
    # costs half as much and z_k reaches u_k with 2^-k. Counting new items by
    # positive weight, y would add r items it does not hold; the kept items
    # (the candidates) do not change, and ℓ1 stays ≤ 1.
    gamma, r = 2.0, 20
    a = list(range(r))
    u = list(range(r, 2 * r))
    start = np.zeros(2 * r)
    start[a[0]] = gamma - 1.5
    for k in range(1, r):
        start[a[k]] = gamma - (1 - 2.0 ** -(k + 1))
    later = [[a[0], u[0]]] + [[a[k - 1], a[k], u[k]] for k in range(1, r)]
    h1 = greedy_hist([[a[0]]] + later, 2 * r, gamma, start)
    h2 = greedy_hist(later, 2 * r, gamma, start)
    positive_new = (h1 > 0) & (h2 == 0)
    assert positive_new[u].all() and not positive_new[a].any()
    held = np.ones(2 * r, bool)  # every item is kept by someone besides y
    assert greedy_facts(h1, h2, held, held, 1, gamma) == []


def weight_ordered_hist(sets, n_items, gamma, start, highest_first=True):
    """Greedy in the order of the CURRENT weights (highest below Γ first, the
    greedy of Gopi et al.'s Appendix E): not shipped."""
    w = np.array(start, dtype=np.float64)
    for s in sets:
        order = sorted((c for c in s if w[c] < gamma), key=lambda c: -w[c] if highest_first else w[c])
        policy_greedy_update(w, np.array(order, dtype=np.int64), gamma)
    return w


def test_ordering_by_the_current_weight_breaks_the_sensitivity():
    # Appendix E's instance: y holds u1 only; 20 later persons hold (u1, u2);
    # before y, H[u1] < H[u2] < H[u1] + 1. With y, u1 is the heavier item and
    # everyone after feeds it; without y, u2.
    gamma, u1, u2 = 50.0, 0, 1
    start = [0.0, 0.5]  # left by earlier persons, the same in both runs
    after = [[u1, u2]] * 20
    h1 = weight_ordered_hist([[u1]] + after, 2, gamma, start)
    h2 = weight_ordered_hist(after, 2, gamma, start)
    assert np.abs(h1 - h2).sum() > 20
    # the shipped greedy (each person's own order) keeps it at most 1 on the same persons
    g1 = greedy_hist([[u1]] + after, 2, gamma, start)
    g2 = greedy_hist(after, 2, gamma, start)
    assert np.abs(g1 - g2).sum() <= 1 + TOL


def l2_greedy_update(w, codes, gamma):
    """A greedy with an ℓ2 budget (Σ a_j² <= 1): not shipped."""
    left = 1.0
    for c in codes:
        cost = max(gamma - w[c], 0.0)
        take = min(cost, math.sqrt(max(left, 0.0)))
        w[c] += take
        left -= take * take


def test_an_l2_budget_greedy_is_not_l2_non_expansive():
    gamma, eta = 3.0, 1e-4
    g = np.array([gamma - 1.0, 0.0])  # item 0 costs exactly 1: nothing left for item 1
    h = g + np.array([eta, 0.0])  # an η more on item 0 (what an earlier person could leave)
    l2_greedy_update(g, [0, 1], gamma)
    l2_greedy_update(h, [0, 1], gamma)
    assert np.linalg.norm(h - g) > 100 * eta  # ≈ √(2η): the difference grew
    # the shipped ℓ1 greedy on the same pair keeps the difference at η
    g, h = np.array([gamma - 1.0, 0.0]), np.array([gamma - 1.0 + eta, 0.0])
    policy_greedy_update(g, np.array([0, 1]), gamma)
    policy_greedy_update(h, np.array([0, 1]), gamma)
    assert np.abs(h - g).sum() <= eta * (1 + 1e-6)


# ------------------------------------------------------------- threshold ρ

def exact_failure(rho, scale, weights):
    """P[some item released] for independent Lap(scale) noise, scipy's tail."""
    q = stats.laplace.sf(rho - np.asarray(weights), scale=scale)
    return float(-np.expm1(np.sum(np.log1p(-q))))  # 1 − Π(1 − q) without cancellation


@pytest.mark.parametrize("epsilon,delta,max_items", [(3.0, math.exp(-10), 100), (1.0, 1e-6, 1),
                                                     (1.0, 1e-6, 10), (0.5, 1e-3, 300), (8.0, 1e-9, 50)])
def test_rho_greedy_is_the_smallest_threshold_for_the_worst_new_items(epsilon, delta, max_items):
    rho = rho_greedy(epsilon, delta, max_items)
    scale = ratio_up(1.0, epsilon)
    worst = [1.0] + [0.0] * (max_items - 1)
    assert exact_failure(rho, scale, worst) <= delta
    assert exact_failure(rho - 1e-6, scale, worst) > delta * (1 - 1e-6)  # not larger than needed
    assert greedy_failure(rho, scale, max_items) == pytest.approx(exact_failure(rho, scale, worst), rel=1e-9)
    # every other weighting of ≤ Δ0 new items with total ≤ 1 is less likely to leak (convexity)
    rng = np.random.default_rng(int(epsilon * 100) + max_items)
    for _ in range(200):
        t = int(rng.integers(1, max_items + 1))
        h = rng.dirichlet(np.ones(t)) * rng.uniform(0, 1) if rng.random() < 0.7 else np.eye(t)[0]
        assert exact_failure(rho, scale, h) <= delta * (1 + 1e-9)
    # between one new item of weight 1 and the union bound
    assert 1 + scale * math.log(1 / (2 * delta)) <= rho + 1e-12
    target = delta * (1 - GREEDY_MARGIN)  # ρ keeps this margin below δ
    assert rho <= scale * math.log((math.exp(1 / scale) + max_items - 1) / (2 * target)) * (1 + 1e-12)
    if max_items == 1:
        assert rho == pytest.approx(rho_laplace(epsilon, delta, 1), rel=1e-9)


def test_the_reference_codes_threshold_misses_the_zero_weight_new_items():
    # ρ = 1 + b·ln(1/(2δ)) (dpsu_gw.py) covers one item of weight 1; the
    # person's other new items, at weight 0, push the failure above δ.
    epsilon, delta, max_items = 3.0, math.exp(-10), 100
    scale = ratio_up(1.0, epsilon)
    paper = 1 + scale * math.log(1 / (2 * delta))
    assert exact_failure(paper, scale, [1.0] + [0.0] * (max_items - 1)) > 5 * delta
    assert rho_greedy(epsilon, delta, max_items) > paper + 0.5


def test_the_greedy_plan():
    epsilon, delta = 3.0, math.exp(-10)
    plan = plan_set_union(epsilon, delta, 100, GREEDY, alpha=2.0)
    assert GREEDY in SEQUENTIAL and GREEDY in HELD_SUPPORT
    assert plan.noise == "laplace" and plan.norm == "l1" and plan.sensitivity == 1.0
    # exact discrete Laplace on the grid of 2^-20: its scale and integer threshold, in weight units,
    # within a relative ε·2^-20 (plus three cells for ρ) of the real-valued mechanism's
    beta = grid_scale(epsilon, 1.0)
    assert plan.grid_bits == 20 and plan.scale == math.ldexp(float(beta), -20)
    assert ratio_up(1.0, epsilon) < plan.scale < ratio_up(1.0, epsilon) * (1 + epsilon * 2.0**-20)
    assert plan.rho == math.ldexp(greedy_grid_threshold(float(beta), delta, 100), -20)
    real = rho_greedy(epsilon, delta, 100)  # the threshold grows with the scale, plus the grid's cells
    assert real < plan.rho < real * (1 + epsilon * 2.0**-20) + 3 * 2.0**-20
    assert plan.gamma == plan.rho + 2.0 * plan.scale
    assert plan.noise_delta == 0.0 and plan.threshold_delta == delta
    release = release_plan(Params(epsilon=epsilon, delta=delta, method=GREEDY))
    assert release.parameters["algorithm"].startswith("Carvalho, Wang, Gondara 2022")
    assert "shards" in release.parameters
    assert Params(epsilon=epsilon, delta=delta).method == "policy-gaussian"  # the default is unchanged


def test_zero_weight_kept_items_are_candidates_only_for_greedy():
    rng = np.random.default_rng(14)
    weights = np.zeros(200_000)
    greedy = plan_set_union(1.0, 0.4, 2, GREEDY)
    laplace = plan_set_union(1.0, 0.4, 2, "policy-laplace")
    released = release_mask(weights, greedy, rng).mean()
    assert released == pytest.approx(greedy.release_probability(0.0), rel=0.1)
    assert released > 0
    assert not release_mask(weights, laplace, rng).any()


def test_build_histogram_keeps_the_facts_for_one_person_alone():
    # a person alone: the first item gets min(Γ, 1), the next only if Γ < 1
    assert build_histogram(*csr([[0, 1, 2]]), 3, GREEDY, 4.0).tolist() == [1.0, 0.0, 0.0]
    assert build_histogram(*csr([[0, 1, 2]]), 3, GREEDY, 0.4).tolist() == pytest.approx([0.4, 0.4, 0.2])
