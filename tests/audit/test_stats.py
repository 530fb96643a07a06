"""The audit statistics themselves: intervals cover, bounds are conservative."""

import math

import numpy as np

from tests.audit.stats import assert_detects
from tests.audit.stats import clopper_pearson, epsilon_lower_bound, two_sided_lower_bound


def test_clopper_pearson_edges():
    assert clopper_pearson(0, 10, 0.05)[0] == 0.0
    assert clopper_pearson(10, 10, 0.05)[1] == 1.0
    lo, hi = clopper_pearson(50, 100, 0.05)
    assert 0.39 < lo < 0.5 < hi < 0.61


def test_randomized_response_bound_is_below_and_near_its_epsilon():
    # Randomized response with ε = 1: P[report 1 | bit 1] = e/(1+e).
    rng = np.random.default_rng(1)
    eps, n = 1.0, 200_000
    p = math.exp(eps) / (1 + math.exp(eps))
    k1 = int((rng.random(n) < p).sum())
    k2 = int((rng.random(n) < 1 - p).sum())
    lb = two_sided_lower_bound(k1, n, k2, n)
    assert 0.9 < lb <= eps
    # Twice the leakage (ε = 2) is detected against a claim of 1.
    p2 = math.exp(2.0) / (1 + math.exp(2.0))
    k1 = int((rng.random(n) < p2).sum())
    k2 = int((rng.random(n) < 1 - p2).sum())
    assert_detects("randomized response at ε=2", eps, two_sided_lower_bound(k1, n, k2, n))


def test_no_leak_gives_zero():
    assert epsilon_lower_bound(500, 1000, 500, 1000) == 0.0
