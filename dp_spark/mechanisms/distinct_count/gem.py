"""Generalized Exponential Mechanism (GEM) of Raskhodnikova & Smith (2016).

Used by Knop & Steinke (NeurIPS 2023, Algorithm 3) to choose the per-person
contribution bound ℓ: candidates have utilities ``q_1..q_k`` with differing
sensitivities ``Δ_1..Δ_k`` (``Δ_ℓ = ℓ``), and GEM selects a candidate close to
the best *in units of its own sensitivity*. Definition (ALGORITHMS.md 1.5):
``t = (2/ε)·ln(k/β)``; ``a_i = q_i − t·Δ_i``; normalised score
``s_i = min_j (a_i − a_j)/(Δ_i + Δ_j)`` (so ``s_i ≤ 0``); release ``i`` with
``Pr[i] ∝ exp(ε·s_i/2)``.

Privacy: if each ``q_j`` moves by at most ``Δ_j`` between neighbours (the Δ
fixed independently of the data), each term moves by at most 1, hence so does
``s_i``; the exponential mechanism on sensitivity-1 scores is ε-DP. The
scores are computed exactly from the given doubles and rounded down onto a
grid of 2^-20 (:func:`_normalized_general`), so their sensitivity is 1 with
no floating-point slack.

Same-direction variant (``monotone=True``): if every ``q_j`` moves in the SAME
direction by at most ``Δ_j`` (as the bounded distinct counts c_l:
0 <= c'_l − c_l <= l), ``a_i − a_j`` moves by ``δ_i − δ_j ∈ [−Δ_j, Δ_i]``, so
``s_i = min_j (a_i − a_j)/max(Δ_i, Δ_j)`` still has sensitivity 1 with a
smaller denominator. These scores are computed exactly and rounded down onto
a grid (:func:`_normalized_same_direction`), so the sensitivity is 1 with no
floating-point slack. GEM's utility argument is unchanged (``s_î ≥ −t`` gives
``q_î ≥ q_j − t(Δ_j − Δ_î + max(Δ_î, Δ_j)) ≥ q_j − 2tΔ_j``).

:func:`generalized_exponential` samples ``Pr[i] ∝ exp(ε·s_i/2)``;
:func:`generalized_permute_and_flip` runs permute-and-flip (McKenna & Sheldon
2020) on the same scores, also ε-DP and never less likely to pick the best.

Normalised scores in O(k log k) (ALGORITHMS.md 1.6): ``s_i = max{x : a_i −
x·Δ_i ≥ g(x)}`` with ``g(x) = max_j (a_j + x·Δ_j)``, the upper envelope of
the lines; along it (lines sorted by slope) the terms first decrease then
increase, so a binary search per ``i`` finds the minimiser (in doubles, as a
guess checked exactly in whole numbers: :func:`_normalized_general`).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike

from dp_spark.accounting.exact import ratio_down
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.exponential import (
    as_score_vector,
    check_positive_finite,
    check_rng,
    permute_and_flip,
)
from dp_spark.noise import selection

__all__ = [
    "gem_normalized_scores",
    "gem_normalized_scores_naive",
    "generalized_exponential",
    "generalized_exponential_probabilities",
    "generalized_permute_and_flip",
    "generalized_permute_and_flip_probabilities",
    "exponential_rows",
    "permute_and_flip_rows",
    "same_direction_scores_batch",
]


def _validate(
    scores: ArrayLike, sensitivities: ArrayLike, epsilon: float, beta: float
) -> tuple[np.ndarray, np.ndarray, float, float]:
    q = as_score_vector(scores, allow_neg_inf=False)
    try:
        d = np.asarray(sensitivities, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterError("sensitivities must be a 1-D sequence of positive real numbers") from None
    if d.ndim != 1:
        raise ParameterError("sensitivities must be one-dimensional: one sensitivity per candidate")
    if d.shape[0] != q.shape[0]:
        raise ParameterError(
            f"scores and sensitivities must have the same length (got {q.shape[0]} scores and "
            f"{d.shape[0]} sensitivities); pass one sensitivity per candidate"
        )
    if not np.isfinite(d).all() or (d <= 0.0).any():
        raise ParameterError("every sensitivity must be positive and finite")
    eps = check_positive_finite(epsilon, "epsilon")
    if isinstance(beta, bool) or not isinstance(beta, (int, float, np.integer, np.floating)):
        raise ParameterError("beta must be a real number in (0, 1)")
    b = float(beta)
    if not (0.0 < b < 1.0):
        raise ParameterError("beta must lie strictly between 0 and 1 (e.g. 0.05)")
    return q, d, eps, b


def _threshold(k: int, epsilon: float, beta: float) -> float:
    """t = (2/ε)·ln(k/β), a float computed from public parameters only."""
    return (2.0 / epsilon) * math.log(k / beta)


def _shifted_utilities(q: np.ndarray, d: np.ndarray, epsilon: float, beta: float) -> np.ndarray:
    """a_i = q_i − t·Δ_i with t = (2/ε)·ln(k/β)."""
    k = q.shape[0]
    t = _threshold(k, epsilon, beta)
    with np.errstate(over="ignore", invalid="ignore"):
        a = q - t * d
    if not np.isfinite(a).all():
        raise ParameterError(
            "scores, sensitivities and ln(k/beta)/epsilon are too large to combine in floating "
            "point; rescale the scores and sensitivities (e.g. divide both by a public constant)"
        )
    return a


def _scaled_shifted(q: np.ndarray, d: np.ndarray, epsilon: float, beta: float) -> tuple[list[int], list[int]]:
    """(A, D): whole numbers with A_j/S = q_j − t·Δ_j and D_j/S = Δ_j exactly, for the doubles given
    and t = (2/ε)·ln(k/β) as a double, one power of two S for all (every double is n/2^e: no
    rational arithmetic, only shifts and products of integers)."""
    qr = [x.as_integer_ratio() for x in q.tolist()]
    dr = [x.as_integer_ratio() for x in d.tolist()]
    nt, dt = _threshold(len(qr), epsilon, beta).as_integer_ratio()
    scale = max(max(den for _, den in qr), dt * max(den for _, den in dr))  # powers of two
    aa = [nq * (scale // dq) - nt * nd * (scale // (dt * dd)) for (nq, dq), (nd, dd) in zip(qr, dr)]
    ddv = [nd * (scale // dd) for nd, dd in dr]
    return aa, ddv


def _exact_envelope(dd: list[int], aa: list[int]) -> list[int]:
    """The indices j of the lines of ``x ↦ max_j (aa_j + dd_j·x)`` (whole slopes and intercepts),
    by increasing slope, exactly: the upper convex hull of the points (dd_j, aa_j), Andrew's
    monotone chain on Python integers. O(k log k)."""
    hull: list[int] = []
    for j in sorted(range(len(dd)), key=lambda j: (dd[j], aa[j])):
        x, y = dd[j], aa[j]
        if hull and dd[hull[-1]] == x:  # parallel lines: the later (higher) one replaces it
            hull.pop()
        while len(hull) >= 2:
            x1, y1, x2, y2 = dd[hull[-2]], aa[hull[-2]], dd[hull[-1]], aa[hull[-1]]
            if (y2 - y1) * (x - x1) > (y - y1) * (x2 - x1):
                break
            hull.pop()
        hull.append(j)
    return hull


def _normalized_general(q: np.ndarray, d: np.ndarray, a_f: np.ndarray, epsilon: float, beta: float) -> np.ndarray:
    """``s_i = min_j (a_i − a_j)/(Δ_i + Δ_j)`` (the paper's GEM), ``a_i = q_i − t·Δ_i``, computed
    EXACTLY from the given doubles, then raised to −:data:`SCORE_FLOOR` if below it and rounded
    DOWN to a multiple of 2^-:data:`SCORE_GRID_BITS`, exactly a double: sensitivity 1 with no
    floating-point slack, as :func:`_normalized_same_direction` (the exact scores move by at most 1
    between neighbours, module docstring; the floor and the grid keep it).

    O(k log k) through the upper envelope g(x) = max_j (a_j + Δ_j·x) (ALGORITHMS.md 1.6), in whole
    numbers: with every a_j and Δ_j scaled by one power of two S to integers A_j, D_j (the ratio
    is unchanged), the envelope is the exact upper hull of the points (D_j, A_j); s_i is the root of
    the decreasing a_i − x·Δ_i − g(x), which lies on the envelope line m whose stretch
    [b_m, b_(m+1)] (breakpoints (A_m − A_(m+1))/(D_(m+1) − D_m)) holds (A_i − A_m)/(D_i + D_m), and
    then equals it. Doubles only guess m (a binary search per i, vectorised, on ``a_f``, the a_j in
    doubles: :func:`_shifted_utilities`); the guess is checked exactly and, if wrong, m is found by
    an exact binary search over the breakpoints."""
    k = q.shape[0]
    aa, dd = _scaled_shifted(q, d, epsilon, beta)
    hull = _exact_envelope(dd, aa)
    hx, hy = [dd[j] for j in hull], [aa[j] for j in hull]
    lines = len(hull)
    guess = _envelope_guess(a_f, d, a_f[hull], d[hull])

    def h_at(i: int, m: int) -> int:
        """The sign of a_i − x·Δ_i − g(x) at breakpoint b_m (between lines m − 1 and m), 0 < m < lines:
        with b_m = N/Q (Q > 0), sign of A_i·Q − N·D_i − (A_m·Q + N·D_m)."""
        num, den = hy[m - 1] - hy[m], hx[m] - hx[m - 1]
        value = (aa[i] - hy[m]) * den - num * (dd[i] + hx[m])
        return (value > 0) - (value < 0)

    grid = 2**SCORE_GRID_BITS
    out = np.empty(k)
    for i in range(k):
        m = int(guess[i])
        # the root is on line m iff h >= 0 at b_m (or m == 0) and h <= 0 at b_(m+1) (or m is the last)
        if not ((m == 0 or h_at(i, m) >= 0) and (m == lines - 1 or h_at(i, m + 1) <= 0)):
            lo, hi = 0, lines - 1  # the last m with h(b_m) >= 0 (h decreases)
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if h_at(i, mid) >= 0:
                    lo = mid
                else:
                    hi = mid - 1
            m = lo
        num, den = aa[i] - hy[m], dd[i] + hx[m]
        out[i] = max(min((num * grid) // den, 0), -SCORE_FLOOR * grid) / grid  # a whole number below 2^53 / 2^20
    return out


def _envelope_guess(a: np.ndarray, d: np.ndarray, env_a: np.ndarray, env_d: np.ndarray) -> np.ndarray:
    """For every i, the envelope line whose term (a_i − a_m)/(Δ_i + Δ_m) is least, in doubles
    (the terms along the envelope first decrease, then increase: a binary search for the valley).
    Only a guess: :func:`_normalized_general` checks it exactly."""
    m_lines, k = env_d.shape[0], a.shape[0]
    if m_lines == 1:
        return np.zeros(k, dtype=np.intp)

    def term(m: np.ndarray) -> np.ndarray:
        return (a - env_a[m]) / (d + env_d[m])

    lo = np.zeros(k, dtype=np.intp)
    hi = np.full(k, m_lines - 1, dtype=np.intp)
    with np.errstate(over="ignore", invalid="ignore"):
        while True:
            active = lo < hi
            if not active.any():
                break
            mid = np.minimum((lo + hi) // 2, m_lines - 2)
            descending = term(mid) > term(mid + 1)
            lo = np.where(active & descending, mid + 1, lo)
            hi = np.where(active & ~descending, mid, hi)
    return lo


#: The public grid the ``monotone`` scores are rounded down to: multiples of
#: 2^-20 (its inverse is whole, so rounding down keeps a difference of at
#: most 1 at most 1, below).
SCORE_GRID_BITS = 20
#: ``monotone`` scores below −2^32 are raised to it (a 1-Lipschitz map: the
#: sensitivity is kept), so every rounded score is a float exactly
#: (2^32·2^20 = 2^52 grid steps). GEM's utility statement is unaffected while
#: t = (2/ε)·ln(k/β) <= 2^32 (the event s_î < −t is the same).
SCORE_FLOOR = 2**32


def _normalized_same_direction(q: np.ndarray, d: np.ndarray, epsilon: float, beta: float) -> np.ndarray:
    """``s_i = min_j (a_i − a_j)/max(Δ_i, Δ_j)`` (the ``monotone`` variant),
    ``a_i = q_i − t·Δ_i``, computed EXACTLY (:class:`fractions.Fraction`) from
    the given floats by the direct formula (O(k²): meant for few candidates),
    then raised to −:data:`SCORE_FLOOR` if below it and rounded DOWN to a
    multiple of 2^-:data:`SCORE_GRID_BITS`, exactly a float.

    Guarantee: for same-direction neighbours the exact scores differ by at
    most 1 (module docstring); the floor keeps that; and rounding down to the
    grid g = 2^-20 keeps it EXACTLY, since with X = s/g, Y = s'/g,
    |X − Y| <= N = 1/g whole, ⌊X⌋ − ⌊Y⌋ < N + 1 and is whole, so <= N. So the
    returned floats have sensitivity 1 with no slack, max s = 0 exactly, and
    lie below the exact scores by less than 2^-20 (above −2^32)."""
    k = q.shape[0]
    t = Fraction(_threshold(k, epsilon, beta))
    dd = [Fraction(float(x)) for x in d]
    a = [Fraction(float(x)) - t * di for x, di in zip(q, dd)]
    scale = 2**SCORE_GRID_BITS
    out = np.empty(k)
    for i in range(k):
        s = min(min((a[i] - a[j]) / max(dd[i], dd[j]) for j in range(k)), Fraction(0))
        s = max(s, Fraction(-SCORE_FLOOR))
        out[i] = math.floor(s * scale) / scale  # an integer below 2^53 over a power of 2: exact
    return out


#: :func:`same_direction_scores_batch` computes in int64 while the threshold t stays below this (a
#: larger t, a tiny ε, goes to the exact Fraction path row by row).
_BATCH_THRESHOLD_LIMIT = 2**38
#: ... and clips the utilities to ±2^60 first (then their pairwise differences fit int64).
_BATCH_UTILITY_LIMIT = 2**62
UTILITY_CLIP = 2**60


def _pair_constants(d: list[int], t: Fraction) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Public per-pair (i, j) integers of the same-direction scores: D = max(Δ_i, Δ_j), W = ⌊2^20·c⌋
    and R = ⌈D·(2^20·c − W)⌉ for c = t·(Δ_i − Δ_j)/D (exact), and the clip K·D of the utility
    difference (K = 2^33 + ⌈|c|⌉ + 1). Functions of the candidates, ε and β only."""
    k, scale = len(d), 2**SCORE_GRID_BITS
    den, whole, cut, clip = (np.zeros((k, k), dtype=np.int64) for _ in range(4))
    for i in range(k):
        for j in range(k):
            top = max(d[i], d[j])
            c = t * (d[i] - d[j]) / top
            w = math.floor(c * scale)
            den[i, j], whole[i, j] = top, w
            cut[i, j] = math.ceil(top * (c * scale - w))
            clip[i, j] = min((2**33 + math.ceil(abs(c)) + 1) * top, _BATCH_UTILITY_LIMIT)
    return den, whole, cut, clip


def same_direction_scores_batch(utilities: ArrayLike, sensitivities, epsilon: float, beta: float) -> np.ndarray:
    """Row g of the result is ``gem_normalized_scores(utilities[g], sensitivities, epsilon, beta,
    monotone=True)`` EXACTLY (the same floats), for every row at once: the per-group choice of a
    grouped release over G groups. ``utilities``: (G, k) whole numbers, first clipped to
    ±:data:`UTILITY_CLIP` (a 1-Lipschitz monotone map: every utility still moves by at most its Δ, all
    the same way, so the sensitivity argument holds; no refusal depends on the utilities, and no
    real count reaches 2^60); ``sensitivities``: k public whole numbers in 1..2^40 (bound
    candidates, or m·l). A deterministic function of private scores: releases nothing itself; each
    row keeps sensitivity 1 (module docstring).

    How it is exact in int64: ⌊2^20·(a_i − a_j)/D⌋ (D = max(Δ_i, Δ_j)) = ⌊2^20·A/D − 2^20·c⌋ with
    A = q_i − q_j private and c = t·(Δ_i − Δ_j)/D public. With A = D·x + y, 2^20·y = D·u + r
    (0 <= y, r < D), 2^20·A/D = 2^20·x + u + r/D, and with 2^20·c = W + f (0 <= f < 1) the floor is
    2^20·x + u − W − [r/D < f] = 2^20·x + u − W − [r < ⌈D·f⌉]: integers only, W and ⌈D·f⌉ computed
    once per pair from Fractions. The floor commutes with min, with the cap at 0 and with the floor
    at −2^32 (monotone maps onto whole grid values), so s_i = clip(min_j ⌊2^20·x_ij⌋, −2^52, 0)/2^20 as
    :func:`_normalized_same_direction` rounds it. A is clipped to ±K·D first: beyond it x_ij is
    above 2^33 (no effect on a min that includes j = i's 0) or below −2^33 (floored to −2^32 either
    way). Falls back to that function row by row when t >= 2^38."""
    q = np.asarray(utilities)
    if q.ndim != 2 or q.dtype.kind not in "iu":
        raise ParameterError("utilities must be a two-dimensional array of whole numbers (groups × candidates)")
    q = np.clip(q.astype(np.int64), -UTILITY_CLIP, UTILITY_CLIP)
    d_arr = np.asarray(sensitivities)
    if (d_arr.ndim != 1 or d_arr.shape[0] != q.shape[1] or d_arr.dtype.kind not in "iu" or (d_arr < 1).any()
            or (d_arr > 2**40).any()):
        raise ParameterError("sensitivities must be one whole number in 1..2^40 per candidate")
    k = q.shape[1]
    eps = check_positive_finite(epsilon, "epsilon")
    d = [int(x) for x in d_arr]
    t = Fraction(_threshold(k, eps, float(beta)))
    if t >= _BATCH_THRESHOLD_LIMIT:  # public: the exact Fraction path, one row at a time
        dd = d_arr.astype(np.float64)
        return np.array([_normalized_same_direction(row.astype(np.float64), dd, eps, float(beta)) for row in q]
                        ).reshape(q.shape)
    den, whole, cut, clip = _pair_constants(d, t)
    grid = 2**SCORE_GRID_BITS
    best = np.zeros(q.shape, dtype=np.int64)  # j = i contributes exactly 0
    for i in range(k):
        for j in range(k):
            if i == j:
                continue
            diff = np.clip(q[:, i] - q[:, j], -clip[i, j], clip[i, j])
            x, y = np.divmod(diff, den[i, j])
            u, r = np.divmod(y << SCORE_GRID_BITS, den[i, j])
            term = x * grid + u - whole[i, j] - (r < cut[i, j])
            np.minimum(best[:, i], term, out=best[:, i])
    np.maximum(best, -SCORE_FLOOR * grid, out=best)
    return best.astype(np.float64) / grid  # whole numbers below 2^53 over a power of 2: exact


def permute_and_flip_rows(scores: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """For every row of ``scores`` (G, k) of sensitivity 1 each, an index drawn as
    :func:`generalized_permute_and_flip` draws it (permute-and-flip at c = ε/2 rounded down,
    sampled exactly: ``dp_spark.noise.selection``): ε-DP per row (McKenna & Sheldon 2020). For
    G = 1 the same draw as :func:`generalized_permute_and_flip` from the same generator state."""
    coef = ratio_down(check_positive_finite(epsilon, "epsilon"), 2.0)
    return selection.permute_and_flip_rows(np.asarray(scores, dtype=np.float64), coef, check_rng(rng))


def exponential_rows(scores: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """For every row of ``scores`` (G, k) of sensitivity 1 each, an index drawn as
    :func:`generalized_exponential` draws it (Pr[i] ∝ exp(c·s_i), c = ε/2 rounded down, sampled
    exactly by rejection: ``dp_spark.noise.selection``): ε-DP and ε-bounded range per row. For
    G = 1 the same draw as :func:`generalized_exponential` from the same generator state."""
    coef = ratio_down(check_positive_finite(epsilon, "epsilon"), 2.0)
    return selection.exponential_mechanism_rows(np.asarray(scores, dtype=np.float64), coef, check_rng(rng))


def _normalized(q: np.ndarray, d: np.ndarray, eps: float, b: float, monotone: bool) -> np.ndarray:
    a = _shifted_utilities(q, d, eps, b)  # also refuses inputs too large to combine in floating point
    return _normalized_same_direction(q, d, eps, b) if monotone else _normalized_general(q, d, a, eps, b)


def gem_normalized_scores(
    scores: ArrayLike, sensitivities: ArrayLike, epsilon: float, beta: float, *, monotone: bool = False
) -> np.ndarray:
    """GEM normalised scores ``s_i = min_j (a_i − a_j)/(Δ_i + Δ_j)`` (module
    docstring), O(k log k) through the upper envelope; ``monotone=True``: the
    same-direction scores with denominators ``max(Δ_i, Δ_j)``, exact and on
    the 2^-20 grid. A deterministic function of private scores: releases
    nothing itself."""
    q, d, eps, b = _validate(scores, sensitivities, epsilon, beta)
    return _normalized(q, d, eps, b, _flag(monotone))


def _flag(monotone) -> bool:
    if not isinstance(monotone, (bool, np.bool_)):
        raise ParameterError("monotone must be True or False")
    return bool(monotone)


def gem_normalized_scores_naive(
    scores: ArrayLike, sensitivities: ArrayLike, epsilon: float, beta: float
) -> np.ndarray:
    """Same as :func:`gem_normalized_scores` (the same doubles) by the direct O(k²) formula on
    exact whole numbers (for tests)."""
    q, d, eps, b = _validate(scores, sensitivities, epsilon, beta)
    _shifted_utilities(q, d, eps, b)  # the same refusal
    t = Fraction(_threshold(q.shape[0], eps, b))  # here by Fractions, apart from the fast path's integers
    dq = [Fraction(float(x)) for x in d]
    a = [Fraction(float(x)) - t * di for x, di in zip(q, dq)]
    scale = max(v.denominator for v in a + dq)  # powers of two
    aa = np.array([int(v * scale) for v in a], dtype=object)
    dd = np.array([int(v * scale) for v in dq], dtype=object)
    grid = 2**SCORE_GRID_BITS
    lowest = -SCORE_FLOOR * grid
    return np.array([max(min(((aa[i] - aa) * grid // (dd[i] + dd)).min(), 0), lowest) / grid
                     for i in range(q.shape[0])])


def generalized_exponential_probabilities(
    scores: ArrayLike, sensitivities: ArrayLike, epsilon: float, beta: float, *, monotone: bool = False
) -> np.ndarray:
    """Exact output distribution of :func:`generalized_exponential` (log-sum-exp).
    Not private: for tests, audits and synthetic inputs only."""
    q, d, eps, b = _validate(scores, sensitivities, epsilon, beta)
    s = _normalized(q, d, eps, b, _flag(monotone))
    logw = ratio_down(eps, 2.0) * (s - s.max())
    w = np.exp(logw)
    return np.exp(logw - math.log(float(w.sum())))


def generalized_exponential(
    scores: ArrayLike,
    sensitivities: ArrayLike,
    epsilon: float,
    beta: float,
    rng: np.random.Generator,
    *,
    monotone: bool = False,
) -> int:
    """Select a candidate with GEM (Raskhodnikova & Smith 2016; Knop &
    Steinke 2023, Algorithm 3): index ``î`` with ``Pr[i] ∝ exp(c·s_i)``, c = ε/2
    rounded down, over the normalised scores, sampled exactly
    (:func:`exponential_rows`); 0-based.

    Privacy: ε-DP if each ``scores[j]`` moves by at most ``sensitivities[j]``
    between neighbours and the sensitivities, ``beta`` and ``epsilon`` do not
    depend on the data (``monotone``: only if all scores move the same way).
    Utility: with probability ≥ 1 − β, ``q_î ≥ max_j (q_j − 2t·Δ_j)``,
    ``t = (2/ε)·ln(k/β)`` (the best normalised score is 0, so ``s_î ≥ −t``
    w.p. ≥ 1 − β, which rearranges to the bound).
    """
    rng = check_rng(rng)
    q, d, eps, b = _validate(scores, sensitivities, epsilon, beta)
    s = _normalized(q, d, eps, b, _flag(monotone))
    return int(exponential_rows(s[None, :], eps, rng)[0])


def generalized_permute_and_flip(
    scores: ArrayLike,
    sensitivities: ArrayLike,
    epsilon: float,
    beta: float,
    rng: np.random.Generator,
    *,
    monotone: bool = False,
) -> int:
    """GEM's normalised scores sampled by permute-and-flip (McKenna & Sheldon
    2020; :func:`dp_spark.mechanisms.exponential.permute_and_flip`): ε-DP under
    the conditions of :func:`generalized_exponential`. Utility: ``i`` is output
    only if visited and accepted, with probability at most
    ``exp(ε·(s_i − max s)/2)``, and ``max s = 0``; so
    ``P[s_î < −t] ≤ k·e^{−εt/2} = β`` (the sampler's coefficient c is ε/2
    rounded down, weakening this by a factor ``e^{(ε/2 − c)t}``, one ulp of c
    times t), and w.p. ≥ 1 − β ``q_î ≥ max_j (q_j − 2tΔ_j)``. Returns the index.
    """
    rng = check_rng(rng)
    q, d, eps, b = _validate(scores, sensitivities, epsilon, beta)
    return permute_and_flip(_normalized(q, d, eps, b, _flag(monotone)), eps, 1.0, rng)


def generalized_permute_and_flip_probabilities(
    scores: ArrayLike, sensitivities: ArrayLike, epsilon: float, beta: float, *, monotone: bool = False
) -> np.ndarray:
    """Exact output distribution of :func:`generalized_permute_and_flip`:
    with ``p_j = exp(c·(s_j − max s))`` (c = ε/2 rounded down), i is released
    with probability ``p_i·∫₀¹ Π_{j≠i} (1 − p_j x) dx`` (accepted, and every
    candidate visited before it rejected), a degree k − 1 polynomial
    integrated exactly by Gauss–Legendre. O(k²). Not private: for tests,
    audits and synthetic inputs only."""
    q, d, eps, b = _validate(scores, sensitivities, epsilon, beta)
    s = _normalized(q, d, eps, b, _flag(monotone))
    p = np.exp(ratio_down(eps, 2.0) * (s - s.max()))
    k = p.shape[0]
    nodes, weights = np.polynomial.legendre.leggauss(k // 2 + 1)
    x = (nodes + 1.0) / 2.0  # on [0, 1]; weights halve with the interval
    factors = 1.0 - p[:, None] * x[None, :]  # (k, nodes): each in [0, 1]
    out = np.empty(k)
    for i in range(k):
        rest = np.prod(np.delete(factors, i, axis=0), axis=0)
        out[i] = p[i] * float(np.dot(weights, rest)) / 2.0
    return out / out.sum()
