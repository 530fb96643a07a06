"""Buffered-linear-Toeplitz (BLT) factorized counter: a streaming continual counter with O(n) state.

Releases, one step at a time, noisy prefix sums D_w(t) = Σ_{s≤t} x_s of the w-truncated difference
stream x (as the tree of :mod:`.tree` and the square-root counter of :mod:`.factorized` do) under
ρ-zCDP for the item-level relations of :mod:`.relations`, with exact integer noise, integer outputs,
n integers and 2n + 3 floats of state (plus at most ``PREFETCH`` pre-drawn noise values) and a step
cost independent of t (O(n) plus one exact draw, made ahead in batches of ``PREFETCH``).

Sources. Dvijotham, McMahan, Pillutla, Steinke, Thakurta, "Efficient and Near-Optimal Noise
Generation for Streaming Differential Privacy" (arXiv 2404.16706, 2024): the BLT family
r_0 = 1, r_k = Σ_i s_i d_i^(k−1) with its n-buffer streaming product, fitted to approach the square
root factorization; only their abstract was read, the parametrisation as in jax_privacy's
``buffered_toeplitz`` docstrings, so every statement below is derived here and checked by the tests.
Jain, Kalemaj, Raskhodnikova, Sivakumar, Smith (NeurIPS 2023): the reduction of turnstile distinct
counting to the prefix sums of the w-truncated difference stream, the neighbouring relations.
Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020): an integer
statistic plus N_Z(0, σ²) per coordinate is Δ²/(2σ²)-zCDP for ℓ2 sensitivity Δ (as cited in
:mod:`dp_spark.noise`), and the discrete Gaussian's variance is at most σ².

Factorization. A (T×T lower-triangular ones) = L·C with C the lower-triangular Toeplitz matrix of r
and L = A C^(−1) that of ℓ, the coefficients of 1/((1−z)r(z)). With dyadic public parameters
d_i = D_i/2^K ∈ (0, 1], s_i = G_i/2^K > 0, Σ s_i ≤ 1 (integers D_i, G_i, K = 36 + max(0, log2 T − 20);
:class:`BLTParams` checks and refuses otherwise), r is positive and non-increasing: r_1 = Σ s_i ≤ 1 =
r_0 and every term decays. So the flippancy bounds of :mod:`.factorized` (Lemmas A, B, C, which need
only r ≥ 0 non-increasing) bound ‖CΔ‖² for neighbouring truncated streams.

Closed forms (:func:`strategy_square_sums`, :func:`prefix_square_sums`, checked against the direct
series in the tests). S_r(n) = Σ_{k<n} r_k² = 1 + Σ_ij s_i s_j Σ_{k<n−1} (d_i d_j)^k. The inverse C^(−1)
runs the same buffers on its own output: x_t = y_t − sᵀb(t−1), b(t) = M b(t−1) + 1·y_t with
M = diag(d) − 1sᵀ, so ℓ_k = Σ_{j≤k} (C^(−1))_{j0} = 1 − sᵀ(I−M)^(−1)(I−M^(k))1 = α + Σ_m β_m λ_m^k
(λ the eigenvalues of M) and S_ℓ(t) = Σ_{k<t} ℓ_k² is a sum of geometric series. Where M's
eigenvectors are ill-conditioned (a buffer with d = 1 and a negligible scale) that form loses
accuracy, so what the counter states and the fit minimises is computed without it: the counter
runs the inverse on a unit impulse beside the data (ℓ_k and S_ℓ(t) in O(n) per step), and
:func:`prefix_square_sums_gram` sums the Gram matrix of (ℓ_k, M^k 1) by doubling.

Sensitivity (:func:`sensitivity_bound`). An integer upper sequence R_j ≥ 2^30 r_j, non-increasing, is
computed exactly by ceiling fixed-point recurrences (no floating point); U_R(w) (item removal,
Lemma A) or min(4U_R, V_R) (subset, Lemmas B, C) of :mod:`.factorized` then bound 2^60·‖CΔ‖² exactly
(each row bound of the lemmas is monotone in the coefficients, so an upper sequence that is itself
non-increasing gives a valid bound).

Fixed-point streaming product (data side, exact integers). State B_i ∈ Z (initially 0). Step t:
Y_t = 2^K x_t + Σ_i ⌊G_i B_i/2^K⌋ (the old state), then B_i ← ⌊D_i B_i/2^K⌋ + 2^K x_t.

Lemma D. −M < Y_t − 2^K(Cx)_t ≤ 0 for every t, with M = Σ_{i: d_i<1} s_i/(1−d_i) + n.
Proof. The exact product has B_i^lin(t) = d_i B_i^lin(t−1) + 2^K x_t and 2^K(Cx)_t = 2^K x_t +
Σ_i s_i B_i^lin(t−1). The floor gives B_i(t) = d_i B_i(t−1) − φ + 2^K x_t with φ ∈ [0, 1), so
E_i = B_i − B_i^lin satisfies E_i(t) = d_i E_i(t−1) − φ, E_i(0) = 0, hence E_i ∈ (−1/(1−d_i), 0]
(and E_i ≡ 0 when d_i = 1: D_i = 2^K, no rounding). Likewise Y_t = 2^K x_t + Σ_i (s_i B_i(t−1) − ψ_i)
with ψ_i ∈ [0, 1), so Y_t − 2^K(Cx)_t = Σ_i (s_i E_i(t−1) − ψ_i) ∈ (−M, 0]. ∎

Privacy. Y is a deterministic integer function of x. For neighbours x, x' (which agree before the
first step t_0 where they differ, so Y_t = Y'_t for t < t_0), Y − Y' = 2^K C(x − x') + (E − E') with
|E_t − E'_t| < M, so ‖Y − Y'‖₂ ≤ 2^K √B_C(w) + M √T ≤ Δ̌ (an integer, rounded up exactly from
R, M and T). The release ỹ_t = Y_t + Z_t with Z_t ~ N_Z(0, σ̌²) i.i.d., σ̌² ≥ Δ̌²/(2ρ) exactly
(``rational_sigma2``), is ρ-zCDP: per coordinate D_α(N_Z(a, σ̌²) ‖ N_Z(b, σ̌²)) ≤ α(a−b)²/(2σ̌²) for
integers a, b (CKS 2020), Rényi divergences add over independent coordinates and the adaptive
stream is handled coordinate by coordinate (the t-th coordinate's mean is a function of the
data alone). Everything released is a function of ỹ only: x̂_t = 2^−K ỹ_t − Σ_i s_i b̂_i(t−1),
b̂_i ← d_i b̂_i + x̂_t (float), estimate_t = round(Σ_{r≤t} x̂_r); post-processing.

Error. 2^−K A C^(−1) ỹ = Ax + 2^−K L Z + 2^−K L E: noise variance ≤ (σ̌ 2^−K)² S_ℓ(t) (the statement,
``std_t`` = σ̌ 2^−K √S_ℓ(t)), a deterministic bias |2^−K (LE)_t| ≤ 2^−K M Σ_{j<t}|ℓ_j| ≤
2^−K M √(t S_ℓ(t)) (negligible: :meth:`BLTCounter.bias_bound`), plus ≤ 1/2 from the rounding.

Parameters. :func:`table_params` picks public (d, s) from a committed table fitted per
(log2 T, log2 w) by ``benchmarks/blt_fit.py`` (objective: (√U_r(w) + 2^−K M √T)²·S_ℓ(T), the
maximum variance per 1/(2ρ) at the quantised parameters); any valid parameters give
the same guarantee, the table only affects accuracy.

Pure numpy; never imports pyspark.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from dp_spark import checks as _checks
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.continual_distinct._blt_table import BUFFERS as TABLE_BUFFERS
from dp_spark.mechanisms.continual_distinct._blt_table import TABLE
from dp_spark.mechanisms.continual_distinct.factorized import removal_bound, subset_bound
from dp_spark.mechanisms.continual_distinct.relations import check_relation
from dp_spark.mechanisms.continual_distinct.tree import integer_vector
from dp_spark.noise.discrete_batch import discrete_gaussian_batch_wide, rational_sigma2
from dp_spark.noise.records import NoiseDraw
from dp_spark.noise.rng import check_rng

__all__ = [
    "BLTCounter",
    "BLTParams",
    "BLTRelease",
    "blt_bits",
    "blt_counts",
    "prefix_coefficients",
    "prefix_square_sums",
    "sensitivity_bound",
    "strategy_coefficients",
    "strategy_square_sums",
    "table_params",
    "upper_coefficients",
]

_UPPER_BITS = 30  # R_j ≥ 2^30 r_j: R_j² ≤ 2^60 keeps the weights of the subset bound in int64
_FIXED_POINT = 64  # bits of the ceiling recurrences for s_i d_i^k
_MAX_HORIZON = 1 << 25
_STATE_KIND = "dp_spark.mechanisms.continual_distinct.BLTCounter"
_STATE_VERSION = 2
_READABLE_VERSIONS = (1, 2)  # version 1 had no pre-drawn noise
#: Noise is drawn this many steps ahead (fewer near the horizon) in one vectorised call: the
#: draws are i.i.d. and independent of the data, so drawing Z_t before x_t arrives leaves the
#: joint distribution of (ỹ_t) unchanged; it makes a step's draw ~5 µs instead of ~300 µs.
PREFETCH = 1024


def blt_bits(horizon: int) -> int:
    """K = 36 + max(0, log2 T − 20): the fixed-point scale 2^K of the BLT's parameters and state."""
    return 36 + max(0, _checks.log2_exact(_checks.horizon(horizon)) - 20)


@dataclass(frozen=True)
class BLTParams:
    """Dyadic BLT parameters d_i = D_i/2^K, s_i = G_i/2^K (``decays`` D, ``scales`` G, ``bits`` K).

    Checked on construction: D_i ∈ [1, 2^K], G_i ≥ 1, Σ G_i ≤ 2^K (so r is positive and
    non-increasing), K ≤ 52 (d_i, s_i exact in float64)."""

    bits: int
    decays: tuple[int, ...]
    scales: tuple[int, ...]

    def __post_init__(self):
        bits = _checks.integer(self.bits, "bits", 1, 52)
        decays = tuple(_checks.integer(v, "BLT decay numerator", 1, 1 << bits) for v in self.decays)
        scales = tuple(_checks.integer(v, "BLT scale numerator", 1, 1 << bits) for v in self.scales)
        if not decays or len(decays) != len(scales):
            raise ParameterError("a BLT needs equally many decays and scales (at least one)")
        if sum(scales) > (1 << bits):
            raise ParameterError("BLT scales must sum to at most 1 (so r is non-increasing)")
        object.__setattr__(self, "bits", bits)
        object.__setattr__(self, "decays", decays)
        object.__setattr__(self, "scales", scales)

    @classmethod
    def from_floats(cls, decays, scales, bits: int) -> BLTParams:
        """Quantise real (d, s) onto the 2^−K grid: D_i = round(d_i 2^K) clipped to [1, 2^K],
        G_i = ⌊s_i 2^K⌋ (at least 1), so Σ s_i ≤ 1 is kept."""
        unit = 1 << bits
        d = [min(unit, max(1, round(float(v) * unit))) for v in decays]
        s = [max(1, math.floor(float(v) * unit)) for v in scales]
        excess = sum(s) - unit  # > 0 only when the floats sum to 1 up to rounding
        if excess > 0:
            top = s.index(max(s))
            s[top] -= excess
        return cls(bits, tuple(d), tuple(s))

    @property
    def buffers(self) -> int:
        return len(self.decays)

    @property
    def d(self) -> np.ndarray:
        return np.asarray([math.ldexp(v, -self.bits) for v in self.decays])

    @property
    def s(self) -> np.ndarray:
        return np.asarray([math.ldexp(v, -self.bits) for v in self.scales])

    def slack(self) -> Fraction:
        """M = Σ_{i: d_i<1} s_i/(1−d_i) + n of Lemma D, exactly."""
        unit = 1 << self.bits
        total = Fraction(self.buffers)
        for dn, gn in zip(self.decays, self.scales):
            if dn < unit:
                total += Fraction(gn, unit - dn)
        return total

    def to_dict(self) -> dict:
        return {"bits": self.bits, "decays": list(self.decays), "scales": list(self.scales)}

    @classmethod
    def from_dict(cls, data: dict) -> BLTParams:
        return cls(int(data["bits"]), tuple(int(v) for v in data["decays"]), tuple(int(v) for v in data["scales"]))


def table_params(horizon: int, flippancy_bound: int, buffers: int = TABLE_BUFFERS) -> BLTParams:
    """The committed fitted parameters for (T, w), quantised at K = :func:`blt_bits`(T).

    Entry (log2 T, log2 w) with log2 T clipped to the table's range and w rounded down to a power of
    two at most the table's largest for that T (public values only; any entry is valid, the choice
    only affects accuracy)."""
    horizon = _checks.horizon(horizon)
    w = _checks.integer(flippancy_bound, "flippancy_bound", 1)
    entries = TABLE[buffers] if buffers in TABLE else None
    if entries is None:
        raise ParameterError(f"no fitted BLT table for {buffers} buffers; one of {sorted(TABLE)}")
    logs = sorted({k for k, _ in entries})
    log_t = min(max(_checks.log2_exact(horizon), logs[0]), logs[-1])
    log_w = min(w.bit_length() - 1, max(j for k, j in entries if k == log_t))
    d, s = entries[(log_t, log_w)]
    return BLTParams.from_floats(d, s, blt_bits(horizon))


# --------------------------------------------------------------------------- series and closed forms


def strategy_coefficients(params: BLTParams, n: int) -> np.ndarray:
    """r_k for k < n by the direct series r_0 = 1, r_k = Σ s_i d_i^(k−1) (float64; analysis)."""
    k = np.arange(max(n - 1, 0), dtype=np.float64)
    r = np.ones(n)
    if n > 1:
        r[1:] = (params.s[:, None] * params.d[:, None] ** k[None, :]).sum(axis=0)
    return r


def prefix_coefficients(params: BLTParams, n: int) -> np.ndarray:
    """ℓ_k for k < n (A C^(−1) = Toeplitz(ℓ)) by running the inverse recurrence on a unit impulse
    (float64, O(n·buffers); the direct series the closed forms are checked against)."""
    d, s = params.d.tolist(), params.s.tolist()
    b = [0.0] * len(d)
    out = np.empty(n)
    total = 0.0
    for k in range(n):
        xk = (1.0 if k == 0 else 0.0) - sum(si * bi for si, bi in zip(s, b))
        b = [di * bi + xk for di, bi in zip(d, b)]
        total += xk
        out[k] = total
    return out


def _geo(x: complex, n: int) -> complex:
    """Σ_{k<n} x^k (x = 1 allowed)."""
    if x == 1:
        return complex(n)
    return (1 - x**n) / (1 - x)


def _floats(params) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(d, s) as float tuples from BLTParams or from a pair of real sequences (fitting)."""
    if isinstance(params, BLTParams):
        return tuple(params.d.tolist()), tuple(params.s.tolist())
    d, s = params
    return tuple(float(v) for v in d), tuple(float(v) for v in s)


def _geo_below_one(gap: float, n: int) -> float:
    """Σ_{k<n} x^k for x = 1 − gap ∈ [0, 1] (gap given exactly, so x near 1 loses nothing)."""
    if gap == 0:
        return float(n)
    if gap >= 1:
        return 1.0 if n > 0 else 0.0
    return -math.expm1(n * math.log1p(-gap)) / gap


def strategy_square_sums(params, n: int) -> float:
    """S_r(n) = Σ_{k<n} r_k² in closed form: 1 + Σ_ij s_i s_j Σ_{k<n−1} (d_i d_j)^k (float; 1 − d_i d_j
    is formed as (1 − d_i) + d_i(1 − d_j)). ``params``: BLTParams or a pair (d, s) of real sequences."""
    if n <= 1:
        return float(max(n, 0))
    d, s = _floats(params)
    return 1.0 + sum(si * sj * _geo_below_one((1 - di) + di * (1 - dj), n - 1)
                     for di, si in zip(d, s) for dj, sj in zip(d, s))


def _inverse_modes(params) -> tuple[complex, tuple[complex, ...], tuple[complex, ...]]:
    return _modes(*_floats(params))


@lru_cache(maxsize=64)
def _modes(d_values: tuple[float, ...], s_values: tuple[float, ...]) -> tuple:
    d, s = np.asarray(d_values), np.asarray(s_values)
    matrix = np.diag(d) - np.outer(np.ones(len(d)), s)
    lam, vectors = np.linalg.eig(matrix)
    left = s @ vectors
    right = np.linalg.solve(vectors, np.ones(len(d)))
    beta = left * right / (1 - lam)
    alpha = 1 - np.sum(beta)
    return complex(alpha), tuple(complex(v) for v in beta), tuple(complex(v) for v in lam)


def spectral_radius(params) -> float:
    """max |λ| over the inverse's modes; < 1 means the float inverse is stable."""
    d, s = (np.asarray(v) for v in _floats(params))
    return float(np.max(np.abs(np.linalg.eigvals(np.diag(d) - np.outer(np.ones(d.shape[0]), s)))))


def prefix_square_sums(params, t: int) -> float:
    """S_ℓ(t) = Σ_{k<t} ℓ_k² in closed form from ℓ_k = α + Σ_m β_m λ_m^k (float, O(n²));
    ``params``: BLTParams or a pair (d, s)."""
    if t <= 0:
        return 0.0
    alpha, beta, lam = _inverse_modes(params)
    total = t * alpha * alpha + 2 * alpha * sum(b * _geo(v, t) for b, v in zip(beta, lam))
    total += sum(bi * bj * _geo(vi * vj, t) for bi, vi in zip(beta, lam) for bj, vj in zip(beta, lam))
    return max(total.real, 0.0)


def prefix_square_sums_gram(params, t: int) -> float:
    """S_ℓ(t) without an eigendecomposition: z_k = (ℓ_k, M^k 1) follows z_{k+1} = Q z_k with
    Q = [[1, −sᵀ], [0, M]], z_0 = (1, 1), so S_ℓ(t) is the (0, 0) entry of the Gram sum
    G(t) = Σ_{k<t} Q^k z_0 z_0ᵀ (Q^k)ᵀ, computed by doubling (G(2m) = G(m) + Q^m G(m) (Q^m)ᵀ) in
    O(n³ log t). Sums of positive semidefinite terms: robust where eigenvectors are ill-conditioned;
    the fit's objective and the check of the closed form."""
    if t <= 0:
        return 0.0
    d, s = (np.asarray(v) for v in _floats(params))
    n = d.shape[0]
    q = np.zeros((n + 1, n + 1))
    q[0, 0] = 1.0
    q[0, 1:] = -s
    q[1:, 1:] = np.diag(d) - np.outer(np.ones(n), s)
    start = np.ones(n + 1)
    gram = np.zeros((n + 1, n + 1))
    power = np.eye(n + 1)
    for bit in bin(int(t))[2:]:
        gram = gram + power @ gram @ power.T
        power = power @ power
        if bit == "1":
            moved = power @ start
            gram = gram + np.outer(moved, moved)
            power = q @ power
    return float(gram[0, 0])


# --------------------------------------------------------------------------- sensitivity


@lru_cache(maxsize=16)
def _upper_coefficients(params: BLTParams, horizon: int) -> np.ndarray:
    shift = _FIXED_POINT - params.bits
    unit_shift = params.bits
    total = [0] * horizon
    for dn, gn in zip(params.decays, params.scales):
        h = gn << shift  # = 2^F s_i exactly
        for j in range(1, horizon):
            total[j] += h
            h = -((-h * dn) >> unit_shift)  # ⌈h·d_i⌉ ≥ 2^F s_i d_i^j
    down = _FIXED_POINT - _UPPER_BITS
    out = np.empty(horizon, dtype=np.int64)
    out[0] = 1 << _UPPER_BITS
    if horizon > 1:
        out[1:] = [-((-v) >> down) for v in total[1:]]
    if np.any(out <= 0) or np.any(np.diff(out) > 0):
        raise ParameterError("internal: the BLT's upper coefficients are not positive non-increasing")
    out.flags.writeable = False
    return out


def upper_coefficients(params: BLTParams, horizon: int) -> np.ndarray:
    """R_j ≥ 2^30 r_j for j < T (int64, read-only), exact: ceiling fixed-point recurrences at 64 bits
    for each s_i d_i^(j−1), summed and rounded up; positive and non-increasing (checked)."""
    horizon = _checks.horizon(horizon)
    if horizon > _MAX_HORIZON:
        raise ParameterError("the BLT counter supports horizons up to 2^25")
    return _upper_coefficients(params, horizon)


@lru_cache(maxsize=64)
def _sensitivity_bound(params: BLTParams, horizon: int, w: int, relation: str) -> int:
    upper = upper_coefficients(params, horizon)
    core = removal_bound(upper, horizon, w) if relation == "item-removal" else subset_bound(upper, horizon, w)
    sens_c = isqrt_ceil(int(core) << (2 * (params.bits - _UPPER_BITS)))  # ≥ 2^K √B_C(w)
    slack = params.slack() ** 2 * horizon  # (M √T)²
    return sens_c + isqrt_ceil(math.ceil(slack))


def sensitivity_bound(params: BLTParams, horizon: int, flippancy_bound: int, relation: str = "subset") -> int:
    """Δ̌ ≥ 2^K √B_C(w) + M √T, an integer: the ℓ2 sensitivity of the fixed-point strategy Y on the
    w-truncated stream under ``relation`` (module docstring, Lemma D and "Privacy")."""
    horizon = _checks.horizon(horizon)
    w = _checks.integer(flippancy_bound, "flippancy_bound", 1)
    if params.bits < _UPPER_BITS:
        raise ParameterError(f"the BLT's bits must be at least {_UPPER_BITS}")
    return _sensitivity_bound(params, horizon, w, check_relation(relation))


def isqrt_ceil(value: int) -> int:
    """⌈√value⌉ for an integer value ≥ 0."""
    root = math.isqrt(value)
    return root if root * root == value else root + 1


# --------------------------------------------------------------------------- the counter


def _inverse_step(d: list[float], s: list[float], buffers: list[float], value: float) -> tuple[float, list[float]]:
    """One step of C^(−1) on its own buffers: x̂ = value − Σ s_i b_i, b_i ← d_i b_i + x̂ (float)."""
    xhat = value - sum(si * bi for si, bi in zip(s, buffers))
    return xhat, [di * bi + xhat for di, bi in zip(d, buffers)]


class BLTCounter:
    """The streaming BLT counter (module docstring): ``step(x_t, rng)`` → (estimate_t, std_t).

    ``sigma2`` is σ̌² on the 2^K grid (exact rational); :meth:`for_flippancy` calibrates it to ρ.
    Data side: n Python ints; noise side: n + 1 floats, n + 2 for the stated variance, and the
    noise drawn ahead (up to :data:`PREFETCH` ints, drawn before the data of their steps);
    :meth:`to_dict` / :meth:`from_dict` restore bit-exactly (floats as ``float.hex``). The state is
    confidential (exact data sums)."""

    def __init__(self, horizon: int, params: BLTParams, sigma2: object, sensitivity: int | None = None) -> None:
        self.horizon = _checks.horizon(horizon)  #: T (public)
        if not isinstance(params, BLTParams):
            raise ParameterError("params must be BLTParams")
        self.params = params  #: the public BLT parameters
        value = Fraction(sigma2) if not isinstance(sigma2, Fraction) else sigma2
        if value <= 0:
            raise ParameterError("sigma2 must be > 0")
        self._sigma2 = value
        self._sensitivity = sensitivity
        self._unit_shift = params.bits
        self._d = params.d.tolist()
        self._s = params.s.tolist()
        self._t = 0
        self._buffers = [0] * params.buffers
        self._noise_buffers = [0.0] * params.buffers
        self._total = 0.0
        self._impulse = [0.0] * params.buffers  # the inverse run on a unit impulse: ℓ_k, S_ℓ incrementally
        self._ell = 0.0
        self._ell_sq = 0.0
        self._pending: list[int] = []  # noise drawn ahead for the next steps (confidential)

    @classmethod
    def for_flippancy(cls, horizon: int, rho: float, flippancy_bound: int, relation: str = "subset",
                      params: BLTParams | None = None) -> BLTCounter:
        """A counter that is ρ-zCDP on the w-truncated stream under ``relation``: σ̌² =
        ``rational_sigma2``(Δ̌²/(2ρ)) with Δ̌ = :func:`sensitivity_bound`; ``params`` default
        :func:`table_params`(T, w)."""
        horizon = _checks.horizon(horizon)
        rho = _checks.positive(rho, "rho")
        params = table_params(horizon, flippancy_bound) if params is None else params
        sens = sensitivity_bound(params, horizon, flippancy_bound, relation)
        sigma2 = rational_sigma2(Fraction(sens * sens) / (2 * Fraction(rho)))
        return cls(horizon, params, sigma2, sens)

    @property
    def sigma2(self) -> Fraction:
        """σ̌² (exact, on the 2^K grid)."""
        return self._sigma2

    @property
    def sigma(self) -> float:
        """σ̌/2^K: the noise scale in count units."""
        return math.sqrt(self._sigma2) / (1 << self.params.bits)

    @property
    def sensitivity_int(self) -> int | None:
        """Δ̌ (an integer on the 2^K grid), when known."""
        return self._sensitivity

    @property
    def steps_done(self) -> int:
        return self._t

    def std(self, t: int) -> float:
        """σ̌·2^−K·√S_ℓ(t): the bound on the noise std of the estimate at step t (count units), S_ℓ by
        :func:`prefix_square_sums_gram` (``step`` states the same, tracked incrementally)."""
        return self.sigma * math.sqrt(prefix_square_sums_gram(self.params, t))

    def bias_bound(self) -> float:
        """2^−K·M·√(t·S_ℓ(t)) ≥ the deterministic fixed-point bias at the current step t (count units)."""
        return float(self.params.slack()) * math.sqrt(self._t * self._ell_sq) / (1 << self.params.bits)

    def advance(self, x: int) -> int:
        """The data side of one step: Y_t (exact int) from x_t; updates the integer state."""
        k = self._unit_shift
        scaled = int(x) << k
        y = scaled + sum((g * b) >> k for g, b in zip(self.params.scales, self._buffers))
        self._buffers = [((dn * b) >> k) + scaled for dn, b in zip(self.params.decays, self._buffers)]
        return y

    def release(self, noisy: int) -> int:
        """The noise side of one step (post-processing of ỹ_t only): the integer estimate."""
        xhat, self._noise_buffers = _inverse_step(self._d, self._s, self._noise_buffers,
                                                  math.ldexp(float(noisy), -self._unit_shift))
        self._total += xhat
        return int(round(self._total))

    def _track_variance(self) -> float:
        """Advance ℓ by one step (the inverse on a unit impulse) and return σ̌·2^−K·√S_ℓ(t): O(n)."""
        xhat, self._impulse = _inverse_step(self._d, self._s, self._impulse, 1.0 if self._t == 0 else 0.0)
        self._ell += xhat
        self._ell_sq += self._ell * self._ell
        return self.sigma * math.sqrt(self._ell_sq)

    def step(self, x: int, rng: np.random.Generator) -> tuple[int, float]:
        """Consume x_t (an integer) and return (estimate_t, std_t); one discrete Gaussian draw (taken
        from the draws made ahead, :data:`PREFETCH` at a time)."""
        check_rng(rng)
        if self._t >= self.horizon:
            raise ParameterError("the horizon is reached; start a new counter (and budget) for more steps")
        y = self.advance(x)
        if not self._pending:
            self._pending = _draw_ahead(self._sigma2, self.horizon - self._t, rng)
        estimate = self.release(y + self._pending.pop())
        std = self._track_variance()
        self._t += 1
        return estimate, std

    def noise_record(self, step: str, flippancy_bound: int, relation: str, draws: int | None = None) -> NoiseDraw:
        """The public record of the draws so far (kind "factorized-counter": a discrete Gaussian per
        coordinate of an integer strategy; scale σ̌/2^K, sensitivity Δ̌/2^K)."""
        sens = self._sensitivity
        if sens is None:
            sens = sensitivity_bound(self.params, self.horizon, flippancy_bound, relation)
        scale = 1 << self.params.bits
        return NoiseDraw(step, "factorized-counter", scale=self.sigma, std=self.sigma, sensitivity=sens / scale,
                         draws=self._t if draws is None else draws,
                         target=(f"the BLT-factorized stream ({self.params.buffers} buffers, fixed point 2^-"
                                 f"{self.params.bits}) truncated at flippancy {flippancy_bound}"),
                         parameters={"flippancy_bound": int(flippancy_bound), "norm": 2})

    def to_dict(self) -> dict:
        """JSON-serialisable checkpoint (confidential: exact data-side sums)."""
        return {
            "kind": _STATE_KIND,
            "version": _STATE_VERSION,
            "horizon": self.horizon,
            "params": self.params.to_dict(),
            "sigma2": [self._sigma2.numerator, self._sigma2.denominator],
            "t": self._t,
            "buffers": [str(v) for v in self._buffers],
            "noise_buffers": [v.hex() for v in self._noise_buffers],
            "total": self._total.hex(),
            "impulse": [v.hex() for v in self._impulse],
            "ell": self._ell.hex(),
            "ell_sq": self._ell_sq.hex(),
            "pending": [str(v) for v in self._pending],
        }

    @classmethod
    def from_dict(cls, state: dict, sensitivity: int | None = None) -> BLTCounter:
        """Restore a counter saved by :meth:`to_dict`; nothing is re-drawn."""
        if not isinstance(state, dict) or state.get("kind") != _STATE_KIND:
            raise ParameterError("state is not a saved BLTCounter (wrong or missing 'kind')")
        if state.get("version") not in _READABLE_VERSIONS:
            raise ParameterError(f"BLTCounter state version must be one of {_READABLE_VERSIONS}")
        params = BLTParams.from_dict(state["params"])
        num, den = (int(v) for v in state["sigma2"])
        counter = cls(int(state["horizon"]), params, Fraction(num, den), sensitivity)
        counter._t = _checks.integer(state["t"], "state['t']", 0, counter.horizon)
        buffers = [int(v) for v in state["buffers"]]
        noise = [float.fromhex(v) for v in state["noise_buffers"]]
        if len(buffers) != params.buffers or len(noise) != params.buffers:
            raise ParameterError("BLTCounter state has the wrong number of buffers")
        counter._buffers = buffers
        counter._noise_buffers = noise
        counter._total = float.fromhex(state["total"])
        counter._impulse = [float.fromhex(v) for v in state["impulse"]]
        counter._ell = float.fromhex(state["ell"])
        counter._ell_sq = float.fromhex(state["ell_sq"])
        if len(counter._impulse) != params.buffers:
            raise ParameterError("BLTCounter state has the wrong number of buffers")
        counter._pending = [int(v) for v in state.get("pending", [])]
        if len(counter._pending) > counter.horizon - counter._t:
            raise ParameterError("BLTCounter state holds more pre-drawn noise than steps remain")
        return counter


def _draw_ahead(sigma2: Fraction, remaining: int, rng: np.random.Generator) -> list[int]:
    """min(PREFETCH, remaining) i.i.d. N_Z(0, σ̌²) draws, in the order the steps use them (pop from
    the end)."""
    draws = discrete_gaussian_batch_wide(sigma2, min(PREFETCH, remaining), rng)
    return [int(v) for v in draws[::-1]]


@dataclass(frozen=True)
class BLTRelease:
    """A whole column run by :func:`blt_counts`: ``estimates`` (int64), ``std`` (count units),
    ``strategy`` (the exact integer Y, object array; confidential, for tests)."""

    estimates: np.ndarray
    std: np.ndarray
    strategy: np.ndarray


def blt_counts(stream: object, counter: BLTCounter, rng: np.random.Generator) -> BLTRelease:
    """Run ``counter``'s recurrence over the whole integer column ``stream`` from its current state
    (its own loop, the same operations in the same order and the same draws as :meth:`BLTCounter.step`,
    so the results are identical): the batch form of the streaming counter. ``counter`` is left
    unchanged, so it must hold no noise drawn ahead (refused otherwise: every run would reuse it)."""
    check_rng(rng)
    values = integer_vector(stream, "stream")
    params = counter.params
    k = params.bits
    if counter.steps_done + values.shape[0] > counter.horizon:
        raise ParameterError("the stream is longer than the counter's remaining horizon")
    if counter._pending:  # the counter is left unchanged, so its draws ahead would be used twice
        raise ParameterError("blt_counts runs from a counter with no noise drawn ahead (a fresh counter, or one "
                             "restored before its first step); this one's draws would be reused")
    decays, scales = params.decays, params.scales
    d, s = params.d.tolist(), params.s.tolist()
    state = counter.to_dict()
    buffers = [int(v) for v in state["buffers"]]
    noise_buffers = [float.fromhex(v) for v in state["noise_buffers"]]
    total = float.fromhex(state["total"])
    impulse = [float.fromhex(v) for v in state["impulse"]]
    ell, ell_sq = float.fromhex(state["ell"]), float.fromhex(state["ell_sq"])
    pending = [int(v) for v in state["pending"]]
    sigma2, sigma, start = counter.sigma2, counter.sigma, counter.steps_done
    n = values.shape[0]
    estimates = np.empty(n, dtype=np.int64)
    std = np.empty(n)
    strategy = np.empty(n, dtype=object)
    for t, x in enumerate(values.tolist()):
        scaled = int(x) << k
        y = scaled
        for g, b in zip(scales, buffers):
            y += (g * b) >> k
        buffers = [((dn * b) >> k) + scaled for dn, b in zip(decays, buffers)]
        strategy[t] = y
        if not pending:
            pending = _draw_ahead(sigma2, counter.horizon - start - t, rng)
        noisy = y + pending.pop()
        xhat, noise_buffers = _inverse_step(d, s, noise_buffers, math.ldexp(float(noisy), -k))
        total += xhat
        estimates[t] = int(round(total))
        xhat, impulse = _inverse_step(d, s, impulse, 1.0 if start + t == 0 else 0.0)
        ell += xhat
        ell_sq += ell * ell
        std[t] = sigma * math.sqrt(ell_sq)
    return BLTRelease(estimates=estimates, std=std, strategy=strategy)
