"""Generalized Exponential Mechanism (GEM) of Raskhodnikova & Smith (2016).

Used by Knop & Steinke (NeurIPS 2023, "Counting Distinct Elements Under
Person-Level DP", Algorithm 3) to choose the per-person contribution bound ℓ:
candidates have utilities ``q_1..q_k`` whose sensitivities ``Δ_1..Δ_k`` differ
(``Δ_ℓ = ℓ`` there), and GEM selects a candidate whose utility is close to the
best one *measured in units of that candidate's own sensitivity*.

Definition (ALGORITHMS.md 1.5):

* ``t = (2/ε)·ln(k/β)``;
* ``a_i = q_i − t·Δ_i``;
* normalised score ``s_i = min_j (a_i − a_j)/(Δ_i + Δ_j)`` (so ``s_i ≤ 0``);
* release ``i`` with ``Pr[i] ∝ exp(ε·s_i/2)``.

Privacy: if each ``q_j`` changes by at most ``Δ_j`` between neighbouring data
sets, with ``Δ_j > 0`` fixed independently of the data, each term
``(a_i − a_j)/(Δ_i + Δ_j)`` changes by at most 1, hence so does their minimum
``s_i``; the exponential mechanism on sensitivity-1 scores is ε-DP.

Variant for same-direction neighbours (``monotone=True``, issue 25): if,
between neighbours, every ``q_j`` moves in the SAME direction by at most
``Δ_j`` (adding a person never lowers any of them, as with the bounded
distinct counts c_l: 0 <= c'_l − c_l <= l), then ``a_i − a_j`` moves by
``δ_i − δ_j ∈ [−Δ_j, Δ_i]``, at most ``max(Δ_i, Δ_j)`` in absolute value, so
``s_i = min_j (a_i − a_j)/max(Δ_i, Δ_j)`` still has sensitivity 1 with a
smaller denominator: a sharper choice for the same ε. These scores are
computed exactly from the given floats and rounded down to multiples of
2^-20 (floored at −2^32), so their sensitivity is 1 exactly, with no
floating-point slack (:func:`_normalized_same_direction`). GEM's utility argument
is unchanged (``s_î ≥ −t`` gives ``q_î ≥ q_j − t(Δ_j − Δ_î + max(Δ_î, Δ_j))
≥ q_j − 2tΔ_j``).

Sampling: :func:`generalized_exponential` draws ``Pr[i] ∝ exp(ε·s_i/2)``;
:func:`generalized_permute_and_flip` runs permute-and-flip (McKenna &
Sheldon 2020) on the same sensitivity-1 scores, also ε-DP, and never less
likely to pick the best candidate (issue 25 measured it sharper:
benchmarks/README.md).

Normalised scores are computed in O(k log k) (ALGORITHMS.md 1.6):
``s_i = max{x : a_i − x·Δ_i ≥ g(x)}`` with ``g(x) = max_j (a_j + x·Δ_j)`` the
upper envelope of the lines of slope ``Δ_j`` and intercept ``a_j``. The line
of the envelope active at ``x = s_i`` is the minimiser ``j`` of the
definition; along the envelope (lines sorted by slope) the terms
``(a_i − a_j)/(Δ_i + Δ_j)`` first decrease then increase, so a binary search
per ``i`` finds it.
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
    gumbel_argmax,
    permute_and_flip,
)

__all__ = [
    "gem_normalized_scores",
    "gem_normalized_scores_naive",
    "generalized_exponential",
    "generalized_exponential_probabilities",
    "generalized_permute_and_flip",
    "generalized_permute_and_flip_probabilities",
]


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# upper envelope of lines y = a_j + Δ_j·x
# ---------------------------------------------------------------------------


def _below_chord(
    x0: np.ndarray, y0: np.ndarray, x1: np.ndarray, y1: np.ndarray, x2: np.ndarray, y2: np.ndarray
) -> np.ndarray:
    """True where point 1 lies on or below the segment from point 0 to point 2
    (x0 < x1 < x2), i.e. line 1 is never strictly on top of the envelope."""
    return (y1 - y0) * (x2 - x0) <= (y2 - y0) * (x1 - x0)


def _upper_envelope(d: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Slopes and intercepts of the lines forming ``x ↦ max_j (a_j + Δ_j x)``.

    In the dual, line (slope Δ, intercept a) is the point (Δ, a) and the lines
    on the upper envelope are exactly the vertices of the upper convex hull of
    those points. Returned sorted by increasing slope. O(k log k): a sort,
    vectorised pruning passes, and (only if pruning stalls, e.g. a concave run
    followed by a very high last point) one linear pass of the monotone chain
    in Python.
    """
    order = np.lexsort((a, d))  # by slope, then intercept
    xs, ys = d[order], a[order]
    # Parallel lines: only the highest can be on the envelope.
    keep = np.ones(xs.shape[0], dtype=bool)
    keep[:-1] = xs[:-1] != xs[1:]
    xs, ys = xs[keep], ys[keep]

    # Vectorised pruning: a point on/below the chord of its current neighbours
    # is not a hull vertex, whatever else is removed, so all such points can go
    # at once. Concave inputs (the usual distinct-count case) finish in one pass.
    while xs.shape[0] >= 3:
        bad = _below_chord(xs[:-2], ys[:-2], xs[1:-1], ys[1:-1], xs[2:], ys[2:])
        n_bad = int(np.count_nonzero(bad))
        if n_bad == 0:
            return xs, ys
        keep = np.ones(xs.shape[0], dtype=bool)
        keep[1:-1] = ~bad
        xs, ys = xs[keep], ys[keep]
        if n_bad * 16 < xs.shape[0]:
            break  # slow progress: finish with the linear-time monotone chain
    if xs.shape[0] < 3:
        return xs, ys

    # Andrew's monotone chain (upper hull), points already sorted by x.
    hx: list[float] = []
    hy: list[float] = []
    for x, y in zip(xs.tolist(), ys.tolist()):
        while len(hx) >= 2 and (hy[-1] - hy[-2]) * (x - hx[-2]) <= (y - hy[-2]) * (hx[-1] - hx[-2]):
            hx.pop()
            hy.pop()
        hx.append(x)
        hy.append(y)
    return np.asarray(hx), np.asarray(hy)


# ---------------------------------------------------------------------------
# normalised scores
# ---------------------------------------------------------------------------


def _normalized_from_shifted(a: np.ndarray, d: np.ndarray) -> np.ndarray:
    env_d, env_a = _upper_envelope(d, a)
    m_lines = env_d.shape[0]
    k = a.shape[0]

    def term(m: np.ndarray) -> np.ndarray:
        # (a_i − a_j)/(Δ_i + Δ_j) for j = envelope line m[i], elementwise in i.
        return (a - env_a[m]) / (d + env_d[m])

    if m_lines == 1:
        best = np.zeros(k, dtype=np.intp)
    else:
        # First envelope index m with term(m) <= term(m+1) (the valley of the
        # unimodal sequence); m_lines - 1 if the sequence decreases throughout.
        lo = np.zeros(k, dtype=np.intp)
        hi = np.full(k, m_lines - 1, dtype=np.intp)
        while True:
            active = lo < hi
            if not active.any():
                break
            mid = np.minimum((lo + hi) // 2, m_lines - 2)
            descending = term(mid) > term(mid + 1)
            lo = np.where(active & descending, mid + 1, lo)
            hi = np.where(active & ~descending, mid, hi)
        best = lo
    # Rounding can put the search one line off near a breakpoint; every term is
    # an upper bound on the exact minimum, so taking the neighbours too is safe.
    s = term(best)
    if m_lines > 1:
        s = np.minimum(s, term(np.maximum(best - 1, 0)))
        s = np.minimum(s, term(np.minimum(best + 1, m_lines - 1)))
    # j = i contributes exactly 0.
    return np.minimum(s, 0.0)


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
    ``a_i = q_i − t·Δ_i``, computed EXACTLY (:class:`fractions.Fraction`)
    from the given floats q, Δ and the public float t, by the direct formula
    (O(k²) exact operations: meant for few candidates; the distinct-count
    release passes at most ten, the powers of 4 up to max_bound <= 10⁶).
    Then each score is raised to −:data:`SCORE_FLOOR` if below it and
    rounded DOWN to a multiple of 2^-:data:`SCORE_GRID_BITS`, exactly a float.

    Guarantee: for same-direction neighbours (every q_j moving by δ_j, all δ
    of one sign, |δ_j| <= Δ_j) the exact scores differ by at most 1 (module
    docstring); raising to the floor keeps that; and rounding down to the
    grid g = 2^-20 keeps it EXACTLY, since with X = s/g, Y = s'/g, |X − Y| <= N
    = 1/g whole, ⌊X⌋ − ⌊Y⌋ < N + 1 and is whole, so <= N. So the returned
    floats have sensitivity 1 with no rounding slack, max s = 0 exactly (the
    candidate with the largest a), and they are below the exact scores by
    less than 2^-20 (above −2^32)."""
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


def _normalized(q: np.ndarray, d: np.ndarray, eps: float, b: float, monotone: bool) -> np.ndarray:
    a = _shifted_utilities(q, d, eps, b)  # also refuses inputs too large to combine in floating point
    return _normalized_same_direction(q, d, eps, b) if monotone else _normalized_from_shifted(a, d)


def gem_normalized_scores(
    scores: ArrayLike, sensitivities: ArrayLike, epsilon: float, beta: float, *, monotone: bool = False
) -> np.ndarray:
    """GEM normalised scores ``s_i = min_j (a_i − a_j)/(Δ_i + Δ_j)``, O(k log k).

    With ``monotone=True``: ``s_i = min_j (a_i − a_j)/max(Δ_i, Δ_j)`` (O(k²)
    exact operations), sensitivity 1 ONLY if between neighbours all scores
    move in the same direction (module docstring); the distinct-count counts
    do. These are computed exactly and rounded down to multiples of 2^-20
    (raised to −2^32 if below), so the sensitivity is 1 exactly.

    ``a_i = q_i − t·Δ_i`` with ``t = (2/ε)·ln(k/β)``, ``q = scores``,
    ``Δ = sensitivities`` (Raskhodnikova & Smith 2016; Knop & Steinke 2023,
    Algorithm 3 and Appendix B). Each ``s_i ≤ 0`` and has sensitivity 1 when
    each ``q_j`` has sensitivity ``Δ_j``.

    Computed through the upper envelope of the lines ``y = a_j + Δ_j·x`` and a
    binary search per candidate; agrees with
    :func:`gem_normalized_scores_naive` up to floating-point rounding.

    This is a deterministic function of private scores and releases nothing by
    itself; only :func:`generalized_exponential`'s output may be published.
    """
    q, d, eps, b = _validate(scores, sensitivities, epsilon, beta)
    return _normalized(q, d, eps, b, _flag(monotone))


def _flag(monotone) -> bool:
    if not isinstance(monotone, (bool, np.bool_)):
        raise ParameterError("monotone must be True or False")
    return bool(monotone)


def gem_normalized_scores_naive(
    scores: ArrayLike, sensitivities: ArrayLike, epsilon: float, beta: float
) -> np.ndarray:
    """Same as :func:`gem_normalized_scores` by the direct O(k²) formula (for tests)."""
    q, d, eps, b = _validate(scores, sensitivities, epsilon, beta)
    a = _shifted_utilities(q, d, eps, b)
    k = a.shape[0]
    out = np.empty(k)
    rows = max(1, 4_000_000 // k)  # bound the k×k temporary to ~32 MB
    for start in range(0, k, rows):
        stop = min(k, start + rows)
        block = (a[start:stop, None] - a[None, :]) / (d[start:stop, None] + d[None, :])
        out[start:stop] = block.min(axis=1)
    return out


def generalized_exponential_probabilities(
    scores: ArrayLike, sensitivities: ArrayLike, epsilon: float, beta: float, *, monotone: bool = False
) -> np.ndarray:
    """Exact output distribution of :func:`generalized_exponential`.

    ``p_i = exp(ε·s_i/2) / Σ_j exp(ε·s_j/2)`` over the normalised scores,
    computed by log-sum-exp (``monotone`` as in :func:`gem_normalized_scores`).
    Deterministic in the private scores and not private itself: for tests,
    audits and synthetic inputs only.
    """
    q, d, eps, b = _validate(scores, sensitivities, epsilon, beta)
    s = _normalized(q, d, eps, b, _flag(monotone))
    logw = (eps / 2.0) * (s - s.max())
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
    """Select a candidate with the Generalized Exponential Mechanism.

    Raskhodnikova & Smith (2016), as Algorithm 3 of Knop & Steinke (2023).
    Releases an index ``î`` drawn with ``Pr[i] ∝ exp(ε·s_i/2)`` where ``s`` are
    the normalised scores of :func:`gem_normalized_scores` (sensitivity 1),
    sampled by Gumbel-max in log space.

    Privacy: ε-DP, provided each ``scores[j]`` changes by at most
    ``sensitivities[j]`` between neighbouring data sets and the sensitivities,
    ``beta`` and ``epsilon`` are chosen independently of the data. (In the
    distinct-count release this is called with ``ε/2`` of the total budget.)

    Utility: with probability at least ``1 − β``,
    ``q_î ≥ max_j (q_j − (4·Δ_j/ε)·ln(k/β))``, i.e. the selected utility is
    within ``2t·Δ_j`` of every candidate ``j``'s utility, ``t = (2/ε)ln(k/β)``.
    (The exponential mechanism gives ``s_î ≥ −t`` w.p. ≥ 1 − β because the
    best normalised score is 0; ``s_î ≥ −t`` rearranges to the bound.)

    Arguments: ``scores`` (k finite utilities, k ≥ 1), ``sensitivities`` (k
    positive finite numbers), ``epsilon > 0`` finite, ``beta ∈ (0, 1)``,
    ``rng`` a ``numpy.random.Generator``; ``monotone`` as in
    :func:`gem_normalized_scores` (only for scores that all move in the same
    direction between neighbours). Returns the selected index (0-based).
    """
    rng = check_rng(rng)
    q, d, eps, b = _validate(scores, sensitivities, epsilon, beta)
    s = _normalized(q, d, eps, b, _flag(monotone))
    return gumbel_argmax((eps / 2.0) * (s - s.max()), rng)


def generalized_permute_and_flip(
    scores: ArrayLike,
    sensitivities: ArrayLike,
    epsilon: float,
    beta: float,
    rng: np.random.Generator,
    *,
    monotone: bool = False,
) -> int:
    """GEM's normalised scores, sampled by permute-and-flip (ε-DP).

    The scores ``s`` of :func:`gem_normalized_scores` (``monotone`` as there)
    have sensitivity 1; permute-and-flip (McKenna & Sheldon 2020) visits the
    candidates in a random order and accepts ``i`` with probability
    ``exp(ε·(s_i − max s)/2)``, drawn as report-noisy-max with Exp(1) noise
    (:func:`dp_spark.mechanisms.exponential.permute_and_flip`). ε-DP under the
    same conditions as :func:`generalized_exponential` (plus, if
    ``monotone``, every score moving in the same direction between
    neighbours). Utility: permute-and-flip outputs ``i`` only if it visits
    and accepts it, so with probability at most ``exp(ε·(s_i − max s)/2)``;
    and ``max s = 0`` (every ``s_i <= 0``, and the candidate with the largest
    ``a_i`` has ``s = 0``). So, with ``t = (2/ε)·ln(k/β)``,
    ``P[s_î < −t] ≤ k·e^{−εt/2} = β`` (the sampler's coefficient is ε/2
    rounded down, c, which weakens this to ``k·e^{−ct}``, a factor
    ``e^{(ε/2 − c)t}`` of at most one ulp of c times t), and GEM's argument
    from ``s_î ≥ −t`` gives, with probability >= 1 − β,
    ``q_î ≥ max_j (q_j − 2tΔ_j)``. Returns the index.
    """
    rng = check_rng(rng)
    q, d, eps, b = _validate(scores, sensitivities, epsilon, beta)
    return permute_and_flip(_normalized(q, d, eps, b, _flag(monotone)), eps, 1.0, rng)


def generalized_permute_and_flip_probabilities(
    scores: ArrayLike, sensitivities: ArrayLike, epsilon: float, beta: float, *, monotone: bool = False
) -> np.ndarray:
    """Exact output distribution of :func:`generalized_permute_and_flip`.

    With acceptance probabilities ``p_j = exp(c·(s_j − max s))``, c the
    sampler's ε/2 rounded down, candidate i is released with probability
    ``p_i·∫₀¹ Π_{j≠i} (1 − p_j x) dx`` (i is accepted, and every candidate
    visited before it — each one independently with probability x when i
    comes at uniform time x — is rejected). The integrand is a polynomial
    of degree k − 1, integrated exactly by Gauss–Legendre quadrature with
    ⌈k/2⌉ nodes. O(k²). Deterministic in the private scores and not private:
    for tests, audits and synthetic inputs only.
    """
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
