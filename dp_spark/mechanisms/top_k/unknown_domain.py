"""Unknown Domain Gumbel (Durfee & Rogers 2019; Rogers, "Private Count
Release", Algorithm 1): top-k without a public item list, δ-approximate
(k·ε²/8)-zCDP.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from dp_spark.accounting.exact import exact, float_up, ln_bounds, ratio_up
from dp_spark.errors import ParameterError
from dp_spark.noise.records import NoiseDraw
from dp_spark.mechanisms.top_k.peeling import bounded_range_step
from dp_spark.mechanisms.top_k._common import as_counts, check_delta, check_int, check_positive, check_rng, group_share


# ---------------------------------------------------------------------------
# Unknown Domain Gumbel
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class UnknownDomainResult:
    """Output of :func:`unknown_domain_gumbel`.

    ``indices``: int64 array of at most k indices into ``top_counts``, in
    decreasing order of noisy count. ``bottom``: True when fewer than k items
    cleared the noisy threshold, i.e. ⊥ was appended to the output.
    ``noise``: the record of its Gumbel draws (one per collected item with a
    positive count and one on the threshold: not a public number, so
    ``draws`` is None; the spread bound covers k̄ scores).
    """

    indices: np.ndarray
    bottom: bool
    noise: tuple = ()


def unknown_domain_threshold(epsilon: float, delta: float, kbar: int) -> float:
    """Threshold T = 1 + (1/ε)·ln(k̄/δ) of Unknown Domain Gumbel (seed Theorem 4),
    rounded up.

    Up is the safe direction: the threshold's δ is k̄·P[G_i − G_0 > T − 1]
    <= k̄·e^{−(T−1)/β} for Gumbel scale β, which only falls as T grows, so a
    T above the exact value spends less δ than charged, never more (a lower
    T would let more items absent from a neighbour clear it). The proof
    needs T − 1 >= β·ln(k̄/δ) for the scale β actually drawn, and the
    Gumbel scale is 1/ε rounded up (:func:`unknown_domain_gumbel`), so T
    uses that same β, an upper bound on ln(k̄/δ) of the exact k̄/δ, and
    rounds the product and the sum up (exact rationals,
    :mod:`dp_spark.accounting.exact`)."""
    eps = check_positive(epsilon, "epsilon")
    dlt = check_delta(delta)
    kbar = check_int(kbar, "kbar", 1)
    beta = exact(ratio_up(1.0, eps))
    log_hi = ln_bounds(exact(kbar) / exact(dlt))[1]
    return float_up(1 + beta * log_hi)


def unknown_domain_calibration(epsilon: float, delta: float, k: int) -> tuple[float, float, float]:
    """Per-item ε' and the δ split that make Unknown Domain Gumbel (ε, δ)-DP.

    Returns ``(epsilon_item, delta_threshold, delta_conversion)`` with
    ``delta_threshold = delta_conversion = delta/2`` and
    ε' = sqrt(8/k)·(sqrt(L + ε) − sqrt(L)), L = ln(1/δ'): Unknown Domain
    Gumbel with (ε', δ/2) is δ/2-approximate (kε'²/8)-zCDP (seed Theorem 4),
    and ρ-zCDP gives (ρ + 2·sqrt(ρ·L), δ')-DP (Bun & Steinke 2016), so the
    whole is (kε'²/8 + ε'·sqrt(kL/2), δ/2 + δ/2) = (ε, δ)-DP (the same
    equation as CDP-Peel's, without the pure-composition fallback, which
    Theorem 4 does not state).
    """
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

    Durfee & Rogers (NeurIPS 2019); Rogers, "Private Count Release"
    (arXiv 2403.05073), Algorithm 1 and Theorem 4 (ALGORITHMS.md 5.1). With
    β = 1/ε and T = 1 + (1/ε)·ln(k̄/δ) (:func:`unknown_domain_threshold`):
    T~ = T + c_(k̄+1) + Gumbel(β); every item among the k̄ largest with a
    positive count gets c~_i = c_i + Gumbel(β) and is kept if c~_i > T~; the
    output is the (at most k) kept items with the largest c~, in decreasing
    order, followed by ⊥ when fewer than k were kept.

    Guarantee: δ-approximate (k·ε²/8)-zCDP (seed Theorem 4), when adding or
    removing one person changes every count by at most 1 (distinct-person
    counts; a person may touch every count, and items may appear or vanish:
    no public domain is needed). Only the ordered item list (and whether ⊥
    was appended) may be released, not the noisy counts.

    Why k <= k̄ (k = k̄ included) is sound. The proof has two parts. (a) On
    the items in the top k̄ of both neighbours D and D′, the output is the
    one-shot Gumbel top-k of those counts and of the threshold
    T + c_(k̄+1) (a count of sensitivity 1 too, acting as ⊥), which is
    k·ε²/8-zCDP (Durfee & Rogers 2019, as used by seed Theorem 4); this part
    does not involve k̄. (b) The δ: an item i in the top k̄ of one data set
    X ∈ {D, D′} but not of the other has c_i(X) <= c_(k̄+1)(X) + 1 (say
    D′ = D plus one person:
    if i is in the top k̄ of D only, c_i(D) <= c_i(D′) <= c_(k̄+1)(D′) <=
    c_(k̄+1)(D) + 1; if of D′ only, c_i(D′) <= c_i(D) + 1 <= c_(k̄+1)(D) + 1
    <= c_(k̄+1)(D′) + 1). Its chance of clearing the noisy threshold in X is
    P[c_i + G_i > T + c_(k̄+1) + G_0] <= P[G_i − G_0 > T − 1] <=
    e^{−ε(T−1)} = δ/k̄ (G_i − G_0 is logistic with scale 1/ε). There are at
    most k̄ such items, so by a union bound, except with probability δ no
    such item is kept, and then both outputs are computed from the common
    items as in (a). Neither part needs k < k̄.

    Args:
        top_counts: the k̄ largest counts of the whole histogram, one per item
            (any order; fewer than k̄ entries when the histogram has fewer
            items). Items with count 0 are never selected.
        k: the largest number of items to return, 1 <= k <= kbar (the seed
            states k < k̄; k = k̄ is also covered by its argument).
        epsilon: ε > 0 (β = 1/ε).
        delta: δ in (0, 1).
        kbar: k̄ >= 1, the number of top counts collected.
        rng: the source of all randomness.
        count_kbar_plus_1: the (k̄+1)-th largest count of the histogram; 0
            when the histogram has at most k̄ items. Must not exceed any of
            ``top_counts``.

    Returns:
        :class:`UnknownDomainResult` with indices into ``top_counts``.
    """
    c = as_counts(top_counts, "top_counts", integral=False, allow_empty=True)
    kbar = check_int(kbar, "kbar", 1)
    k = check_int(k, "k", 1, kbar, " (k may not exceed kbar)")
    thr = unknown_domain_threshold(epsilon, delta, kbar)
    eps = float(epsilon)
    rng = check_rng(rng)
    base = _next_count(c, kbar, count_kbar_plus_1)
    beta = ratio_up(1.0, eps)  # Gumbel scale 1/ε rounded up (more noise, never less)
    noisy_threshold = thr + base + float(rng.gumbel(scale=beta))
    cand = np.flatnonzero(c > 0)
    noisy = c[cand] + rng.gumbel(scale=beta, size=cand.size)
    keep = noisy > noisy_threshold
    kept, kept_noisy = cand[keep], noisy[keep]
    order = np.argsort(-kept_noisy, kind="stable")[:k]
    indices = kept[order].astype(np.int64)
    return UnknownDomainResult(indices=indices, bottom=bool(indices.size < k), noise=(unknown_domain_noise(eps, kbar),))


def unknown_domain_noise(epsilon: float, kbar: int, step: str = "selection") -> NoiseDraw:
    """The record of Unknown Domain Gumbel's draws at the per-item ``epsilon``
    on ``kbar`` counts: Gumbel of scale 1/ε (rounded up, as drawn), one per
    collected item with a positive count and one on the threshold (not a
    public number, so ``draws`` is None; the spread bound covers k̄ scores)."""
    beta = ratio_up(1.0, float(epsilon))
    return NoiseDraw(step, "gumbel", scale=beta, std=beta * math.pi / math.sqrt(6.0), sensitivity=1.0, draws=None,
                     target=f"the {kbar} largest counts and the threshold (Unknown Domain Gumbel)",
                     parameters={"spread": kbar})


def grouped_unknown_domain(tops, k: int, epsilon: float, delta: float, kbar: int, max_groups: int,
                           rng: np.random.Generator) -> list[UnknownDomainResult]:
    """Per group, in order, Unknown Domain Gumbel on its k̄ largest counts
    (``tops``: a sequence of objects with ``counts`` and ``next_count``, e.g.
    :class:`dp_spark.stages.item_counts.TopCounts`; one for an ungrouped
    release) calibrated to be (ε/m, δ/m)-DP (:func:`group_share`). Each
    group's counts move by at most 1, all the same way, and one person
    changes at most m groups: (ε, δ)-DP in all (basic composition over
    them, parallel composition across the others)."""
    eps_item, delta_threshold, _ = unknown_domain_calibration(*group_share(epsilon, delta, max_groups), k)
    return [unknown_domain_gumbel(top.counts, k, eps_item, delta_threshold, kbar, rng, top.next_count)
            for top in tops]


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
