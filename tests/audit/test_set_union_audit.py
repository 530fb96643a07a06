"""Audit of DP Set Union (Gopi et al., ICML 2020, Algorithm 1) for every policy.

Two worst cases per policy, both run through the real mechanism: the policy
kernel (:func:`dp_spark.mechanisms.set_union.build_histogram`, one shard with
the cutoff Γ of the plan) builds the histograms of D and D' = D + one person
y, and :func:`dp_spark.mechanisms.set_union.release_mask` adds the noise and
applies ρ, ``TRIALS`` times per input (one vectorized call, fixed test seeds).

1. y adds weight to items others hold (the noise step's (ε, δ_noise) claim;
   δ_noise = 0 for Laplace, δ/2 for Gaussian). D: k persons holding y's
   items (weight k); y holds one item (two for count, whose ℓ1 sensitivity is
   Δ0 = 2: each item moves by 1 and "both released" carries the whole ratio
   e^ε). Event: all of y's items released, and its complement the other way
   round (two_sided_lower_bound). Laplace: the ratio is exactly e^ε for every
   k with k + 1 ≤ ρ; Gaussian: a half-line event is the optimal test and its
   best position depends on σ, so the audit runs a fixed grid of k (the same
   for the broken variant) and reports the largest bound, α split over the
   grid (Bonferroni). The Gaussian policies' exact noise is calibrated through
   ρ-zCDP, whose conversion leaves part of ε unused at this large δ: the
   tightness check is against the ε its exact profile attains.
2. y adds items nobody else holds (the threshold step's claim: released with
   probability ≤ δ_threshold = δ for Laplace, δ/2 for Gaussian). y holds the
   t ≤ Δ0 new items for which the exact release probability under the kernel
   is largest; on D they are not in the histogram and are never released.
   Event: any of them released; bound ln((p_lo(D') − δ_threshold)/p_hi(D)).
   Policy Greedy (Carvalho et al., AAAI 2022) gives the first of them up to 1
   and the others 0, which it still noises (its candidates are the kept
   items), so its worst t is Δ0.
3. Policy Greedy only: y's weight on a shared item moves later persons'
   budgets onto their other items (the cascade the ℓ1 proof covers):
   D = k persons on a, then z holding [a, u]; with y (on a), z covers a's
   remaining gap and spills 1 − gap onto u. Event: u released (u is z's
   kept item in both runs).

Power: the same procedure against a broken variant — noise scale halved for
(1), threshold ρ halved for (2) — must prove a leak (assert_detects).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy.optimize import brentq

from dp_spark.mechanisms.set_union import (
    HELD_SUPPORT,
    POLICIES,
    SEQUENTIAL,
    build_histogram,
    gaussian_mechanism_delta,
    plan_set_union,
    release_mask,
)
from tests.audit.stats import assert_detects
from tests.audit.stats import ALPHA, epsilon_lower_bound, two_sided_lower_bound

TRIALS = 200_000
EPSILON = 1.0
DELTA = 0.1  # large, so that the δ parts are measurable with TRIALS runs
MAX_ITEMS = 4


def _histogram(plan, persons: list[list[int]], n_items: int) -> np.ndarray:
    """The kernel's histogram of ``persons`` (lists of item codes), visited in order."""
    sizes = [len(p) for p in persons]
    indptr = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    codes = np.array([c for p in persons for c in p], dtype=np.int64)
    gamma = plan.gamma if plan.method in SEQUENTIAL else None
    return build_histogram(indptr, codes, n_items, plan.method, gamma)


def _kept(persons: list[list[int]], n_items: int) -> np.ndarray:
    """The items some person keeps: the histogram's rows (policy-greedy's candidates, weight 0
    included; items nobody keeps are not in the Spark histogram at all)."""
    kept = np.zeros(n_items, dtype=bool)
    kept[[c for p in persons for c in p]] = True
    return kept


def _event_count(weights, plan, event: list[int], rng, any_of: bool = False, kept=None) -> int:
    """Runs (of TRIALS) in which all (or any) of the ``event`` items are released; ``kept``: the
    histogram's rows (default: every item)."""
    tiled = np.tile(np.asarray(weights, dtype=np.float64), TRIALS)
    mask = release_mask(tiled, plan, rng).reshape(TRIALS, len(weights))
    if kept is not None:
        mask &= kept
    mask = mask[:, event]
    hit = mask.any(axis=1) if any_of else mask.all(axis=1)
    return int(hit.sum())


def _weight_grid(plan) -> range:
    """k = 1, 2, …: y's items are in the histogram of D too (k = 0 would be
    audit (2), whose claim is δ, not e^ε)."""
    return range(1, int(np.ceil(plan.rho)) + 2)


def added_weight_bound(plan, seed: int) -> float:
    """Audit (1): the largest two-sided ε lower bound over the grid of k."""
    own = [0, 1] if plan.method == "count" else [0]
    grid = _weight_grid(plan)
    best = 0.0
    for k in grid:
        rng = np.random.default_rng([seed, k])
        base = [list(own)] * k
        with_y = _event_count(_histogram(plan, base + [own], 2), plan, own, rng)
        without = _event_count(_histogram(plan, base, 2), plan, own, rng)
        bound = two_sided_lower_bound(with_y, TRIALS, without, TRIALS, plan.noise_delta,
                                      alpha=ALPHA / len(grid))
        best = max(best, bound)
    return best


def attainable_epsilon(plan) -> float:
    """The ε the noise step attains at its δ_noise: the claim for Laplace; for the discrete Gaussian
    (calibrated through ρ-zCDP, whose conversion to (ε, δ) is not tight) the ε of the Gaussian
    mechanism's exact privacy profile at σ/Δ (Balle & Wang 2018, Theorem 8; on a grid of 2^-40 the
    discrete Gaussian's profile is the continuous one), which the audit can approach."""
    if plan.noise != "gaussian":
        return plan.epsilon
    return brentq(lambda e: gaussian_mechanism_delta(plan.scale, e, plan.sensitivity) - plan.noise_delta,
                  1e-9, plan.epsilon)


def worst_new_items(plan) -> int:
    """The t ≤ Δ0 new items whose exact chance of any release is largest,
    with the weights the kernel gives them."""

    def chance(t: int) -> float:  # the items' weights differ under policy-greedy (one full, the rest 0)
        weights = _histogram(plan, [list(range(t))], t)
        return 1.0 - float(np.prod([1.0 - plan.release_probability(float(w)) for w in weights]))

    return max(range(1, plan.max_items + 1), key=chance)


def new_items_bound(plan, seed: int, t: int) -> tuple[float, int]:
    """Audit (2): D has one background person on item 0; y adds items 1..t."""
    rng = np.random.default_rng(seed)
    background, new = [[0]], list(range(1, t + 1))
    with_y = _event_count(_histogram(plan, background + [new], t + 1), plan, new, rng, any_of=True,
                          kept=_kept(background + [new], t + 1))
    without = _event_count(_histogram(plan, background, t + 1), plan, new, rng, any_of=True,
                           kept=_kept(background, t + 1))
    assert without == 0  # items outside the histogram's support are never released
    return epsilon_lower_bound(with_y, TRIALS, without, TRIALS, plan.threshold_delta), with_y


@pytest.mark.parametrize("method", POLICIES)
def test_one_person_adding_weight_moves_the_output_by_at_most_e_eps(method, audit_record):
    plan = plan_set_union(EPSILON, DELTA, MAX_ITEMS if method != "count" else 2, method)
    seed = 100 + POLICIES.index(method)
    bound = added_weight_bound(plan, seed)
    audit_record(f"set-union {method}: person adds weight", plan.epsilon, bound, TRIALS,
                 delta=plan.noise_delta)
    assert plan.noise_record.kind == ("discrete-gaussian" if plan.noise == "gaussian" else "discrete-laplace")
    assert bound >= 0.75 * attainable_epsilon(plan)  # the event is sharp: the audit is nearly tight
    broken = dataclasses.replace(plan, scale=plan.scale / 2)
    assert_detects(f"set-union {method} with noise halved", plan.epsilon,
                   added_weight_bound(broken, seed))


@pytest.mark.parametrize("method", POLICIES)
def test_one_person_adding_new_items_releases_one_with_probability_at_most_delta(method, audit_record):
    plan = plan_set_union(EPSILON, DELTA / 2, MAX_ITEMS, method)
    t = worst_new_items(plan)
    if method == "count" or method in HELD_SUPPORT:
        assert t == MAX_ITEMS  # every new item weighs 1 (greedy: 1 or 0, all noised): the more, the likelier
    seed = 200 + POLICIES.index(method)
    bound, hits = new_items_bound(plan, seed, t)
    audit_record(f"set-union {method}: person adds {t} new items", plan.epsilon, bound, TRIALS,
                 delta=plan.threshold_delta)
    # The claim is attained or nearly so (ρ is the smallest threshold that
    # keeps the worst t below δ_threshold): the observed rate is close to it.
    assert hits / TRIALS >= 0.5 * plan.threshold_delta
    broken = dataclasses.replace(plan, rho=plan.rho / 2)
    assert_detects(f"set-union {method} with threshold halved", plan.epsilon,
                   new_items_bound(broken, seed, worst_new_items(broken))[0])


def cascade_bound(plan, seed: int) -> tuple[float, float]:
    """Audit (3): (ε lower bound, u's weight with y). Items a = 0, u = 1; the plan's cutoff Γ is
    1/20 above a whole number, so k = ⌊Γ⌋ − 1 persons leave a at k, y raises it to k + 1, and z
    ([a, u]) covers the remaining 1/20 and gives u 19/20 (without y: a takes z's whole budget)."""
    k = math.floor(plan.gamma) - 1
    before, z = [[0]] * k, [[0, 1]]
    with_y, without = _histogram(plan, before + [[0]] + z, 2), _histogram(plan, before + z, 2)
    assert without[1] == 0.0 and np.abs(with_y - without).sum() <= 1 + 1e-12
    rng = np.random.default_rng(seed)
    kept = _kept(before + z, 2)
    hits_with = _event_count(with_y, plan, [1], rng, kept=kept)
    hits_without = _event_count(without, plan, [1], rng, kept=kept)
    return epsilon_lower_bound(hits_with, TRIALS, hits_without, TRIALS, plan.noise_delta), float(with_y[1])


def test_greedy_cascade_moves_the_output_by_at_most_e_eps(audit_record):
    base = plan_set_union(EPSILON, DELTA, MAX_ITEMS, "policy-greedy")
    target = math.ceil(base.gamma) + 0.05  # Γ = ρ + α·b, α chosen for a cutoff 1/20 above a whole number
    plan = plan_set_union(EPSILON, DELTA, MAX_ITEMS, "policy-greedy", alpha=(target - base.rho) / base.scale)
    assert plan.gamma == pytest.approx(target)
    bound, spilled = cascade_bound(plan, 300)
    assert spilled == pytest.approx(0.95)
    audit_record("set-union policy-greedy: the added person's weight cascades", plan.epsilon, bound, TRIALS,
                 delta=plan.noise_delta)
    assert bound >= 0.75 * plan.epsilon  # u's weight moves by 0.95: nearly tight
    broken = dataclasses.replace(plan, scale=plan.scale / 2)
    assert_detects("set-union policy-greedy cascade with noise halved", plan.epsilon, cascade_bound(broken, 300)[0])
