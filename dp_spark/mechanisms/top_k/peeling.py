"""Peeling baselines for top-k: PNF-Peel (k rounds of permute-and-flip at
ε/k, ε-DP; Gillenwater et al. ICML 2022, Algorithm 2) and CDP-Peel (one-shot
Gumbel top-k, Durfee & Rogers 2019, (ε, δ)-DP by the CDP bound).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike

from dp_spark.accounting.exact import exact, ln_bounds, ratio_up, share_down
from dp_spark.mechanisms.top_k._common import (
    as_counts, check_delta, check_int, check_positive, check_rng, top_k_indices,
)


# ---------------------------------------------------------------------------
# peeling baselines
# ---------------------------------------------------------------------------


def pnf_peel_top_k(counts: ArrayLike, k: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """ε-DP top-k by peeling: k rounds of permute-and-flip at ε/k each (PNF-Peel).

    Gillenwater et al. (ICML 2022), Section 4.1.1 / Algorithm 2 (ALGORITHMS.md
    3.4). Round t adds fresh ``Exp(scale k/epsilon)`` noise to the count of
    every item not yet chosen and picks the largest noisy count; that is
    permute-and-flip in its report-noisy-max-with-exponential-noise form
    (Ding et al. 2021).

    Guarantee: ε-DP when adding or removing one person changes every count by
    at most 1 *in the same direction* (distinct-person counts: adding a person
    never lowers a count, removing one never raises a count). For such
    monotone utilities permute-and-flip at privacy ε' needs noise scale 1/ε'
    rather than 2/ε' (McKenna & Sheldon 2020, Remark 1; the factor 2 is only
    needed when scores can move in opposite directions), and the restriction
    to the not-yet-chosen items keeps the utility monotone. Each round is
    therefore (ε/k)-DP with scale k/ε, and k rounds compose (adaptively,
    basic composition) to ε-DP. The domain must be public.

    Args:
        counts: 1-D array of non-negative counts (length d), one per item.
        k: number of items, 1 <= k <= d.
        epsilon: total privacy parameter ε > 0.
        rng: the source of all randomness.

    Returns:
        int64 array of k distinct indices into ``counts``, in selection order.
    """
    c = as_counts(counts, integral=False)
    d = c.shape[0]
    k = check_int(k, "k", 1, d, " (the number of items in counts)")
    eps = check_positive(epsilon, "epsilon")
    rng = check_rng(rng)
    scale = ratio_up(k, eps)  # k/ε rounded up: more noise, never less
    remaining = np.ones(d, dtype=bool)
    out = np.empty(k, dtype=np.int64)
    for t in range(k):
        cand = np.flatnonzero(remaining)
        noisy = c[cand] + rng.exponential(scale=scale, size=cand.size)
        pick = int(cand[int(np.argmax(noisy))])
        out[t] = pick
        remaining[pick] = False
    return out


def cdp_peel_epsilon_per_step(epsilon: float, delta: float, k: int) -> float:
    """Per-step ε' such that k ε'-DP exponential mechanisms are (ε, δ)-DP.

    ALGORITHMS.md 3.4 (Gillenwater et al. 2022, Lemma 4.2; code
    ``em_epsilon_cdp``): an ε'-DP exponential mechanism is ε'-bounded-range,
    hence (ε'²/8)-zCDP (Cesar & Rogers 2021); k of them are (k ε'²/8)-zCDP;
    ρ-zCDP implies (ρ + 2 sqrt(ρ ln(1/δ)), δ)-DP (Bun & Steinke 2016). Solving
    k ε'²/8 + ε' sqrt(k ln(1/δ)/2) = ε gives
    ε' = sqrt(8(ln(1/δ) + ε)/k) - sqrt(8 ln(1/δ)/k). Basic composition gives
    ε/k (pure ε-DP); the larger of the two is returned. ``delta = 0`` returns
    ε/k.
    """
    eps = check_positive(epsilon, "epsilon")
    dlt = check_delta(delta, allow_zero=True)
    k = check_int(k, "k", 1)
    pure = share_down(eps, k)  # ε/k rounded down: k shares never exceed ε
    if dlt == 0.0:
        return pure
    return max(pure, bounded_range_step(eps, dlt, k))


def _implied_within(step: float, epsilon: Fraction, log_inv_hi: Fraction, k: int) -> bool:
    """Exactly: k·s²/8 + s·sqrt(k·L/2) <= ε, for s = ``step`` and L =
    ``log_inv_hi`` (an upper bound on ln(1/δ); the left side grows with L,
    so the check is conservative). Squared to stay in the rationals."""
    s = exact(step)
    rest = epsilon - k * s * s / 8
    return rest >= 0 and s * s * k * log_inv_hi / 2 <= rest * rest


def bounded_range_step(epsilon: float, delta: float, k: int) -> float:
    """The per-step ε' (rounded down) with k·ε'²/8 + ε'·sqrt(k ln(1/δ)/2) <= ε
    exactly: k ε'-bounded-range mechanisms are then (ε, δ)-DP (see
    :func:`cdp_peel_epsilon_per_step`).

    ε' = sqrt(8/k)·(sqrt(L + ε) − sqrt(L)), L = ln(1/δ), is computed in the
    cancellation-free form sqrt(8/k)·ε/(sqrt(L + ε) + sqrt(L)) (the
    difference of two close square roots loses most of its digits when
    ε ≪ L), and then stepped down one float at a time until the implied ε,
    evaluated in exact rational arithmetic with an upper bound on ln(1/δ)
    (:func:`dp_spark.accounting.exact.ln_bounds`), is at most the given ε.
    The float estimate is within a few ulps, so the loop runs a few times."""
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
    Pay-what-you-get Composition" (NeurIPS 2019), as used by Gillenwater et
    al. (2022, Algorithm 3; ALGORITHMS.md 3.4): add one ``Gumbel(scale
    1/eps')`` draw to every count, with ``eps' =
    cdp_peel_epsilon_per_step(epsilon, delta, k)``, and return the k items with
    the largest noisy counts, largest first. This has the same distribution
    as k rounds of peeling with the exponential mechanism
    ``Pr[j] ∝ exp(eps' c_j)`` (Durfee & Rogers, Lemma 4.2).

    Guarantee: (ε, δ)-DP when adding or removing one person changes every
    count by at most 1 in the same direction (distinct-person counts: the
    count utility is monotone, so exp(ε' c) is ε'-DP and ε'-bounded-range;
    the accounting is in :func:`cdp_peel_epsilon_per_step`). ``delta = 0``
    gives ε' = ε/k and pure ε-DP. The domain must be public.

    Returns:
        int64 array of k distinct indices into ``counts``, in rank order.
    """
    c = as_counts(counts, integral=False)
    d = c.shape[0]
    k = check_int(k, "k", 1, d, " (the number of items in counts)")
    eps_step = cdp_peel_epsilon_per_step(epsilon, delta, k)
    rng = check_rng(rng)
    noisy = c + rng.gumbel(scale=ratio_up(1.0, eps_step), size=d)  # 1/ε' rounded up
    return top_k_indices(noisy, k)
