"""DP Set Union with exact integer noise: the weighted-Gaussian histogram, the
discrete Gaussian and an integer threshold; the private key step of a grouped
release (:mod:`dp_spark.releases.group_keys`). Every random decision is an
exact discrete Gaussian draw (Canonne, Kamath, Steinke, "The Discrete Gaussian
for Differential Privacy", NeurIPS 2020) added to an integer statistic and
compared with an integer threshold: no float noise, no float comparison.

Released: the items u of the histogram's support with X_u + Z_u > R, where
- H is the ``weighted-gaussian`` histogram of Gopi et al. (Appendix D;
  :mod:`dp_spark.summaries.set_union`): a person keeping t <= Δ0 items adds
  a_t = ⌊2^30/√t⌋ units of 2^-30 to each, so H[u] is a whole number U_u of
  units (the mask receives the double U_u·2^-30, exact below 2^53 units,
  otherwise rounded monotonically to a neighbouring double);
- X_u = ⌊H[u]·2^g⌋ on the grid of 2^-g (``grid_bits`` g, from Δ0 alone);
- Z_u ~ N_Z(0, s²), independent, s an integer (``sigma``);
- R an integer (``threshold``).

Guarantee: (ε, δ)-DP for adding or removing one person, δ = δ_n + δ_t,
δ_n = δ/2 (the noise), δ_t = δ − δ_n (the threshold). Proof. Let D' = D
plus person y, who keeps the set S, t = |S| <= Δ0. Only the items of S
change, each by exactly a_t units: U'_u = U_u + a_t for u in S.

(1) Sensitivity on the common support. For u in S, |X'_u − X_u| <= d_t =
    ⌈a_t/c⌉ + 1 with c = 2^(30−g) units a grid cell: flooring two numbers
    a_t units apart differs by at most ⌈a_t/c⌉, and the cast of the long
    sum U < 2^63 to a double errs by at most 2^9 units, less than a cell
    (g <= 16: c >= 2^14), and is monotone with every grid point a double,
    so it moves ⌊U/c⌋ by at most one. Other coordinates are equal. So
    ‖X' − X‖₂² <= Δ² = max_{t<=Δ0} t·d_t² (an integer, ``l2_squared``).
    On the items of supp(H), the vector X + Z is then Δ²/(2s²)-zCDP (CKS
    2020, Theorem 14 of the full version, arXiv 2004.00010: the discrete
    Gaussian on an integer vector of ℓ2 sensitivity Δ), and s² >= Δ²/(2ρ_n) (exactly) with ρ_n
    chosen so that ρ_n-zCDP implies (ε, δ_n)-DP by CKS 2020, §2.3, Corollary 13
    (for every order α > 1, δ = e^((α−1)(αρ−ε))/(α−1)·(1 − 1/α)^α; checked
    at one α with a margin on ln δ far above the floats' error). The
    released set restricted to supp(H) is a post-processing of it.
(2) New items. T = supp(H') \\ supp(H) ⊆ S, j = |T| <= t, and an item of
    T has U' = a_t <= a_j, so X' <= x_j = ⌊a_j/2^(30−g)⌋ (a_t < 2^31:
    exact). R >= x_j + m_j with P[Z > m_j] <= δ_t/j
    (:func:`dp_spark.noise.tails.discrete_gaussian_upper_quantile`, an
    upper bound on the exact tail), so some item of T is released with
    probability q <= j·δ_t/j = δ_t (union bound).
(3) Both directions. The noise of T is independent of the rest; on the
    event "no item of T released" M(D') equals M(D')|supp(H). For any set
    O of outputs: P[M(D') ∈ O] <= P[M(D')|supp(H) ∈ O] + q <=
    e^ε·P[M(D) ∈ O] + δ_n + δ_t. Conversely, for O a set of subsets of
    supp(H) (the only outputs of D), with a = P[M(D')|supp(H) ∈ O], so
    that P[M(D') ∈ O] = (1 − q)·a: P[M(D) ∈ O] <= min(1, e^ε·a + δ_n).
    If e^ε·a <= 1, e^ε·a = e^ε·(1 − q)·a + e^ε·q·a <= e^ε·P[M(D') ∈ O] + q;
    else e^ε·(1 − q)·a + q > (1 − q) + q = 1. Either way P[M(D) ∈ O] <=
    e^ε·P[M(D') ∈ O] + δ_n + δ_t.

(4) δ-approximate ρ-zCDP, for a ρ-zCDP release (the key step of count-release):
    (1)–(3) give more than (ε, δ)-DP. Take for M(D') the event E' = "no
    item of T released" (P[E'] = 1 − q >= 1 − δ_t; an event of the output)
    and for M(D) the whole space. Given E', M(D') is M(D')|supp(H), as T's
    noise is independent of the rest: the same post-processing of X' + Z on
    supp(H) that M(D) is of X + Z, so by (1) the Rényi divergence of every
    order α between the two, either way, is at most α·Δ²/(2s²) <= α·ρ_n (CKS
    2020, Theorem 14). That is δ_t-approximate ρ_n-zCDP (Bun & Steinke, TCC
    2016, Definition 8.1), which composes by adding ρ and δ (their Lemma
    8.3): :func:`plan_discrete_set_union_zcdp` takes ρ_n = ρ and δ_t = δ
    directly, with no conversion.

Every constant depends on (ε, δ, Δ0) only (or (ρ, δ, Δ0)). g trades the additive slack of
(1), about √Δ0 grid cells, against the size of s: 2^g >= 128·⌈√Δ0⌉ keeps Δ
within 1 + 2/128 of the real-valued sensitivity 2^g. Against the float
analytic Gaussian this costs the zCDP conversion and the weighted policy
(Policy Gaussian's float weights have a data-independent sensitivity bound on
a grid only with an additive √N term, N bounded by the int64 row count:
:mod:`.gaussian_grid`, which keeps that term small with a finer grid than
this step's); figures in benchmarks/results/2026-11-29-from-docstrings.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import ndtr

from dp_spark.accounting.conversions import zcdp_to_approx_epsilon
from dp_spark.accounting.exact import exact, ratio_down
from dp_spark.errors import ParameterError
from dp_spark.noise.discrete import discrete_gaussian
from dp_spark.noise.discrete_batch import discrete_gaussian_batch
from dp_spark.noise.records import NoiseDraw
from dp_spark.noise.rng import check_rng
from dp_spark.noise.tails import discrete_gaussian_upper_quantile
from dp_spark.summaries.set_union import UNIT_BITS, person_units

__all__ = ["EXACT_POLICY", "DiscreteSetUnionPlan", "plan_discrete_set_union", "plan_discrete_set_union_zcdp",
           "plan_discrete_round", "zcdp_for_dp",
           "split_delta", "grid_statistic", "discrete_release_mask", "exact_release_probability"]

#: The update policy of the exact mechanism: additive, so its histogram is an exact integer sum.
EXACT_POLICY = "weighted-gaussian"
#: The grid's fineness against the slack of flooring (module docstring): 2^g >= GRID_FACTOR·⌈√Δ0⌉.
GRID_FACTOR = 128
#: Up to this s the vectorised int64 sampler applies (its products stay in int64:
#: 2·s²·(s + 1)² < 2^56); above, the exact Fraction sampler, one draw at a time.
BATCH_SIGMA = 8192
#: Up to this s the exact release probability is summed term by term (|k| <= 40·s + 40).
_SUM_SIGMA = 5000


@dataclass(frozen=True)
class DiscreteSetUnionPlan:
    """Every public constant of one exact DP Set Union run, from (ε, δ, Δ0):
    the grid 2^-``grid_bits``, the integer ℓ2² sensitivity ``l2_squared``,
    the integer ``sigma`` and ``threshold`` (grid cells), ρ_n and the split of
    δ. ``rho`` / ``scale``: threshold and σ in weight units (for reports)."""

    epsilon: float
    delta: float
    max_items: int
    grid_bits: int
    l2_squared: int
    sigma: int
    threshold: int
    noise_rho: float
    noise_delta: float
    threshold_delta: float
    method: str = EXACT_POLICY
    noise: str = "discrete-gaussian"
    gamma: float | None = None

    @property
    def rho(self) -> float:
        """The threshold in weight units (R·2^-g): an item is released iff
        its grid weight plus the noise exceeds it."""
        return math.ldexp(self.threshold, -self.grid_bits)

    @property
    def scale(self) -> float:
        """σ of the noise in weight units (s·2^-g)."""
        return math.ldexp(self.sigma, -self.grid_bits)

    @property
    def sensitivity(self) -> float:
        """ℓ2 sensitivity of the grid statistic, in weight units (sqrt(Δ²)·2^-g)."""
        return math.ldexp(math.sqrt(self.l2_squared), -self.grid_bits)

    @property
    def noise_record(self) -> NoiseDraw:
        """One exact discrete Gaussian draw per item of the histogram (not a public number: ``draws`` None)."""
        return NoiseDraw("noise", "discrete-gaussian", scale=self.scale, std=self.scale,
                         sensitivity=self.sensitivity, draws=None,
                         target="each item's histogram weight (released if above the threshold)",
                         parameters={"norm": 2})

    def release_probability(self, weight: float) -> float:
        """P[X + Z > R] at histogram weight ``weight``: exact for s <= 5000,
        else the normal approximation (error statements only); 0 for weight <= 0."""
        if not weight > 0.0:
            return 0.0
        x = int(grid_statistic(np.array([weight], dtype=np.float64), self.grid_bits)[0])
        if self.sigma <= _SUM_SIGMA:
            return exact_release_probability(x, self)
        return float(ndtr((x - self.threshold - 0.5) / self.sigma))

    def weight_for(self, probability: float) -> float:
        """A weight at which an item is released with probability at least
        ``probability`` (>= 1/2): (R + 1 + m)·2^-g with P[Z > m] <= 1 − p."""
        if not 0.5 <= probability < 1.0:
            raise ParameterError("weight_for needs a probability in [0.5, 1)")
        m = discrete_gaussian_upper_quantile(float(self.sigma), 1.0 - probability)
        return math.ldexp(self.threshold + 1 + m, -self.grid_bits)


#: The finest grid: a cell of 2^(30−16) = 2^14 units stays above the cast's error (module docstring, (1)).
MAX_GRID_BITS = 16


def _grid_bits(max_items: int) -> int:
    """g: 2^g >= GRID_FACTOR·⌈√Δ0⌉, between 10 and MAX_GRID_BITS."""
    return min(MAX_GRID_BITS, max(10, (GRID_FACTOR * (math.isqrt(max_items - 1) + 1)).bit_length()))


def _l2_squared(max_items: int, grid_bits: int) -> int:
    """Δ² = max_{t <= Δ0} t·(⌈a_t/2^(30−g)⌉ + 1)² (module docstring, (1))."""
    cell = 1 << (UNIT_BITS - grid_bits)
    return max(t * (-(-person_units(EXACT_POLICY, t) // cell) + 1) ** 2 for t in range(1, max_items + 1))


def _log_delta(rho: float, epsilon: float, log_alpha_1: float) -> float:
    """ln δ of the ρ-zCDP -> (ε, δ) conversion at the order α = 1 + e^u (CKS
    2020, §2.3, Corollary 13: for every α > 1, δ = e^((α−1)(αρ−ε))/(α−1)·(1 − 1/α)^α)."""
    a1 = math.exp(log_alpha_1)
    alpha = 1.0 + a1
    return a1 * (alpha * rho - epsilon) - log_alpha_1 + alpha * math.log1p(-1.0 / alpha)


def _best_log_delta(rho: float, epsilon: float) -> tuple[float, float]:
    """(u, ln δ) at the order α = 1 + e^u that minimises the conversion's δ (any α is valid)."""
    found = minimize_scalar(lambda u: _log_delta(rho, epsilon, u), bounds=(-40.0, 40.0), method="bounded",
                            options={"xatol": 1e-10})
    return float(found.x), _log_delta(rho, epsilon, float(found.x))


#: Margin on ln δ against the float evaluation of the conversion (its error is below 1e-12 at every
#: magnitude reached here; a bound that holds with this margin holds exactly).
_LOG_MARGIN = 1e-6


def zcdp_for_dp(epsilon: float, delta: float) -> float:
    """The largest ρ_n (to 2^-40 relative, by bisection) for which the
    discrete Gaussian's ρ_n-zCDP gives (ε, δ)-DP by CKS 2020, §2.3, Corollary 13,
    at some order α (checked with a margin on ln δ)."""
    target = math.log(delta) - _LOG_MARGIN
    lo, hi = 0.0, epsilon  # δ(ε) > δ for every α: the answer is below ε (e.g. BS: ρ < ε)
    while hi - lo > hi * 2.0**-40:
        mid = 0.5 * (lo + hi)
        if _best_log_delta(mid, epsilon)[1] <= target:
            lo = mid
        else:
            hi = mid
    if lo <= 0.0:
        raise ParameterError(f"epsilon = {epsilon:g}, delta = {delta:g}: no noise scale converts; use larger values")
    return lo


def split_delta(delta: float) -> tuple[float, float]:
    """(δ_n, δ_t) = (δ/2, δ − δ/2), both exact doubles summing to at most δ exactly."""
    noise_delta = delta / 2.0
    threshold_delta = float(exact(delta) - exact(noise_delta))  # exact: δ/2 of a float is a float
    if exact(noise_delta) + exact(threshold_delta) > exact(delta) or noise_delta <= 0.0:
        raise ParameterError(f"delta = {delta:g} is too small to split")
    return noise_delta, threshold_delta


def plan_discrete_set_union(epsilon: float, delta: float, max_items: int) -> DiscreteSetUnionPlan:
    """The constants of the exact set union at (ε, δ), Δ0 = ``max_items``
    (module docstring): (ε, δ)-DP over the weighted-Gaussian histogram.
    Public parameters only; ParameterError outside ε > 0, 0 < δ < 1, Δ0 >= 1."""
    epsilon, delta = float(epsilon), float(delta)
    if isinstance(max_items, bool) or not isinstance(max_items, (int, np.integer)) or int(max_items) < 1:
        raise ParameterError(f"max_items must be a whole number >= 1; got {max_items!r}")
    if not (math.isfinite(epsilon) and epsilon > 0 and 0.0 < delta < 1.0):
        raise ParameterError("the exact set union needs epsilon > 0 and 0 < delta < 1")
    max_items = int(max_items)
    noise_delta, threshold_delta = split_delta(delta)
    return plan_discrete_round(epsilon, delta, max_items, zcdp_for_dp(epsilon, noise_delta), noise_delta,
                               threshold_delta)


def plan_discrete_set_union_zcdp(rho: float, delta: float, max_items: int) -> DiscreteSetUnionPlan:
    """The constants of the exact set union as a δ-approximate ρ-zCDP step at Δ0 = ``max_items``
    (module docstring, (4)): noise ρ-zCDP on the common support (s² >= Δ²/(2ρ), exactly), the
    threshold failing with probability at most δ. ``epsilon``/``delta`` of the plan are its
    (ε, 2δ)-DP reading (ρ-zCDP at δ' = δ plus the threshold's δ), for statements only. Public
    parameters only; ParameterError outside ρ > 0, 0 < δ < 1/2, Δ0 >= 1."""
    rho, delta = float(rho), float(delta)
    if isinstance(max_items, bool) or not isinstance(max_items, (int, np.integer)) or int(max_items) < 1:
        raise ParameterError(f"max_items must be a whole number >= 1; got {max_items!r}")
    if not (math.isfinite(rho) and rho > 0 and 0.0 < delta < 0.5):
        raise ParameterError("the exact set union as approximate zCDP needs rho > 0 and 0 < delta < 1/2")
    epsilon = zcdp_to_approx_epsilon(rho, delta)
    return plan_discrete_round(epsilon, 2.0 * delta, int(max_items), rho, delta, delta)


def plan_discrete_round(epsilon: float, delta: float, max_items: int, noise_rho: float, noise_delta: float,
                        threshold_delta: float) -> DiscreteSetUnionPlan:
    """The constants of one exact set union whose noise is ``noise_rho``-zCDP
    (s² >= Δ²/(2ρ), exactly) and whose threshold fails with probability at
    most ``threshold_delta`` (module docstring, (1) and (2)); ``epsilon``,
    ``delta`` and ``noise_delta`` are recorded for the report (the caller
    checks that ρ converts to them). Public parameters only."""
    max_items = int(max_items)
    grid_bits = _grid_bits(max_items)
    l2_squared = _l2_squared(max_items, grid_bits)
    need = Fraction(l2_squared) / (2 * exact(noise_rho))  # s² >= Δ²/(2ρ_n), exactly
    sigma = math.isqrt(math.ceil(need))
    if sigma * sigma < need:
        sigma += 1
    cell = 1 << (UNIT_BITS - grid_bits)
    threshold = max(person_units(EXACT_POLICY, j) // cell
                    + discrete_gaussian_upper_quantile(float(sigma), ratio_down(threshold_delta, j))
                    for j in range(1, max_items + 1))
    return DiscreteSetUnionPlan(epsilon=epsilon, delta=delta, max_items=max_items, grid_bits=grid_bits,
                                l2_squared=l2_squared, sigma=sigma, threshold=int(threshold),
                                noise_rho=noise_rho, noise_delta=noise_delta, threshold_delta=threshold_delta)


def grid_statistic(weights: np.ndarray, grid_bits: int) -> np.ndarray:
    """X = ⌊weight·2^g⌋ as int64, exactly (a product by a power of two and a
    floor of doubles are exact)."""
    return np.floor(np.ldexp(np.asarray(weights, dtype=np.float64), grid_bits)).astype(np.int64)


def _draws(plan: DiscreteSetUnionPlan, size: int, rng: np.random.Generator) -> np.ndarray:
    if plan.sigma <= BATCH_SIGMA:
        return discrete_gaussian_batch(plan.sigma * plan.sigma, size, rng)
    return np.asarray(discrete_gaussian(plan.sigma, rng, size=size), dtype=np.int64)


def discrete_release_mask(weights: np.ndarray, plan: DiscreteSetUnionPlan, rng: np.random.Generator) -> np.ndarray:
    """Boolean mask of the released items: X + Z > R, one exact draw per item
    of weight > 0 (others never released). Guarantee: the module docstring's,
    for the summed ``weighted-gaussian`` histogram at the plan's Δ0."""
    weights = np.asarray(weights, dtype=np.float64)
    check_rng(rng)
    support = weights > 0.0
    out = np.zeros(weights.size, dtype=bool)
    idx = np.flatnonzero(support.reshape(-1))
    if idx.size:
        x = grid_statistic(weights.reshape(-1)[idx], plan.grid_bits)
        out[idx] = x + _draws(plan, int(idx.size), rng) > plan.threshold
    return out.reshape(weights.shape)


def exact_release_probability(x: int, plan: DiscreteSetUnionPlan) -> float:
    """P[x + Z > R], Z ~ N_Z(0, s²), summed over |k| <= 40·s + 40 (the rest
    is below e^(−800) of the sum): the tests' brute-force reference."""
    s = plan.sigma
    top = 40 * s + 40
    k = np.arange(-top, top + 1, dtype=np.float64)
    weights = np.exp(-(k * k) / (2.0 * float(s) * float(s)))
    above = weights[k > plan.threshold - int(x)]
    return float(math.fsum(above.tolist()) / math.fsum(weights.tolist()))
