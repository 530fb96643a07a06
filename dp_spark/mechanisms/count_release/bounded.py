"""The contribution-bounding baseline of Private Count Release ("Plume"-style,
Rogers 2024, Section 4; ALGORITHMS.md 5.3): its mechanism half, numpy only.

The Spark stage keeps, per person, at most m distinct items (a salted-hash,
uniformly random-looking choice), so the vector of per-item counts has L2
sensitivity sqrt(m) and L-infinity sensitivity 1. Then, with budget (ρ, δ)
split by α:

1. Partition selection by Gaussian thresholding (share α·ρ, all of δ): every
   item present in the bounded data gets count + N(0, σ_s²),
   σ_s = sqrt(m / (2αρ)), and is kept if that exceeds
   τ = 1 + σ_s·Φ⁻¹(1 − δ/m). The noise is drawn inside Spark (mapInPandas)
   by :func:`gaussian_threshold_select`, a pure function of the items, their
   counts and a secret key: each item's draw is keyed by the item itself
   (:mod:`dp_spark.mechanisms.count_release.keyed`), so it does not depend on partitioning and a
   re-evaluated or retried task selects the same items. Guarantee:
   δ-approximate (αρ)-zCDP — the noisy vector over the items of both
   neighbours is a Gaussian mechanism (ρ = m/(2σ_s²)); the added person's at
   most m new items (count 1, absent from the other data set) clear τ with
   probability at most m·P[N(0, σ_s²) > τ − 1] = δ, and on the complement
   the two outputs are post-processings of that Gaussian mechanism.
2. Counts of the selected items (share (1 − α)·ρ): the data restricted to the
   selected items is bounded again to m items per person and every selected
   item's count (0 if no kept row holds it) gets exact discrete Gaussian
   noise N_Z(0, σ_c²), σ_c = sqrt(m/(2(1−α)ρ)): ((1 − α)ρ)-zCDP. Drawn
   inside Spark too (:func:`keyed_noisy_counts`, one generator per item
   seeded by the item's keyed digest), so the driver only ever receives the
   released (item, noisy count) rows.
3. Optional threshold (post-processing): drop noisy counts below
   T = (2 + r)·σ_c / r, so that (h~ + σ)/(h~ − σ) <= 1 + r for the rest.

Total: δ-approximate ρ-zCDP (composition, Bun–Steinke 2016). Differences
from the seed: the same m is used for both boundings (the seed recomputes a
percentile m' on the restricted data, which is not private); sensitivity
sqrt(m) in step 2, as the seed does (conservative). The selection uses
floating-point Gaussian noise (Φ⁻¹ of a 53-bit keyed uniform: each item's
keep/drop probability is the idealised one up to 2⁻⁵³); the released counts
use the exact integer sampler.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dp_spark import checks
from dp_spark.accounting import ZCDP, float_down, float_up, remainder
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.count_release.keyed import item_generator, keyed_normals, noise_key
from dp_spark.noise import discrete_gaussian
from dp_spark.noise.records import NoiseDraw

__all__ = [
    "BoundedPlan",
    "bounded_plan",
    "noise_key",
    "gaussian_threshold_select",
    "keyed_noisy_counts",
    "selection_probability",
    "SELECTION_STREAM",
    "COUNT_STREAM",
]

#: Stream names of :mod:`dp_spark.mechanisms.count_release.keyed` (selection and count noise never share a draw).
SELECTION_STREAM = "pcr-bounded-sel"
COUNT_STREAM = "pcr-bounded-cnt"


@dataclass(frozen=True)
class BoundedPlan:
    """The public calibration of the bounded baseline (depends on parameters only)."""

    max_items: int
    rho: float
    delta: float
    alpha: float
    relative_error: float
    selection_sigma: float
    selection_threshold: float
    count_sigma: float
    count_threshold: float

    @property
    def selection_cost(self) -> ZCDP:
        """(αρ rounded down, δ): σ_s is calibrated so that m/(2σ_s²) is at most this ρ exactly."""
        return ZCDP(_selection_rho(self.alpha, self.rho), self.delta)

    @property
    def count_cost(self) -> ZCDP:
        """(ρ − selection ρ, rounded down; 0): the two parts sum to at most ρ exactly."""
        return ZCDP(remainder(self.rho, _selection_rho(self.alpha, self.rho)), 0.0)

    @property
    def noise(self) -> tuple[NoiseDraw, NoiseDraw]:
        """The records of the two keyed draws made inside Spark (steps
        "selection" and "counts"): N(0, σ_s²) per item of the bounded data and
        N_Z(0, σ_c²) per selected item (how many is not a public number:
        ``draws`` None), on counts of ℓ2 sensitivity sqrt(m)."""
        sensitivity = math.sqrt(self.max_items)
        return (
            NoiseDraw("selection", "gaussian", scale=self.selection_sigma, std=self.selection_sigma,
                      sensitivity=sensitivity, draws=None,
                      target=f"each item's count bounded to {self.max_items} items per person (partition selection)",
                      parameters={"norm": 2}),
            NoiseDraw("counts", "discrete-gaussian", scale=self.count_sigma, std=self.count_sigma,
                      sensitivity=sensitivity, draws=None,
                      target=f"each selected item's count bounded to {self.max_items} items per person",
                      parameters={"norm": 2}),
        )


def _selection_rho(alpha: float, rho: float) -> float:
    return float_down(Fraction(alpha) * Fraction(rho))


def gaussian_sigma_for(l2_squared: int, rho: float) -> float:
    """The smallest float σ with Δ₂²/(2σ²) <= ρ exactly (Δ₂² = ``l2_squared``):
    the noise scale for ρ-zCDP, rounded up, never down."""
    sigma = math.sqrt(l2_squared / (2.0 * rho))
    while 2 * Fraction(sigma) ** 2 * Fraction(rho) < l2_squared:
        sigma = math.nextafter(sigma, math.inf)
    return sigma


def bounded_plan(rho: float, delta: float, max_items: int, alpha: float = 0.5,
                 relative_error: float = 0.1) -> BoundedPlan:
    """Calibrate the baseline: σ_s, τ, σ_c and T (see the module docstring).

    ρ > 0, δ in (0, 1), m >= 1 whole, α in (0, 1), r > 0; ParameterError
    otherwise. ρ_selection = m/(2σ_s²) <= αρ and ρ_counts = m/(2σ_c²) <=
    ρ − αρ exactly on the floats (σ rounded up, shares rounded down; the two
    shares sum to at most ρ exactly).
    """
    rho = checks.positive(rho, "rho")
    delta = checks.open_unit(delta, "delta")
    m = checks.whole(max_items, "max_items")
    alpha = checks.open_unit(alpha, "alpha")
    relative_error = checks.positive(relative_error, "relative_error", " (e.g. 0.1 for 10%)")
    sigma_s = gaussian_sigma_for(m, _selection_rho(alpha, rho))
    from scipy.special import ndtri  # lazy: Spark workers load this; +130-370 ms a worker

    # Φ⁻¹(1 − δ/m), with a relative margin of 1e-12 above ndtri's float error
    tau = float_up(1 + Fraction(sigma_s) * Fraction(float(-ndtri(delta / m))) * (1 + Fraction(1, 10**12)))
    sigma_c = gaussian_sigma_for(m, remainder(rho, _selection_rho(alpha, rho)))
    return BoundedPlan(
        max_items=m,
        rho=rho,
        delta=delta,
        alpha=alpha,
        relative_error=relative_error,
        selection_sigma=sigma_s,
        selection_threshold=tau,
        count_sigma=sigma_c,
        count_threshold=(2.0 + relative_error) * sigma_c / relative_error,
    )


def _items_and_counts(items, counts):
    counts = np.asarray(counts)
    if counts.ndim != 1 or len(items) != counts.size:
        raise ParameterError("items and counts must be 1-D and of the same length")
    return items, counts


def gaussian_threshold_select(items, counts, *, sigma: float, threshold: float,
                              key: tuple[int, ...]) -> np.ndarray:
    """Step 1 for one batch of items (run inside Spark, in mapInPandas):
    the boolean mask ``counts + N(0, sigma²) > threshold``, where each
    item's Gaussian draw is keyed by (``key``, the item)
    (:func:`dp_spark.mechanisms.count_release.keyed.keyed_normals`, stream
    :data:`SELECTION_STREAM`): one draw per item whatever the batching.
    ``items``: distinct strings or integers. Pure numpy."""
    items, counts = _items_and_counts(items, counts)
    noise = float(sigma) * keyed_normals(items, key, SELECTION_STREAM)
    return counts.astype(np.float64) + noise > float(threshold)


def keyed_noisy_counts(items, counts, *, sigma: float, key: tuple[int, ...]) -> np.ndarray:
    """Step 2 for one batch of items (run inside Spark, in mapInPandas):
    int64 ``counts`` plus exact discrete Gaussian noise N_Z(0, sigma²)
    (Canonne–Kamath–Steinke 2020), each item's draw from its own generator
    keyed by (``key``, the item) (:func:`dp_spark.mechanisms.count_release.keyed.item_generator`,
    stream :data:`COUNT_STREAM`), so one draw per item whatever the batching.
    (m/(2σ²))-zCDP for a count vector of L2 sensitivity sqrt(m)."""
    items, counts = _items_and_counts(items, counts)
    counts = counts.astype(np.int64)
    noise = np.fromiter((discrete_gaussian(sigma, item_generator(x, key, COUNT_STREAM)) for x in items),
                        dtype=np.int64, count=len(items))
    return counts + noise


def selection_probability(count: float, sigma: float, threshold: float) -> float:
    """P[count + N(0, σ²) > τ] (public formula, for tests and error statements)."""
    from scipy.special import ndtr  # lazy: Spark workers load this; +130-370 ms a worker

    return float(ndtr((count - threshold) / sigma))
