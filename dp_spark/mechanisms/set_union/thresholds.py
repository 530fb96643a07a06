"""Noise scales, thresholds ρ and cutoffs Γ of DP Set Union (pure math).

Gopi et al., "Differentially Private Set Union" (ICML 2020): Theorem 3.1
(Policy Laplace, and Weighted Laplace by Theorem D.1), Theorem 4.1 (Policy
Gaussian, and Weighted Gaussian by Theorem D.2), and the Count baseline of
Korolova et al. (2009) as the paper states it. With p_t = 1 − (1 − δ)^{1/t}:

=====================  =============================  ===================================================
policy                 noise                          threshold ρ
=====================  =============================  ===================================================
count                  Lap(b), b = Δ0/ε               1 + Q_b(p_Δ0)
weighted/policy-lap.   Lap(b), b = 1/ε                max_{t=1..Δ0} 1/t + Q_b(p_t)
weighted/policy-gau.   N(0, σ²), σ = AGM(ε, δ/2, 1)   max_{t=1..Δ0} 1/√t + σ·Φ⁻¹((1 − δ/2)^{1/t})
policy-greedy          Lap(b), b = 1/ε                min ρ ≥ 1: 1 − (1 − ½e^{−(ρ−1)/b})(1 − ½e^{−ρ/b})^{Δ0−1} ≤ δ
=====================  =============================  ===================================================

Q_b(p) is the exact upper p-quantile of Lap(b) (:func:`laplace_isf`); AGM the
analytic Gaussian mechanism of Balle & Wang (ICML 2018), the smallest σ for
which N(0, σ²) on a statistic of ℓ2 sensitivity 1 is (ε, δ/2)-DP.
Γ = ρ + α·scale.

The Laplace rows are the papers' real-valued mechanisms. What runs is their
exact counterpart on the grid of 2^-20 (:mod:`.laplace_grid`): the weight
rounded to the grid at random, discrete Laplace noise of scale β cells with
e^(1/β) − 1 <= ε/(2^20·Δ₁), and an integer threshold R computed the same way
from the discrete tail; the plan states them in weight units (``scale`` =
β·2^-20, ``rho`` = R·2^-20, ``grid_bits`` = 20). They exceed the table's by a
relative ~ε·2^-21 (the threshold also by up to three cells).
The Gaussian rows are likewise the papers' mechanisms; what runs is the exact
discrete Gaussian on the grid of 2^-g, g <= 40 (:mod:`.gaussian_grid`): the
capped weight floored onto the grid, N_Z(0, s²) noise with s² >= Δ²/(2ρ_n),
ρ_n-zCDP converted to (ε, δ/2), and an integer threshold R from the discrete
tail; ``scale`` = s·2^-g, ``rho`` = R·2^-g, ``sensitivity`` = Δ·2^-g.

Why ρ makes the release (ε, δ)-DP (the papers' proofs): with T the items
only the extra person holds (|T| = t ≤ Δ0, each of weight ≤ 1/t, 1/√t or 1:
:mod:`dp_spark.summaries.set_union`, fact (T)), ρ is chosen so that no item of
T clears the threshold with probability ≥ 1 − δ (Laplace) or 1 − δ/2
(Gaussian); on that event the output is (ε, 0)-, resp. (ε, δ/2)-DP by the
Laplace / Gaussian mechanism with sensitivity 1 (Δ0 for count, fact (S)).
Policy Greedy (Carvalho et al., AAAI 2022) has a weaker fact (T) over every
kept item, weight 0 included, hence its own ρ: :mod:`.greedy`.
Everything here depends on parameters only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy.special import log_ndtr, ndtr, ndtri

from dp_spark import checks
from dp_spark.accounting.exact import ratio_up
from dp_spark.errors import ParameterError
from dp_spark.noise.records import NoiseDraw
from dp_spark.noise.tails import discrete_gaussian_upper_quantile
from dp_spark.mechanisms.set_union.gaussian_grid import (
    gaussian_grid_release_probability,
    plan_gaussian_grid,
)
from dp_spark.mechanisms.set_union.laplace_grid import (
    GRID_BITS,
    grid_release_probability,
    grid_scale,
    grid_threshold_of,
    grid_weight_for,
)
from dp_spark.summaries.set_union import NOISE_OF, SEQUENTIAL, check_policy

__all__ = [
    "SetUnionPlan",
    "plan_set_union",
    "per_item_tail",
    "laplace_isf",
    "analytic_gaussian_sigma",
    "gaussian_mechanism_delta",
    "rho_count",
    "rho_laplace",
    "rho_gaussian",
    "SHARD_CUTOFFS",
    "shard_cutoff",
]

#: Relative tolerance of the analytic Gaussian bisection (the reference code's 1e-12).
AGM_TOL = 1e-12


def per_item_tail(delta: float, t: np.ndarray | int) -> np.ndarray:
    """p_t = 1 − (1 − δ)^{1/t}: if each of t independent items clears the
    threshold with probability p_t, none does with probability exactly 1 − δ."""
    t = np.asarray(t, dtype=np.float64)
    return -np.expm1(np.log1p(-delta) / t)


def laplace_isf(scale: float, p: np.ndarray | float) -> np.ndarray:
    """x with P[Lap(scale) > x] = p, for p in (0, 1): scale·ln(1/(2p)) when
    p ≤ 1/2, scale·ln(2(1 − p)) when p > 1/2."""
    p = np.asarray(p, dtype=np.float64)
    return np.where(p <= 0.5, scale * np.log(0.5 / np.minimum(p, 0.5)),
                    scale * np.log(2.0 * (1.0 - np.maximum(p, 0.5))))


def gaussian_mechanism_delta(sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """The smallest δ for which N(0, σ²) noise on a statistic of ℓ2 sensitivity
    S is (ε, δ)-DP (Balle & Wang 2018, Theorem 8):
    Φ(S/(2σ) − εσ/S) − e^ε·Φ(−S/(2σ) − εσ/S), evaluated in logs."""
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    first = float(ndtr(a - b))
    second = math.exp(epsilon + float(log_ndtr(-a - b)))
    return max(0.0, first - second)


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The analytic Gaussian mechanism (Balle & Wang 2018): the smallest σ
    (to relative tolerance 1e-12, rounded up) with
    :func:`gaussian_mechanism_delta` (σ) ≤ δ. N(0, σ²) noise is then
    (ε, δ)-DP for ℓ2 sensitivity ``sensitivity``. Solved by bisection: the
    privacy profile is decreasing in σ."""
    if not (epsilon > 0 and 0 < delta < 1 and sensitivity > 0):
        raise ParameterError("analytic Gaussian needs epsilon > 0, 0 < delta < 1, sensitivity > 0.")
    lo, hi = sensitivity * 1e-3, sensitivity
    while gaussian_mechanism_delta(hi, epsilon, sensitivity) > delta:
        lo, hi = hi, hi * 2.0
    while gaussian_mechanism_delta(lo, epsilon, sensitivity) <= delta and lo > 1e-300:
        hi, lo = lo, lo / 2.0
    while hi - lo > AGM_TOL * hi:
        mid = 0.5 * (lo + hi)
        if gaussian_mechanism_delta(mid, epsilon, sensitivity) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def rho_count(epsilon: float, delta: float, max_items: int) -> float:
    """Count (Korolova et al. 2009, as in Gopi et al.): Lap(Δ0/ε) noise;
    every item of T has weight 1 and |T| ≤ Δ0, so ρ = 1 + Q_{Δ0/ε}(p_{Δ0})."""
    scale = ratio_up(max_items, epsilon)  # Δ0/ε rounded up (the real-valued mechanism)
    return float(1.0 + laplace_isf(scale, per_item_tail(delta, max_items)))


def rho_laplace(epsilon: float, delta: float, max_items: int) -> float:
    """Weighted / Policy Laplace (Theorems 3.1, D.1): Lap(1/ε) noise;
    ρ = max_{t=1..Δ0} 1/t + Q_{1/ε}(p_t)."""
    t = np.arange(1, max_items + 1, dtype=np.float64)
    scale = ratio_up(1.0, epsilon)  # 1/ε rounded up (the real-valued mechanism)
    return float(np.max(1.0 / t + laplace_isf(scale, per_item_tail(delta, t))))


def rho_gaussian(sigma: float, delta: float, max_items: int) -> float:
    """Weighted / Policy Gaussian (Theorems 4.1, D.2): N(0, σ²) noise;
    ρ = max_{t=1..Δ0} 1/√t + σ·Φ⁻¹((1 − δ/2)^{1/t}), with
    Φ⁻¹(1 − q) = −Φ⁻¹(q) and q = 1 − (1 − δ/2)^{1/t} for accuracy."""
    t = np.arange(1, max_items + 1, dtype=np.float64)
    q = per_item_tail(delta / 2.0, t)
    return float(np.max(1.0 / np.sqrt(t) - sigma * ndtri(q)))


@dataclass(frozen=True)
class SetUnionPlan:
    """Every public constant of one DP Set Union run: ``noise`` laplace (scale
    b) or gaussian (σ), the threshold ``rho``, the cutoff ``gamma`` (None for
    count / weighted), the ℓ1 or ℓ2 ``sensitivity`` the noise is calibrated
    to, and δ's two parts ``noise_delta`` / ``threshold_delta``. ``grid_bits``
    (always set by :func:`plan_set_union`): the noise is exact discrete Laplace
    (:mod:`.laplace_grid`: ``scale`` and ``rho`` its β and R in weight units)
    or exact discrete Gaussian (:mod:`.gaussian_grid`: its s and R in weight
    units, ``sensitivity`` its ℓ2 Δ) on the grid of 2^-grid_bits."""

    method: str
    epsilon: float
    delta: float
    max_items: int
    alpha: float
    noise: str
    scale: float
    rho: float
    gamma: float | None
    sensitivity: float
    norm: str
    noise_delta: float
    threshold_delta: float
    grid_bits: int | None = None

    @property
    def grid_beta(self) -> float:
        """β, the discrete Laplace scale in grid cells (Laplace policies)."""
        return math.ldexp(self.scale, self.grid_bits)

    @property
    def grid_sigma(self) -> int:
        """s, the discrete Gaussian's integer scale in grid cells (Gaussian policies)."""
        return math.ceil(math.ldexp(self.scale, self.grid_bits))

    @property
    def grid_threshold(self) -> int:
        """R, the integer threshold in grid cells."""
        return math.ceil(math.ldexp(self.rho, self.grid_bits))

    @property
    def noise_record(self) -> NoiseDraw:
        """The record of the noise :class:`~.thresholding.ThresholdStep` draws
        in Spark: one draw per histogram item (``draws`` None: not public).
        On the grid the ℓ1 sensitivity is stated with the random rounding's
        factor β·(e^(1/β) − 1) (:mod:`.laplace_grid`, Lemma), so that
        sensitivity/scale is the privacy loss the proof bounds by ε."""
        target = "each item's histogram weight (released if above the threshold)"
        if self.grid_bits is not None and self.noise == "gaussian":
            return NoiseDraw("noise", "discrete-gaussian", scale=self.scale, std=self.scale,
                             sensitivity=self.sensitivity, draws=None, target=target, parameters={"norm": 2})
        if self.grid_bits is not None:
            beta = self.grid_beta
            p = math.exp(-1.0 / beta)
            return NoiseDraw("noise", "discrete-laplace", scale=self.scale,
                             std=math.ldexp(math.sqrt(2.0 * p) / -math.expm1(-1.0 / beta), -self.grid_bits),
                             sensitivity=self.sensitivity * beta * math.expm1(1.0 / beta),
                             draws=None, target=target, parameters={"norm": 1})
        laplace = self.noise == "laplace"
        return NoiseDraw("noise", "laplace" if laplace else "gaussian", scale=self.scale,
                         std=math.sqrt(2.0) * self.scale if laplace else self.scale, sensitivity=self.sensitivity,
                         draws=None, target=target,
                         parameters={"norm": 1 if self.norm == "l1" else 2})

    def release_probability(self, weight: float) -> float:
        """P[weight + noise > ρ]: the chance an item of this histogram weight
        is released (public math, for error statements and tests); on the
        grid the exact P[⌊x⌋ + B + Z > R] of :mod:`.laplace_grid`, resp. P[X + Z > R] of
        :mod:`.gaussian_grid` (the normal approximation for s > 5000 cells)."""
        if self.grid_bits is not None and self.noise == "gaussian":
            return gaussian_grid_release_probability(weight, self.grid_sigma, self.grid_threshold, self.grid_bits)
        if self.grid_bits is not None:
            return grid_release_probability(weight, self.grid_beta, self.grid_threshold, self.grid_bits)
        x = (self.rho - weight) / self.scale
        if self.noise == "laplace":
            return float(0.5 * math.exp(-x)) if x >= 0 else float(1.0 - 0.5 * math.exp(x))
        return float(ndtr(-x))

    def weight_for(self, probability: float) -> float:
        """The histogram weight at which an item is released with ``probability``
        (on the grid: a grid weight released with at least it, for p >= 1/2)."""
        if self.grid_bits is not None and self.noise == "gaussian":
            if not 0.5 <= probability < 1.0:
                raise ParameterError("weight_for needs a probability in [0.5, 1)")
            m = discrete_gaussian_upper_quantile(float(self.grid_sigma), 1.0 - probability)
            return math.ldexp(self.grid_threshold + 1 + m, -self.grid_bits)
        if self.grid_bits is not None:
            return grid_weight_for(probability, self.grid_beta, self.grid_threshold, self.grid_bits)
        if self.noise == "laplace":
            return float(self.rho - laplace_isf(self.scale, probability))
        return float(self.rho + self.scale * ndtri(probability))


def _double_up(n: int) -> float:
    """The least double >= the integer n."""
    value = float(n)
    return math.nextafter(value, math.inf) if int(value) < n else value


def plan_set_union(
    epsilon: float, delta: float, max_items: int, method: str, alpha: float = 2.0
) -> SetUnionPlan:
    """Noise, threshold and cutoff of the policy ``method`` at (ε, δ),
    Δ0 = ``max_items``, α = ``alpha`` (module docstring): releasing
    {u : H[u] + noise_u > ρ} is then (ε, δ)-DP for a histogram with facts (S)
    and (T). The parameters are checked by :func:`dp_spark.plans.set_union.plan`;
    the only refusal here is an ε so small that the constants overflow."""
    method = check_policy(method)
    epsilon, delta, max_items, alpha = float(epsilon), float(delta), int(max_items), float(alpha)
    noise = NOISE_OF[method]
    if not math.isfinite(max_items / epsilon * 1e3):
        raise ParameterError(
            f"epsilon = {epsilon:g} is too small: the noise scale or threshold overflows "
            "a float; use a larger epsilon."
        )
    grid_bits = None
    if noise == "laplace":  # exact discrete Laplace on the grid (.laplace_grid), stated in weight units
        sensitivity, norm, noise_delta, threshold_delta = (float(max_items) if method == "count" else 1.0,
                                                           "l1", 0.0, delta)
        grid_bits = GRID_BITS
        beta = grid_scale(epsilon, sensitivity, grid_bits)
        scale = float(beta)
        if Fraction(scale) < beta:  # never less noise than β
            scale = math.nextafter(scale, math.inf)
        scale = math.ldexp(scale, -grid_bits)
        rho = math.ldexp(grid_threshold_of(method, float(beta), delta, max_items, grid_bits), -grid_bits)
    else:  # exact discrete Gaussian on the grid (.gaussian_grid), stated in weight units
        grid = plan_gaussian_grid(method, epsilon, delta, max_items)
        grid_bits = grid.grid_bits
        scale = math.ldexp(_double_up(grid.sigma), -grid_bits)  # exact below 2^53 cells, else rounded up
        rho = math.ldexp(_double_up(grid.threshold), -grid_bits)
        root = math.sqrt(grid.l2_squared)
        if root * root < grid.l2_squared:  # never state less sensitivity than Δ
            root = math.nextafter(root, math.inf)
        sensitivity, norm = math.ldexp(root, -grid_bits), "l2"
        noise_delta, threshold_delta = grid.noise_delta, grid.threshold_delta
    gamma = rho + alpha * scale if method in SEQUENTIAL else None
    if not all(math.isfinite(x) for x in (scale, rho, gamma if gamma is not None else 0.0)):
        raise ParameterError(
            f"epsilon = {epsilon:g} is too small: the noise scale or threshold overflows "
            "a float; use a larger epsilon."
        )
    return SetUnionPlan(
        method=method, epsilon=epsilon, delta=delta, max_items=max_items, alpha=alpha,
        noise=noise, scale=float(scale), rho=float(rho), gamma=gamma,
        sensitivity=sensitivity, norm=norm, noise_delta=noise_delta,
        threshold_delta=threshold_delta, grid_bits=grid_bits,
    )


#: How the cutoff Γ is applied when a sequential policy runs in several shards.
SHARD_CUTOFFS = ("scaled", "full")


def shard_cutoff(gamma: float, shards: int, rule: str = "scaled") -> float:
    """The cutoff each shard's sequential policy runs with [DERIVED here; not
    in the paper]: ``full``, Γ in every shard; ``scaled`` (default), Γ/√shards.
    One shard: both are Γ, the paper's algorithm. Privacy does not depend on
    it (facts (S) and (T) of :mod:`dp_spark.summaries.set_union` hold for
    every cutoff > 0; ρ and the noise are unchanged); it moves utility only:
    Γ/√shards caps the budget a popular item absorbs across shards at
    √shards·Γ while a rare item's holders, one per shard, can still add
    Γ/√shards each. Chosen by measurement: see
    benchmarks/results/2026-11-29-from-docstrings.md.
    """
    rule = checks.choice(rule, "shard_cutoff", SHARD_CUTOFFS)
    shards = checks.integer(shards, "shards", 1)  # the public limit is the plan's (dp_spark.plans.set_union)
    return float(gamma) if rule == "full" else float(gamma) / math.sqrt(shards)
