"""Issue 21 §5: every noise scale, per-step ε and threshold of the mechanism
layer is rounded in the direction that never understates privacy loss.

Each test scans random parameters and checks the value against the exact
quantity (rationals, and decimal logarithms at 60 digits); on today's
round-to-nearest arithmetic about half of the draws land on the wrong side,
so each test fails on round-to-nearest code."""

from __future__ import annotations

import math
from decimal import Context, Decimal
from fractions import Fraction

import numpy as np
import pytest

from dp_spark.accounting.exact import ln_bounds, ln_down, ln_up
from dp_spark.mechanisms.set_union.thresholds import plan_set_union
from dp_spark.mechanisms.top_k import auto as topk_auto
from dp_spark.mechanisms.top_k.peeling import cdp_peel_epsilon_per_step
from dp_spark.mechanisms.top_k.unknown_domain import unknown_domain_calibration, unknown_domain_threshold

CTX = Context(prec=80)


def _epsilons(n: int = 300, seed: int = 2101) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(x) for x in np.exp(rng.uniform(np.log(1e-3), np.log(20.0), n))]


def _ln(q: Fraction) -> Fraction:
    """ln q to ~80 digits (the tests' reference; independent of ln_bounds)."""
    return Fraction(Decimal(q.numerator).ln(CTX)) - Fraction(Decimal(q.denominator).ln(CTX))


class _Recorder(np.random.Generator):
    """A generator recording the scale of every draw."""

    def __init__(self):
        super().__init__(np.random.PCG64(0))
        self.scales = []
        self._rng = np.random.default_rng(0)

    def laplace(self, loc=0.0, scale=1.0, size=None):
        self.scales.append(scale)
        return self._rng.laplace(loc, scale, size)

    def gumbel(self, loc=0.0, scale=1.0, size=None):
        self.scales.append(scale)
        return self._rng.gumbel(loc, scale, size)

    def exponential(self, scale=1.0, size=None):
        self.scales.append(scale)
        return self._rng.exponential(scale, size)


def test_ln_bounds_bracket_the_logarithm():
    for x in (1e-300, 1e-11, 0.1, 0.5, 1.0, 2.0, 10.0, 1e300, 5e-324):
        lo, hi = ln_bounds(x)
        ref = _ln(Fraction(x))
        assert lo <= ref <= hi and hi - lo < Fraction(1, 10**45)
        assert Fraction(ln_down(x)) <= ref <= Fraction(ln_up(x))


@pytest.mark.parametrize("policy,numerator", [("count", 7), ("weighted-laplace", 1), ("policy-laplace", 1)])
def test_set_union_laplace_scale_rounded_up(policy, numerator):
    max_items = 7 if policy == "count" else 5
    for eps in _epsilons(60):
        plan = plan_set_union(eps, 1e-6, max_items, policy)
        assert Fraction(plan.scale) >= Fraction(numerator) / Fraction(eps), eps


def test_pnf_peel_coefficient_rounded_down(monkeypatch):
    """Each round's permute-and-flip runs at c <= ε/k exactly (the noise scale k/ε rounded up)."""
    from dp_spark.mechanisms.top_k import peeling

    seen = []
    real = peeling.permute_and_flip_rows

    def recording(scores, coefficient, rng):
        seen.append(coefficient)
        return real(scores, coefficient, rng)

    monkeypatch.setattr(peeling, "permute_and_flip_rows", recording)
    counts = np.array([5, 4, 3, 2, 1])
    for eps in _epsilons(100):
        seen.clear()
        peeling.pnf_peel_top_k(counts, 3, eps, np.random.default_rng(0))
        assert len(seen) == 3 and all(Fraction(c) <= Fraction(eps) / 3 for c in seen), eps


def test_auto_choice_scale_rounded_up_and_split_within_budget(monkeypatch):
    counts = np.arange(2000, 0, -1)
    scales = []
    real = topk_auto.discrete_laplace

    def recording(scale, rng, size=None):  # the choice's noise: the exact discrete Laplace sampler
        scales.append(scale)
        return real(scale, rng, size=size)

    monkeypatch.setattr(topk_auto, "discrete_laplace", recording)
    for eps in _epsilons(100):
        scales.clear()
        noisy = topk_auto.noisy_rank_counts(counts, np.array([1, 50]), eps, np.random.default_rng(0))
        assert noisy.shape == (2,)
        assert Fraction(scales[0]) >= Fraction(2) / Fraction(eps), eps
        choice = topk_auto.choose_mechanism(counts, 50, eps, 1e-6, np.random.default_rng(1), share=0.07)
        assert Fraction(choice.epsilon_choice) + Fraction(choice.epsilon_selection) <= Fraction(eps)


def _implied_epsilon(step: float, delta: float, k: int) -> Fraction:
    """k s²/8 + s·sqrt(k ln(1/δ)/2), with the square root bracketed from
    above (80-digit decimals, then widened)."""
    s = Fraction(step)
    log_inv = -_ln(Fraction(delta))
    inner = s * s * k * log_inv / 2
    root = Fraction(Decimal(inner.numerator).sqrt(CTX) / Decimal(inner.denominator).sqrt(CTX))
    return k * s * s / 8 + root * (1 + Fraction(1, 10**70))


def test_cdp_peel_step_never_implies_more_than_charged():
    rng = np.random.default_rng(7)
    checked = 0
    for eps in _epsilons(300):
        delta = float(np.exp(rng.uniform(np.log(1e-12), np.log(0.5))))
        k = int(rng.integers(1, 500))
        step = cdp_peel_epsilon_per_step(eps, delta, k)
        if step * k > eps * (1 + 1e-9):  # the zCDP branch (else basic composition, below)
            checked += 1
            assert _implied_epsilon(step, delta, k) <= Fraction(eps), (eps, delta, k)
        else:
            assert Fraction(step) * k <= Fraction(eps), (eps, k)
        # and it is the largest such step to within a few ulps (no needless loss)
        assert step >= eps / k * (1 - 1e-15) or _implied_epsilon(step * (1 + 1e-12), delta, k) > Fraction(eps)
    assert checked > 100


def test_cdp_peel_coefficient_is_the_step(monkeypatch):
    """CDP-Peel's one-shot Gumbel(1/ε') top-k is sampled as the k peeling rounds it equals, at
    coefficient exactly ε' (no reciprocal rounded twice)."""
    import dp_spark.mechanisms.top_k.peeling as peeling

    seen = []
    real = peeling.exponential_peel

    def recording(scores, coefficient, k, rng, stop=None):
        seen.append(coefficient)
        return real(scores, coefficient, k, rng, stop)

    monkeypatch.setattr(peeling, "exponential_peel", recording)
    counts = np.arange(100, 0, -1)
    for eps in _epsilons(100):
        seen.clear()
        out = peeling.cdp_peel_top_k(counts, 5, eps, 1e-6, np.random.default_rng(0))
        assert len(set(out.tolist())) == 5
        assert seen == [cdp_peel_epsilon_per_step(eps, 1e-6, 5)], eps


def test_cdp_peel_step_has_no_cancellation_at_small_epsilon():
    # ε ≪ ln(1/δ): sqrt(L + ε) − sqrt(L) loses most digits; the step must still
    # be within a relative 1e-12 of the exact root (and not above it)
    eps, delta, k = 1e-9, 1e-12, 1000
    step = cdp_peel_epsilon_per_step(eps, delta, k)
    log_inv = float(-_ln(Fraction(delta)))
    exact_root = math.sqrt(8.0 / k) * eps / (math.sqrt(log_inv + eps) + math.sqrt(log_inv))
    assert step == pytest.approx(exact_root, rel=1e-12)
    assert _implied_epsilon(step, delta, k) <= Fraction(eps)


def test_unknown_domain_item_epsilon_never_implies_more_than_charged():
    rng = np.random.default_rng(11)
    for eps in _epsilons(200):
        delta = float(np.exp(rng.uniform(np.log(1e-12), np.log(0.5))))
        k = int(rng.integers(1, 300))
        eps_item, d_thr, d_conv = unknown_domain_calibration(eps, delta, k)
        assert Fraction(d_thr) + Fraction(d_conv) <= Fraction(delta)
        assert _implied_epsilon(eps_item, d_conv, k) <= Fraction(eps), (eps, delta, k)


def test_unknown_domain_threshold_rounded_up():
    # T − 1 >= β·ln(k̄/δ) with β the Gumbel scale actually drawn (1/ε rounded up)
    rng = np.random.default_rng(13)
    for eps in _epsilons(300):
        delta = float(np.exp(rng.uniform(np.log(1e-12), np.log(0.5))))
        kbar = int(rng.integers(1, 10_000))
        thr = unknown_domain_threshold(eps, delta, kbar)
        needed = 1 + _ln(Fraction(kbar) / Fraction(delta)) / Fraction(eps)
        assert Fraction(thr) >= needed, (eps, delta, kbar)
        assert thr == pytest.approx(float(needed), rel=1e-13)  # rounded, not inflated


def test_sqrt_helpers_are_directed():
    from dp_spark.accounting.exact import sqrt_down, sqrt_up

    for x in _epsilons(200):
        q = Fraction(x) / 3
        lo, hi = sqrt_down(q), sqrt_up(q)
        assert Fraction(lo) ** 2 <= q <= Fraction(hi) ** 2
        assert Fraction(math.nextafter(lo, math.inf)) ** 2 > q
        assert Fraction(math.nextafter(hi, 0.0)) ** 2 < q


def test_sparse_vector_round_epsilon_and_scales_within_rho():
    from dp_spark.mechanisms.continual_distinct.svt import SparseVector

    rng = np.random.default_rng(17)
    for rho in _epsilons(300):
        cutoff = int(rng.integers(1, 200))
        svt = SparseVector(rho, cutoff)
        e0 = Fraction(svt.epsilon_per_round)
        assert cutoff * e0 * e0 / 2 <= Fraction(rho), (rho, cutoff)
        assert svt.threshold_scale >= 2 / e0 and svt.query_scale >= 4 / e0


def test_exponential_mechanism_coefficient_rounded_down():
    from dp_spark.mechanisms.exponential import _log_weights

    for eps in _epsilons(200):
        for monotone, c in ((True, 1), (False, 2)):
            logw = _log_weights(np.array([0.0, 1.0]), eps, 3.0, monotone)  # [−coef, 0]
            assert Fraction(-logw[0]) <= Fraction(eps) / (c * 3), (eps, monotone)


def test_joint_coefficient_rounded_down():
    from dp_spark.mechanisms.top_k.joint import joint_top_k_log_weights

    for eps in _epsilons(200):
        # sensitivity 3: ε/(2·3) is rarely a float (ε/2 always is)
        w = joint_top_k_log_weights([5, 3, 1], 1, eps, sensitivity=3)
        assert w.floor_diff[1] == 2 and w.log_count[1] == 0.0  # log weight −2·coef, exact
        assert Fraction(-w.log_weight[1]) / 2 <= Fraction(eps) / 6, eps
