"""Peeling baselines for top-k: PNF-Peel (k rounds of permute-and-flip at
ε/k, ε-DP; Gillenwater et al. ICML 2022, Algorithm 2; sampled exactly) and
CDP-Peel (one-shot Gumbel top-k, Durfee & Rogers 2019, (ε, δ)-DP by the CDP
bound; sampled exactly as the k peeling rounds it equals,
:func:`dp_spark.noise.weighted.exponential_peel`).
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike

from dp_spark.accounting.exact import exact, ln_bounds, share_down
from dp_spark.mechanisms.top_k._common import (
    as_counts, check_delta, check_int, check_positive, check_rng,
)
from dp_spark.noise.selection import permute_and_flip_rows
from dp_spark.noise.weighted import exponential_peel


def pnf_peel_top_k(counts: ArrayLike, k: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """ε-DP top-k by peeling: k rounds of permute-and-flip at ε/k (PNF-Peel;
    Gillenwater et al., ICML 2022, Algorithm 2; ALGORITHMS.md 3.4).

    Round t runs permute-and-flip over the items not yet chosen with
    coefficient c = ε/k rounded down: a uniform order, item j accepted with
    probability exp(−c·(max − c_j)), drawn exactly
    (:func:`dp_spark.noise.selection.permute_and_flip_rows`; the same law as
    report-noisy-max with ``Exp(scale k/ε)`` noise, Ding et al. 2021, without
    floating-point noise). Guarantee: ε-DP when one person moves every count
    by at most 1 *in the same direction*; for such monotone utilities
    permute-and-flip at ε' needs c = ε', not ε'/2 (McKenna & Sheldon 2020,
    Remark 1), and restricting to the items not yet chosen keeps them
    monotone, so each round is ε/k-DP and k rounds compose to ε. The domain
    must be public. Returns k distinct int64 indices in selection order.
    """
    c = as_counts(counts, integral=False)
    d = c.shape[0]
    k = check_int(k, "k", 1, d, " (the number of items in counts)")
    eps = check_positive(epsilon, "epsilon")
    rng = check_rng(rng)
    coefficient = share_down(eps, k)  # ε/k rounded down: k rounds never exceed ε
    remaining = np.ones(d, dtype=bool)
    out = np.empty(k, dtype=np.int64)
    for t in range(k):
        cand = np.flatnonzero(remaining)
        pick = int(cand[int(permute_and_flip_rows(c[cand][None, :], coefficient, rng)[0])])
        out[t] = pick
        remaining[pick] = False
    return out


def cdp_peel_epsilon_per_step(epsilon: float, delta: float, k: int) -> float:
    """Per-step ε' such that k ε'-DP exponential mechanisms are (ε, δ)-DP.

    ALGORITHMS.md 3.4 (Gillenwater et al. 2022, Lemma 4.2): an ε'-DP
    exponential mechanism is ε'-bounded-range, hence ε'²/8-zCDP (Cesar &
    Rogers 2021); k compose to kε'²/8; ρ-zCDP gives
    (ρ + 2 sqrt(ρ ln(1/δ)), δ)-DP (Bun & Steinke 2016), solved by
    :func:`bounded_range_step`. The larger of that and basic composition's
    ε/k is returned; ``delta = 0`` gives ε/k.
    """
    eps = check_positive(epsilon, "epsilon")
    dlt = check_delta(delta, allow_zero=True)
    k = check_int(k, "k", 1)
    pure = share_down(eps, k)  # ε/k rounded down: k shares never exceed ε
    if dlt == 0.0:
        return pure
    return max(pure, bounded_range_step(eps, dlt, k))


def _implied_within(step: float, epsilon: Fraction, log_inv_hi: Fraction, k: int) -> bool:
    """Exactly: k·s²/8 + s·sqrt(k·L/2) <= ε for s = ``step``, L an upper
    bound on ln(1/δ) (conservative); squared to stay in the rationals."""
    s = exact(step)
    rest = epsilon - k * s * s / 8
    return rest >= 0 and s * s * k * log_inv_hi / 2 <= rest * rest


@lru_cache(maxsize=64)  # public inputs only; a grouped release asks once or twice per group (exact: ~0.2 ms)
def bounded_range_step(epsilon: float, delta: float, k: int) -> float:
    """The per-step ε' (rounded down) with k·ε'²/8 + ε'·sqrt(k ln(1/δ)/2) <= ε
    exactly: k ε'-bounded-range mechanisms are then (ε, δ)-DP. ε' =
    sqrt(8/k)·ε/(sqrt(L + ε) + sqrt(L)), L = ln(1/δ) (cancellation-free),
    stepped down one float at a time until the implied ε, in exact rationals
    with an upper bound on L, is at most ε."""
    eps_q = exact(epsilon)
    log_inv_hi = -ln_bounds(delta)[0]  # ln(1/δ), rounded up
    log_inv = float(log_inv_hi)
    step = math.sqrt(8.0 / k) * epsilon / (math.sqrt(log_inv + epsilon) + math.sqrt(log_inv))
    for _ in range(64):
        if _implied_within(step, eps_q, log_inv_hi, k):
            return step
        step = math.nextafter(step, 0.0)
    while not _implied_within(step, eps_q, log_inv_hi, k):  # not reached: the estimate is ulps off
        step *= 0.5
    return step


def cdp_peel_top_k(
    counts: ArrayLike, k: int, epsilon: float, delta: float, rng: np.random.Generator
) -> np.ndarray:
    """(ε, δ)-DP top-k by one-shot Gumbel noise (CDP-Peel).

    Durfee & Rogers, "Practical Differentially Private Top-k Selection with
    Pay-what-you-get Composition" (NeurIPS 2019), as in Gillenwater et al.
    (2022, Algorithm 3): one ``Gumbel(1/ε')`` per count, ε' =
    :func:`cdp_peel_epsilon_per_step`, the k largest noisy counts; distributed
    as k rounds of peeling with ``Pr[j] ∝ exp(ε' c_j)`` (Lemma 4.2), which is
    how it is sampled, exactly (no floating-point noise; O(k·d) work).
    Guarantee: (ε, δ)-DP when one person moves every count by at most 1 in the
    same direction (exp(ε' c) is then ε'-DP and ε'-bounded-range); ``delta = 0``
    gives pure ε-DP. Public domain. Returns k int64 indices in rank order.
    """
    c = as_counts(counts, integral=False)
    d = c.shape[0]
    k = check_int(k, "k", 1, d, " (the number of items in counts)")
    eps_step = cdp_peel_epsilon_per_step(epsilon, delta, k)
    rng = check_rng(rng)
    return exponential_peel(c, eps_step, k, rng)  # exactly the law of the one-shot Gumbel(1/ε') top k
