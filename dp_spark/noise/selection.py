"""Exact samplers for selection: permute-and-flip and the exponential mechanism, no floating-point noise.

Both mechanisms release an index from a score vector ``s`` (one row per
group). With ``c`` the mechanism's coefficient (ε/(2Δ) rounded down;
ε/Δ for same-direction scores) and ``p_j = exp(−c·(max s − s_j))``:

- **permute-and-flip** (McKenna & Sheldon, NeurIPS 2020): visit the
  candidates in a uniformly random order and release the first ``j``
  accepted, each with probability ``p_j`` (the best has ``p_j = 1``, so some
  candidate is accepted). ε-DP for scores of sensitivity Δ, c = ε/(2Δ);
  expected score never below the exponential mechanism's.
- **the exponential mechanism** (McSherry & Talwar 2007): release ``j`` with
  probability ``p_j / Σ_i p_i``; sampled by rejection: propose ``j`` uniformly,
  accept with probability ``p_j``, repeat (the accepted index has exactly that
  law; expected proposals ``k / Σ_i p_i <= k``). ε-DP and ε-bounded range
  (so ε²/8-zCDP) for c = ε/(2Δ).

Exactness. The only randomness is uniform integers from ``rng``: the
permutation (``Generator.permuted``: Fisher–Yates on bounded integers by
rejection), the proposals (``Generator.integers``), and Bernoulli(exp(−x))
for the exact rational ``x = c·(max s − s_j)`` of the doubles given
(:func:`bernoulli_exp_gap`). So the output has exactly the idealised
mechanism's distribution for the scores as given (up to the uniformity of
``rng``'s bits), and its ε is the idealised one for those scores: nothing of
Mironov's (2012) floating-point attack applies. The privacy map assumes that
the double scores passed in have sensitivity Δ: the caller's obligation, met
exactly by integer counts, GEM's normalised scores (both forms: computed
exactly and rounded down onto a grid) and the group cap's quantile grid
scores. Running time and the number of words drawn depend
on the scores (how many candidates are visited or proposed before one is
accepted): like every sampler here, these assume an adversary who sees the
release, not the driver's timing.

Bernoulli(exp(−x)). Let M = 2^e >= x (e >= 0) and y = x/M <= 1; then
exp(−x) = exp(−y)^M: M independent Bernoulli(exp(−y)) trials must all succeed
(for x >= 1, y >= 1/2, so a run stops after O(1) expected trials). Each trial
is Canonne, Kamath & Steinke (NeurIPS 2020), Algorithm 1: A_k ~ Bernoulli(y/k)
for k = 1, 2, … until the first failure K; P[K odd] = exp(−y). Bernoulli(q),
q = y/k, compares a uniform real U = 0.W₁W₂… (64-bit words) with q: W₁ <
⌊q·2^64⌋ means U < q, W₁ > ⌊q·2^64⌋ means U > q, a tie looks at the next word
against the remainder (:func:`dp_spark.noise.words.below`, on Python ints:
exact). The first comparison is settled in doubles where a proven error bound
settles it (:func:`dp_spark.noise.words.bernoulli_bounded`), in Python ints
otherwise (probability below 2^-40 a comparison): the outcome is the exact
rule's for every word.

Error bound of the doubles. g_f = fl(top − s) and x_f = fl(c·g_f) are
correctly rounded (|relative error| <= u = 2^-53 each, absolute 2^-1074 in the
subnormal range); y_f = x_f·2^-e is exact but for an underflow (2^-1075);
q_f = fl(y_f/k) adds u relative and 2^-1075 absolute. So |q_f − q| <=
3.01u·q + 2^-1073. The interval used, q_f(1 ∓ 2^-48) ∓ 2^-1060 (with its own
two roundings, each u relative), holds q with a factor over 8 to spare in
the relative part. Ends are scaled by 2^64 exactly (ldexp); a word W is
compared through fl(W), within 2^11 of W, against the end ∓ 2^13 (rounded
within 2^11): W_f < fl(lo·2^64 − 2^13) gives W < q·2^64 − 2^12 <= ⌊q·2^64⌋,
W_f > fl(hi·2^64 + 2^13) gives W > q·2^64 + 2^12 > ⌊q·2^64⌋.
M is chosen from an upper end of x (x_f(1 + 2^-48) + 2^-1060 >= x), so
M >= x exactly. Elements with x_f >= 2^60 (or an infinite gap) take the
Fraction-based scalar sampler of ``dp_spark.noise.discrete``, exact for any
size; x = 0 (the best candidate, or a tie with it) is accepted without a draw.

Blocks. For few active elements (below ``_FEW``) one numpy call draws several CKS steps (and
several of the M trials) of each element, and candidates are tried a block at a time; the
outcome is read off the first failure (or acceptance) in the block and the draws after it are
discarded. All draws are independent, so this changes which words are used, never the law.

Guarantees are stated where these samplers are used
(``dp_spark.mechanisms.exponential``, ``dp_spark.mechanisms.distinct_count.gem``);
this module releases nothing by itself.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Callable

import numpy as np

from dp_spark.errors import ParameterError
from dp_spark.noise.discrete import bernoulli_exp_fraction
from dp_spark.noise.rng import check_rng
from dp_spark.noise.words import bernoulli_bounded

__all__ = ["bernoulli_exp_gap", "permute_and_flip_rows", "exponential_mechanism_rows"]

#: Relative and absolute widening of every float bound (module docstring: > 8× the rounding error).
_RELATIVE = 2.0**-48
_ABSOLUTE = 2.0**-1060
#: x_f at or above this goes to the Fraction-based sampler (M = 2^e stays far inside int64).
_LARGE = 2.0**60
#: Below this many active elements, several CKS steps (and trials) are drawn per numpy call.
_FEW = 4096


def _ratio(q: Fraction) -> tuple[int, int]:
    return q.numerator, q.denominator


def _bounds(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Doubles [lo, hi] around q_f = fl(y_f/k) that hold the exact y/k (module docstring)."""
    return q * (1.0 - _RELATIVE) - _ABSOLUTE, q * (1.0 + _RELATIVE) + _ABSOLUTE


def _split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(e, y_f) for doubles 0 < x_f < 2^60 within the module's bound of x: M = 2^e >= x (from an
    upper end of x) and y_f = x_f/M, so exp(−x) = exp(−x/M)^M with x/M <= 1."""
    upper = x * (1.0 + _RELATIVE) + _ABSOLUTE
    e = np.maximum(np.frexp(upper)[1], 0).astype(np.int64)  # upper < 2^e
    return e, np.ldexp(x, -e)


def _width_for(n: int, small: int) -> int:
    """Steps (or trials) drawn per call: ``small`` for a few elements (one numpy call instead of
    several; the extra words are discarded unused), 1 for many (no words wasted)."""
    return small if n < _FEW else 1


def _exp_unit_trials(y: np.ndarray, exact: Callable[[int], Fraction], rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(−y_i)) for rationals 0 <= y_i <= 1 given as doubles ``y`` (within the module's
    error bound) and exactly by ``exact(i)``: CKS Algorithm 1's first part, all elements at once.
    Steps k .. k + w − 1 of every active element are drawn together (independent Bernoullis; the
    first failure K decides, the draws after it are unused)."""
    result = np.zeros(y.shape[0], dtype=bool)
    active = np.arange(y.shape[0])
    k = 1
    while active.shape[0]:
        width = _width_for(active.shape[0], 8)
        ks = np.arange(k, k + width)
        lo, hi = _bounds(y[active][:, None] / ks[None, :])
        success = bernoulli_bounded(
            lo.ravel(), hi.ravel(),
            lambda j, at=active, ks=ks, w=width: _ratio(exact(int(at[j // w])) / int(ks[j % w])), rng,
        ).reshape(active.shape[0], width)
        failed = ~success
        ends = failed.any(axis=1)
        first = k + np.argmax(failed, axis=1)  # K, where the row has a failure in this block
        result[active[ends]] = first[ends] % 2 == 1
        active = active[~ends]
        k += width
    return result


def bernoulli_exp_gap(coefficient: float, top: np.ndarray, scores: np.ndarray,
                      rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(−c·(top_i − s_i))) element-wise, exactly, for a finite double c > 0 and
    finite doubles s_i <= top_i (the exact rational of the doubles, not a rounded product).
    Floating-point flags are ignored (no argument uses them; a global ``np.seterr(all="raise")``
    must not make a draw fail on some scores only). Releases nothing by itself."""
    with np.errstate(all="ignore"):
        return _bernoulli_exp_gap(coefficient, top, scores, rng)


def _bernoulli_exp_gap(coefficient: float, top: np.ndarray, scores: np.ndarray,
                       rng: np.random.Generator) -> np.ndarray:
    top = np.asarray(top, dtype=np.float64)
    s = np.asarray(scores, dtype=np.float64)
    n = s.shape[0]
    out = np.zeros(n, dtype=bool)
    if n == 0:
        return out
    x = coefficient * (top - s)
    out[s == top] = True  # x = 0: exp(0) = 1, nothing to draw
    small = np.flatnonzero((s != top) & (x < _LARGE))  # x is NaN nowhere: top, s finite and c > 0

    def exact_x(i: int) -> Fraction:
        return Fraction(coefficient) * (Fraction(float(top[i])) - Fraction(float(s[i])))

    if small.shape[0]:
        e, y = _split(x[small])
        trials_left = np.left_shift(np.int64(1), e)
        active = np.arange(small.shape[0])
        while active.shape[0]:  # M independent trials must all succeed; a block of them per call
            width = int(min(_width_for(active.shape[0], 4), trials_left[active].max()))
            rep = np.repeat(active, width)
            ok = _exp_unit_trials(
                y[rep],
                lambda j, rep=rep: exact_x(int(small[rep[j]])) / (1 << int(e[rep[j]])),
                rng,
            ).reshape(active.shape[0], width)
            used = np.arange(width)[None, :] < trials_left[active][:, None]  # trials past M: unused
            failed = (~ok & used).any(axis=1)
            trials_left[active] -= width
            done = ~failed & (trials_left[active] <= 0)
            out[small[active[done]]] = True
            active = active[~failed & ~done]
    for i in np.flatnonzero((s != top) & ~(x < _LARGE)).tolist():
        out[i] = bernoulli_exp_fraction(exact_x(i), rng)
    return out


#: Candidates tried per row in one vectorised call: up to this many in total over the active rows.
_BATCH = 1 << 16


def _first_accepted(s: np.ndarray, top: np.ndarray, rows: np.ndarray, cands: np.ndarray, coefficient: float,
                    rng: np.random.Generator) -> np.ndarray:
    """For each row r of ``rows``: the first column b of ``cands[r]`` whose candidate is accepted
    (an exact Bernoulli(exp(−c·(top − s))) each, −inf never), or −1. Every Bernoulli in the block is
    drawn: independent trials, so the first accepted one has the law of a sequential visit that
    stops there (the later draws are discarded unused)."""
    scores = s[rows[:, None], cands]
    live = np.isfinite(scores)
    accepted = np.zeros(scores.shape, dtype=bool)
    accepted[live] = bernoulli_exp_gap(coefficient, np.broadcast_to(top[rows][:, None], scores.shape)[live],
                                       scores[live], rng)
    first = np.argmax(accepted, axis=1)
    return np.where(accepted[np.arange(rows.shape[0]), first], first, -1)


def _width(active: int, left: int) -> int:
    return max(1, min(left, _BATCH // max(active, 1)))


def _score_rows(scores: np.ndarray) -> np.ndarray:
    """``scores`` as a (G, k) float64 array, k >= 1, every entry finite or −inf and every row with
    a finite entry; refused otherwise (a programming error: the callers validate their scores; the
    message quotes no score)."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2 or s.shape[1] < 1:
        raise ParameterError("selection scores must be a (groups, candidates) array with a candidate or more")
    finite = np.isfinite(s)
    if not (finite | np.isneginf(s)).all() or not finite.any(axis=1).all():
        raise ParameterError("selection scores must be finite or -inf, with a finite score in every row")
    return s


def permute_and_flip_rows(scores: np.ndarray, coefficient: float, rng: np.random.Generator) -> np.ndarray:
    """Permute-and-flip on every row of ``scores`` (G, k) (finite doubles or −inf, at least one
    finite per row) at coefficient c: per row, a uniform order of the k candidates; the first j
    accepted with probability exp(−c·(max s − s_j)) is released (−inf: never). Exact (module
    docstring); candidates are tried a block of the order at a time (:func:`_first_accepted`).
    ε-DP per row for c <= ε/(2Δ) and scores of sensitivity Δ (c <= ε/Δ for same-direction
    scores) (McKenna & Sheldon 2020). Returns the (G,) indices."""
    rng = check_rng(rng)
    s = _score_rows(scores)
    g, k = s.shape
    top = s.max(axis=1)
    order = rng.permuted(np.tile(np.arange(k, dtype=np.int64), (g, 1)), axis=1)
    chosen = np.full(g, -1, dtype=np.int64)
    active = np.arange(g)
    t = 0
    while active.shape[0]:  # ends by t = k: each row's best candidate is accepted with probability 1
        width = _width(active.shape[0], k - t)
        block = order[active, t:t + width]
        first = _first_accepted(s, top, active, block, coefficient, rng)
        done = first >= 0
        chosen[active[done]] = block[done, first[done]]
        active = active[~done]
        t += width
    return chosen


def exponential_mechanism_rows(scores: np.ndarray, coefficient: float,
                               rng: np.random.Generator) -> np.ndarray:
    """The exponential mechanism on every row of ``scores`` (G, k) (finite doubles or −inf, at
    least one finite per row): index j with probability ∝ exp(c·s_j), by rejection from uniform
    proposals (module docstring; a block of i.i.d. proposals at a time, the first accepted
    released), exactly. ε-DP and ε-bounded range per row for c <= ε/(2Δ) and scores of
    sensitivity Δ (McSherry & Talwar 2007). Returns the (G,) indices."""
    rng = check_rng(rng)
    s = _score_rows(scores)
    g, k = s.shape
    top = s.max(axis=1)
    chosen = np.full(g, -1, dtype=np.int64)
    active = np.arange(g)
    while active.shape[0]:
        block = rng.integers(0, k, size=(active.shape[0], _width(active.shape[0], 4 * k)), dtype=np.int64)
        first = _first_accepted(s, top, active, block, coefficient, rng)
        done = first >= 0
        chosen[active[done]] = block[done, first[done]]
        active = active[~done]
    return chosen
