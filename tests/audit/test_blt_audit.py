"""Privacy audit of the streaming BLT counter (:mod:`dp_spark.mechanisms.continual_distinct.blt`).

The counter releases post-processing of ỹ = Y + Z: Y the exact fixed-point integer strategy its data
side computes (``BLTCounter.advance``, step by step), Z ~ N_Z(0, σ̌²)^T i.i.d. from the exact wide
sampler at the σ̌² that ``BLTCounter.for_flippancy`` calibrates (the counter's own draws come from the
same sampler at the same σ̌², ahead of time; that the estimates are a function of ỹ alone is
``tests/unit/test_blt.py::test_estimates_are_post_processing_of_the_noisy_strategy``). For a
neighbouring pair the log-likelihood ratio of the two discrete Gaussians is affine in <ỹ, u>,
u = Y − Y', so the most powerful event is a threshold on

    s = <ỹ − Y', u> / (σ̌·‖u‖):  s ≈ N(‖u‖/σ̌, 1) on D, N(0, 1) on D'.

Worst-case pairs, through dp_spark's stream semantics (the w-truncated difference stream of one item):
- item removal, w = 1, T = 16: one insert at step 1, removed (‖u‖ within 1e-6 of the bound Δ̌);
- subset, w = 1, T = 8: the anti-phase pair of the factorized audit (jumps −1, +1).
The claim is (ρ + 2·sqrt(ρ·ln(1/δ)), δ) at δ = 10⁻² (Bun–Steinke 2016, Prop. 1.3); the broken variant
halves σ̌ and must be detected. Y and u are exact integers; the projection is a float statistic.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dp_spark.mechanisms.continual_distinct import blt
from dp_spark.noise.discrete_batch import discrete_gaussian_batch_wide
from tests.audit.stats import assert_detects, epsilon_lower_bound
from tests.audit.test_factorized_audit import _difference_stream, claimed_epsilon

DELTA = 1e-2
RHO = 0.5
TRIALS = 60_000
THRESHOLD = 3.0  # on s, fixed in advance

# relation, w, horizon T, the item's events on D, the indices of the events D' keeps
CASES = {
    "item-removal": ("item-removal", 1, 16, [(1, 1)], []),
    "subset": ("subset", 1, 8, [(1, 1), (1, -1), (7, 1)], [0]),
}


def _strategy(params: blt.BLTParams, horizon: int, stream: np.ndarray) -> list[int]:
    """Y: the counter's own data side over the whole stream (exact Python ints)."""
    counter = blt.BLTCounter(horizon, params, Fraction(1))
    return [counter.advance(int(x)) for x in stream]


def _projections(noise_var: Fraction, u: np.ndarray, shift: float, seed: int) -> np.ndarray:
    """s on TRIALS releases: (<Z, u> + shift) / (σ̌‖u‖), Z drawn by the counter's sampler at σ̌²."""
    rng = np.random.default_rng(seed)
    draws = discrete_gaussian_batch_wide(noise_var, TRIALS * u.shape[0], rng).astype(np.float64)
    norm = math.sqrt(float(u @ u))
    return (draws.reshape(TRIALS, u.shape[0]) @ u + shift) / (math.sqrt(noise_var) * norm)


def _lower_bound(on_d, on_d_prime) -> float:
    k1, k2 = int(np.sum(on_d >= THRESHOLD)), int(np.sum(on_d_prime >= THRESHOLD))
    return epsilon_lower_bound(k1, on_d.shape[0], k2, on_d_prime.shape[0], DELTA)


@pytest.mark.parametrize("name", sorted(CASES))
def test_blt_counter_audit(name, audit_record):
    """Each relation's worst-case pair at the calibrated σ̌ (the claim holds) and at σ̌/2 (detected).
    The pair's ‖Y − Y'‖ is checked against the counter's own bound Δ̌ first (a worst case it nearly
    reaches), and the counter is checked to draw at exactly this σ̌²."""
    relation, w, horizon, events, kept = CASES[name]
    z = _difference_stream(events, horizon, w)
    z_ref = _difference_stream([events[i] for i in kept], horizon, w)
    counter = blt.BLTCounter.for_flippancy(horizon, RHO, w, relation)
    moved = [a - b for a, b in zip(_strategy(counter.params, horizon, z), _strategy(counter.params, horizon, z_ref))]
    bound = counter.sensitivity_int
    assert 0.6 * bound * bound <= sum(v * v for v in moved) <= bound * bound
    assert counter.sigma2 >= Fraction(bound * bound) / (2 * Fraction(RHO))

    u = np.array(moved, dtype=np.float64)
    shift = float(u @ u)  # <Y − Y', u>
    claimed = claimed_epsilon(RHO, DELTA)
    label = f"BLT counter ({relation}, w = {w}, T = {horizon})"
    on_d, on_d_prime = _projections(counter.sigma2, u, shift, 1), _projections(counter.sigma2, u, 0.0, 2)
    audit_record(label, claimed, _lower_bound(on_d, on_d_prime), TRIALS, DELTA)
    broken = counter.sigma2 / 4
    assert_detects(label, claimed, _lower_bound(_projections(broken, u, shift, 3), _projections(broken, u, 0.0, 4)))
