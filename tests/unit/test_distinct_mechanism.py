"""The driver half of the distinct-count release (numpy only)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dp_spark.noise import discrete_laplace_upper_quantile
from dp_spark.mechanisms.distinct_count.bound import noise_margins, release_from_counts


def test_margins_are_the_discrete_laplace_quantiles():
    m = noise_margins(1.0, 0.05, 4)
    assert m.tolist() == [discrete_laplace_upper_quantile(2.0 * l, 0.05) for l in range(1, 5)]
    # close to the continuous margin (2l/eps) ln(1/(2 beta)) of the paper
    for l, value in enumerate(m, start=1):
        assert abs(value - 2 * l * math.log(10)) <= 2 * l * 0.2 + 1


def test_lower_bound_holds_with_probability_about_one_minus_beta():
    """P[lower_bound > c_l̂] must be <= beta; and the margin is tight, so the
    failure rate is not far below beta either (the test can fail both ways)."""
    rng = np.random.default_rng(2024)
    counts = np.full(20, 5000, dtype=np.int64)
    counts[:5] = [1000, 2000, 3000, 4000, 4500]
    beta, runs = 0.1, 4000
    fails = 0
    for _ in range(runs):
        out = release_from_counts(counts, 1.0, beta, rng)
        fails += out["lower_bound"] > counts[out["bound"] - 1]
    rate = fails / runs
    sd = math.sqrt(beta * (1 - beta) / runs)
    assert rate <= beta + 4 * sd, rate
    assert rate >= beta - 0.05, rate  # discrete quantile: P[X > m] is within a step of beta


def test_estimate_noise_is_discrete_laplace_with_the_stated_scale():
    rng = np.random.default_rng(7)
    counts = np.full(10, 10_000, dtype=np.int64)  # every bound equally good: l̂ is small
    noise, scales = [], set()
    for _ in range(3000):
        out = release_from_counts(counts, 2.0, 0.05, rng)
        noise.append(out["estimate"] - 10_000)
        scales.add((out["bound"], out["noise_scale"]))
        assert out["noise_scale"] == 2.0 * out["bound"] / 2.0
    # GEM prefers the smallest bound when counts are flat (smaller margin)
    bounds = [b for b, _ in scales]
    assert min(bounds) == 1
    assert abs(np.mean(noise)) < 0.5


def test_gem_picks_a_bound_near_the_knee():
    rng = np.random.default_rng(1)
    l = np.arange(1, 100)
    counts = np.minimum(1450, 150 * l).astype(np.int64)  # saturates at l = 10
    bounds = [release_from_counts(counts, 1.0, 0.05, rng)["bound"] for _ in range(300)]
    assert 5 <= np.median(bounds) <= 16


def test_released_values_are_clamped_at_zero_and_integers():
    rng = np.random.default_rng(0)
    for _ in range(200):
        out = release_from_counts(np.zeros(5, dtype=np.int64), 0.5, 0.05, rng)
        assert isinstance(out["estimate"], int) and out["estimate"] >= 0
        assert 0 <= out["lower_bound"] <= out["estimate"]


def test_release_only_depends_on_counts_through_the_mechanism():
    """Same seed, same counts -> same release; a different seed differs."""
    counts = np.arange(1, 31, dtype=np.int64) * 10
    a = release_from_counts(counts, 1.0, 0.05, np.random.default_rng(5))
    b = release_from_counts(counts, 1.0, 0.05, np.random.default_rng(5))
    assert a == b
    others = {release_from_counts(counts, 1.0, 0.05, np.random.default_rng(s))["estimate"] for s in range(10)}
    assert len(others) > 1


def test_end_to_end_privacy_ratio_on_neighbouring_counts():
    """Exact output distribution of l̂ (GEM) on neighbouring count vectors:
    the probability ratio is within e^{ε/2} (the GEM half of the budget)."""
    from dp_spark.mechanisms.distinct_count.gem import generalized_exponential_probabilities

    eps, beta = 1.0, 0.05
    counts = np.array([10, 18, 24, 28, 30, 31], dtype=np.float64)
    l = np.arange(1, 7, dtype=np.float64)
    margins = noise_margins(eps, beta, 6)
    neighbour = counts + l  # a new person adding l items at every bound
    p = generalized_exponential_probabilities(counts - margins, l, eps / 2, beta)
    q = generalized_exponential_probabilities(neighbour - margins, l, eps / 2, beta)
    assert np.max(np.abs(np.log(p) - np.log(q))) <= eps / 2 + 1e-9
