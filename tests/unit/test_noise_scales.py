"""Noise scales are rounded up, never down (finding 9): the scale a sampler
receives is at least the exact quotient Δ/ε of the floats given."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dp_spark.mechanisms.distinct_count.bound as dc
from dp_spark.accounting import ratio_up
from dp_spark.mechanisms.top_k import unknown_domain as topk


@settings(max_examples=200, deadline=None)
@given(st.floats(1e-3, 50), st.integers(0, 2**32 - 1))
def test_distinct_count_laplace_scale_is_rounded_up(epsilon, seed):
    seen = []
    real = dc.discrete_laplace_batch_any

    def recording(scale, size, rng):
        seen.append(scale)
        return real(scale, size, rng)

    dc.discrete_laplace_batch_any = recording
    try:
        out = dc.release_from_counts(np.arange(1, 9) * 10, epsilon, 0.05, np.random.default_rng(seed))
    finally:
        dc.discrete_laplace_batch_any = real
    assert Fraction(seen[0]) >= 2 * out["bound"] / Fraction(epsilon)


@settings(max_examples=200, deadline=None)
@given(st.floats(1e-6, 1e3), st.sampled_from([0.0, 1.0, 3.0]))
def test_unknown_domain_gumbel_coefficient_and_threshold(epsilon, base):
    """The Gumbel(1/ε) draws are sampled as the peel at coefficient exactly ε (the scale 1/ε is
    never rounded down: it is not rounded at all), and ⊥'s score is at least T + c_(k̄+1) exactly
    (T computed for the scale 1/ε rounded up, so at least what ε needs)."""
    seen = []
    real = topk.exponential_peel

    def recording(scores, coefficient, k, rng, stop=None):
        seen.append((coefficient, float(scores[stop])))
        return real(scores, coefficient, k, rng, stop)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(topk, "exponential_peel", recording)
        topk.unknown_domain_gumbel(np.array([5.0, 3.0]), 1, epsilon, 1e-6, 2, np.random.default_rng(1),
                                   count_kbar_plus_1=min(base, 3.0))
    threshold = topk.unknown_domain_threshold(epsilon, 1e-6, 2)
    assert [c for c, _ in seen] == [epsilon]
    assert Fraction(seen[0][1]) >= Fraction(threshold) + Fraction(min(base, 3.0))
