"""Exponential mechanism, report-noisy-max and permute-and-flip.

Each releases only the *index* of a selected candidate. The guarantees hold
when every score moves by at most ``sensitivity`` between neighbours
(add/remove one privacy unit), ``sensitivity`` fixed independently of the
data. Both are sampled exactly (``dp_spark.noise.selection``): permute-and-flip
by its definition (a uniform order, each candidate accepted with an exact
Bernoulli(exp(−c·gap))), the exponential mechanism by rejection from uniform
proposals with the same Bernoulli; the coefficient c is ε/(2Δ) (ε/Δ when
monotone) rounded down. So each is ε-DP as the idealised mechanism is, with
no floating-point side channel (Mironov 2012). Error messages never quote
scores: they are private.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from dp_spark import checks
from dp_spark.accounting.exact import ratio_down
from dp_spark.errors import ParameterError
from dp_spark.noise.selection import exponential_mechanism_rows, permute_and_flip_rows

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


def _coefficient(epsilon: float, sensitivity: float, monotone: bool) -> float:
    """c = ε/(2Δ) (ε/Δ when monotone) rounded down: never a sharper mechanism than ε allows."""
    divisor = sensitivity if monotone else 2.0 * sensitivity
    if not math.isfinite(epsilon / divisor):
        raise ParameterError("epsilon / sensitivity overflows; use a smaller epsilon or a larger sensitivity")
    return ratio_down(epsilon, divisor)


def _log_weights(scores: np.ndarray, epsilon: float, sensitivity: float, monotone: bool) -> np.ndarray:
    """c·(u_i − max u) (:func:`_coefficient`); −inf stays −inf, every finite value ≤ 0."""
    coef = _coefficient(epsilon, sensitivity, monotone)
    top = scores.max()  # finite: at least one finite score, no +inf
    with np.errstate(over="ignore", invalid="ignore"):
        shifted = scores - top  # −inf stays −inf; a huge range may round to −inf (weight 0 anyway)
        logw = coef * shifted
    logw[np.isneginf(shifted)] = -np.inf
    return logw


def _select(sampler, scores: np.ndarray, coefficient: float, rng: np.random.Generator) -> int:
    """One row through an exact row sampler, over the finite candidates only (−inf: never chosen)."""
    finite = np.flatnonzero(np.isfinite(scores))
    return int(finite[int(sampler(scores[finite][None, :], coefficient, rng)[0])])


def exponential_mechanism(
    scores: ArrayLike,
    epsilon: float,
    sensitivity: float,
    rng: np.random.Generator,
    monotone: bool = False,
) -> int:
    """Select one candidate with the exponential mechanism (McSherry & Talwar 2007).

    Releases an index drawn with ``Pr[i] ∝ exp(ε·u_i / (2Δ))`` (exactly, by
    rejection: module docstring): ε-DP and ε-bounded range for scores of
    sensitivity ``Δ``. ``monotone=True`` uses
    ``exp(ε·u_i / Δ)``, ε-DP only if all scores move in the same direction
    between neighbours. A ``-inf`` score gets probability 0; NaN, ``+inf`` and
    all-``-inf`` vectors are refused. Returns the 0-based index.
    """
    rng = check_rng(rng)
    arr = as_score_vector(scores, allow_neg_inf=True)
    eps = check_positive_finite(epsilon, "epsilon")
    sens = check_positive_finite(sensitivity, "sensitivity")
    mono = _check_bool(monotone, "monotone")
    return _select(exponential_mechanism_rows, arr, _coefficient(eps, sens, mono), rng)


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
    scores of sensitivity Δ. With ``noise="gumbel"`` (scale ``2Δ/ε``) its law
    is the exponential mechanism's, with ``noise="exponential"`` (scale
    ``2Δ/ε``) permute-and-flip's (Ding, Kifer, Steinke, Wang & Xiao 2021); each
    is drawn by that mechanism's exact sampler, no noise is added to a float.
    ``monotone`` halves the scale (valid only for same-direction scores).
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
    mechanism's. Sampled exactly by that definition (module docstring).
    ``monotone`` as in :func:`exponential_mechanism`; ``-inf`` scores
    are never selected. Returns the 0-based index.
    """
    rng = check_rng(rng)
    arr = as_score_vector(scores, allow_neg_inf=True)
    eps = check_positive_finite(epsilon, "epsilon")
    sens = check_positive_finite(sensitivity, "sensitivity")
    mono = _check_bool(monotone, "monotone")
    return _select(permute_and_flip_rows, arr, _coefficient(eps, sens, mono), rng)
