"""Unknown Domain Gumbel (Durfee & Rogers 2019; Rogers, "Private Count
Release", Algorithm 1): top-k without a public item list, δ-approximate
(k·ε²/8)-zCDP.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike

from dp_spark.accounting.exact import exact, float_up, ln_bounds, ratio_up
from dp_spark.errors import ParameterError
from dp_spark.noise.records import NoiseDraw
from dp_spark.noise.weighted import exponential_peel
from dp_spark.mechanisms.top_k.peeling import bounded_range_step
from dp_spark.mechanisms.top_k._common import as_counts, check_delta, check_int, check_positive, check_rng, group_share


@dataclass(frozen=True)
class UnknownDomainResult:
    """Output of :func:`unknown_domain_gumbel`: ``indices`` (int64, at most
    k, into ``top_counts``, by decreasing noisy count), ``bottom`` (fewer
    than k cleared the noisy threshold: ⊥ appended) and ``noise`` (the record
    of its Gumbel draws)."""

    indices: np.ndarray
    bottom: bool
    noise: tuple = ()


@lru_cache(maxsize=64)  # public inputs only; a grouped release asks once per group (exact logarithms: ~0.3 ms)
def unknown_domain_threshold(epsilon: float, delta: float, kbar: int) -> float:
    """Threshold T = 1 + (1/ε)·ln(k̄/δ) of Unknown Domain Gumbel (seed
    Theorem 4), rounded up: the threshold's δ is k̄·P[G_i − G_0 > T − 1] <=
    k̄·e^{−(T−1)/β} for the Gumbel scale β, falling as T grows, so a larger T
    spends less δ than charged. T uses β = 1/ε rounded up (at least the exact
    sampler's 1/ε), an upper bound on ln(k̄/δ), and exact rationals rounded up."""
    eps = check_positive(epsilon, "epsilon")
    dlt = check_delta(delta)
    kbar = check_int(kbar, "kbar", 1)
    beta = exact(ratio_up(1.0, eps))
    log_hi = ln_bounds(exact(kbar) / exact(dlt))[1]
    return float_up(1 + beta * log_hi)


def unknown_domain_calibration(epsilon: float, delta: float, k: int) -> tuple[float, float, float]:
    """Per-item ε' and the δ split that make Unknown Domain Gumbel (ε, δ)-DP:
    ``(epsilon_item, delta/2, delta/2)``. With (ε', δ/2) it is δ/2-approximate
    kε'²/8-zCDP (seed Theorem 4), and ρ-zCDP gives (ρ + 2·sqrt(ρ·L), δ')-DP,
    L = ln(1/δ') (Bun & Steinke 2016): ε' solves kε'²/8 + ε'·sqrt(kL/2) = ε
    (:func:`~.peeling.bounded_range_step`, without CDP-Peel's pure fallback,
    which Theorem 4 does not state)."""
    eps = check_positive(epsilon, "epsilon")
    dlt = check_delta(delta)
    k = check_int(k, "k", 1)
    half = dlt / 2.0  # exact (a power-of-two division of a normal float)
    # cancellation-free, rounded down, and checked in exact arithmetic
    eps_item = bounded_range_step(eps, half, k)
    return eps_item, half, half


def unknown_domain_gumbel(
    top_counts: ArrayLike,
    k: int,
    epsilon: float,
    delta: float,
    kbar: int,
    rng: np.random.Generator,
    count_kbar_plus_1: float = 0.0,
) -> UnknownDomainResult:
    """Top-k without a public domain: Unknown Domain Gumbel.

    Durfee & Rogers (NeurIPS 2019); Rogers, "Private Count Release" (arXiv
    2403.05073), Algorithm 1 and Theorem 4 (ALGORITHMS.md 5.1). With β = 1/ε
    and T (:func:`unknown_domain_threshold`): T~ = T + c_(k̄+1) + Gumbel(β);
    each of the k̄ largest with a positive count gets c~_i = c_i + Gumbel(β)
    and is kept if c~_i > T~; the output is the (at most k) kept items by
    decreasing c~, then ⊥ when fewer than k were kept.

    Guarantee: δ-approximate (k·ε²/8)-zCDP (seed Theorem 4) when one person
    moves every count by at most 1 (a person may touch every count; items may
    appear or vanish). Only the ordered items (and ⊥) may be released.

    Why k <= k̄ (k = k̄ included) is sound. (a) On the items in the top k̄ of
    both neighbours D and D′, the output is the one-shot Gumbel top-k of those
    counts and of the threshold T + c_(k̄+1) (sensitivity 1 too, acting as ⊥):
    k·ε²/8-zCDP (Durfee & Rogers 2019), independent of k̄. (b) An item in the
    top k̄ of one X ∈ {D, D′} only has c_i(X) <= c_(k̄+1)(X) + 1 (say D′ = D
    plus one person: if of D only, c_i(D) <= c_i(D′) <= c_(k̄+1)(D′) <=
    c_(k̄+1)(D) + 1; if of D′ only, c_i(D′) <= c_i(D) + 1 <= c_(k̄+1)(D) + 1
    <= c_(k̄+1)(D′) + 1), so it clears the noisy threshold with probability
    <= P[G_i − G_0 > T − 1] <= e^{−ε(T−1)} = δ/k̄ (G_i − G_0 is logistic with
    scale 1/ε). At most k̄ such items: except with probability δ none is
    kept, and both outputs come from the common items as in (a).

    ``top_counts``: the k̄ largest counts (any order; fewer when the
    histogram has fewer items; count-0 items are never selected);
    1 <= k <= ``kbar`` = k̄; ε > 0; δ in (0, 1); ``count_kbar_plus_1``: the
    (k̄+1)-th largest count (0 if none), at most any of ``top_counts``.
    Returns an :class:`UnknownDomainResult` indexing ``top_counts``.
    """
    c = as_counts(top_counts, "top_counts", integral=False, allow_empty=True)
    kbar = check_int(kbar, "kbar", 1)
    k = check_int(k, "k", 1, kbar, " (k may not exceed kbar)")
    thr = unknown_domain_threshold(epsilon, delta, kbar)
    eps = float(epsilon)
    rng = check_rng(rng)
    base = _next_count(c, kbar, count_kbar_plus_1)
    # The Gumbel(1/ε) draws are sampled exactly as the peel they equal (Durfee & Rogers 2019,
    # Lemma 4.2): rounds of the exponential mechanism P[j] ∝ exp(ε·score_j) over the candidates
    # and the threshold T + c_(k̄+1) (⊥), until ⊥ or k items are chosen. T assumed the scale
    # 1/ε rounded up, at least the 1/ε used here. ⊥'s score: bottom_score (exactly T' + c_(k̄+1)).
    cand = np.flatnonzero(c > 0)
    scores = np.append(c[cand], bottom_score(thr, base))
    chosen = exponential_peel(scores, eps, k, rng, stop=cand.shape[0])
    indices = cand[chosen].astype(np.int64)
    return UnknownDomainResult(indices=indices, bottom=bool(indices.size < k), noise=(unknown_domain_noise(eps, kbar),))


def unknown_domain_noise(epsilon: float, kbar: int, step: str = "selection") -> NoiseDraw:
    """The record of Unknown Domain Gumbel's draws at the per-item ``epsilon``
    on ``kbar`` counts: Gumbel of scale 1/ε rounded up (at least the exact
    sampler's 1/ε: the error statement is conservative); ``draws`` None (not
    public), the spread bound covering k̄ scores."""
    beta = ratio_up(1.0, float(epsilon))
    return NoiseDraw(step, "gumbel", scale=beta, std=beta * math.pi / math.sqrt(6.0), sensitivity=1.0, draws=None,
                     target=f"the {kbar} largest counts and the threshold (Unknown Domain Gumbel)",
                     parameters={"spread": kbar})


def grouped_unknown_domain(tops, k: int, epsilon: float, delta: float, kbar: int, max_groups: int,
                           rng: np.random.Generator) -> list[UnknownDomainResult]:
    """Per group, in order, Unknown Domain Gumbel on its k̄ largest counts
    (``tops``: objects with ``counts`` and ``next_count``) at (ε/m, δ/m)
    (:func:`group_share`): (ε, δ)-DP in all, as :func:`~.error.grouped_domain_top_k`."""
    eps_item, delta_threshold, _ = unknown_domain_calibration(*group_share(epsilon, delta, max_groups), k)
    return [unknown_domain_gumbel(top.counts, k, eps_item, delta_threshold, kbar, rng, top.next_count)
            for top in tops]


def bottom_score(threshold: float, base: float) -> float:
    """⊥'s score in Unknown Domain Gumbel: T' + c_(k̄+1) with T' the threshold rounded up to a
    multiple of 2^-20 (a larger threshold: less δ spent), so that the sum of T' and a whole count
    below 2^32 is a double exactly: ⊥'s score moves by exactly what the count moves, as the privacy
    argument's sensitivity 1 needs (a rounded sum could move by one more unit in its last place).
    Past that the sum is rounded up (a larger threshold again)."""
    grid = math.ceil(threshold * 2.0**20) / 2.0**20  # exact: scaling by powers of two
    return float_up(Fraction(grid) + Fraction(base))


def _next_count(c: np.ndarray, kbar: int, count_kbar_plus_1) -> float:
    """Check the (k̄+1)-th largest count against the k̄ largest ``c`` and
    return it as a float (the messages never quote a count)."""
    if c.shape[0] > kbar:
        raise ParameterError(
            "top_counts holds more than kbar counts; pass only the kbar largest "
            "and give the (kbar+1)-th as count_kbar_plus_1"
        )
    if isinstance(count_kbar_plus_1, bool) or not isinstance(count_kbar_plus_1, numbers.Real):
        raise ParameterError("count_kbar_plus_1 must be a real number")
    base = float(count_kbar_plus_1)
    if not math.isfinite(base) or base < 0.0:
        raise ParameterError("count_kbar_plus_1 must be finite and non-negative")
    if c.shape[0] < kbar and base != 0.0:
        raise ParameterError(
            "count_kbar_plus_1 must be 0 when fewer than kbar counts are passed "
            "(the histogram then has no (kbar+1)-th item)"
        )
    if c.size and base > float(np.min(c)):
        raise ParameterError(
            "count_kbar_plus_1 must not exceed any of top_counts; pass the kbar "
            "largest counts and the (kbar+1)-th largest"
        )
    return base
