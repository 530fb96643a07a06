"""The private choice of the group cap m and the per-group noise scales
(dp_spark.mechanisms.groups): sensitivities on random add/remove-one-person
neighbours, output distributions against brute force on tiny inputs, and the
scale arithmetic (ℓ1 = mℓ under pure ε, ℓ2 = √m·ℓ under zCDP)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dp_spark.errors import ParameterError
from dp_spark.mechanisms.groups import (
    choose_max_groups,
    gem_utilities,
    group_noise_scale,
    group_selection_epsilon,
    quantile_scores,
    quantile_sensitivity,
)
from dp_spark.mechanisms.distinct_count.gem import generalized_exponential_probabilities


def histogram_of(counts, top):
    """h[j-1] = #{p : min(c_p, M) = j} from per-person group counts (brute force)."""
    h = np.zeros(top, dtype=np.int64)
    for c in counts:
        h[min(c, top) - 1] += 1
    return h


def brute_gem_utilities(counts, top):
    return np.array([sum(min(c, m) for c in counts) for m in range(1, top + 1)], dtype=float)


def brute_quantile_scores(counts, top, q):
    out = []
    for m in range(1, top + 1):
        low = sum(1 for c in counts if min(c, top) <= m)
        high = len(counts) - low
        out.append(-abs((1 - q) * low - q * high))
    return np.array(out)


def brute_quantile_grid(counts, top, q):
    """The exact quantile scores from the persons, rounded down onto multiples of 2^-20."""
    fq = Fraction(q)
    out = []
    for m in range(1, top + 1):
        low = sum(1 for c in counts if min(c, top) <= m)
        exact_score = -abs((1 - fq) * low - fq * (len(counts) - low))
        out.append(math.floor(exact_score * 2**20) / 2**20)
    return np.array(out)


def test_scores_match_brute_force_on_random_inputs():
    rng = np.random.default_rng(1)
    for _ in range(200):
        top = int(rng.integers(1, 9))
        counts = list(rng.integers(1, 12, size=int(rng.integers(0, 15))))
        h = histogram_of(counts, top)
        q, d = gem_utilities(h)
        np.testing.assert_array_equal(q, brute_gem_utilities(counts, top))
        np.testing.assert_array_equal(d, np.arange(1, top + 1))
        quant = float(rng.uniform(0.05, 0.95))
        np.testing.assert_array_equal(quantile_scores(h, quant), brute_quantile_grid(counts, top, quant))


def test_sensitivities_hold_on_random_add_remove_one_person_neighbours():
    """|u(D + y) − u(D)| ≤ Δ for every candidate, over random D and persons y,
    and the bound is reached (it is not loose by more than rounding)."""
    rng = np.random.default_rng(2)
    worst_gem, worst_quantile = 0.0, 0.0
    for _ in range(2000):
        top = int(rng.integers(1, 10))
        counts = list(rng.integers(1, 15, size=int(rng.integers(0, 20))))
        y = int(rng.integers(1, 15))
        h, h_plus = histogram_of(counts, top), histogram_of(counts + [y], top)
        q, d = gem_utilities(h)
        q_plus, _ = gem_utilities(h_plus)
        change = q_plus - q
        assert np.all(change >= 0) and np.all(change <= d)  # 0 ≤ Δq_m ≤ m
        worst_gem = max(worst_gem, float(np.max(change / d)))
        quant = float(rng.uniform(0.01, 0.99))
        moved = np.abs(quantile_scores(h_plus, quant) - quantile_scores(h, quant))
        assert np.all(moved <= quantile_sensitivity(quant))  # exact doubles on the grid: no slack
        worst_quantile = max(worst_quantile, float(np.max(moved / quantile_sensitivity(quant))))
    assert worst_gem == 1.0 and worst_quantile > 0.99


def brute_em_probabilities(scores, epsilon, sensitivity):
    w = np.array([math.exp(epsilon * (s - max(scores)) / (2 * sensitivity)) for s in scores])
    return w / w.sum()


def chi_square_pvalue(draws, probabilities):
    observed = np.bincount(draws, minlength=len(probabilities))
    expected = probabilities * len(draws)
    keep = expected > 5
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    if exp[-1] == 0:
        assert obs[-1] == 0
        obs, exp = obs[:-1], exp[:-1]
    return float(stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


@pytest.mark.parametrize("counts, top, epsilon, quant", [
    ([1, 1, 2, 3, 5, 8], 6, 1.0, 0.5),
    ([1, 2, 2, 2, 4, 4, 7, 9, 9], 8, 2.0, 0.9),
    ([3], 4, 0.5, 0.75),
])
def test_quantile_choice_matches_the_brute_force_distribution(counts, top, epsilon, quant):
    expected = brute_em_probabilities(brute_quantile_scores(counts, top, quant), epsilon,
                                      max(quant, 1 - quant))
    rng = np.random.default_rng(3)
    h = histogram_of(counts, top)
    draws = np.array([choose_max_groups(h, epsilon, rng, method="quantile", quantile=quant) - 1
                      for _ in range(20000)])
    assert chi_square_pvalue(draws, expected) > 1e-3


@pytest.mark.parametrize("counts, top, epsilon", [
    ([1, 1, 2, 3, 5, 8, 8, 8], 6, 1.0),
    ([1] * 30 + [2] * 10 + [6] * 3, 8, 2.0),
])
def test_gem_choice_matches_the_brute_force_distribution(counts, top, epsilon):
    """GEM's exact distribution on utilities computed by brute force from the
    persons (not from the histogram) against 20,000 draws."""
    beta = 0.1
    expected = generalized_exponential_probabilities(brute_gem_utilities(counts, top),
                                                     np.arange(1, top + 1), epsilon, beta)
    rng = np.random.default_rng(4)
    h = histogram_of(counts, top)
    draws = np.array([choose_max_groups(h, epsilon, rng, method="gem", beta=beta) - 1 for _ in range(20000)])
    assert chi_square_pvalue(draws, expected) > 1e-3


def test_exact_privacy_ratio_on_neighbours_is_at_most_exp_epsilon():
    """The exact output distributions on every neighbour pair of small
    histograms: max ratio ≤ e^ε (both methods)."""
    rng = np.random.default_rng(5)
    eps = 1.0
    for _ in range(300):
        top = int(rng.integers(1, 7))
        counts = list(rng.integers(1, 9, size=int(rng.integers(0, 10))))
        y = int(rng.integers(1, 9))
        for quant in (0.3, 0.9):
            p = brute_em_probabilities(brute_quantile_scores(counts, top, quant), eps, max(quant, 1 - quant))
            p2 = brute_em_probabilities(brute_quantile_scores(counts + [y], top, quant), eps, max(quant, 1 - quant))
            assert np.max(np.abs(np.log(p / p2))) <= eps + 1e-9
        d = np.arange(1, top + 1)
        p = generalized_exponential_probabilities(brute_gem_utilities(counts, top), d, eps, 0.1)
        p2 = generalized_exponential_probabilities(brute_gem_utilities(counts + [y], top), d, eps, 0.1)
        assert np.max(np.abs(np.log(p / p2))) <= eps + 1e-9


@pytest.mark.parametrize("method", ["gem", "quantile"])
def test_choice_meets_its_stated_utility_guarantee(method):
    """10,000 persons in 3 groups, two in 10: with probability ≥ 1 − β the
    choice is within the mechanism's stated utility margin (GEM:
    q_m ≥ max_j (q_j − (4j/ε)·ln(M/β)); exponential mechanism:
    u(m) ≥ max u − (2Δ/ε)·ln(M/β)), so m = 1, 2 (which drop two thirds of
    the data or more) are never chosen. Both spread their choice over the
    flat top (m = 3..): a larger m keeps no more data, and the release's
    noise (m·ℓ) is not part of either utility (README, per-group releases)."""
    h = np.zeros(20, dtype=np.int64)
    h[2] = 10_000
    h[9] = 2
    eps, beta, top = 1.0, 0.05, 20
    rng = np.random.default_rng(6)
    picks = np.array([choose_max_groups(h, eps, rng, method=method, beta=beta) for _ in range(2000)])
    if method == "gem":
        q, d = gem_utilities(h)
        ok = q[picks - 1] >= np.max(q - (4 * d / eps) * math.log(top / beta))
    else:
        u = quantile_scores(h, 0.9)
        ok = u[picks - 1] >= u.max() - (2 * quantile_sensitivity(0.9) / eps) * math.log(top / beta)
    assert ok.mean() >= 1 - beta and picks.min() >= 3


@pytest.mark.parametrize("bad", [[], [[1, 2]], [1, -1], [1.5, 2], ["a"], [np.nan]])
def test_bad_histograms_are_refused_without_quoting_them(bad):
    with pytest.raises(ParameterError) as info:
        choose_max_groups(bad, 1.0, np.random.default_rng(0))
    assert "1.5" not in str(info.value) and "-1" not in str(info.value)


def test_bad_parameters_are_refused():
    rng = np.random.default_rng(0)
    with pytest.raises(ParameterError):
        choose_max_groups([1, 2], 1.0, rng, method="median")
    with pytest.raises(ParameterError):
        choose_max_groups([1, 2], 0.0, rng)
    with pytest.raises(ParameterError):
        choose_max_groups([1, 2], 1.0, rng, method="quantile", quantile=1.0)
    with pytest.raises(ParameterError):
        group_noise_scale(2, 1.0)
    with pytest.raises(ParameterError):
        group_noise_scale(2, 1.0, epsilon=1.0, rho=1.0)
    with pytest.raises(ParameterError):
        group_noise_scale(0, 1.0, epsilon=1.0)


@pytest.mark.parametrize("m, ell, eps", [(1, 1.0, 1.0), (3, 5.0, 0.7), (7, 2.0, 0.1), (100, 13.0, 3.0)])
def test_pure_scale_is_m_ell_over_epsilon(m, ell, eps):
    scale = group_noise_scale(m, ell, epsilon=eps)
    assert scale.model == "pure" and scale.sensitivity == m * ell
    assert scale.scale >= m * ell / eps and scale.scale == pytest.approx(m * ell / eps, rel=1e-15)
    assert group_selection_epsilon(m, epsilon=eps) <= eps / m
    assert group_selection_epsilon(m, epsilon=eps) * m <= eps  # m selections never exceed the budget


@pytest.mark.parametrize("m, ell, rho", [(1, 1.0, 0.5), (4, 5.0, 0.2), (9, 3.0, 1.0), (50, 7.0, 0.01)])
def test_zcdp_scale_is_sqrt_m_ell_over_sqrt_two_rho(m, ell, rho):
    scale = group_noise_scale(m, ell, rho=rho)
    assert scale.model == "zcdp" and scale.sensitivity == pytest.approx(math.sqrt(m) * ell, rel=1e-15)
    sigma = math.sqrt(m) * ell / math.sqrt(2 * rho)
    assert scale.scale == pytest.approx(sigma, rel=1e-15)
    # ρ-zCDP of the whole vector: (ℓ2)²/(2σ²) ≤ ρ, exactly in rationals
    from fractions import Fraction

    assert Fraction(m) * Fraction(ell) ** 2 / (2 * Fraction(scale.scale) ** 2) <= Fraction(rho)
    eps_g = group_selection_epsilon(m, rho=rho)
    assert Fraction(m) * Fraction(eps_g) ** 2 / 8 <= Fraction(rho)  # m ε_g²/8-zCDP selections
    assert eps_g == pytest.approx(math.sqrt(8 * rho / m), rel=1e-15)


def test_one_group_per_person_gives_every_group_the_full_budget():
    """m = 1 (parallel composition): the per-group scale is the ungrouped one."""
    assert group_noise_scale(1, 4.0, epsilon=0.5).scale == 8.0
    assert group_noise_scale(1, 4.0, rho=0.5).scale == 4.0
    assert group_selection_epsilon(1, epsilon=0.5) == 0.5
    assert group_selection_epsilon(1, rho=0.5) == 2.0
    # and the scale grows with m: m under pure ε, √m under zCDP
    assert group_noise_scale(4, 4.0, epsilon=0.5).scale == 32.0
    assert group_noise_scale(4, 4.0, rho=0.5).scale == 8.0
