"""Per-group releases: the private choice of the group cap m and the
per-group noise scales for a cap m. Pure numpy.

Input of :func:`choose_max_groups`: the NON-PRIVATE histogram of groups per
person from :func:`dp_spark.stages.groups.groups_per_person_histogram`,
``h[j-1] = #{p : c_p = j}``, ``c_p = min(|G_p|, M)``, M = ``len(h)`` public.
Neighbouring relation: add/remove one person, i.e. one entry of ``h`` moves
by ±1. Both methods release one m in 1..M under pure ε-DP (``epsilon``, M and
the parameters chosen independently of the data):

- ``"gem"`` (default): GEM (:func:`dp_spark.mechanisms.distinct_count.gem.generalized_exponential`)
  over ``q_m = Σ_p min(c_p, m)`` (the rows a cap m keeps) with sensitivities
  ``Δ_m = m``: adding person y adds ``min(c_y, m)`` ∈ [0, m] to ``q_m`` and
  changes nothing else. With probability ≥ 1 − β it picks an m with
  ``q_m ≥ max_j (q_j − (4j/ε)·ln(M/β))``.
- ``"quantile"``: the exponential mechanism for the ``q``-quantile of c_p,
  ``u(m) = −|(1 − q)·L(m) − q·R(m)|``, ``L(m) = #{p : c_p ≤ m}``,
  ``R(m) = #{p : c_p > m}``: adding y raises L(m) or R(m) by 1, moving the
  inner term by 1 − q or −q, so ``|Δu(m)| ≤ max(q, 1 − q)``. The scores are
  computed exactly and rounded down onto multiples of 2^-20, which adds one
  grid step: Δ = max(q, 1 − q) + 2^-20 (rounded up), and
  ``Pr[m] ∝ exp(ε·u(m)/(2Δ))``, sampled exactly, is ε-DP.

:func:`group_noise_scale` and :func:`group_selection_epsilon`: the budget
arithmetic for a release capped at m groups per person with per-group
sensitivity ℓ (ALGORITHMS.md §8): the vector over groups has ℓ1 ≤ m·ℓ and
ℓ2 ≤ √m·ℓ, so pure ε gives every group Laplace scale m·ℓ/ε and ρ-zCDP a
Gaussian σ = √m·ℓ/√(2ρ). m = 1 is parallel composition: the full budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike

from dp_spark import checks
from dp_spark.settings.groups import MAX_GROUPS_LIMIT
from dp_spark.accounting.exact import exact, float_up, ratio_up, share_down, sqrt_down, sqrt_up
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.distinct_count.gem import generalized_exponential
from dp_spark.mechanisms.exponential import exponential_mechanism
from dp_spark.noise.records import NoiseDraw

__all__ = [
    "GroupScale",
    "MAX_GROUPS_METHODS",
    "cap_record",
    "choose_max_groups",
    "gem_utilities",
    "group_noise_scale",
    "group_selection_epsilon",
    "quantile_scores",
    "quantile_sensitivity",
]

MAX_GROUPS_METHODS = ("gem", "quantile")


def _histogram(histogram: ArrayLike) -> np.ndarray:
    """``histogram`` as int64 counts, refused (never quoted) unless a 1-D
    sequence of M ≥ 1 non-negative whole numbers, M ≤ :data:`MAX_GROUPS_LIMIT`."""
    try:
        arr = np.asarray(histogram)
    except (TypeError, ValueError):
        raise ParameterError("histogram must be a 1-D sequence of whole numbers") from None
    if arr.ndim != 1 or not 1 <= arr.size <= MAX_GROUPS_LIMIT:
        raise ParameterError(f"histogram must be one-dimensional with 1 to {MAX_GROUPS_LIMIT:,} entries "
                             "(one per count of groups 1..M)")
    if arr.dtype.kind not in "iu" and not (arr.dtype.kind == "f" and np.all(np.isfinite(arr))
                                           and np.all(arr == np.round(arr))):
        raise ParameterError("histogram entries must be whole numbers")
    out = arr.astype(np.int64)
    if (out < 0).any():
        raise ParameterError("histogram entries must be >= 0")
    return out


def gem_utilities(histogram: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """NON-PRIVATE: (q, Δ) for m = 1..M, ``q_m = Σ_j h_j·min(j, m)`` and
    ``Δ_m = m`` (module docstring: adding a person moves q_m by min(c_y, m))."""
    h = _histogram(histogram)
    levels = np.arange(1, h.size + 1, dtype=np.float64)
    # Σ_j h_j min(j, m) = Σ_{j ≤ m} j·h_j + m·Σ_{j > m} h_j
    below = np.cumsum(levels * h)
    above = h.sum() - np.cumsum(h)
    return below + levels * above, levels.copy()


#: The quantile scores are rounded down onto multiples of 2^-QUANTILE_GRID_BITS.
QUANTILE_GRID_BITS = 20
#: |L(m) − q·N| is clipped here (in grid units: 2^32 persons), so every score is an exact double.
_QUANTILE_CLIP = 2**52


def quantile_sensitivity(quantile: float) -> float:
    """Δ = max(q, 1 − q) + 2^-20, rounded up: the sensitivity of :func:`quantile_scores` (the
    exact scores move by at most max(q, 1 − q); rounding them down onto the 2^-20 grid adds at
    most one grid step)."""
    q = exact(checks.open_unit(quantile, "quantile"))
    return float_up(max(q, 1 - q) + Fraction(1, 2**QUANTILE_GRID_BITS))


def quantile_scores(histogram: ArrayLike, quantile: float) -> np.ndarray:
    """NON-PRIVATE: ``u(m) = −|(1 − q)·L(m) − q·R(m)| = −|L(m) − q·N|`` for m = 1..M, with L(m)
    the persons with c_p ≤ m, R(m) those with c_p > m and N = L + R, computed exactly from the
    double q and rounded down onto multiples of 2^-20 (|L − qN| clipped at 2^32, 1-Lipschitz:
    every score is an exact double); each moves by at most :func:`quantile_sensitivity` on
    add/remove of one person."""
    h = _histogram(histogram)
    q = exact(checks.open_unit(quantile, "quantile"))
    persons = int(h.sum())
    target = q * persons * 2**QUANTILE_GRID_BITS  # q·N in grid units, exactly
    lo, hi = math.floor(target), math.ceil(target)
    at_most = np.cumsum(h)
    if persons >= 2**40:  # L·2^20 or the target would leave int64: the same arithmetic on Python ints
        at_most = at_most.astype(object)
    scaled = at_most << QUANTILE_GRID_BITS
    gap = np.where(scaled >= hi, scaled - lo, hi - scaled)  # ⌈|L·2^20 − target|⌉
    gap = np.minimum(gap, _QUANTILE_CLIP).astype(np.int64)
    return -gap.astype(np.float64) / 2**QUANTILE_GRID_BITS


def choose_max_groups(histogram: ArrayLike, epsilon: float, rng: np.random.Generator, *, method: str = "gem",
                      beta: float = 0.05, quantile: float = 0.9) -> int:
    """Release a group cap m in 1..M (M = ``len(histogram)``) under pure
    ε-DP, add/remove one person (module docstring): ``method="gem"`` with
    failure probability ``beta``, or ``"quantile"`` for the ``quantile`` of
    c_p. Messages never quote the histogram."""
    eps = checks.positive(epsilon, "epsilon")  # a share: see _budget
    rng = checks.rng(rng)
    checks.choice(method, "method", MAX_GROUPS_METHODS)
    if method == "gem":
        beta = checks.open_unit(beta, "beta")
        scores, sensitivities = gem_utilities(histogram)
        return 1 + generalized_exponential(scores, sensitivities, eps, beta, rng)
    scores = quantile_scores(histogram, quantile)
    return 1 + exponential_mechanism(scores, eps, quantile_sensitivity(quantile), rng)


def cap_record(top: int, epsilon: float, beta: float) -> NoiseDraw:
    """The record of :func:`choose_max_groups`' GEM choice of m in 1..``top``
    (scale 2/ε; ε-bounded range, so ε²/8-zCDP), step ``max_groups``."""
    return NoiseDraw("max_groups", "gem", scale=2.0 / epsilon, std=None, sensitivity=1.0,
                     target=f"the group cap m in 1..{top} (scores: rows kept, sensitivity m)",
                     parameters={"beta": beta, "bounded_range": True})


@dataclass(frozen=True)
class GroupScale:
    """The noise of each group's statistic at a cap of m = ``max_groups`` and
    per-group sensitivity ℓ = ``bound``: ``model`` "pure", (discrete) Laplace
    ``scale`` = m·ℓ/ε, ℓ1 ``sensitivity`` m·ℓ, ε-DP over all groups; "zcdp",
    (discrete) Gaussian σ = √m·ℓ/√(2ρ), ℓ2 √m·ℓ, ρ-zCDP. Rounded up."""

    max_groups: int
    bound: float
    model: str
    sensitivity: float
    scale: float


def _budget(epsilon, rho) -> tuple[str, float]:
    if (epsilon is None) == (rho is None):
        raise ParameterError("give exactly one of epsilon (pure ε-DP) or rho (ρ-zCDP)")
    # a share may lie below the plan's range for ε / ρ: it must not be refused after spending
    return ("pure", checks.positive(epsilon, "epsilon")) if epsilon is not None else ("zcdp", checks.positive(rho, "rho"))


def group_noise_scale(max_groups: int, bound: float, *, epsilon: float | None = None,
                      rho: float | None = None) -> GroupScale:
    """:class:`GroupScale` for m = ``max_groups``, ℓ = ``bound`` and the
    noisy step's budget (``epsilon``: pure; ``rho``: zCDP)."""
    m = checks.integer(max_groups, "max_groups", 1, MAX_GROUPS_LIMIT)
    ell = checks.positive(bound, "bound")
    model, value = _budget(epsilon, rho)
    if model == "pure":  # b = m·ℓ/ε in exact arithmetic, rounded up
        sensitivity = exact(m) * exact(ell)
        return GroupScale(m, ell, model, float_up(sensitivity), ratio_up(sensitivity, value))
    # σ = sqrt(m·ℓ² / (2ρ)), rounded up; the ℓ2 sensitivity √m·ℓ is shown rounded up too
    variance = exact(m) * exact(ell) ** 2 / (2 * exact(value))
    return GroupScale(m, ell, model, sqrt_up(exact(m) * exact(ell) ** 2), sqrt_up(variance))


def group_selection_epsilon(max_groups: int, *, epsilon: float | None = None, rho: float | None = None) -> float:
    """The ε of each per-group selection when a person touches at most m
    groups: ε/m under pure ε (basic composition), √(8ρ/m) under ρ-zCDP (an
    ε_g-DP exponential mechanism is ε_g²/8-zCDP). Rounded down."""
    m = checks.integer(max_groups, "max_groups", 1, MAX_GROUPS_LIMIT)
    model, value = _budget(epsilon, rho)
    if model == "pure":
        return share_down(value, m)
    return sqrt_down(8 * exact(value) / m)
