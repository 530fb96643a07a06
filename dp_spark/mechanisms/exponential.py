"""Exponential mechanism, report-noisy-max and permute-and-flip.

Each releases only the *index* of a selected candidate. The guarantees hold
when every score moves by at most ``sensitivity`` between neighbours
(add/remove one privacy unit), ``sensitivity`` fixed independently of the
data. Sampling is in log space: the exponential mechanism by the Gumbel-max
trick (``argmax_i (ε·u_i/(2Δ) + G_i)``, exactly ``Pr[i] ∝ exp(ε·u_i/(2Δ))``),
permute-and-flip as report-noisy-max with ``Exp(1)`` noise. The draws use
numpy's floating-point generators: the guarantee is that of the idealised
real-valued mechanism (no defence against floating-point side channels,
Mironov 2012). Error messages never quote scores: they are private.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from dp_spark import checks
from dp_spark.accounting.exact import ratio_down
from dp_spark.errors import ParameterError

__all__ = [
    "exponential_mechanism",
    "exponential_mechanism_probabilities",
    "report_noisy_max",
    "permute_and_flip",
]


check_rng = checks.rng
check_positive_finite = checks.positive
_check_bool = checks.boolean


def as_score_vector(scores: ArrayLike, *, allow_neg_inf: bool) -> np.ndarray:
    """``scores`` as a 1-D float64 array; unusable entries are refused by kind, never by value."""
    try:
        arr = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterError("scores must be a 1-D sequence of real numbers") from None
    if arr.ndim != 1:
        raise ParameterError("scores must be one-dimensional: one score per candidate")
    if arr.size == 0:
        raise ParameterError("scores is empty; pass at least one candidate")
    if np.isnan(arr).any():
        raise ParameterError("scores contain NaN; compute a real-valued score for every candidate")
    if np.isposinf(arr).any():
        raise ParameterError("scores contain +inf; every score must be finite (or -inf to exclude a candidate)")
    if np.isneginf(arr).any():
        if not allow_neg_inf:
            raise ParameterError("scores contain -inf; every score must be finite for this mechanism")
        if np.isneginf(arr).all():
            raise ParameterError(
                "every score is -inf, so no candidate can be selected; give at least one "
                "candidate a finite score"
            )
    return arr


def _log_weights(scores: np.ndarray, epsilon: float, sensitivity: float, monotone: bool) -> np.ndarray:
    """ε·(u_i − max u)/(cΔ), c = 2 (1 when monotone); −inf stays −inf, every finite value ≤ 0."""
    divisor = sensitivity if monotone else 2.0 * sensitivity
    if not math.isfinite(epsilon / divisor):
        raise ParameterError("epsilon / sensitivity overflows; use a smaller epsilon or a larger sensitivity")
    coef = ratio_down(epsilon, divisor)  # rounded down: never a sharper mechanism than ε allows
    top = scores.max()  # finite: at least one finite score, no +inf
    with np.errstate(over="ignore", invalid="ignore"):
        shifted = scores - top  # −inf stays −inf; a huge range may round to −inf (weight 0 anyway)
        logw = coef * shifted
    logw[np.isneginf(shifted)] = -np.inf
    return logw


def gumbel_argmax(log_weights: np.ndarray, rng: np.random.Generator) -> int:
    """Index drawn with Pr[i] ∝ exp(log_weights[i]) (Gumbel-max trick)."""
    noisy = log_weights + rng.gumbel(loc=0.0, scale=1.0, size=log_weights.shape[0])
    return int(np.argmax(noisy))


def _exponential_argmax(log_weights: np.ndarray, rng: np.random.Generator) -> int:
    """argmax_i (log_weights[i] + E_i), E_i ~ Exp(1) i.i.d. (permute-and-flip)."""
    noisy = log_weights + rng.standard_exponential(size=log_weights.shape[0])
    return int(np.argmax(noisy))


def exponential_mechanism(
    scores: ArrayLike,
    epsilon: float,
    sensitivity: float,
    rng: np.random.Generator,
    monotone: bool = False,
) -> int:
    """Select one candidate with the exponential mechanism (McSherry & Talwar 2007).

    Releases an index drawn with ``Pr[i] ∝ exp(ε·u_i / (2Δ))`` (Gumbel-max in
    log space): ε-DP for scores of sensitivity ``Δ``. ``monotone=True`` uses
    ``exp(ε·u_i / Δ)``, ε-DP only if all scores move in the same direction
    between neighbours. A ``-inf`` score gets probability 0; NaN, ``+inf`` and
    all-``-inf`` vectors are refused. Returns the 0-based index.
    """
    rng = check_rng(rng)
    arr = as_score_vector(scores, allow_neg_inf=True)
    eps = check_positive_finite(epsilon, "epsilon")
    sens = check_positive_finite(sensitivity, "sensitivity")
    mono = _check_bool(monotone, "monotone")
    return gumbel_argmax(_log_weights(arr, eps, sens, mono), rng)


def exponential_mechanism_probabilities(
    scores: ArrayLike,
    epsilon: float,
    sensitivity: float,
    monotone: bool = False,
) -> np.ndarray:
    """Exact output distribution of :func:`exponential_mechanism`, by
    log-sum-exp (``-inf`` scores get exactly 0). Not private: for tests,
    audits and public or synthetic inputs only.
    """
    arr = as_score_vector(scores, allow_neg_inf=True)
    eps = check_positive_finite(epsilon, "epsilon")
    sens = check_positive_finite(sensitivity, "sensitivity")
    mono = _check_bool(monotone, "monotone")
    logw = _log_weights(arr, eps, sens, mono)
    # max(logw) == 0, so exp() never overflows and the sum is >= 1.
    w = np.exp(logw)
    log_total = math.log(float(w.sum()))
    return np.exp(logw - log_total)


def report_noisy_max(
    scores: ArrayLike,
    epsilon: float,
    sensitivity: float,
    rng: np.random.Generator,
    noise: Literal["gumbel", "exponential"] = "gumbel",
    monotone: bool = False,
) -> int:
    """Report-noisy-max: the index of the largest noisy score, ε-DP for
    scores of sensitivity Δ. ``noise="gumbel"`` (scale ``2Δ/ε``) is the
    exponential mechanism; ``noise="exponential"`` (scale ``2Δ/ε``) is
    permute-and-flip (Ding, Kifer, Steinke, Wang & Xiao 2021). ``monotone``
    halves the scale (valid only for same-direction scores).
    """
    if noise == "gumbel":
        return exponential_mechanism(scores, epsilon, sensitivity, rng, monotone=monotone)
    if noise == "exponential":
        return permute_and_flip(scores, epsilon, sensitivity, rng, monotone=monotone)
    raise ParameterError('noise must be "gumbel" (exponential mechanism) or "exponential" (permute-and-flip)')


def permute_and_flip(
    scores: ArrayLike,
    epsilon: float,
    sensitivity: float,
    rng: np.random.Generator,
    monotone: bool = False,
) -> int:
    """Select one candidate with permute-and-flip (McKenna & Sheldon 2020).

    Visit the candidates in random order, accept ``r`` with probability
    ``exp(ε·(u_r − max u)/(2Δ))``, release the first accepted: ε-DP for scores
    of sensitivity Δ, expected score never worse than the exponential
    mechanism's. Drawn as report-noisy-max with ``Exp(1)`` noise on
    ``ε·u_i/(2Δ)`` (the same distribution: Ding, Kifer, Steinke, Wang & Xiao
    2021). ``monotone`` as in :func:`exponential_mechanism`; ``-inf`` scores
    are never selected. Returns the 0-based index.
    """
    rng = check_rng(rng)
    arr = as_score_vector(scores, allow_neg_inf=True)
    eps = check_positive_finite(epsilon, "epsilon")
    sens = check_positive_finite(sensitivity, "sensitivity")
    mono = _check_bool(monotone, "monotone")
    return _exponential_argmax(_log_weights(arr, eps, sens, mono), rng)
