"""DP Set Union with exact discrete Gaussian noise on a grid: the noise step of
``weighted-gaussian`` and ``policy-gaussian``.

Gopi et al., "Differentially Private Set Union" (ICML 2020), Algorithm 1
step 3 with Gaussian noise (Theorem 4.1, Policy Gaussian; Theorem D.2,
Weighted Gaussian), run with exact integer noise: the discrete Gaussian of
Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy"
(NeurIPS 2020; Theorem 14 of arXiv 2004.00010 for its zCDP, §2.3 Corollary 13
for the conversion to (ε, δ)) added to an integer statistic and compared with
an integer threshold: no float noise, no float comparison of a noisy value.

Released: the items u of the support (weight > 0) with X_u + Z_u > R, where
- C = 2^22 is a public cap (it moves utility only: an item at the cap is
  released with probability P[Z > R − C·2^g], 1 to double precision while
  R·2^-g + 40σ < 2^22, e.g. ε >= 1e-4 at Δ0 <= 100, δ = 1e-6) and
  X_u = ⌊min(H[u], C)·2^g⌋, the weight floored onto the grid of 2^-g
  (g = ``grid_bits`` <= 40, from (ε, δ) alone: :func:`plan_gaussian_grid`);
  min, the product by a power of two and the floor of doubles are exact, and
  X_u <= 2^62 fits an int64;
- Z_u ~ N_Z(0, s²), i.i.d., s an integer (``sigma``), drawn by
  :func:`dp_spark.noise.discrete_batch.discrete_gaussian_batch_wide`;
- R an integer (``threshold``).

Guarantee: (ε, δ)-DP for adding or removing one person, δ = δ_n + δ_t with
δ_n = δ/2 (the noise) and δ_t = δ − δ_n (the threshold). Let D' = D plus
person y, H and H' the summed shard histograms (:mod:`dp_spark.summaries.set_union`).

(1) Sensitivity on the common support. By fact (S), ‖H' − H‖₂ <= 1. The cap
    u ↦ min(u, C) is 1-Lipschitz in each coordinate, so the capped vectors
    W, W' satisfy ‖W' − W‖₂ <= 1 too, and W_u = W'_u wherever H_u = H'_u.
    For reals a, b, |⌊a⌋ − ⌊b⌋| < |a − b| + 1, and ⌊a⌋ = ⌊b⌋ if a = b. So
    X' − X = 2^g·(W' − W) + r with |r_u| < 1 on the N coordinates where H
    and H' differ and r_u = 0 elsewhere: ‖X' − X‖₂ <= 2^g·‖W' − W‖₂ + √N.
    - ``policy-gaussian``: N is not bounded by anything public but the input's
      size: each coordinate is an item of some input row, and a row count is
      an int64, so N <= 2^63 − 1 and √N < A = ⌊√(2^63 − 1)⌋ + 1 = 3037000500
      (:data:`ROW_ROOT`), a data-independent term: Δ = 2^g + A, Δ² its
      (integer) square, within 2^-8.5 relative of 2^g at g = 40.
    - ``weighted-gaussian``: the histogram is a sum of whole units of 2^-30
      (a person keeping t items adds a_t = ⌊2^30/√t⌋ to each) cast once to a
      double. Below 2^52 units (a weight below C = 2^22) the cast is exact;
      above, it is monotone and C is a double, so min(·, C) gives C exactly
      when the exact weight is >= C. So W is the cap of the exact sum, and
      for g >= 30 (always: :data:`MIN_GRID_BITS`) X_u = min(U_u, 2^52)·2^(g−30)
      exactly: only the t items of S_y move, each by at most a_t·2^(g−30)
      (min is 1-Lipschitz), so Δ² = max_{t <= Δ0} t·(a_t·2^(g−30))² <= 4^g,
      no slack.
    The released set on supp(H) is a post-processing of (X_u + Z_u) there,
    which is Δ²/(2s²)-zCDP (CKS 2020, Theorem 14); s² >= Δ²/(2ρ_n), exactly,
    with ρ_n from :func:`.discrete.zcdp_for_dp` (ρ_n-zCDP implies (ε, δ_n)-DP
    by CKS 2020, Corollary 13).
(2) New items. T = supp(H') \\ supp(H) ⊆ S_y (fact (T)), j = |T| <= Δ0. The
    bound x_j on X' of an item of T (:func:`new_item_cells`):
    - ``weighted-gaussian``: U' = a_t <= a_j units (t >= j), so
      X' <= x_j = a_j·2^(g−30) exactly.
    - ``policy-gaussian``: in real arithmetic H'[u] <= 1/√j (fact (T)). The
      floats: the items of T start at 0, so their gap is Γ exactly; y's
      increment is fl(fl(1/ñ)·Γ), ñ = fl(√(S̃)), S̃ the sequential float sum
      of the t' <= Δ0 rounded squared gaps, S̃ >= S·(1 − γ_t') with
      γ_n = nu/(1 − nu), u = 2^-53 (Higham, "Accuracy and Stability of
      Numerical Algorithms", Lemma 3.1 and §3.1), S >= jΓ²; so the increment
      is <= (1/√j)·(1 + u)²/((1 − u)·√(1 − γ_Δ0)) <= (1/√j)·(1 + (Δ0 + 8)·2^-52)
      (the first-order term is (Δ0/2 + 3)·u; the case ñ <= 1, where the
      items are set to Γ, gives the same bound on Γ). No other shard holds an
      item of T, so the summed weight is this increment, exactly. Hence
      X' <= x_j = ⌈2^g/√j⌉ + ⌈(Δ0 + 8)·2^(g−52)⌉.
    R = max_j x_j + m_j with P[Z > m_j] <= δ_t/j
    (:func:`dp_spark.noise.tails.discrete_gaussian_upper_quantile`, an upper
    bound on the exact tail), so some item of T is released with probability
    q <= j·δ_t/j = δ_t (union bound).
(3) Both directions, from (1) and (2), exactly as in :mod:`.discrete`, step (3).

Fact (S) for the sequential policy's float histograms is the summaries
module's (non-expansiveness of the ℓ2 descent, Lemma 4.1 of the paper); the
floor's slack of (1) covers the grid, not a float error of the descent.

The grid: the discrete Gaussian is drawn exactly and fast for s < 2^48
(:func:`~dp_spark.noise.discrete_batch.discrete_gaussian_batch_wide`'s int64
proposal); g is the largest value <= 40 with s < 2^47 (g >= 30; below, for an ε
so small that s >= 2^47 at g = 30, the same exact sampler draws one at a
time; s < 2^58 and R < 2^62, else the plan refuses ε). The plan states s and
R in weight units (``scale`` = s·2^-g, ``rho`` = R·2^-g, exact doubles below
2^53 cells, else rounded up); :class:`GaussianGridMask` reads them back
rounding up, so it never runs with less noise or a lower threshold than the
plan's (nor than a plan altered by hand states). The decision is computed as
Z > R − X, which no int64 overflow can reach (X <= 2^62, 0 <= R < 2^62).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy.special import ndtr

from dp_spark.accounting.exact import exact, ratio_down
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.set_union.discrete import split_delta, zcdp_for_dp
from dp_spark.noise.discrete_batch import discrete_gaussian_batch_wide
from dp_spark.noise.rng import check_rng
from dp_spark.noise.tails import discrete_gaussian_upper_quantile
from dp_spark.summaries.set_union import UNIT_BITS, person_units

__all__ = ["GAUSS_GRID_BITS", "GAUSSIAN_POLICIES", "MIN_GRID_BITS", "ROW_ROOT", "GaussianGrid", "gaussian_l2_squared",
           "new_item_cells", "plan_gaussian_grid", "gaussian_grid_cells", "gaussian_grid_release_probability",
           "GaussianGridMask", "gaussian_grid_mask"]

#: The finest grid: 2^-40 weight units a cell (X <= 2^62 under the cap C = 2^22).
GAUSS_GRID_BITS = 40
#: The cap C = 2^CAP_BITS on a weight (module docstring): the weighted policy's cast is exact below it.
CAP_BITS = 22
#: The coarsest: the weighted policy's units of 2^-30 stay whole cells (module docstring, (1)).
MIN_GRID_BITS = 30
#: s < 2^SIGMA_BITS: the exact sampler's int64 proposal (t = s + 1 < 2^48), with a factor 2 to spare.
SIGMA_BITS = 47
#: A > √N for every N <= 2^63 − 1 coordinates (module docstring, (1)).
ROW_ROOT = math.isqrt(2**63 - 1) + 1
#: The policies this module serves.
GAUSSIAN_POLICIES = ("weighted-gaussian", "policy-gaussian")
#: The smallest normal double: δ_t/Δ0 below it is refused (its tail quantile's 1/β overflows).
_SMALLEST_NORMAL = 2.0**-1022
#: Items a :class:`GaussianGridMask` draws for at a time: a fixed block, whatever the batches.
BLOCK = 4096


@dataclass(frozen=True)
class GaussianGrid:
    """The integer constants of the exact Gaussian noise step (module docstring): grid 2^-``grid_bits``,
    ℓ2² sensitivity ``l2_squared`` (cells²), ``sigma`` s and ``threshold`` R (cells), ρ_n and the
    split of δ."""

    grid_bits: int
    sigma: int
    threshold: int
    l2_squared: int
    noise_rho: float
    noise_delta: float
    threshold_delta: float


def _check_method(method: str) -> str:
    if method not in GAUSSIAN_POLICIES:
        raise ParameterError(f"the Gaussian grid serves {', '.join(GAUSSIAN_POLICIES)}; got {method!r}")
    return method


def gaussian_l2_squared(method: str, max_items: int, grid_bits: int) -> int:
    """Δ² (cells², an integer) of X = ⌊min(H, C)·2^g⌋ (module docstring, (1)): (2^g + A)² for
    ``policy-gaussian``, max_t t·(a_t·2^(g−30))² for ``weighted-gaussian``."""
    if _check_method(method) == "policy-gaussian":
        return ((1 << grid_bits) + ROW_ROOT) ** 2
    shift = grid_bits - UNIT_BITS
    if shift < 0:
        raise ParameterError("the weighted Gaussian grid needs grid_bits >= 30")
    return max(t * (person_units(method, t) << shift) ** 2 for t in range(1, int(max_items) + 1))


def _ceil_root(numerator: int, denominator: int) -> int:
    """⌈√(numerator/denominator)⌉ for positive integers."""
    k = math.isqrt(numerator // denominator)
    while k * k * denominator < numerator:
        k += 1
    return k


def new_item_cells(method: str, j: int, max_items: int, grid_bits: int) -> int:
    """x_j, the largest X' of an item only the added person holds when they hold j such items
    (module docstring, (2))."""
    if _check_method(method) == "weighted-gaussian":
        return person_units(method, j) << (grid_bits - UNIT_BITS)
    slack = -(-(int(max_items) + 8) * (1 << grid_bits) // (1 << 52))  # ⌈(Δ0 + 8)·2^(g−52)⌉
    return _ceil_root(1 << (2 * grid_bits), int(j)) + slack


def _sigma_for(l2_squared: int, noise_rho: float) -> int:
    """The smallest integer s with s² >= Δ²/(2ρ_n), exactly."""
    need = Fraction(l2_squared) / (2 * exact(noise_rho))
    sigma = math.isqrt(math.ceil(need))
    if sigma * sigma < need:
        sigma += 1
    return sigma


def plan_gaussian_grid(method: str, epsilon: float, delta: float, max_items: int,
                       grid_bits: int | None = None) -> GaussianGrid:
    """The constants of the exact Gaussian noise step of ``method`` at (ε, δ), Δ0 = ``max_items``
    (module docstring): (ε, δ)-DP over the summed histograms with facts (S) and (T). ``grid_bits``
    None: the largest g <= 40 with s < 2^47 (at least 30); a given g (tests) is used as is.
    Public parameters only."""
    method = _check_method(method)
    epsilon, delta, max_items = float(epsilon), float(delta), int(max_items)
    if not (math.isfinite(epsilon) and epsilon > 0 and 0.0 < delta < 1.0 and max_items >= 1):
        raise ParameterError("the Gaussian grid needs epsilon > 0, 0 < delta < 1 and max_items >= 1")
    noise_delta, threshold_delta = split_delta(delta)
    if not ratio_down(threshold_delta, max_items) >= _SMALLEST_NORMAL:  # the tail quantiles need 1/β finite
        raise ParameterError(f"delta = {delta:g} is too small for the threshold of {max_items} items per person")
    noise_rho = zcdp_for_dp(epsilon, noise_delta)
    if grid_bits is None:
        for bits in range(GAUSS_GRID_BITS, MIN_GRID_BITS - 1, -1):
            grid_bits = bits
            if _sigma_for(gaussian_l2_squared(method, max_items, bits), noise_rho) < 1 << SIGMA_BITS:
                break
    grid_bits = int(grid_bits)
    if method == "weighted-gaussian" and grid_bits < MIN_GRID_BITS:
        raise ParameterError("the weighted Gaussian grid needs grid_bits >= 30")
    l2_squared = gaussian_l2_squared(method, max_items, grid_bits)
    sigma = _sigma_for(l2_squared, noise_rho)
    threshold = max(new_item_cells(method, j, max_items, grid_bits)
                    + discrete_gaussian_upper_quantile(float(sigma), ratio_down(threshold_delta, j))
                    for j in range(1, max_items + 1))
    if not (sigma < 1 << 58 and threshold < 1 << 62):  # int64 draws (but with probability e^-512) and R
        raise ParameterError(f"epsilon = {epsilon:g} is too small: the noise scale overflows; use a larger epsilon")
    return GaussianGrid(grid_bits=grid_bits, l2_squared=l2_squared, sigma=sigma, threshold=int(threshold),
                        noise_rho=noise_rho, noise_delta=noise_delta, threshold_delta=threshold_delta)


def gaussian_grid_cells(weights: np.ndarray, grid_bits: int) -> np.ndarray:
    """X = ⌊min(weight, 2^22)·2^g⌋ as int64, exactly (module docstring), for g <= 40."""
    if not grid_bits <= GAUSS_GRID_BITS:
        raise ParameterError("the Gaussian grid is at most 2^-40")
    cap = math.ldexp(1.0, CAP_BITS)
    capped = np.minimum(np.asarray(weights, dtype=np.float64), cap)
    return np.floor(np.ldexp(capped, grid_bits)).astype(np.int64)


def _tail(m: int, sigma: int) -> float:
    """P[Z > m], Z ~ N_Z(0, s²): summed exactly for s <= 5000 (|k| <= 40·s + 40), else the normal
    approximation with continuity correction (public math for reports and tests)."""
    if sigma <= 5000:
        top = 40 * sigma + 40
        k = np.arange(-top, top + 1, dtype=np.float64)
        w = np.exp(-(k * k) / (2.0 * float(sigma) ** 2))
        return float(math.fsum(w[k > m].tolist()) / math.fsum(w.tolist()))
    return float(ndtr(-(m + 0.5) / sigma))


def gaussian_grid_release_probability(weight: float, sigma: int, threshold: int, grid_bits: int) -> float:
    """P[X + Z > R] at histogram weight ``weight`` (0 for weight <= 0, outside the support)."""
    if not weight > 0.0:
        return 0.0
    x = int(gaussian_grid_cells(np.array([weight]), grid_bits)[0])
    return _tail(int(threshold) - x, int(sigma))


def _draws(sigma: int, size: int, rng: np.random.Generator) -> np.ndarray:
    return discrete_gaussian_batch_wide(sigma * sigma, size, rng)


class GaussianGridMask:
    """The mask of one stream of items (one noise bucket, batch after batch): item i of the
    stream gets the i-th discrete Gaussian draw of ``rng``'s blocks of ``block`` draws (default
    :data:`BLOCK`), so an item's draw does not depend on where the batches break (the rejection
    sampler run per batch would); a caller passing the whole stream in one call gives its length as
    ``block`` and draws exactly that many. Items outside the support (weight <= 0) use up their
    slot and are never released.
    s = ⌈``scale``·2^g⌉, R = ⌈``rho``·2^g⌉ (never below the plan's). Guarantee as
    :func:`gaussian_grid_mask`."""

    def __init__(self, scale: float, rho: float, rng: np.random.Generator, grid_bits: int,
                 block: int = BLOCK):
        self.grid_bits = int(grid_bits)
        self.block = max(1, int(block))
        self.sigma = math.ceil(math.ldexp(float(scale), self.grid_bits))
        self.threshold = math.ceil(math.ldexp(float(rho), self.grid_bits))
        if self.sigma < 1:
            raise ParameterError("the Gaussian grid needs a scale of at least one cell")
        self.rng = check_rng(rng)
        self._noise = np.zeros(0, dtype=np.int64)

    def _take(self, size: int) -> np.ndarray:
        noise = [self._noise]
        have = self._noise.size
        while have < size:  # block after block: the same draws however the items are batched
            noise.append(_draws(self.sigma, self.block, self.rng))
            have += self.block
        self._noise = np.concatenate(noise)
        out, self._noise = self._noise[:size], self._noise[size:]
        return out

    def __call__(self, weights: np.ndarray) -> np.ndarray:
        weights = np.asarray(weights, dtype=np.float64)
        flat = weights.reshape(-1)
        noise = self._take(flat.size)
        out = np.zeros(flat.size, dtype=bool)
        idx = np.flatnonzero(flat > 0.0)
        if idx.size:
            out[idx] = noise[idx] > self.threshold - gaussian_grid_cells(flat[idx], self.grid_bits)  # no overflow
        return out.reshape(weights.shape)


def gaussian_grid_mask(weights: np.ndarray, scale: float, rho: float, rng: np.random.Generator,
                       grid_bits: int) -> np.ndarray:
    """Boolean mask of the released items: X + Z > R over the support (module docstring), one exact
    discrete Gaussian draw per item (:class:`GaussianGridMask`, exactly ``len(weights)`` draws). Guarantee: the module docstring's,
    (ε, δ)-DP for a plan of :func:`dp_spark.mechanisms.set_union.plan_set_union` with a Gaussian
    policy."""
    return GaussianGridMask(scale, rho, rng, grid_bits, block=np.size(weights))(weights)
