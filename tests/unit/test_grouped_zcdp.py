"""The grouped distinct-count's ρ-zCDP path (issue 24): the discrete
Gaussian tail quantile (noise.tails), the per-group mechanism's samplers
(the count's discrete Gaussian and the bound's exponential-mechanism GEM)
against their distributions, its budget arithmetic, and the plan's split."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dp_spark.accounting import ZCDP, PureDP, pure_to_zcdp
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.distinct_count.gem import generalized_exponential_probabilities
from dp_spark.mechanisms.distinct_count.bound import gaussian_margins, release_group_zcdp_at
from dp_spark.mechanisms.distinct_count.cap_bound import release_groups
from dp_spark.mechanisms.groups import group_noise_scale, group_selection_epsilon
from dp_spark.noise.tails import discrete_gaussian_upper_quantile
from dp_spark.plans.distinct_count import plan
from dp_spark.mechanisms.distinct_count.bound import selection_scores


def exact_tail(m: int, sigma: float) -> float:
    """P[X > m], X ~ N_Z(0, σ²), by summing the pmf far into the tail."""
    ks = np.arange(-int(60 * sigma) - 60, int(60 * sigma) + 61)
    w = np.exp(-(ks.astype(np.float64) ** 2) / (2 * sigma * sigma))
    return float(w[ks > m].sum() / w.sum())


@pytest.mark.parametrize("sigma", [0.05, 0.4, 1.0, 2.5, 7.3, 40.0, 999.0, 1000.5, 3000.0])
@pytest.mark.parametrize("beta", [0.2, 0.05, 1e-3])
def test_discrete_gaussian_quantile_is_valid_and_tight(sigma, beta):
    m = discrete_gaussian_upper_quantile(sigma, beta)
    assert exact_tail(m, sigma) <= beta
    if sigma <= 1000:  # the exact sum: the smallest such m
        assert m == 0 or exact_tail(m - 1, sigma) > beta
    else:  # the integral bound: within a step of the smallest
        assert m <= 1 or exact_tail(m - 2, sigma) > beta
    assert m <= math.ceil(sigma * math.sqrt(2 * math.log(1 / beta)))  # never above the sub-Gaussian bound


def test_discrete_gaussian_quantile_at_a_subnormal_beta():
    """β below the smallest normal double: 1/β overflows, so the sub-Gaussian cap is computed from
    −ln β; the quantile is finite and at most that cap."""
    beta = 5e-324
    m = discrete_gaussian_upper_quantile(2.0, beta)
    assert 0 < m <= math.ceil(2.0 * math.sqrt(-2.0 * math.log(beta)))


def test_discrete_gaussian_quantile_refuses_bad_input():
    with pytest.raises(ParameterError):
        discrete_gaussian_upper_quantile(0.0, 0.05)
    with pytest.raises(ParameterError):
        discrete_gaussian_upper_quantile(1.0, 1.0)


def test_count_noise_is_the_discrete_gaussian_with_the_stated_sigma():
    """Chi-square of estimate − c against N_Z(0, σ²) over the central values
    (p > 1e-4, fixed seed), and rejection at σ·1.15 (the test can fail);
    one candidate bound, so every draw is at l = 1."""
    rho, m, n = 0.3, 3, 6000
    sigma = group_noise_scale(m, 1, rho=rho).scale
    assert sigma == pytest.approx(math.sqrt(m) / math.sqrt(2 * rho))
    margins = gaussian_margins({1: sigma}, 0.05, 1)
    rng = np.random.default_rng(5)
    counts = np.array([10_000])
    noise = np.array([release_group_zcdp_at(counts, 1.0, {1: sigma}, margins, 0.05, rng)["estimate"] - 10_000
                      for _ in range(n)])
    edges = np.arange(-6, 7)

    def expected(s):
        ks = np.arange(-200, 201)
        w = np.exp(-(ks ** 2) / (2 * s * s))
        p = w / w.sum()
        inner = np.array([p[ks == k].sum() for k in edges])
        return np.concatenate([[p[ks < -6].sum()], inner, [p[ks > 6].sum()]])

    observed = np.concatenate([[np.sum(noise < -6)], [np.sum(noise == k) for k in edges], [np.sum(noise > 6)]])
    assert stats.chisquare(observed, expected(sigma) * n).pvalue > 1e-4
    assert stats.chisquare(observed, expected(1.15 * sigma) * n).pvalue < 1e-4


def test_bound_choice_is_the_exponential_mechanism_gem():
    """The per-group choice's frequencies match the exponential-mechanism
    GEM's exact probabilities (chi-square p > 1e-4) and not permute-and-flip's
    at a doubled ε (the test can fail)."""
    from dp_spark.mechanisms.distinct_count.gem import generalized_permute_and_flip_probabilities

    max_bound, rho, m, n = 16, 0.02, 2, 12_000
    cands = [1, 4, 16]
    sigmas = {c: group_noise_scale(m, c, rho=rho).scale for c in cands}
    margins = gaussian_margins(sigmas, 0.05, max_bound)
    counts = np.zeros(max_bound, dtype=np.int64)
    counts[[0, 3, 15]] = [300, 340, 380]
    eps = group_selection_epsilon(m, rho=rho)
    idx = np.array(cands) - 1
    q, gem_beta = selection_scores(counts[idx], cands, margins[idx], eps)  # the release's scores and β
    probs = generalized_exponential_probabilities(q, np.array(cands, float), eps, gem_beta, monotone=True)
    assert probs.min() > 0.02
    rng = np.random.default_rng(3)
    picks = [release_group_zcdp_at(counts[idx], eps, sigmas, margins[idx], 0.05, rng)["bound"] for _ in range(n)]
    observed = np.array([picks.count(c) for c in cands])
    assert stats.chisquare(observed, probs * n).pvalue > 1e-4
    other = generalized_permute_and_flip_probabilities(q.astype(float), np.array(cands, float), 2 * eps, gem_beta,
                                                       monotone=True)
    assert stats.chisquare(observed, other * n).pvalue < 1e-4


def test_lower_bound_holds_per_group_with_probability_at_least_one_minus_beta():
    rho, m, beta, runs = 0.5, 4, 0.1, 3000
    at = np.array([[800, 900, 950]] * 5)  # 5 groups, candidates 1, 4, 16
    rng = np.random.default_rng(9)
    fails = total = 0
    for _ in range(runs // 5):
        released, _ = release_groups(at, [1, 4, 16], 16, m, beta, rng, noise="gaussian", select=rho / 2,
                                     count=rho / 2)
        for r in released:
            c = dict(zip([1, 4, 16], at[0]))[r["bound"]]
            fails += r["lower_bound"] > c
            total += 1
    rate, sd = fails / total, math.sqrt(beta * (1 - beta) / total)
    assert rate <= beta + 4 * sd
    assert rate >= beta - 0.05  # the margin is tight (the test can fail both ways)


def test_release_groups_budget_arithmetic():
    at = np.array([[5, 9], [0, 0]])
    released, per_group = release_groups(at, [1, 4], 4, 3, 0.05, np.random.default_rng(1), noise="gaussian",
                                         select=0.12, count=0.2)
    assert per_group["epsilon_select_per_group"] == group_selection_epsilon(3, rho=0.12)
    assert per_group["epsilon_select_per_group"] == pytest.approx(math.sqrt(8 * 0.12 / 3))
    assert all(r["noise"][1].kind == "discrete-gaussian" for r in released)
    for r in released:  # σ = √m·l/√(2ρ_count): each group's count ρ/m-zCDP, m groups compose to ρ_count
        assert r["noise_scale"] == group_noise_scale(3, r["bound"], rho=0.2).scale
        assert r["bound"] ** 2 / (2 * r["noise_scale"] ** 2) <= 0.2 / 3
        assert (per_group["epsilon_select_per_group"] ** 2 / 8) * 3 <= 0.12
    pure, per = release_groups(at, [1, 4], 4, 3, 0.05, np.random.default_rng(1), noise="laplace", select=0.5,
                               count=0.5)
    assert per["epsilon_per_group"] <= 1.0 / 3 and pure[0]["noise"][1].kind == "discrete-laplace"
    with pytest.raises(ValueError):
        release_groups(at, [1, 4], 4, 3, 0.05, np.random.default_rng(1), noise="uniform", select=0.5, count=0.5)


def test_plan_gaussian_per_group_is_zcdp_at_rho_epsilon_squared_over_two():
    """noise="gaussian" is asked for by name; the default per group is the
    pure ε-DP the caller's epsilon= states."""
    keys = ["a", "b", "c"]
    assert plan(epsilon=1.0, group_by="g", groups=keys, max_groups=2).guarantee == PureDP(1.0)
    grouped = plan(epsilon=1.0, group_by="g", groups=keys, max_groups=2, noise="gaussian")
    assert grouped.guarantee == ZCDP(pure_to_zcdp(1.0)) and grouped.guarantee.rho == 0.5
    assert grouped.parameters["noise"] == "discrete gaussian" and grouped.parameters["rho"] == 0.5
    # its (ε, δ') equivalent at δ' = 1e-6 (Bun & Steinke 2016: ε = ρ + 2√(ρ ln(1/δ'))), as top-k's states
    assert grouped.equivalent.delta == 1e-6
    assert grouped.equivalent.epsilon == pytest.approx(0.5 + 2 * math.sqrt(0.5 * math.log(1e6)), rel=1e-9)
    assert grouped.to_dict()["privacy"]["approx_dp_equivalent"]["delta"] == 1e-6
    assert plan(epsilon=1.0, group_by="g", groups=keys, max_groups=2).equivalent is None  # pure: none needed
    costs = [s.cost for s in grouped.split]
    assert all(isinstance(c, ZCDP) for c in costs) and sum(c.rho for c in costs) <= 0.5
    assert sum(c.rho for c in costs) == pytest.approx(0.5)
    assert grouped.split.cost("shards").rho == pytest.approx(0.005)
    private = plan(epsilon=1.0, group_by="g", groups=keys, noise="gaussian")
    assert private.split.cost("max_groups").rho == pytest.approx(0.125)  # the joint (m, l) choice: ρ/4
    assert private.split.cost("count").rho == pytest.approx(0.5 - 0.005 - 0.125) and "select" not in private.split
    pure = plan(epsilon=1.0, group_by="g", groups=keys, max_groups=2, noise="laplace")
    assert pure.guarantee == PureDP(1.0) and pure.parameters["noise"] == "discrete laplace"
    ungrouped = plan(epsilon=1.0)
    assert ungrouped.guarantee == PureDP(1.0) and plan(epsilon=1.0, noise="laplace").guarantee == PureDP(1.0)
    assert "rho" not in ungrouped.parameters
    with pytest.raises(ParameterError, match="per group only"):
        plan(epsilon=1.0, noise="gaussian")
    with pytest.raises(ParameterError):
        plan(epsilon=1.0, group_by="g", groups=keys, noise="uniform")


@pytest.mark.parametrize("m", [1, 2, 5])
def test_the_grouped_zcdp_split_states_rho_over_m_and_sums_to_rho(m):
    grouped = plan(epsilon=1.0, group_by="country", groups=["a", "b"], max_groups=m, shards=4, noise="gaussian")
    labels = [s.label for s in grouped.split]
    assert [s.name for s in grouped.split] == ["select", "count"]
    assert sum(s.cost.rho for s in grouped.split) == pytest.approx(0.5)
    if m == 1:
        assert all("full ρ" in label and "parallel composition" in label for label in labels)
    else:
        assert all(f"ρ/{m}" in label and "zCDP composition" in label for label in labels)


@pytest.mark.parametrize("epsilon", [0.1, 0.3, 0.7, 1.1, 2.7, 3.3, 1e-6, 49.99])
def test_the_zcdp_plan_builds_at_any_epsilon_and_charges_at_least_epsilon_squared_over_two(epsilon):
    """ρ = ε²/2 is stated so that its decimal covers its binary value (the
    plan's calibration check refused ε = 0.3 before); every split fits it."""
    from fractions import Fraction

    from dp_spark.accounting.exact import written

    for m in (None, 3):
        grouped = plan(epsilon=epsilon, group_by="g", groups=["a", "b"], max_groups=m, noise="gaussian")
        rho = grouped.guarantee.rho
        assert Fraction(rho) <= written(rho) and written(rho) >= written(epsilon) ** 2 / 2
        assert sum(Fraction(s.cost.rho) for s in grouped.split) <= Fraction(rho)
