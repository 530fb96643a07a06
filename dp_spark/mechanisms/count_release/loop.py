"""Private Count Release (Rogers, arXiv 2403.05073, Algorithm 2), numpy only.

Releases as many item counts as the budget allows, each with its own σ,
without a per-person contribution bound. Input: the k̄ largest per-item counts
of distinct persons and the (k̄+1)-th (the Spark stage's bounded summary). Each
count has sensitivity 1 and a person may touch every count (ALGORITHMS.md 5.2).

The loop (a privacy filter over δ-approximate zCDP, Whitehouse, Ramdas,
Rogers and Wu, "Fully-Adaptive Composition in Differential Privacy", ICML
2023; paper Theorem 5)::

    ε = ε*; while ρ_spent + ε²/4 <= ρ and δ_spent + δ* <= δ (exactly, no slack):
        s = Unknown Domain Gumbel top-1 (β = 1/ε, T = 1 + ln(k̄_t/δ*)/ε)  # δ*-approx ε²/8-zCDP
        if s is ⊥: ε = √2·ε
        else: σ = max(σ_r(ε), 2/ε); release h[s] + N_Z(0, σ²); remove s   # 1/(2σ²) <= ε²/8 zCDP

Each step's cost is fixed by earlier outputs, and a step runs only if its
largest cost (ε²/8 + ε²/8) still fits, so the total never exceeds (ρ, δ): the
release is δ-approximate ρ-zCDP (paper Theorem 6), hence
(ρ + 2·sqrt(ρ·ln(1/δ')), δ + δ')-DP for any δ' > 0 (not the seed's typo 2·sqrt(2 ln(1/δ'))).

Differences from the paper:

* k̄_t = k̄ − r after r releases (the paper keeps k̄ and needs the top k̄+1+r
  counts). We collect the top k̄+1 once and run Theorem 4's mechanism with
  k̄_t (threshold T_t = 1 + ln(k̄_t/δ*)/ε) on h_t = h minus the r released
  items. That is exactly the mechanism on h_t: every released item was in the
  collected top k̄, so the top k̄_t of h_t are the collected items still alive,
  and its (k̄_t + 1)-th count is still ``next_count`` = c_(k̄+1) of h. Removing
  released items is post-processing, and one person still moves every count
  of h_t by at most 1 in the same direction, so Theorem 4 applies to each
  call: an item in the top k̄_t of one neighbour only has count at most the
  (k̄_t + 1)-th + 1, so clears the noisy threshold with probability at most
  e^{−ε(T_t − 1)} = δ*/k̄_t, and there are at most k̄_t such items
  (:func:`dp_spark.mechanisms.top_k.unknown_domain_gumbel`). The loop stops
  after k̄ releases.
* σ_r(ε) = (r/a)·T with a = ``accuracy_factor`` (1.5 in the paper): formula
  (2) with the k̄_t used. A count of at least T is within relative error r
  with probability about 2Φ(a) − 1 (87%) when σ = σ_r, less when the floor
  2/ε binds; :func:`within_relative_error_probability` gives each released
  count's exact lower bound, and the release reports it.
* Counts are integers, so the noise is the exact discrete Gaussian N_Z(0, σ²)
  (Canonne–Kamath–Steinke 2020; the paper's is continuous):
  (1/(2σ²))-zCDP for sensitivity 1, standard deviation at most σ.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike

from dp_spark import checks
from dp_spark.accounting import ZCDP, PrivacyFilter, bounded_range_to_zcdp, gaussian_zcdp
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.top_k.unknown_domain import unknown_domain_gumbel, unknown_domain_threshold
from dp_spark.noise import discrete_gaussian
from dp_spark.noise.records import NoiseDraw
from dp_spark.noise.rng import check_rng

__all__ = [
    "EPSILON_MIN",
    "DELTA_MIN",
    "ACCURACY_FACTOR",
    "ReleasedCount",
    "PCRResult",
    "pcr_sigma",
    "within_relative_error_probability",
    "private_count_release",
    "check_pcr_parameters",
]

#: The budget-split steps the loop's noise records are charged to (the release's split labels).
SELECTION_STEP = "selection"
COUNT_STEP = "counts"

#: The paper's ε*, δ* and the constant of formula (2).
EPSILON_MIN = 0.0005
DELTA_MIN = 1e-11
ACCURACY_FACTOR = 1.5

STOP_RHO = "rho"
STOP_DELTA = "delta"
STOP_KBAR = "kbar"


@dataclass(frozen=True)
class ReleasedCount:
    """One released count: ``index`` into ``top_counts``, the noisy
    ``count``, its noise ``sigma`` (std at most σ), the ``epsilon`` and the
    ``threshold`` T_t of the selection that found it (public), and the
    1-based loop ``round``."""

    index: int
    count: int
    sigma: float
    epsilon: float
    round: int
    threshold: float


@dataclass
class PCRResult:
    """What Private Count Release outputs: functions of the noisy outputs and
    public parameters only. ``noise``: the records of its draws in order
    (selections: :data:`SELECTION_STEP`; counts: :data:`COUNT_STEP`)."""

    released: list[ReleasedCount]
    spent: ZCDP
    selection_spent: ZCDP
    count_spent: ZCDP
    selection_calls: int
    bottoms: int
    final_epsilon: float
    stopped: str
    ledger: PrivacyFilter = field(repr=False)
    noise: tuple = ()


def check_pcr_parameters(rho, delta, relative_error, kbar, epsilon_min=EPSILON_MIN,
                         delta_min=DELTA_MIN, accuracy_factor=ACCURACY_FACTOR):
    """Validate Algorithm 2's parameters (raises ParameterError naming what to
    change); returns them as floats / int."""
    rho = checks.positive(rho, "rho")
    delta = checks.open_unit(delta, "delta")
    relative_error = checks.positive(relative_error, "relative_error", " (e.g. 0.1 for 10%)")
    kbar = checks.whole(kbar, "kbar")
    epsilon_min = checks.positive(epsilon_min, "epsilon_min")
    delta_min = checks.open_unit(delta_min, "delta_min")
    accuracy_factor = checks.positive(accuracy_factor, "accuracy_factor")
    if rho < epsilon_min**2 / 4:
        raise ParameterError(
            f"rho={rho!r} is below epsilon_min²/4 = {epsilon_min**2 / 4!r}: not even one round "
            "fits; raise rho or lower epsilon_min."
        )
    if delta < delta_min:
        raise ParameterError(
            f"delta={delta!r} is below delta_min={delta_min!r}: not even one round fits; "
            "raise delta or lower delta_min."
        )
    return rho, delta, relative_error, kbar, epsilon_min, delta_min, accuracy_factor


def pcr_sigma(epsilon: float, relative_error: float, kbar: int, delta_min: float,
              accuracy_factor: float = ACCURACY_FACTOR) -> float:
    """σ = max(σ_r(ε), 2/ε), σ_r(ε) = (r/a)·(1 + ln(k̄/δ*)/ε) (paper formula
    (2)); the floor 2/ε keeps the count's cost 1/(2σ²) at most ε²/8."""
    threshold = unknown_domain_threshold(epsilon, delta_min, kbar)
    sigma = max(relative_error / accuracy_factor * threshold, 2.0 / epsilon)
    # 2/ε rounded to nearest may be below 2/ε: round σ up until, exactly on
    # the floats, 1/(2σ²) <= ε²/8, i.e. σ²·ε² >= 4
    while (Fraction(sigma) * Fraction(epsilon)) ** 2 < 4:
        sigma = math.nextafter(sigma, math.inf)
    return sigma


def within_relative_error_probability(sigma: float, relative_error: float, count: float) -> float:
    """A lower bound on P[|Z| <= r·c] for Z ~ N_Z(0, σ²) (discrete Gaussian):
    the probability that a count c released with noise of parameter σ is
    within relative error r of c. Returns 2Φ(⌊r·c⌋/σ) − 1.

    Proof: Z is an integer, so |Z| <= r·c iff |Z| <= m = ⌊r·c⌋. With
    f(x) = exp(−x²/(2σ²)), Poisson summation gives Σ_k f(k) = √(2π)·σ·θ with
    θ = Σ_n exp(−2π²σ²n²) >= 1, and since f decreases on [m, ∞),
    Σ_{k>m} f(k) <= ∫_m^∞ f = σ·√(π/2)·erfc(m/(σ√2)). So
    P[|Z| > m] <= 2σ√(π/2)·erfc(m/(σ√2)) / (√(2π)σ) = 2(1 − Φ(m/σ)).
    Increasing in c: for c at least a threshold T, ``count=T`` bounds it."""
    from scipy.special import ndtr  # lazy: Spark workers load this; +130-370 ms a worker

    sigma = float(sigma)
    if not sigma > 0 or not math.isfinite(sigma):
        raise ParameterError("sigma must be a finite number > 0")
    if not float(relative_error) >= 0 or not float(count) >= 0:
        raise ParameterError("relative_error and count must be >= 0")
    m = math.floor(float(relative_error) * float(count))
    return max(0.0, 2.0 * float(ndtr(m / sigma)) - 1.0)


def _as_top_counts(top_counts, next_count, kbar):
    arr = np.asarray(top_counts)
    if arr.ndim != 1 or arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        if arr.ndim == 1 and arr.size == 0:
            arr = arr.astype(np.int64)
        else:
            raise ParameterError("top_counts must be a 1-D array of whole-number counts")
    arr = arr.astype(np.int64)
    if np.any(arr < 0):
        raise ParameterError("top_counts must be non-negative (numbers of distinct persons)")
    if arr.size > kbar:
        raise ParameterError("top_counts holds more than kbar counts; pass the kbar largest")
    if isinstance(next_count, bool) or not isinstance(next_count, numbers.Integral) or next_count < 0:
        raise ParameterError("next_count must be a whole number >= 0")
    if arr.size < kbar and next_count != 0:
        raise ParameterError("next_count must be 0 when fewer than kbar counts are passed")
    if arr.size and next_count > int(arr.min()):
        raise ParameterError("next_count must not exceed any of top_counts")
    return arr, int(next_count)


def private_count_release(
    top_counts: ArrayLike,
    next_count: int,
    rho: float,
    delta: float,
    relative_error: float,
    kbar: int,
    rng: np.random.Generator,
    *,
    epsilon_min: float = EPSILON_MIN,
    delta_min: float = DELTA_MIN,
    accuracy_factor: float = ACCURACY_FACTOR,
) -> PCRResult:
    """Private Count Release (Rogers 2024, Algorithm 2): δ-approximate ρ-zCDP.

    ``top_counts``: the k̄ largest per-item counts of distinct persons (fewer
    when there are fewer items, any order; NON-PRIVATE); ``next_count``: the
    (k̄+1)-th, 0 if none; ``rho``, ``delta``: the budget, never exceeded
    (paper Theorem 6); ``relative_error``: the target r; ``kbar``: k̄, also
    the most counts released; ``epsilon_min``, ``delta_min``: the paper's ε*
    (grown by √2 after every ⊥) and δ* (each selection's δ);
    ``accuracy_factor``: a in σ_r(ε) = (r/a)·T.

    Guarantee: δ-approximate ρ-zCDP, add/remove one person, when every count
    is a number of distinct persons (sensitivity 1). Returns a :class:`PCRResult`.
    """
    (rho, delta, relative_error, kbar, epsilon_min, delta_min,
     accuracy_factor) = check_pcr_parameters(rho, delta, relative_error, kbar, epsilon_min,
                                             delta_min, accuracy_factor)
    counts, base = _as_top_counts(top_counts, next_count, kbar)
    loop = _Loop(counts=counts, base=base, kbar=kbar, relative_error=relative_error, delta_min=delta_min,
                 accuracy_factor=accuracy_factor, rng=check_rng(rng),
                 ledger=PrivacyFilter(ZCDP(rho, delta), as_written=False),  # binary values, as used
                 epsilon=epsilon_min)
    while (stopped := loop.stop_reason()) is None:
        loop.round()
    return PCRResult(
        released=loop.released,
        spent=loop.ledger.spent,
        selection_spent=loop.selection_spent,
        count_spent=loop.count_spent,
        selection_calls=loop.calls,
        bottoms=loop.bottoms,
        final_epsilon=loop.epsilon,
        stopped=stopped,
        ledger=loop.ledger,
        noise=tuple(loop.noise),
    )


@dataclass(repr=False)  # no repr: it would print the NON-PRIVATE counts
class _Loop:
    """The state of Algorithm 2's loop (NON-PRIVATE counts: module docstring)."""

    counts: np.ndarray
    base: int
    kbar: int
    relative_error: float
    delta_min: float
    accuracy_factor: float
    rng: np.random.Generator
    ledger: PrivacyFilter
    epsilon: float
    alive: np.ndarray = None
    released: list[ReleasedCount] = field(default_factory=list)
    noise: list[NoiseDraw] = field(default_factory=list)
    selection_spent: ZCDP = field(default_factory=lambda: ZCDP(0.0, 0.0))
    count_spent: ZCDP = field(default_factory=lambda: ZCDP(0.0, 0.0))
    calls: int = 0
    bottoms: int = 0

    def __post_init__(self):
        self.alive = np.arange(self.counts.size, dtype=np.int64)

    @property
    def kbar_t(self) -> int:
        return self.kbar - len(self.released)

    def selection_cost(self) -> ZCDP:
        return ZCDP(bounded_range_to_zcdp(self.epsilon), self.delta_min)  # ε²/8, rounded up

    def stop_reason(self) -> str | None:
        """Why the loop stops now (None: the next round's largest cost fits exactly)."""
        if self.kbar_t < 1:
            return STOP_KBAR
        left = self.ledger.remaining  # exact, rounded down: x <= left iff x fits, for a float x
        if 2.0 * self.selection_cost().rho > left.rho:  # the step's largest cost: selection + count
            return STOP_RHO
        if self.delta_min > left.delta:
            return STOP_DELTA
        return None

    def round(self) -> None:
        """One selection (Unknown Domain Gumbel top-1 at ε, δ-approximate
        ε²/8-zCDP); ⊥ grows ε by √2, else the found count is released."""
        cost, kbar_t = self.selection_cost(), self.kbar_t
        self.calls += 1
        found = unknown_domain_gumbel(self.counts[self.alive], 1, self.epsilon, self.delta_min, kbar_t,
                                      self.rng, self.base)
        self.noise.extend(r.at(SELECTION_STEP) for r in found.noise)
        self.ledger.spend(cost, label="selection (Unknown Domain Gumbel, top-1)")
        self.selection_spent = self.selection_spent + cost
        if found.bottom:
            self.bottoms += 1
            self.epsilon = math.sqrt(2.0) * self.epsilon
        else:
            self.release(int(found.indices[0]), kbar_t)

    def release(self, position: int, kbar_t: int) -> None:
        """The count of the alive item at ``position`` plus N_Z(0, σ²),
        σ = max(σ_r(ε), 2/ε): (1/(2σ²))-zCDP <= ε²/8."""
        eps = self.epsilon
        index = int(self.alive[position])
        sigma = pcr_sigma(eps, self.relative_error, kbar_t, self.delta_min, self.accuracy_factor)
        threshold = unknown_domain_threshold(eps, self.delta_min, kbar_t)
        noisy = int(self.counts[index]) + int(discrete_gaussian(sigma, self.rng))
        count_cost = ZCDP(gaussian_zcdp(1.0, sigma), 0.0)  # <= ε²/8 exactly (see pcr_sigma), rounded up
        self.noise.append(NoiseDraw(COUNT_STEP, "discrete-gaussian", scale=sigma, std=sigma, sensitivity=1.0,
                                    target=f"the count found by selection {self.calls}"))
        self.ledger.spend(count_cost, label="count (discrete Gaussian)")
        self.count_spent = self.count_spent + count_cost
        self.alive = np.delete(self.alive, position)
        self.released.append(ReleasedCount(index, noisy, sigma, eps, self.calls, threshold))
