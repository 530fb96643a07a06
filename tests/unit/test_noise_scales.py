"""Noise scales are rounded up, never down (finding 9): the scale a sampler
receives is at least the exact quotient Δ/ε of the floats given."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
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
@given(st.floats(1e-6, 1e3))
def test_unknown_domain_gumbel_scale_is_rounded_up(epsilon):
    seen = []

    class Recorder(np.random.Generator):
        def gumbel(self, loc=0.0, scale=1.0, size=None):
            seen.append(scale)
            return super().gumbel(loc, scale, size)

    topk.unknown_domain_gumbel(np.array([5, 3]), 1, epsilon, 1e-6, 2, Recorder(np.random.PCG64(1)))
    assert seen and all(Fraction(s) >= 1 / Fraction(epsilon) for s in seen)
    assert seen[0] == ratio_up(1.0, epsilon)
