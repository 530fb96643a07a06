"""Top-k mechanism choice: ``method="auto"`` (driver side, numpy only).

No single top-k mechanism is best everywhere. Gillenwater et al. (ICML 2022,
Section 4) find that the joint exponential mechanism wins where the gaps
between the top counts are large, while CDP-Peel (an (ε, δ) method) wins for
large k on flat count profiles; measured on MovieLens 100K and Amazon Fashion
words (benchmarks/topk_accuracy.py) joint's ℓ∞ error jumps to a plateau of
"random items" once k is past a data-dependent point, where CDP-Peel's error
grows smoothly. The choice therefore needs the data, and this module makes it
privately:

* δ = 0 (pure ε-DP only): ``joint`` with the whole budget, decided from public
  parameters alone. Among the pure mechanisms joint matches or beats PNF-Peel
  (paper Section 4; measured), and PNF-Joint's error equals joint's within
  noise, so no data is needed and nothing is spent on the choice.
* δ > 0: a share ``share`` of ε (default 5%) buys noisy counts at three ranks
  of the sorted histogram (1, k, 4k; :func:`noisy_rank_counts`, Laplace, pure
  ε₀-DP), a log-log interpolation of them is a synthetic count profile, and
  the median ℓ∞ error of ``joint`` (exact, from its group log-weights) and of
  ``cdp-peel`` (simulated) at the remaining ε − ε₀ is predicted on that
  profile (:func:`predict_errors`). Everything after the noisy counts is
  post-processing. The chosen mechanism then runs with (ε − ε₀, δ); basic
  composition gives (ε, δ)-DP whichever is chosen (δ is charged even when
  joint is chosen: the choice is not known before the data is read).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from dp_spark.errors import ParameterError
from dp_spark.mechanisms.top_k._common import _as_counts, _check_delta, _check_int, _check_positive, _check_rng
from dp_spark.mechanisms.top_k.joint import _TAIL_MARGIN, _joint_entry_blocks, _joint_prepare, joint_top_k
from dp_spark.mechanisms.top_k.peeling import cdp_peel_top_k

__all__ = ["AUTO_SHARE", "AutoChoice", "auto_anchor_ranks", "auto_share", "choose_mechanism",
           "noisy_rank_counts", "predict_errors", "synthetic_profile"]

AUTO_SHARE = 0.05
# joint is kept unless CDP-Peel's predicted error is below this share of
# joint's: the noisy profile is coarse, and joint's error at small k is the
# one the choice must not spoil (measured on the two benchmark data sets)
PREFER_JOINT = 1.0 / 0.6
_SIMULATIONS = 15
_MAX_PROFILE = 200_000


@dataclass(frozen=True)
class AutoChoice:
    """What ``auto`` decided. ``epsilon_choice`` was spent on the noisy rank
    counts (0 when the choice needed no data); ``epsilon_selection`` is left
    for the chosen mechanism. ``predicted`` holds the predicted median ℓ∞
    errors (DP: post-processing of the noisy rank counts)."""

    mechanism: str
    epsilon_choice: float
    epsilon_selection: float
    predicted: dict


def auto_share(k: int, epsilon: float, delta: float, domain_size: int | None = None) -> float:
    """The share of ε that ``auto`` spends on its private choice, from public
    parameters only (0 when the choice needs no data). The plan charges it
    as its own step whatever the choice turns out to be."""
    return 0.0 if float(delta) == 0.0 else AUTO_SHARE


def auto_anchor_ranks(k: int, d: int) -> np.ndarray:
    """The public ranks (1-based) whose counts the choice estimates: 1, k, 4k (≤ d)."""
    return np.array(sorted({r for r in (1, k, 4 * k) if r <= d}), dtype=np.int64)


def noisy_rank_counts(counts: ArrayLike, ranks: np.ndarray, epsilon: float,
                      rng: np.random.Generator) -> np.ndarray:
    """ε-DP noisy values of the sorted counts c_(r) at the given public ranks.

    Adding or removing one person moves every count by at most 1 in the same
    direction, so every order statistic c_(r) moves by at most 1, and the
    vector of m of them by at most m in ℓ1. Laplace noise of scale m/ε on
    each is the Laplace mechanism: ε-DP.
    """
    c = _as_counts(counts, integral=False)
    eps = _check_positive(epsilon, "epsilon")
    rng = _check_rng(rng)
    m = len(ranks)
    top = np.sort(c)[::-1]
    return top[np.asarray(ranks) - 1] + rng.laplace(scale=m / eps, size=m)


def synthetic_profile(ranks: np.ndarray, values: np.ndarray, d: int) -> np.ndarray:
    """Sorted integer counts of length min(d, 200 000) through the (rank, value)
    points, interpolated in log count against log rank (count data are close
    to power laws), falling to 0 at rank d + 1. Post-processing only."""
    vals = np.maximum(np.minimum.accumulate(np.asarray(values, dtype=np.float64)), 0.5)
    xs = np.log(np.r_[np.asarray(ranks, dtype=np.float64), d + 1.0])
    ys = np.log(np.r_[vals, 0.5])
    r = np.arange(1, min(d, _MAX_PROFILE) + 1, dtype=np.float64)
    return np.round(np.exp(np.interp(np.log(r), xs, ys))).astype(np.int64)


def _joint_median(profile: np.ndarray, k: int, epsilon: float) -> float:
    """Median ℓ∞ error of joint on ``profile`` (every sequence of an entry group
    has ℓ∞ error = the group's floor difference), from its exact group
    log-weights; the sweep stops where joint's own sampler stops (the rest
    weighs at most e^-40 of the total), so this costs what joint costs."""
    prep = _joint_prepare(np.asarray(profile, dtype=np.int64), k)
    coef = epsilon / 2.0
    log_sequences = math.lgamma(prep.d + 1) - math.lgamma(prep.d - k + 1)
    errs, logws, head_max = [], [], -np.inf
    for _, _, floor_diff, log_count in _joint_entry_blocks(prep):
        logw = log_count - coef * floor_diff.astype(np.float64)
        keep = np.isfinite(logw)
        errs.append(floor_diff[keep])
        logws.append(logw[keep])
        head_max = max(head_max, float(np.max(logw)))
        if log_sequences - coef * float(floor_diff[-1]) < head_max - _TAIL_MARGIN:
            break
    err, logw = np.concatenate(errs), np.concatenate(logws)
    p = np.exp(logw - np.max(logw))
    order = np.argsort(err, kind="stable")
    cdf = np.cumsum(p[order]) / np.sum(p)
    return float(err[order][min(int(np.searchsorted(cdf, 0.5)), len(order) - 1)])


def predict_errors(profile: np.ndarray, k: int, epsilon: float, delta: float,
                   rng: np.random.Generator) -> dict:
    """Predicted median ℓ∞ errors of joint and cdp-peel on a (public, synthetic)
    sorted profile at (epsilon, delta)."""
    k = min(k, len(profile))
    errs = []
    for _ in range(_SIMULATIONS):
        chosen = cdp_peel_top_k(profile, k, epsilon, delta, rng)
        errs.append(float(np.max(profile[:k] - profile[chosen])))
    return {"joint": _joint_median(profile, k, epsilon), "cdp-peel": float(np.median(errs))}


def choose_mechanism(counts: ArrayLike, k: int, epsilon: float, delta: float,
                     rng: np.random.Generator, share: float = AUTO_SHARE) -> AutoChoice:
    """Choose the top-k mechanism for ``auto`` (see the module docstring).

    Releases only the choice (and the predicted errors), under ε₀-DP with
    ε₀ = share·ε when δ > 0 (Laplace on three order statistics), and under
    0-DP (public parameters only) when δ = 0. The caller must run the chosen
    mechanism with ``epsilon_selection`` and ``delta``.
    """
    eps = _check_positive(epsilon, "epsilon")
    dlt = _check_delta(delta, allow_zero=True)
    if not (0.0 < float(share) < 0.5):
        raise ParameterError("share must lie in (0, 0.5); it is the part of ε spent on the choice")
    c = _as_counts(counts, integral=True)
    k = _check_int(k, "k", 1, c.shape[0], " (the number of items in counts)")
    if dlt == 0.0:
        return AutoChoice("joint", 0.0, eps, {})
    eps0 = eps * float(share)
    d = c.shape[0]
    ranks = auto_anchor_ranks(k, d)
    noisy = noisy_rank_counts(c, ranks, eps0, rng)
    del c  # non-private: nothing below may use it
    profile = synthetic_profile(ranks, noisy, d)
    predicted = predict_errors(profile, k, eps - eps0, dlt, rng)
    predicted["top_count"] = float(noisy[0])  # rank 1 is always the first anchor
    pick = "cdp-peel" if predicted["cdp-peel"] * PREFER_JOINT < predicted["joint"] else "joint"
    return AutoChoice(pick, eps0, eps - eps0, predicted)


def auto_top_k(counts: ArrayLike, k: int, epsilon: float, delta: float,
               rng: np.random.Generator, share: float = AUTO_SHARE) -> tuple[np.ndarray, AutoChoice]:
    """(ε, δ)-DP top-k (ε-DP when δ = 0) with the mechanism chosen by
    :func:`choose_mechanism`: ε₀ on the choice, ε − ε₀ (and δ) on the
    selection, basic composition. Returns (indices in rank order, choice)."""
    choice = choose_mechanism(counts, k, epsilon, delta, rng, share)
    if choice.mechanism == "joint":
        return joint_top_k(counts, k, choice.epsilon_selection, rng), choice
    return cdp_peel_top_k(counts, k, choice.epsilon_selection, delta, rng), choice

