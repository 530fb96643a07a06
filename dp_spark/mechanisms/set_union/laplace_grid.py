"""DP Set Union with exact discrete Laplace noise on a grid: the noise step of
``count``, ``weighted-laplace``, ``policy-laplace`` and ``policy-greedy``.

Gopi et al., "Differentially Private Set Union" (ICML 2020), Algorithm 1
step 3 with Laplace noise, and Carvalho, Wang, Gondara (AAAI 2022) for the
greedy policy, run with exact integer noise: every random decision compares a
uniform integer from the release's generator with an integer (no float noise,
no float comparison of a noisy value), as in :mod:`dp_spark.noise.discrete`
(Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy",
NeurIPS 2020, Algorithms 1-2; Mironov, CCS 2012, on why float Laplace noise
is not private).

Released: the items u of the support (weight > 0; every kept item, weight 0
included, for ``policy-greedy``) with X_u + Z_u > R, where
- x_u = H[u]·2^g is the weight on the grid of 2^-g (g = :data:`GRID_BITS`;
  a product by a power of two, exact in float64);
- X_u = ⌊x_u⌋ + B_u, B_u ~ Bernoulli(x_u − ⌊x_u⌋): the weight rounded to the
  grid at random (unbiased), B_u drawn exactly (:func:`dp_spark.noise.discrete_batch.bernoulli_double`);
- Z_u ~ discrete Laplace(β), P[Z = k] ∝ e^(−|k|/β), β a multiple of 2^-10
  (:func:`dp_spark.noise.discrete_batch.discrete_laplace_batch`), i.i.d.;
- R an integer, the threshold ρ = R·2^-g rounded up onto the grid.

The rounding is random, not a floor, because the sequential policies'
histograms are floats whose difference between neighbours is bounded in ℓ1 but
spread over a number of items that nothing public bounds (a later person's
descent reacts to the added person's weights): a floor moves every such item by
up to one cell, so the floored statistic has no data-independent sensitivity.
The random rounding's pmf is Lipschitz in the real weight instead (Lemma).

Lemma. For real x let m_x(k) = P[⌊x⌋ + B + Z = k]. Then for all integers k and
reals x, x': |ln m_x(k) − ln m_x'(k)| <= L·|x − x'|, L = e^(1/β) − 1.
Proof. With n = ⌊x⌋, f = x − n: m_x(k) = (1 − f)·p(k − n) + f·p(k − n − 1),
p the discrete Laplace pmf; x ↦ m_x(k) is continuous (f → 1 gives the value
at n + 1, f = 0). On [n, n + 1), r = p(k − n − 1)/p(k − n) ∈ {e^(−1/β), e^(1/β)}
and d/dx ln m_x(k) = (r − 1)/((1 − f) + f·r): for r > 1 its size is at most
r − 1; for r < 1 at most (1 − r)/r; both are e^(1/β) − 1. Integrate. ∎

Guarantee: (ε, δ)-DP for adding or removing one person, ε the plan's,
δ = δ_t (the threshold's; the noise part is pure). Let D' = D plus person y.
(1) Common support. The (H[u])_u satisfy fact (S) of
    :mod:`dp_spark.summaries.set_union`: ‖H' − H‖₁ <= Δ₁ (1, or Δ0 for
    count), so Σ_u |x'_u − x_u| <= 2^g·Δ₁. The draws of different items are
    independent, so by the Lemma the vector (X_u + Z_u) over supp(H) has
    privacy loss at most L·2^g·Δ₁ <= ε: :func:`grid_scale` picks the
    smallest multiple β of 2^-10 with e^(1/β) − 1 <= ε/(2^g·Δ₁) (with a
    relative margin of 1e-12 on the logarithm, far above its float error;
    β >= 2^g·Δ₁/ε·(1 + ε/2^(g+1))·(1 − O(ε²/4^g)), so β·2^-g exceeds the
    real-valued scale Δ₁/ε by a relative 2^-21·ε). The released set on
    supp(H) is its post-processing: ε-DP there.
(2) New items T = supp(H') \\ supp(H) (fact (T)); q(x) = P[⌊x⌋ + B + Z > R]
    is the linear interpolation of the integer tail a_n = P[Z > R − n], so it
    is increasing, and convex for x <= R + 1 (a_n = e^(−(R−n+1)/β)/(1 + e^(−1/β))
    for n <= R, a geometric sequence, and a_(R+1) − a_R >= a_R − a_(R−1)).
    - count / weighted-laplace / policy-laplace: |T| = t <= Δ0 items of
      weight <= 1 (count) resp. 1/t; x <= ⌊2^g·w_t⌋ + 1 (one cell of slack
      for the float sums of the sequential policies). R = max_t
      ⌊2^g·w_t⌋ + 1 + m_t with m_t the smallest m >= 0 with
      P[Z > m] <= p_t·(1 − 1e-9), p_t = 1 − (1 − δ)^(1/t): no item of T is
      released with probability >= (1 − p_t)^t >= 1 − δ.
    - policy-greedy (:mod:`.greedy`, step (3)): |T| <= Δ0, Σ_{u∈T} x_u <= 2^g
      (+ one cell of slack); φ = −ln(1 − q) is convex and increasing on
      [0, R + 1] ⊇ [0, 2^g + 1], so P[some item of T released] <=
      1 − (1 − q(2^g + 1))·(1 − q(0))^(Δ0 − 1) =: f(R), and R is the
      smallest integer >= 2^g with f(R) <= δ·(1 − 1e-9) (:func:`greedy_grid_threshold`).
(3) Both directions, from (1) and (2), as in :mod:`.discrete`, step (3).

The grid costs almost nothing: against the continuous formulas of
:mod:`.thresholds` and :mod:`.greedy` the scale grows by a relative
~2^-21·ε, the threshold by the same relative amount plus at most three cells. The plan stores β and R in weight
units (``scale`` = β·2^-g, ``rho`` = R·2^-g, both exact doubles);
:func:`laplace_grid_mask` reads them back exactly, rounding β up onto
2^-10 and R up onto the integers, so a plan altered by hand is never run
with less noise or a lower threshold than it states.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dp_spark.errors import ParameterError
from dp_spark.noise.discrete import discrete_laplace
from dp_spark.noise.discrete_batch import bernoulli_double, discrete_laplace_batch, rational_scale
from dp_spark.noise.rng import check_rng

__all__ = ["GRID_BITS", "GRID_MARGIN", "grid_scale", "tail_above",
           "grid_release_probability", "grid_weight_for", "laplace_grid_threshold",
           "greedy_grid_failure", "greedy_grid_threshold", "grid_threshold_of", "GridMask", "laplace_grid_mask"]

#: The grid of the Laplace path, 2^-GRID_BITS weight units a cell.
GRID_BITS = 20
#: Relative margin on δ in the threshold searches (their float evaluation errs by far less).
GRID_MARGIN = 1e-9
#: Relative margin on the logarithm in the scale (module docstring, (1)).
_LOG_MARGIN = 1e-12
#: Largest β·2^10 the int64 batch sampler takes; above, the exact Fraction sampler.
_BATCH_NUMERATOR = 2**55


def grid_scale(epsilon: float, sensitivity: float, grid_bits: int = GRID_BITS) -> Fraction:
    """β (grid cells), the smallest multiple of 2^-10 with e^(1/β) − 1 <= ε/(2^g·Δ₁) (with the
    margin of the module docstring, (1)): discrete Laplace(β) on the randomly rounded grid
    statistic of ℓ1 sensitivity Δ₁ (weight units) is then ε-DP."""
    epsilon, sensitivity = float(epsilon), float(sensitivity)
    if not (math.isfinite(epsilon) and epsilon > 0 and sensitivity > 0):
        raise ParameterError("the grid scale needs epsilon > 0 and sensitivity > 0")
    per_cell = epsilon / math.ldexp(sensitivity, grid_bits)
    beta = rational_scale((1.0 + _LOG_MARGIN) / math.log1p(per_cell))
    if not math.expm1(1.0 / float(beta)) <= per_cell * (1.0 - 0.5 * _LOG_MARGIN):
        raise ParameterError("the grid scale does not meet its bound; check epsilon")
    return beta


def _log_tail_above(k: np.ndarray, beta: float) -> np.ndarray:
    """ln P[Z > k] for integers k >= 0, Z ~ discrete Laplace(β): −(k + 1)/β − ln(1 + e^(−1/β))."""
    return -(np.asarray(k, dtype=np.float64) + 1.0) / beta - math.log1p(math.exp(-1.0 / beta))


def tail_above(k: int, beta: float) -> float:
    """P[Z > k] for an integer k, Z ~ discrete Laplace(β): e^(−(k+1)/β)/(1 + e^(−1/β)) for
    k >= 0, 1 − P[Z > −k − 1] below (symmetry)."""
    k = int(k)
    if k >= 0:
        return float(math.exp(float(_log_tail_above(k, beta))))
    return float(-math.expm1(float(_log_tail_above(-k - 1, beta))))


def grid_release_probability(weight: float, beta: float, threshold: int, grid_bits: int = GRID_BITS) -> float:
    """P[⌊x⌋ + B + Z > R] at x = weight·2^g: (1 − f)·P[Z > R − n] + f·P[Z > R − n − 1]."""
    x = math.ldexp(float(weight), grid_bits)
    n = math.floor(x)
    f = x - n
    return (1.0 - f) * tail_above(threshold - n, beta) + f * tail_above(threshold - n - 1, beta)


def _quantiles(beta: float, targets: np.ndarray) -> np.ndarray:
    """m_i, the smallest integer m >= 0 with P[Z > m] <= targets_i (vectorised; closed form, then
    corrected until the condition holds at m and fails at m − 1)."""
    log_t = np.log(targets)
    lead = math.log1p(math.exp(-1.0 / beta))
    m = np.maximum(0, np.ceil(beta * (-log_t - lead)) - 1.0)
    for _ in range(64):
        up = _log_tail_above(m, beta) > log_t
        if not up.any():
            break
        m = m + up
    for _ in range(64):
        down = (m > 0) & (_log_tail_above(m - 1.0, beta) <= log_t)
        if not down.any():
            break
        m = m - down
    return m.astype(np.int64)


def laplace_grid_threshold(beta: float, delta: float, max_items: int, light: np.ndarray,
                           grid_bits: int = GRID_BITS) -> int:
    """R = max_t ⌊2^g·w_t⌋ + 1 + m_t (module docstring, (2)), ``light[t − 1]`` = w_t the largest
    weight of an item only the added person holds when it holds t of them."""
    t = np.arange(1, int(max_items) + 1, dtype=np.float64)
    p_t = -np.expm1(np.log1p(-float(delta) * (1.0 - GRID_MARGIN)) / t)
    cells = np.floor(np.ldexp(np.asarray(light, dtype=np.float64), grid_bits)) + 1.0
    return int(np.max(cells + _quantiles(float(beta), p_t)))


def greedy_grid_failure(threshold: int, beta: float, max_items: int, grid_bits: int = GRID_BITS) -> float:
    """f(R) = 1 − (1 − q(2^g + 1))·(1 − q(0))^(Δ0 − 1), q(n) = P[Z > R − n] (module docstring, (2));
    needs R >= 2^g."""
    one = 1 << grid_bits
    if threshold < one:
        raise ParameterError("the greedy grid failure needs R >= 2^g")
    q1 = tail_above(threshold - one - 1, beta)
    q0 = tail_above(threshold, beta)
    return float(-math.expm1(math.log1p(-q1) + (int(max_items) - 1) * math.log1p(-q0)))


def greedy_grid_threshold(beta: float, delta: float, max_items: int, grid_bits: int = GRID_BITS) -> int:
    """The smallest integer R >= 2^g with :func:`greedy_grid_failure` (R) <= δ·(1 − GRID_MARGIN)
    (bisection; f decreases in R)."""
    target = float(delta) * (1.0 - GRID_MARGIN)
    lo = 1 << grid_bits
    if greedy_grid_failure(lo, beta, max_items, grid_bits) <= target:
        return lo
    hi = lo + 1
    while greedy_grid_failure(hi, beta, max_items, grid_bits) > target:
        hi = lo + 2 * (hi - lo)
    while hi - lo > 1:  # f(lo) > target >= f(hi)
        mid = (lo + hi) // 2
        if greedy_grid_failure(mid, beta, max_items, grid_bits) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def grid_threshold_of(method: str, beta: float, delta: float, max_items: int, grid_bits: int = GRID_BITS) -> int:
    """R of a Laplace policy (module docstring, (2)): count's new items weigh 1, the weighted and
    policy Laplace ones 1/t, policy-greedy's sum to 1."""
    if method == "policy-greedy":
        return greedy_grid_threshold(beta, delta, max_items, grid_bits)
    t = np.arange(1, int(max_items) + 1, dtype=np.float64)
    light = np.ones_like(t) if method == "count" else 1.0 / t
    return laplace_grid_threshold(beta, delta, max_items, light, grid_bits)


def grid_weight_for(probability: float, beta: float, threshold: int, grid_bits: int = GRID_BITS) -> float:
    """A grid weight released with probability at least ``probability`` (>= 1/2):
    (R + 1 + m)·2^-g with P[Z > m] <= 1 − p."""
    if not 0.5 <= probability < 1.0:
        raise ParameterError("weight_for needs a probability in [0.5, 1)")
    m = int(_quantiles(float(beta), np.array([1.0 - float(probability)]))[0])
    return math.ldexp(threshold + 1 + m, -grid_bits)


def _laplace_draws(beta: Fraction, size: int, rng: np.random.Generator) -> np.ndarray:
    if beta.numerator < _BATCH_NUMERATOR:
        return discrete_laplace_batch(beta, size, rng)
    return np.asarray(discrete_laplace(beta, rng, size=size), dtype=np.int64)


#: Items a :class:`GridMask` draws for at a time: a fixed block, whatever the batches.
BLOCK = 4096


class GridMask:
    """The mask of one stream of items (one noise bucket, batch after batch): item i of the
    stream gets the i-th discrete Laplace draw and the i-th uniform 64-bit integer of the
    rounding (:func:`dp_spark.noise.discrete_batch.bernoulli_double`) of ``rng``'s blocks of
    ``block`` items (default :data:`BLOCK`), so the draws of an item do not depend on where the
    batches break (a rejection sampler run per batch would); a caller passing the whole stream in
    one call gives its length as ``block`` and draws exactly that many. Items outside the support
    use up their slot and are never released. Guarantee as :func:`laplace_grid_mask`."""

    def __init__(self, scale: float, rho: float, held_support: bool, rng: np.random.Generator,
                 grid_bits: int = GRID_BITS, block: int = BLOCK):
        self.beta = rational_scale(math.ldexp(float(scale), grid_bits))  # never below the plan's β
        self.threshold = math.ceil(math.ldexp(float(rho), grid_bits))  # never below the plan's R
        self.held_support = bool(held_support)
        self.rng = check_rng(rng)
        self.grid_bits = int(grid_bits)
        self.block = max(1, int(block))
        self._noise = np.zeros(0, dtype=np.int64)
        self._uniform = np.zeros(0, dtype=np.uint64)

    def _take(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        noise, uniform = [self._noise], [self._uniform]
        have = self._noise.size
        while have < size:  # block after block: the same draws however the items are batched
            noise.append(_laplace_draws(self.beta, self.block, self.rng))
            uniform.append(self.rng.integers(0, 2**64, size=self.block, dtype=np.uint64))
            have += self.block
        self._noise, self._uniform = np.concatenate(noise), np.concatenate(uniform)
        noise, uniform = self._noise[:size], self._uniform[:size]
        self._noise, self._uniform = self._noise[size:], self._uniform[size:]
        return noise, uniform

    def __call__(self, weights: np.ndarray) -> np.ndarray:
        weights = np.asarray(weights, dtype=np.float64)
        flat = weights.reshape(-1)
        noise, uniform = self._take(flat.size)
        support = flat >= 0.0 if self.held_support else flat > 0.0
        out = np.zeros(flat.size, dtype=bool)
        idx = np.flatnonzero(support)
        if idx.size:
            x = np.ldexp(flat[idx], self.grid_bits)
            whole = np.floor(x)
            if not np.all(whole < 2.0**62):
                raise ParameterError("a histogram weight is too large for the grid")
            scaled = np.ldexp(x - whole, 64)  # the rounding's Bernoulli, as bernoulli_double
            top = np.floor(scaled)
            u = uniform[idx]
            m = top.astype(np.uint64)
            up = u < m
            tie = np.flatnonzero(u == m)  # probability 2^-64 each: resolved on the rest, exactly
            if tie.size:
                up[tie] = bernoulli_double((scaled - top)[tie], self.rng)
            cells = whole.astype(np.int64) + up
            out[idx] = cells + noise[idx] > self.threshold
        return out.reshape(weights.shape)


def laplace_grid_mask(weights: np.ndarray, scale: float, rho: float, held_support: bool,
                      rng: np.random.Generator, grid_bits: int = GRID_BITS) -> np.ndarray:
    """Boolean mask of the released items: ⌊x⌋ + B + Z > R over the support (module docstring),
    β = ``scale``·2^g rounded up onto 2^-10, R = ⌈``rho``·2^g⌉; one rounding and one noise draw per
    item (:class:`GridMask`, exactly one block of ``len(weights)`` draws). Guarantee: the module
    docstring's, for a plan of :func:`dp_spark.mechanisms.set_union.plan_set_union`."""
    return GridMask(scale, rho, held_support, rng, grid_bits, block=np.size(weights))(weights)
