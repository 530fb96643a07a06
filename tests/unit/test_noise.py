"""Tests of dp_spark.noise: exact samplers against their pmf, float samplers
against scipy, tail helpers against brute force, and generator handling.

Statistical tests use fixed seeds (tests only) and reject at p < 1e-4, so a
correct sampler fails a given test with probability below 1e-4 over seeds; each
is paired with a test showing the same data reject a pmf whose scale is 10%
off, so the tests can fail.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dp_spark.errors import ParameterError
from dp_spark.noise import (
    bernoulli_exp,
    discrete_gaussian,
    discrete_gaussian_std_upper,
    discrete_laplace,
    discrete_laplace_std,
    discrete_laplace_upper_quantile,
    exponential,
    gaussian,
    gumbel,
    laplace,
    laplace_upper_quantile,
    make_rng,
    spawn_rngs,
)
from dp_spark.noise.discrete import uniform_below

P_MIN = 1e-4
N_DISCRETE = 20_000
N_CONTINUOUS = 20_000


# --------------------------------------------------------------------------- exact pmfs


def discrete_laplace_pmf(scale: float, support: np.ndarray) -> np.ndarray:
    """(1 - p)/(1 + p) · p^|k| with p = exp(-1/scale)."""
    p = math.exp(-1.0 / scale)
    return (1 - p) / (1 + p) * np.exp(-np.abs(support) / scale)


def discrete_gaussian_pmf(sigma: float, support: np.ndarray) -> np.ndarray:
    """exp(-k²/(2σ²)) normalised over a support wide enough (±(40σ+10)) that
    the mass left out is below 1e-300."""
    weights = np.exp(-(support.astype(float) ** 2) / (2 * sigma**2))
    return weights / weights.sum()


def support_for(spread: float) -> np.ndarray:
    half = int(40 * spread + 10)
    return np.arange(-half, half + 1)


def chisquare_pvalue(samples: np.ndarray, support: np.ndarray, pmf: np.ndarray) -> float:
    """Chi-square goodness of fit; neighbouring cells are pooled left to right
    until each has expected count >= 5 (a remainder joins the last cell)."""
    assert samples.min() >= support[0] and samples.max() <= support[-1]
    observed_all = np.bincount(samples - support[0], minlength=len(support))
    expected_all = len(samples) * pmf / pmf.sum()
    observed, expected = [], []
    obs_acc = exp_acc = 0.0
    for obs, exp in zip(observed_all, expected_all):
        obs_acc += obs
        exp_acc += exp
        if exp_acc >= 5:
            observed.append(obs_acc)
            expected.append(exp_acc)
            obs_acc = exp_acc = 0.0
    observed[-1] += obs_acc
    expected[-1] += exp_acc
    assert len(observed) >= 3
    return float(stats.chisquare(observed, expected).pvalue)


# --------------------------------------------------------------------------- discrete Laplace


@pytest.fixture(scope="module", params=[0.5, 1.0, 3.7, 20.0])
def laplace_draws(request):
    scale = request.param
    return scale, discrete_laplace(scale, make_rng(1000 + int(10 * scale)), size=N_DISCRETE)


def test_discrete_laplace_matches_pmf(laplace_draws):
    scale, draws = laplace_draws
    assert draws.dtype == np.int64 and draws.shape == (N_DISCRETE,)
    support = support_for(scale)
    assert chisquare_pvalue(draws, support, discrete_laplace_pmf(scale, support)) > P_MIN


def test_discrete_laplace_test_rejects_wrong_scale(laplace_draws):
    scale, draws = laplace_draws
    support = support_for(scale)
    wrong = discrete_laplace_pmf(scale * 1.1, support)
    assert chisquare_pvalue(draws, support, wrong) < P_MIN


def test_discrete_laplace_std_matches_draws(laplace_draws):
    scale, draws = laplace_draws
    # std of the sample std is about std·sqrt((kurtosis-1)/(4n)) < 2% here; allow 6%.
    assert draws.std() == pytest.approx(discrete_laplace_std(scale), rel=0.06)


def test_discrete_laplace_exact_fraction_scale():
    draws = discrete_laplace(Fraction(7, 3), make_rng(5), size=N_DISCRETE)
    support = support_for(7 / 3)
    assert chisquare_pvalue(draws, support, discrete_laplace_pmf(7 / 3, support)) > P_MIN


def test_discrete_laplace_scalar_and_shape():
    rng = make_rng(6)
    value = discrete_laplace(2.0, rng)
    assert type(value) is int
    assert discrete_laplace(2.0, rng, size=(3, 4)).shape == (3, 4)
    assert discrete_laplace(2.0, rng, size=0).shape == (0,)


def test_discrete_laplace_huge_scale_is_fast_and_sane():
    draws = discrete_laplace(1e6, make_rng(7), size=2000)
    # std of the mean is sqrt(2)·1e6/sqrt(2000) ≈ 3.2e4; allow 6 of those.
    assert abs(draws.mean()) < 2e5
    assert draws.std() == pytest.approx(discrete_laplace_std(1e6), rel=0.15)


# --------------------------------------------------------------------------- discrete Gaussian


@pytest.fixture(scope="module", params=[0.8, 2.5, 10.0])
def gaussian_draws(request):
    sigma = request.param
    return sigma, discrete_gaussian(sigma, make_rng(2000 + int(10 * sigma)), size=N_DISCRETE)


def test_discrete_gaussian_matches_pmf(gaussian_draws):
    sigma, draws = gaussian_draws
    support = support_for(sigma)
    assert chisquare_pvalue(draws, support, discrete_gaussian_pmf(sigma, support)) > P_MIN


def test_discrete_gaussian_test_rejects_wrong_sigma(gaussian_draws):
    sigma, draws = gaussian_draws
    support = support_for(sigma)
    assert chisquare_pvalue(draws, support, discrete_gaussian_pmf(sigma * 1.1, support)) < P_MIN


def test_discrete_gaussian_std_upper_is_an_upper_bound():
    for sigma in [0.3, 0.8, 2.5, 10.0]:
        support = support_for(sigma)
        pmf = discrete_gaussian_pmf(sigma, support)
        exact_std = math.sqrt(float(np.sum(pmf * support.astype(float) ** 2)))
        assert exact_std <= discrete_gaussian_std_upper(sigma) * (1 + 1e-12)
    # for large sigma the bound is tight
    assert exact_std == pytest.approx(10.0, rel=1e-6)


# --------------------------------------------------------------------------- Bernoulli(exp(-γ))


@pytest.mark.parametrize("gamma", [0.3, 1, 2.5, Fraction(5, 7)])
def test_bernoulli_exp_binomial(gamma):
    rng = make_rng(3000)
    hits = sum(bernoulli_exp(gamma, rng) for _ in range(N_DISCRETE))
    assert stats.binomtest(hits, N_DISCRETE, math.exp(-float(gamma))).pvalue > P_MIN
    # the same count would reject a 10% larger gamma
    assert stats.binomtest(hits, N_DISCRETE, math.exp(-1.1 * float(gamma))).pvalue < P_MIN


def test_bernoulli_exp_edge_cases():
    rng = make_rng(3001)
    assert all(bernoulli_exp(0, rng) for _ in range(1000))
    assert all(bernoulli_exp(0.0, rng) for _ in range(1000))
    # exp(-60) ≈ 1e-26: never seen, and large gamma stops early
    assert not any(bernoulli_exp(60, rng) for _ in range(1000))
    assert isinstance(bernoulli_exp(0.5, rng), bool)


@pytest.mark.parametrize("bad", [-0.1, Fraction(-1, 3), float("nan"), float("inf"), True, "1"])
def test_bernoulli_exp_refuses_bad_gamma(bad):
    with pytest.raises(ParameterError):
        bernoulli_exp(bad, make_rng(1))


# --------------------------------------------------------------------------- uniform integers


def test_uniform_below_small_and_huge():
    rng = make_rng(4000)
    assert all(uniform_below(1, rng) == 0 for _ in range(100))
    d = 3 * 2**64  # three equal blocks of 2**64, needs two 64-bit words
    values = [uniform_below(d, rng) for _ in range(6000)]
    assert all(0 <= v < d for v in values)
    blocks = np.bincount([v >> 64 for v in values], minlength=3)
    assert len(blocks) == 3
    assert stats.chisquare(blocks).pvalue > P_MIN
    huge = 2**200 + 12345
    assert all(0 <= uniform_below(huge, rng) < huge for _ in range(200))
    with pytest.raises(ParameterError):
        uniform_below(0, rng)


# --------------------------------------------------------------------------- continuous samplers


CONTINUOUS = [
    (laplace, lambda s: stats.laplace(scale=s)),
    (gaussian, lambda s: stats.norm(scale=s)),
    (gumbel, lambda s: stats.gumbel_r(scale=s)),
    (exponential, lambda s: stats.expon(scale=s)),
]


@pytest.mark.parametrize("sampler,reference", CONTINUOUS)
@pytest.mark.parametrize("scale", [0.7, 5.0])
def test_continuous_sampler_ks(sampler, reference, scale):
    draws = sampler(scale, make_rng(5000), size=N_CONTINUOUS)
    assert draws.shape == (N_CONTINUOUS,) and draws.dtype == np.float64
    assert stats.kstest(draws, reference(scale).cdf).pvalue > P_MIN
    assert stats.kstest(draws, reference(1.1 * scale).cdf).pvalue < P_MIN
    assert isinstance(sampler(scale, make_rng(1)), float)


ALL_SAMPLERS = [laplace, gaussian, gumbel, exponential, discrete_laplace, discrete_gaussian]


@pytest.mark.parametrize("sampler", ALL_SAMPLERS)
@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), None, "2"])
def test_samplers_refuse_bad_scale(sampler, bad):
    with pytest.raises(ParameterError):
        sampler(bad, make_rng(1))


@pytest.mark.parametrize("sampler", [laplace, discrete_laplace, discrete_gaussian])
def test_samplers_refuse_bad_rng_and_size(sampler):
    with pytest.raises(ParameterError):
        sampler(1.0, np.random.RandomState(0))
    with pytest.raises(ParameterError):
        sampler(1.0, 42)
    with pytest.raises(ParameterError):
        sampler(1.0, make_rng(1), size=-3)


# --------------------------------------------------------------------------- tails


@pytest.mark.parametrize("scale", [0.3, 1.0, 4.0])
@pytest.mark.parametrize("beta", [0.5, 0.05, 1e-3, 1e-9])
def test_laplace_upper_quantile(scale, beta):
    x = laplace_upper_quantile(scale, beta)
    assert x == pytest.approx(stats.laplace(scale=scale).isf(beta), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("beta", [0.0, 0.6, 1.0, -0.1, float("nan")])
def test_laplace_upper_quantile_refuses_beta(beta):
    with pytest.raises(ParameterError):
        laplace_upper_quantile(1.0, beta)


def brute_force_discrete_quantile(scale: float, beta: float) -> int:
    """Smallest m >= 0 with Σ_{k>m} pmf(k) <= β, summing the pmf directly."""
    support = np.arange(0, int(200 * scale) + 200)
    pmf = discrete_laplace_pmf(scale, support)
    tails = np.cumsum(pmf[::-1])[::-1]  # tails[j] = P[X >= j]
    for m in range(len(support) - 1):
        if tails[m + 1] <= beta:
            return m
    raise AssertionError("support too short")


@pytest.mark.parametrize("scale", [0.2, 0.5, 1.0, 3.7, 20.0, 100.0])
@pytest.mark.parametrize("beta", [0.9, 0.4, 0.1, 0.05, 0.01, 1e-4, 1e-8])
def test_discrete_laplace_upper_quantile_brute_force(scale, beta):
    m = discrete_laplace_upper_quantile(scale, beta)
    assert isinstance(m, int) and m >= 0
    assert m == brute_force_discrete_quantile(scale, beta)


def test_discrete_laplace_upper_quantile_empirical():
    draws = discrete_laplace(3.7, make_rng(6000), size=N_DISCRETE)
    m = discrete_laplace_upper_quantile(3.7, 0.05)
    share_above = float(np.mean(draws > m))
    # P[X > m] <= 0.05, so the observed share (binomial sd <= 0.0016) stays
    # below 0.05 + 4 sd
    assert share_above <= 0.05 + 0.0064


@pytest.mark.parametrize("scale", [0.2, 1.0, 3.7, 50.0])
def test_discrete_laplace_std_brute_force(scale):
    support = support_for(scale)
    pmf = discrete_laplace_pmf(scale, support)
    brute = math.sqrt(float(np.sum(pmf * support.astype(float) ** 2)))
    assert discrete_laplace_std(scale) == pytest.approx(brute, rel=1e-9)
    assert discrete_laplace_std(scale) < math.sqrt(2) * scale


# --------------------------------------------------------------------------- generators


def test_seeded_rng_is_reproducible():
    first = discrete_laplace(2.0, make_rng(42), size=50)
    second = discrete_laplace(2.0, make_rng(42), size=50)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(
        laplace(1.0, make_rng(42), size=5), laplace(1.0, make_rng(42), size=5)
    )


def test_unseeded_rngs_differ():
    a = make_rng().integers(0, 2**63 - 1, size=4)
    b = make_rng(None).integers(0, 2**63 - 1, size=4)
    assert not np.array_equal(a, b)


def test_spawn_rngs():
    children = spawn_rngs(make_rng(9), 3)
    assert len(children) == 3 and all(isinstance(c, np.random.Generator) for c in children)
    streams = [tuple(c.integers(0, 2**63 - 1, size=4)) for c in children]
    assert len(set(streams)) == 3
    again = [tuple(c.integers(0, 2**63 - 1, size=4)) for c in spawn_rngs(make_rng(9), 3)]
    assert again == streams
    assert spawn_rngs(make_rng(9), 0) == []


@pytest.mark.parametrize("bad", [-1, 1.5, "7", True])
def test_make_rng_refuses_bad_seed(bad):
    with pytest.raises(ParameterError):
        make_rng(bad)


def test_spawn_rngs_refuses_bad_arguments():
    with pytest.raises(ParameterError):
        spawn_rngs(make_rng(1), -1)
    with pytest.raises(ParameterError):
        spawn_rngs(np.random.RandomState(1), 2)


def test_noise_package_does_not_import_spark_or_pandas():
    import subprocess
    import sys

    code = (
        "import sys, dp_spark.noise, dp_spark.accounting; "
        "bad = [m for m in ('pyspark', 'pandas') if m in sys.modules]; "
        "sys.exit(1 if bad else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# --------------------------------------------------------------------------- vectorised exact samplers

from dp_spark.noise.discrete_batch import (  # noqa: E402
    bernoulli_exp_batch,
    discrete_gaussian_batch,
    discrete_laplace_batch,
    rational_scale,
    rational_sigma2,
)

N_BATCH = 200_000


@pytest.mark.parametrize("sigma2", [Fraction(1, 4), Fraction(1), Fraction(7, 3), Fraction(40)])
def test_discrete_gaussian_batch_matches_exact_pmf(sigma2):
    draws = discrete_gaussian_batch(sigma2, N_BATCH, make_rng(71))
    assert draws.dtype == np.int64
    sigma = math.sqrt(sigma2)
    support = support_for(sigma)
    pmf = discrete_gaussian_pmf(sigma, support)
    assert chisquare_pvalue(draws, support, pmf) > P_MIN
    # the same draws reject a σ 10% off (the test has power)
    assert chisquare_pvalue(draws, support, discrete_gaussian_pmf(sigma * 1.1, support)) < P_MIN
    # variance against the exact formula Σ k² p(k) (≤ σ²), 5 standard errors
    variance = float((support.astype(float) ** 2 * pmf).sum())
    assert variance <= float(sigma2) + 1e-12
    fourth = float((support.astype(float) ** 4 * pmf).sum())
    se = math.sqrt((fourth - variance**2) / N_BATCH)
    assert abs(float(np.mean(draws.astype(float) ** 2)) - variance) < 5 * se


@pytest.mark.parametrize("scale", [1, 3, 17, Fraction(7, 3), Fraction(1, 4)])
def test_discrete_laplace_batch_matches_exact_pmf(scale):
    draws = discrete_laplace_batch(scale, N_BATCH, make_rng(72))
    scale = float(scale)
    support = support_for(scale)
    assert chisquare_pvalue(draws, support, discrete_laplace_pmf(scale, support)) > P_MIN
    wrong = scale * 1.1 if scale > 0.5 else scale * 1.3  # tiny scales: nearly all mass at 0
    assert chisquare_pvalue(draws, support, discrete_laplace_pmf(wrong, support)) < P_MIN


@pytest.mark.parametrize("a, b", [(0, 1), (1, 3), (1, 1), (5, 2), (7, 1)])
def test_bernoulli_exp_batch_rate(a, b):
    hits = bernoulli_exp_batch(np.full(N_BATCH, a), np.full(N_BATCH, b), make_rng(73))
    p = math.exp(-a / b)
    assert stats.binomtest(int(hits.sum()), N_BATCH, p).pvalue > P_MIN


def test_rational_sigma2_rounds_up_on_a_small_grid():
    assert rational_sigma2(1e-12) == Fraction(1, 2**20)
    for value in [1e-6, 0.01, 0.3, 1.0, 21.000000001, 5376.3, 2.2e7]:
        q = rational_sigma2(value)
        slack = Fraction(1, 2**19) if value >= 1 else Fraction(1, 2**9)
        assert Fraction(value) <= q <= Fraction(value) * (1 + slack)
        discrete_gaussian_batch(q, 10, make_rng(1))  # fits the int64 path


def test_discrete_batch_refuses_bad_arguments():
    rng = make_rng(1)
    for bad in [0, -1, Fraction(-1, 2)]:
        with pytest.raises(ParameterError):
            discrete_gaussian_batch(bad, 3, rng)
    with pytest.raises(ParameterError):
        discrete_laplace_batch(0, 3, rng)
    assert rational_scale(0.3) == Fraction(308, 1024) and rational_scale(2) == 2
    with pytest.raises(ParameterError):
        discrete_gaussian_batch(1, -1, rng)
    with pytest.raises(ParameterError):
        bernoulli_exp_batch([-1], [1], rng)
