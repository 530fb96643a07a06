"""The contribution-bounding baseline of Private Count Release ("Plume"-style,
Rogers 2024, Section 4; ALGORITHMS.md 5.3): its mechanism half, numpy only.

The Spark stage keeps, per person, at most m distinct items (a salted-hash,
uniformly random-looking choice), so the per-item count vector has L2
sensitivity sqrt(m) and L-infinity sensitivity 1. With budget (ρ, δ) split by α:

1. Partition selection by Gaussian thresholding (α·ρ, all of δ): every item
   present in the bounded data gets count + N(0, σ_s²), σ_s = sqrt(m/(2αρ)),
   and is kept if that exceeds τ = 1 + σ_s·Φ⁻¹(1 − δ/m). Drawn inside Spark
   by :func:`gaussian_threshold_select`, keyed by the item
   (:mod:`.keyed`), so a re-evaluated or retried task selects the same items.
   δ-approximate (αρ)-zCDP: the noisy vector over both neighbours' items is a
   Gaussian mechanism (ρ = m/(2σ_s²)); the added person's at most m new items
   (count 1) clear τ with probability at most m·P[N(0, σ_s²) > τ − 1] = δ,
   and on the complement both outputs are post-processings of it.
2. Counts of the selected items ((1 − α)·ρ): the data restricted to them is
   bounded again to m items per person and each selected item's count (0 if
   no kept row holds it) gets exact N_Z(0, σ_c²), σ_c = sqrt(m/(2(1−α)ρ)):
   ((1 − α)ρ)-zCDP. Drawn inside Spark too (:func:`keyed_noisy_counts`), so
   the driver only receives the released (item, noisy count) rows.
3. Optional threshold (post-processing): drop noisy counts below
   T = (2 + r)·σ_c / r, so that (h~ + σ)/(h~ − σ) <= 1 + r for the rest.

Total: δ-approximate ρ-zCDP (composition, Bun–Steinke 2016). Unlike the seed,
both boundings use the same m (the seed's percentile m' on the restricted
data is not private); step 2 uses sensitivity sqrt(m), as the seed does. The
selection's floating-point noise (Φ⁻¹ of a 53-bit keyed uniform) gives each
item the idealised keep probability up to 2⁻⁵³.
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
        """The records of the two keyed draws made inside Spark ("selection",
        "counts"; ``draws`` None: not public), on counts of ℓ2 sensitivity sqrt(m)."""
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
    """Calibrate the baseline: σ_s, τ, σ_c and T (module docstring).

    ρ > 0, δ in (0, 1), m >= 1 whole, α in (0, 1), r > 0; ParameterError
    otherwise. m/(2σ_s²) <= αρ and m/(2σ_c²) <= ρ − αρ exactly (σ rounded
    up, shares rounded down, summing to at most ρ).
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
    """Step 1 for one batch of distinct (string or integer) items, inside
    Spark: the mask ``counts + N(0, sigma²) > threshold``, each draw keyed by
    (``key``, item, :data:`SELECTION_STREAM`), so one per item whatever the batching."""
    items, counts = _items_and_counts(items, counts)
    noise = float(sigma) * keyed_normals(items, key, SELECTION_STREAM)
    return counts.astype(np.float64) + noise > float(threshold)


def keyed_noisy_counts(items, counts, *, sigma: float, key: tuple[int, ...]) -> np.ndarray:
    """Step 2 for one batch of items, inside Spark: int64 ``counts`` plus
    exact N_Z(0, sigma²) (Canonne–Kamath–Steinke 2020) from a generator keyed
    by (``key``, item, :data:`COUNT_STREAM`); (m/(2σ²))-zCDP for a count
    vector of L2 sensitivity sqrt(m)."""
    items, counts = _items_and_counts(items, counts)
    counts = counts.astype(np.int64)
    noise = np.fromiter((discrete_gaussian(sigma, item_generator(x, key, COUNT_STREAM)) for x in items),
                        dtype=np.int64, count=len(items))
    return counts + noise


def selection_probability(count: float, sigma: float, threshold: float) -> float:
    """P[count + N(0, σ²) > τ] (public formula, for tests and error statements)."""
    from scipy.special import ndtr  # lazy: Spark workers load this; +130-370 ms a worker

    return float(ndtr((count - threshold) / sigma))
