"""The exact set union of the private key step (issue 35,
:mod:`dp_spark.mechanisms.set_union.discrete`): its constants against
brute-force references, draws through the exact samplers only, and the
released key set's distribution against the exact discrete distribution on a
tiny input. The neighbouring-input audit is in tests/audit/test_groups_audit.py."""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dp_spark.errors import ParameterError
from dp_spark.mechanisms.set_union import (
    DiscreteSetUnionPlan,
    build_histogram,
    discrete_release_mask,
    plan_discrete_set_union,
    release_mask,
)
from dp_spark.mechanisms.set_union.discrete import BATCH_SIGMA, EXACT_POLICY, grid_statistic
from dp_spark.summaries.set_union import UNIT_BITS, person_units


class NoFloatDraws(np.random.Generator):
    """A generator whose float samplers raise: a step using it draws through
    the exact (integer) samplers only."""

    def _refuse(self, *args, **kwargs):
        raise AssertionError("a float draw on the private key step")

    normal = standard_normal = laplace = gumbel = exponential = standard_exponential = _refuse
    random = uniform = beta = gamma = standard_gamma = _refuse


@functools.lru_cache(maxsize=8)
def pmf(sigma: int) -> tuple[np.ndarray, np.ndarray]:
    """N_Z(0, s²) by brute force: (k, P[k]) over |k| <= 40s + 40."""
    top = 40 * sigma + 40
    k = np.arange(-top, top + 1)
    w = np.exp(-(k.astype(np.float64) ** 2) / (2.0 * sigma * sigma))
    return k, w / math.fsum(w.tolist())


def released_probability(x: int, plan: DiscreteSetUnionPlan) -> float:
    """P[x + Z > R] from the brute-force pmf (independent of the module's reference)."""
    k, p = pmf(plan.sigma)
    return float(math.fsum(p[x + k > plan.threshold].tolist()))


def cks_delta(rho: float, epsilon: float) -> float:
    """ρ-zCDP -> (ε, δ): δ at the best order α by bisection on the
    derivative (Canonne–Kamath–Steinke 2020, §2.3, Corollary 13, as in their
    reference code), independent of the module's optimiser."""
    lo, hi = 1.01, (epsilon + 1) / (2 * rho) + 2
    for _ in range(1000):
        alpha = (lo + hi) / 2
        if (2 * alpha - 1) * rho - epsilon + math.log1p(-1 / alpha) < 0:
            lo = alpha
        else:
            hi = alpha
    return math.exp((alpha - 1) * (alpha * rho - epsilon) + alpha * math.log1p(-1 / alpha)) / (alpha - 1)


PLANS = [(1.0, 0.1, 3), (0.5, 0.02, 1), (2.0, 1e-3, 5), (0.2, 1e-6, 2)]


@pytest.mark.parametrize("epsilon, delta, max_items", PLANS)
def test_the_constants_meet_the_proof(epsilon, delta, max_items):
    """Δ² bounds every person's grid change, s² >= Δ²/(2ρ_n) exactly, ρ_n
    converts to (ε, δ/2) (an independent evaluation), and a new key of j
    clears R with probability <= (δ/2)/j (brute force, small s)."""
    plan = plan_discrete_set_union(epsilon, delta, max_items)
    cell = 2 ** (UNIT_BITS - plan.grid_bits)
    assert 2**plan.grid_bits >= 128 * math.isqrt(max_items)
    for t in range(1, max_items + 1):
        a = person_units(EXACT_POLICY, t)
        worst = max(abs((u + a) // cell - u // cell) + 1 for u in range(0, 4 * cell, cell // 7 + 1))
        assert t * worst**2 <= plan.l2_squared
    assert Fraction(plan.sigma) ** 2 >= Fraction(plan.l2_squared) / (2 * Fraction(plan.noise_rho))
    assert cks_delta(plan.noise_rho, epsilon) <= plan.noise_delta
    assert plan.noise_delta + plan.threshold_delta == delta
    if plan.sigma <= 5000:
        for j in range(1, max_items + 1):
            x_j = person_units(EXACT_POLICY, j) // cell
            assert j * released_probability(x_j, plan) <= plan.threshold_delta
            assert released_probability(x_j, plan) == pytest.approx(plan.release_probability(x_j / 2**plan.grid_bits
                                                                                               + 1e-12), rel=1e-9)


@pytest.mark.parametrize("epsilon, delta, max_items", [(1e-7, 1e-300, 1024), (5.0, 1e-6, 1), (1e-7, 1e-6, 100),
                                                        (5.0, 1e-300, 1024)])
def test_the_extreme_parameters_a_plan_allows_build(epsilon, delta, max_items):
    """The key step runs after the charge: its constants build at every ε_k
    (0.1 × the ε range), δ_k and Δ0 the plan allows."""
    plan = plan_discrete_set_union(epsilon, delta, max_items)
    assert plan.sigma > 0 and plan.threshold > 0 and plan.weight_for(0.95) > plan.rho
    with pytest.raises(ParameterError):
        plan_discrete_set_union(epsilon, 0.0, max_items)


@pytest.mark.parametrize("epsilon", [1.0, 0.05])
def test_the_mask_draws_only_through_the_exact_samplers(epsilon):
    """Both samplers (int64 batch for s <= BATCH_SIGMA, the Fraction one
    above) on a generator whose float samplers raise; release_mask
    dispatches an exact plan to them."""
    plan = plan_discrete_set_union(epsilon, 1e-6, 2)
    assert (plan.sigma <= BATCH_SIGMA) == (epsilon == 1.0)
    weights = np.array([0.0, plan.rho, 1e9, -1.0])
    mask = release_mask(np.tile(weights, 50), plan, NoFloatDraws(np.random.PCG64(3))).reshape(50, 4)
    assert mask[:, 2].all() and not mask[:, 0].any() and not mask[:, 3].any()


def test_the_grid_statistic_is_the_exact_floor():
    w = np.array([0.0, 2.0**-30, 1.0 - 2.0**-30, 1.0, 3.5, 7 * 2.0**-11])
    assert grid_statistic(w, 10).tolist() == [0, 0, 1023, 1024, 3584, 3]


def test_the_released_key_set_has_the_exact_discrete_distribution():
    """Tiny input (four persons, three keys), the real kernel's histogram,
    20,000 runs of the mask: the frequencies of the 8 released sets match the
    exact product distribution (brute-force pmf) — chi-square, seeded."""
    plan = plan_discrete_set_union(1.0, 0.1, 3)
    persons = [[0, 1], [0], [0, 2], [0, 1, 2]]
    sizes = [len(p) for p in persons]
    indptr = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    codes = np.array([c for p in persons for c in p], dtype=np.int64)
    weights = build_histogram(indptr, codes, 3, EXACT_POLICY, None)
    x = grid_statistic(weights, plan.grid_bits)
    p = [released_probability(int(v), plan) for v in x]
    assert 0.02 < min(p) and max(p) < 0.995  # every outcome has mass
    runs = 20_000
    mask = discrete_release_mask(np.tile(weights, runs), plan, np.random.default_rng(35)).reshape(runs, 3)
    observed = np.bincount(mask @ np.array([1, 2, 4]), minlength=8)
    expected = [runs * math.prod(p[i] if (o >> i) & 1 else 1 - p[i] for i in range(3)) for o in range(8)]
    assert stats.chisquare(observed, expected).pvalue > 1e-4
    for i in range(3):
        assert stats.binomtest(int(mask[:, i].sum()), runs, p[i]).pvalue > 1e-4
