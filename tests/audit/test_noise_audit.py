"""Privacy audits of the exact integer samplers (dp_spark.noise.discrete_batch).

Neighbouring inputs: an integer statistic of sensitivity 1 (value 1 on D, 0 on
D'), released as value + noise. Events {output ≥ c} where the likelihood
ratio is largest. Each audit also runs the sampler with its scale halved and
shows the audit detects the factor-2 mistake.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dp_spark.noise.discrete_batch import discrete_gaussian_batch, discrete_laplace_batch
from tests.audit.stats import assert_detects
from tests.audit.stats import epsilon_lower_bound

N = 1 << 19


def _bound(noise_d: np.ndarray, noise_d_prime: np.ndarray, threshold: int, delta: float = 0.0) -> float:
    on_d, on_d_prime = 1 + noise_d, noise_d_prime
    k1, k2 = int(np.sum(on_d >= threshold)), int(np.sum(on_d_prime >= threshold))
    return epsilon_lower_bound(k1, N, k2, N, delta)


def test_discrete_laplace_sampler_audit(audit_record):
    """Scale 1/ε with ε = 1 is ε-DP for sensitivity 1; for c ≥ 1 the ratio
    P[1 + X ≥ c] / P[X ≥ c] is exactly e^ε, so the audit is tight."""
    epsilon = 1.0
    rng = np.random.default_rng(11)
    bound = _bound(discrete_laplace_batch(1, N, rng), discrete_laplace_batch(1, N, rng), 2)
    audit_record("discrete Laplace sampler (scale 1/ε)", epsilon, bound, N)
    broken = _bound(discrete_laplace_batch(Fraction(1, 2), N, rng), discrete_laplace_batch(Fraction(1, 2), N, rng), 2)
    assert_detects("discrete Laplace sampler (scale 1/ε)", epsilon, broken)


def test_discrete_gaussian_sampler_audit(audit_record):
    """σ² = 1 and sensitivity 1: 1/2-zCDP, hence (ε, δ)-DP with
    ε = ρ + 2·sqrt(ρ·ln(1/δ)), δ = 1e-3."""
    rho, delta = 0.5, 1e-3
    claimed = rho + 2 * math.sqrt(rho * math.log(1 / delta))
    rng = np.random.default_rng(12)
    bound = _bound(discrete_gaussian_batch(1, N, rng), discrete_gaussian_batch(1, N, rng), 2, delta)
    audit_record("discrete Gaussian sampler (σ² = 1)", claimed, bound, N, delta)
    quarter = Fraction(1, 4)
    broken = _bound(discrete_gaussian_batch(quarter, N, rng), discrete_gaussian_batch(quarter, N, rng), 2, delta)
    assert_detects("discrete Gaussian sampler (σ² = 1)", claimed, broken)
