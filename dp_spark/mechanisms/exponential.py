"""Exponential mechanism, report-noisy-max and permute-and-flip.

Every mechanism here releases one thing only: the *index* of a selected
candidate. Scores are computed from private data; the guarantee of each
function holds when every score changes by at most ``sensitivity`` between
neighbouring data sets (add/remove one privacy unit) and ``sensitivity`` is
fixed in advance, independently of the data.

Sampling is done in log space. The exponential mechanism is drawn by the
Gumbel-max trick, ``argmax_i (ε·u_i/(2Δ) + G_i)`` with ``G_i ~ Gumbel(1)``
i.i.d., which has exactly the distribution ``Pr[i] ∝ exp(ε·u_i/(2Δ))``
without ever exponentiating a score. Permute-and-flip is drawn as
report-noisy-max with ``Exp(1)`` noise on the same log-space scale.

Limitation (shared by all floating-point samplers): the draws use numpy's
floating-point Gumbel/exponential generators, so the guarantee is the one of
the idealised real-valued mechanism; no defence against floating-point side
channels (Mironov 2012) is attempted here.

Error messages never quote score values: scores are private.
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


# ---------------------------------------------------------------------------
# validation helpers (shared with gem.py)
# ---------------------------------------------------------------------------


check_rng = checks.rng


check_positive_finite = checks.positive


_check_bool = checks.boolean


def as_score_vector(scores: ArrayLike, *, allow_neg_inf: bool) -> np.ndarray:
    """Return ``scores`` as a 1-D float64 array, refusing unusable entries.

    Messages say which kind of entry is wrong, never which value it has.
    """
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
    """ε·(u_i − max u)/(cΔ) with c = 2 (c = 1 when monotone); −inf stays −inf.

    Shifting by the maximum does not change the distribution and keeps every
    finite log-weight ≤ 0, so nothing overflows.
    """
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


# ---------------------------------------------------------------------------
# public mechanisms
# ---------------------------------------------------------------------------


def exponential_mechanism(
    scores: ArrayLike,
    epsilon: float,
    sensitivity: float,
    rng: np.random.Generator,
    monotone: bool = False,
) -> int:
    """Select one candidate with the exponential mechanism (McSherry & Talwar 2007).

    Releases an index ``i`` drawn with ``Pr[i] ∝ exp(ε·u_i / (2Δ))``, where
    ``u = scores`` and ``Δ = sensitivity``. If every score has sensitivity at
    most ``Δ`` (fixed independently of the data), the release is ε-DP.

    With ``monotone=True`` the weights are ``exp(ε·u_i / Δ)``; this is ε-DP
    only if, between any two neighbouring data sets, all scores move in the
    same direction (e.g. counts under add/remove of one person). Do not set it
    otherwise.

    A score of ``-inf`` gives its candidate probability 0. NaN and ``+inf``
    scores are refused, as is a vector whose scores are all ``-inf``.

    Sampling is by the Gumbel-max trick in log space: the index of the largest
    ``ε·(u_i − max u)/(2Δ) + Gumbel(1)``.

    Returns the selected index (0-based).
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
    """Exact output distribution of :func:`exponential_mechanism`.

    Returns ``p`` with ``p_i = exp(ε·u_i/(2Δ)) / Σ_j exp(ε·u_j/(2Δ))``
    (``ε·u_i/Δ`` when ``monotone``), computed by log-sum-exp so that no raw
    score is exponentiated. ``-inf`` scores get probability exactly 0.

    This is a deterministic function of the (private) scores and is *not*
    differentially private itself: use it for tests, audits and reporting of
    the mechanism's behaviour on public or synthetic inputs, never publish it
    for private scores.
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
    """Report-noisy-max: release the index of the largest noisy score.

    ``noise="gumbel"`` adds Gumbel noise of scale ``2Δ/ε``; the output has
    exactly the distribution of the exponential mechanism
    (:func:`exponential_mechanism`) and is ε-DP for scores of sensitivity Δ.

    ``noise="exponential"`` adds exponential noise of scale ``2Δ/ε``; this is
    the permute-and-flip mechanism (McKenna & Sheldon 2020; the equivalence is
    Ding, Kifer, Steinke, Wang & Xiao 2021) and is ε-DP for scores of
    sensitivity Δ (:func:`permute_and_flip`).

    With ``monotone=True`` the noise scale is ``Δ/ε`` (valid only if all scores
    move in the same direction between neighbours).
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

    Definition: visit the candidates in a uniformly random order and accept
    candidate ``r`` with probability ``exp(ε·(u_r − max u)/(2Δ))``; the first
    accepted index is released. It is ε-DP for scores of sensitivity Δ (fixed
    independently of the data), and its expected score is never worse than the
    exponential mechanism's.

    Implemented as report-noisy-max with exponential noise of scale ``2Δ/ε``
    (``argmax_i ε·u_i/(2Δ) + Exp(1)``), which has the same output distribution
    (Ding, Kifer, Steinke, Wang & Xiao 2021). With ``monotone=True`` the scale
    is ``Δ/ε`` (acceptance probability ``exp(ε·(u_r − max u)/Δ)``), valid only
    if all scores move in the same direction between neighbours.

    ``-inf`` scores are never selected; NaN/``+inf`` scores and an all-``-inf``
    vector are refused. Returns the selected index (0-based).
    """
    rng = check_rng(rng)
    arr = as_score_vector(scores, allow_neg_inf=True)
    eps = check_positive_finite(epsilon, "epsilon")
    sens = check_positive_finite(sensitivity, "sensitivity")
    mono = _check_bool(monotone, "monotone")
    return _exponential_argmax(_log_weights(arr, eps, sens, mono), rng)
