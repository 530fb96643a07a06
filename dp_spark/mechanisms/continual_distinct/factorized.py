"""Square-root factorized counter for continual distinct counting.

Releases the prefix sums D_w(t) = Σ_{s≤t} x_s of the w-truncated difference stream x
(``summaries.z_truncated[j]``, as the tree of :mod:`.tree` does) under ρ-zCDP for the item-level
relations of :mod:`.relations`, with exact integer noise: the counter of method "bounded" with
``counter="factorized"`` (batch only).

Sources. Jain, Kalemaj, Raskhodnikova, Sivakumar, Smith (NeurIPS 2023): the reduction to the
w-truncated difference stream and the neighbouring relations (Definitions 1.2, 1.3, 3.3, 3.4 and
Theorems 3.1, 3.2 with the proof for Algorithm 1 were read in full for this design). The square-root
factorization of the counting matrix: Fichtenberger, Henzinger, Upadhyay (ICML 2023) and
Henzinger, Upadhyay, Upadhyay (SODA 2023); of these only FHU's abstract was read and HUU only
through citing pages, so no statement of theirs is used: the factorization identity below is
elementary and checked exactly in the tests. Andersson, Jain, Sivakumar (arXiv 2601.02257, 2026)
apply matrix factorization to this reduction; only their abstract was read, and the sensitivity
bounds below are derived here, not taken from them. Canonne, Kamath, Steinke (NeurIPS 2020): the
discrete Gaussian's privacy (as cited in :mod:`dp_spark.noise`), not re-read for this module.

Factorization. A (T×T lower-triangular ones) = L·R with L = R = the lower-triangular Toeplitz
matrix of c_j = C(2j, j)/4^j (c(z) = (1−z)^(−1/2), c(z)² = 1/(1−z)). The idealised mechanism
releases L(Rx + ζ), ζ ~ N(0, σ²I), with per-step variance σ²·S_c(t), S_r(n) = Σ_{j<n} r_j²
(:func:`factorized_variance`); the tree as used today has σ_tree²·popcount(t)
(:func:`tree_variance`, from :mod:`.tree`'s own allocation).

Sensitivity of R on the difference stream (Δ = x − x', only item u's terms differ; ẽ_u, ẽ'_u
have ≤ w flips each). Needs only r_j ≥ 0 non-increasing (true for c and its rounding ř).
S_r is concave with S_r(0) = 0, so max{Σ κ_i S_r(g_i) : Σ g_i ≤ T} is the sum of the T largest
elements of the multiset ⊎_i {κ_i r_j² : j < T} (greedy is exact for separable concave sums).

- Lemma A (item removal, :func:`removal_bound`): Δ = Dẽ_u has m ≤ w nonzeros, ±1, alternating,
  at p_1 < … < p_m. For a row s with p_k ≤ s < p_{k+1}, (RΔ)_s = ±(a_k − a_{k−1} + a_{k−2} − …)
  with a_i = r_{s−p_i} non-decreasing in i, so 0 ≤ bracket ≤ a_k = r_{s−p_k} (pair from the top);
  rows before p_1 are 0. Summing over the segment gives ≤ S_r(g_k), Σ g_k ≤ T; the balanced split
  maximises it: U_r(w) = (T mod m)·S_r(⌊T/m⌋+1) + (m − T mod m)·S_r(⌊T/m⌋), m = min(w, T).
  Also from the proof: (RDẽ)_s has the sign of ẽ(s) after the first flip and |·| ≤ r_{s − last flip}.
- Lemma B (subset, triangle): ‖RΔ‖ ≤ ‖RDẽ‖ + ‖RDẽ'‖, so ‖RΔ‖² ≤ 4·U_r(w).
- Lemma C (subset, segments, :func:`subset_bound`): cut the rows at the union of the flip times
  of ẽ and ẽ' (≤ 2w segments, total length ≤ T). In a segment starting at σ both vectors are
  constant and |A_s|, |B_s| ≤ r_{s−σ} (A = RDẽ, B = RDẽ'); |A_s − B_s| ≤ r_{s−σ} unless both have
  flipped and ẽ(s) ≠ ẽ'(s) ("heavy", ≤ 2r_{s−σ}). A heavy segment starts after f + f' ≥ 3 flips
  (f + f' odd, both ≥ 1) and two heavy segments are ≥ 2 flips apart, so with f + f' ≤ 2w there are
  ≤ w − 1 heavy segments (none for w = 1). A light segment fits a heavy slot, so
  ‖RΔ‖² ≤ V_r(w) = sum of the T largest elements of (w−1)×{4r_j²} ⊎ (w+1)×{r_j²} (2×{r_j²} for
  w = 1). The subset bound is B_r(w) = min(4·U_r(w), V_r(w)).

Both bounds are property-tested (``tests/unit/test_factorized.py``) against brute force over all
≤ w-flip vectors at small T and against random neighbouring streams built with dp_spark's
reference semantics; U is attained at w = 1.

Exact noise (batch, :func:`factorized_counts`). Real R x is not on a lattice, so the data side is
made integer: ř_j = round(2^k c_j) (:func:`sqrt_int_coefficients`, public, exact, non-increasing),
Ř its Toeplitz matrix. Release y = Ř x + Z, Z ~ N_Z(0, σ̌²)^T: Ř x is an integer vector (computed
exactly, :func:`toeplitz_int`) moving by the integer vector ŘΔ with ‖ŘΔ‖² ≤ B_ř(w) (an exact
integer), so y is B_ř(w)/(2σ̌²)-zCDP (discrete Gaussian on an integer statistic, CKS 2020), with no
rounding term. The estimates round(A Ř^(−1) y) are a function of y only (post-processing; float
arithmetic there affects accuracy, not privacy); their noise is (ℓ̌ * Z)_t with ℓ̌ the coefficients
of 1/((1−z)ř(z)), variance ≤ σ̌²·S_ℓ̌(t), plus ≤ 1/2 from the rounding. In count units
σ = σ̌/2^k and the sensitivity is √B_ř(w)/2^k; with the default k = 20 the stated variance is
within 1e-5 of the real square root's (a unit test checks it at T = 2^12 and 2^16).

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
from dp_spark.mechanisms.continual_distinct.relations import check_relation
from dp_spark.mechanisms.continual_distinct.tree import integer_vector, nodes_per_step
from dp_spark.mechanisms.continual_distinct.tree import sigma2_for_flippancy as tree_sigma2_for_flippancy
from dp_spark.noise.discrete import to_fraction
from dp_spark.noise.discrete_batch import discrete_gaussian_batch_wide, rational_sigma2
from dp_spark.noise.records import NoiseDraw
from dp_spark.noise.rng import check_rng

__all__ = [
    "DEFAULT_BITS",
    "FactorizedRelease",
    "factorized_counts",
    "factorized_variance",
    "max_variance_factor",
    "partial_square_sums",
    "prefix_coefficients",
    "removal_bound",
    "sensitivity2",
    "sigma2_for_flippancy",
    "sqrt_coefficients",
    "sqrt_int_coefficients",
    "subset_bound",
    "toeplitz_int",
    "tree_variance",
]

#: k of the integer strategy ř_j = round(2^k c_j) (variance within 1e-5 of the real square root's, unit-tested).
DEFAULT_BITS = 20
_MAX_BITS = 24  # keeps ř_j² sums and the weights of the subset bound inside int64 for T ≤ 2^25
_MAX_HORIZON = 1 << 25  # the NTT primes below hold 2^26-point transforms
_FIXED_POINT = 128  # bits of the fixed-point recurrence for c_j


# --------------------------------------------------------------------------- coefficients


def sqrt_coefficients(horizon: int) -> np.ndarray:
    """c_j = C(2j, j)/4^j for j < T in float64 (c_0 = 1, c_j = c_{j−1}(2j−1)/(2j)); for analysis
    (variances, golden ratios), never for noise."""
    horizon = _checks.horizon(horizon)
    c = np.ones(horizon)
    if horizon > 1:
        j = np.arange(1, horizon, dtype=np.float64)
        c[1:] = np.cumprod((2 * j - 1) / (2 * j))
    return c


@lru_cache(maxsize=8)
def _sqrt_int_coefficients(horizon: int, bits: int) -> np.ndarray:
    shift = _FIXED_POINT - bits
    half = 1 << (shift - 1)
    lo = hi = 1 << _FIXED_POINT  # lo ≤ 2^P·c_j ≤ hi by the floor / ceiling recurrences
    out = np.empty(horizon, dtype=np.int64)
    out[0] = 1 << bits
    for j in range(1, horizon):
        lo = lo * (2 * j - 1) // (2 * j)
        hi = -(-hi * (2 * j - 1) // (2 * j))
        r_lo, r_hi = (lo + half) >> shift, (hi + half) >> shift
        if r_lo != r_hi:  # 2^k c_j within j·2^(k−P) of a half-integer: refuse rather than guess
            raise ParameterError(f"internal: round(2^{bits}·c_{j}) undecided at {_FIXED_POINT} bits")
        out[j] = r_lo
    out.flags.writeable = False
    return out


def sqrt_int_coefficients(horizon: int, bits: int = DEFAULT_BITS) -> np.ndarray:
    """ř_j = round(2^k c_j) (half up), j < T, exactly, as int64 (read-only).

    2^P c_j is enclosed by the floor and ceiling fixed-point recurrences (P = 128 bits); the
    rounding is accepted only where both ends round alike, so ř_j is the exact rounding of the real
    c_j. Rounding is monotone, so ř is non-negative and non-increasing like c (checked by the tests).
    """
    horizon = _checks.horizon(horizon)
    bits = _checks.integer(bits, "bits", 1, _MAX_BITS)
    if horizon > _MAX_HORIZON:
        raise ParameterError(f"horizon must be at most 2^25 for the factorized counter, got {horizon}")
    return _sqrt_int_coefficients(horizon, bits)


def partial_square_sums(r: object) -> np.ndarray:
    """S[n] = Σ_{j<n} r_j² for n = 0..len(r): int64 (exact, overflow checked) for integer r,
    float64 otherwise."""
    array = np.asarray(r)
    if array.ndim != 1:
        raise ParameterError("coefficients must be a 1-d array")
    if array.dtype.kind in "iu":
        top = int(np.max(np.abs(array))) if array.shape[0] else 0
        if array.shape[0] * top * top < 2**62:
            squares = array.astype(np.int64) ** 2
        else:  # exact in Python ints
            squares = np.asarray([int(v) ** 2 for v in array.tolist()], dtype=object)
    else:
        squares = array.astype(np.float64) ** 2
    head = np.zeros(1, dtype=squares.dtype)
    return np.concatenate((head, np.cumsum(squares)))


def _check_monotone(r: np.ndarray) -> None:
    if r.shape[0] == 0 or np.any(r < 0) or np.any(np.diff(r) > 0):
        raise ParameterError("the flippancy bounds need coefficients that are >= 0 and non-increasing")


def _exact(value):
    return int(value) if isinstance(value, (int, np.integer)) else float(value)


def removal_bound(r: object, horizon: int, flippancy_bound: int):
    """Lemma A: U_r(w) = max ‖RΔ‖² over Δ with ≤ w alternating ±1 nonzeros (item removal).

    An exact int for integer ``r`` (the noise path), a float otherwise. ``r`` (length ≥ T) must be
    >= 0 and non-increasing.
    """
    horizon = _checks.horizon(horizon)
    w = _checks.integer(flippancy_bound, "flippancy_bound", 1)
    coeffs = np.asarray(r)[:horizon]
    if coeffs.shape[0] != horizon:
        raise ParameterError(f"need {horizon} coefficients, got {coeffs.shape[0]}")
    _check_monotone(coeffs)
    squares = partial_square_sums(coeffs)
    m = min(w, horizon)
    q, rem = divmod(horizon, m)
    total = (m - rem) * _exact(squares[q])
    if rem:
        total += rem * _exact(squares[q + 1])
    return total


def _top_sum(r: np.ndarray, horizon: int, classes: list[tuple[int, int]]):
    """Sum of the T largest elements of ⊎ (count × {weight·r_j² : j < T}) over ``classes``
    [(weight, count)], exactly for integer r: each class's chosen elements are a prefix (r² is
    non-increasing), so the sum is Σ weight·count·S[prefix] plus the partial element."""
    squares = partial_square_sums(r)
    sq = (r.astype(np.int64) if r.dtype.kind in "iu" else r.astype(np.float64)) ** 2
    classes = [(wt, cnt) for wt, cnt in classes if cnt > 0]
    values = np.concatenate([wt * sq for wt, _ in classes])
    label = np.repeat(np.arange(len(classes)), horizon)
    counts = np.asarray([cnt for _, cnt in classes], dtype=np.int64)[label]
    order = np.argsort(-values, kind="stable")  # ties keep index order: each class stays a prefix
    cum = np.cumsum(counts[order])
    cut = int(np.searchsorted(cum, horizon))  # first position where ≥ T elements are taken
    taken = np.bincount(label[order[:cut]], minlength=len(classes))
    total = sum(wt * cnt * _exact(squares[int(n)]) for (wt, cnt), n in zip(classes, taken))
    before = int(cum[cut - 1]) if cut else 0
    return total + (horizon - before) * _exact(values[order[cut]])


def subset_bound(r: object, horizon: int, flippancy_bound: int):
    """Lemmas B and C: B_r(w) = min(4·U_r(w), V_r(w)) ≥ max ‖RΔ‖² under the subset relation.

    V_r(w) = the sum of the T largest elements of (w−1)×{4r_j²} ⊎ (w+1)×{r_j²} (2×{r_j²} for
    w = 1). Exact int for integer ``r``; ``r`` must be >= 0 and non-increasing.
    """
    horizon = _checks.horizon(horizon)
    w = _checks.integer(flippancy_bound, "flippancy_bound", 1)
    four_u = 4 * removal_bound(r, horizon, w)
    coeffs = np.asarray(r)[:horizon]
    classes = [(1, 2)] if w == 1 else [(4, min(w - 1, horizon)), (1, min(w + 1, horizon))]
    return min(four_u, _top_sum(coeffs, horizon, classes))


@lru_cache(maxsize=256)
def _sensitivity2(horizon: int, w: int, relation: str, bits: int) -> int:
    r = sqrt_int_coefficients(horizon, bits)
    if relation == "item-removal":
        return removal_bound(r, horizon, w)
    return subset_bound(r, horizon, w)


def sensitivity2(horizon: int, flippancy_bound: int, relation: str = "subset", bits: int = DEFAULT_BITS) -> int:
    """B_ř(w), the exact integer ℓ2² sensitivity of Ř x on the w-truncated difference stream:
    U (Lemma A) for "item-removal", min(4U, V) (Lemmas B, C) for "subset". Public (T, w, k) only."""
    horizon = _checks.horizon(horizon)
    w = _checks.integer(flippancy_bound, "flippancy_bound", 1)
    bits = _checks.integer(bits, "bits", 1, _MAX_BITS)
    return _sensitivity2(horizon, w, check_relation(relation), bits)


# --------------------------------------------------------------------------- variances


def _fft_convolve(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """The first n coefficients of a·b (float, post-processing and analysis only)."""
    size = 1 << max(1, (len(a) + len(b) - 1).bit_length())
    return np.fft.irfft(np.fft.rfft(a, size) * np.fft.rfft(b, size), size)[:n]


def _series_inverse(a: np.ndarray, n: int) -> np.ndarray:
    """The first n coefficients of 1/a(z) (a_0 ≠ 0), Newton iteration b ← b(2 − ab)."""
    b = np.array([1.0 / a[0]])
    m = 1
    while m < n:
        m2 = min(2 * m, n)
        correction = -_fft_convolve(a[:m2], b, m2)
        correction[0] += 2.0
        b = _fft_convolve(b, correction, m2)
        m = m2
    return b


@lru_cache(maxsize=8)
def _prefix_coefficients(horizon: int, bits: int) -> np.ndarray:
    r = sqrt_int_coefficients(horizon, bits).astype(np.float64)
    out = np.cumsum(_series_inverse(r, horizon))
    out.flags.writeable = False
    return out


def prefix_coefficients(horizon: int, bits: int = DEFAULT_BITS) -> np.ndarray:
    """ℓ̌ = the coefficients of 1/((1−z)·ř(z)) (float64, read-only): A Ř^(−1) is their lower-
    triangular Toeplitz matrix, so the estimates' noise is (ℓ̌ * Z)_t (ℓ̌ ≈ 2^(−k) c)."""
    return _prefix_coefficients(_checks.horizon(horizon), _checks.integer(bits, "bits", 1, _MAX_BITS))


@lru_cache(maxsize=64)
def _max_variance_factor(horizon: int, bits: int) -> float:
    return float(4**bits) * float(partial_square_sums(_prefix_coefficients(horizon, bits))[-1])


def max_variance_factor(horizon: int, bits: int = DEFAULT_BITS) -> float:
    """4^k·S_ℓ̌(T): the largest per-step noise variance of :func:`factorized_counts` (at t = T, the
    variance σ̌²·S_ℓ̌(t) being non-decreasing) per unit of σ² in count units (float, for planning)."""
    return _max_variance_factor(_checks.horizon(horizon), _checks.integer(bits, "bits", 1, _MAX_BITS))


def tree_variance(horizon: int, rho: float, flippancy_bound: int, relation: str = "subset") -> np.ndarray:
    """Per-step noise variance bound of the tree as :mod:`.tree` allocates it today:
    σ²·popcount(t), σ² = ``tree.sigma2_for_flippancy`` (κ·w·L/(2ρ), rounded up)."""
    sigma2 = tree_sigma2_for_flippancy(horizon, rho, flippancy_bound, relation)
    return float(sigma2) * nodes_per_step(horizon).astype(np.float64)


def factorized_variance(
    horizon: int, rho: float, flippancy_bound: int, relation: str = "subset", bits: int | None = None
) -> np.ndarray:
    """Per-step noise variance of the factorized counter at ρ-zCDP, t = 1..T.

    ``bits=None``: the real square root, σ²·S_c(t) with σ² = B_c(w)/(2ρ) (exact formula; the
    analysis baseline). ``bits=k``: the integer strategy :func:`factorized_counts` runs,
    σ̌²·S_ℓ̌(t) with σ̌² = :func:`sigma2_for_flippancy`·4^k (an upper bound: the discrete
    Gaussian's variance is at most σ̌²), excluding the ≤ 1/2 of the final rounding.
    """
    horizon = _checks.horizon(horizon)
    rho = _checks.positive(rho, "rho")
    relation = check_relation(relation)
    if bits is None:
        c = sqrt_coefficients(horizon)
        sens = removal_bound(c, horizon, flippancy_bound) if relation == "item-removal" else \
            subset_bound(c, horizon, flippancy_bound)
        return sens / (2.0 * rho) * partial_square_sums(c)[1:]
    sigma2 = float(sigma2_for_flippancy(horizon, rho, flippancy_bound, relation, bits) * 4**bits)
    return sigma2 * partial_square_sums(prefix_coefficients(horizon, bits))[1:]


def sigma2_for_flippancy(
    horizon: int, rho: float, flippancy_bound: int, relation: str = "subset", bits: int = DEFAULT_BITS
) -> Fraction:
    """σ² in count units (σ̌²/4^k) with σ̌² = ``rational_sigma2``(B_ř(w)/(2ρ)), exact: the noise
    of :func:`factorized_counts` at this σ² is ρ-zCDP on the w-truncated stream under ``relation``."""
    rho = _checks.positive(rho, "rho")
    sens = sensitivity2(horizon, flippancy_bound, relation, bits)
    return rational_sigma2(Fraction(sens) / (2 * Fraction(rho))) / 4**bits


# --------------------------------------------------------------------------- exact Toeplitz product

# NTT primes p = c·2^e + 1 with an element of order 2^e; p1·p2 > 2^61, every product of two residues < 2^62
_PRIMES = ((2013265921, 31, 27), (1811939329, 13, 26))
_CRT_RANGE = 2**60  # |value| < this is recovered exactly from its residues mod p1·p2 (> 2^61)


def _ntt(values: np.ndarray, prime: int, root: int, invert: bool) -> np.ndarray:
    """Number-theoretic transform of length n = 2^m mod ``prime`` (iterative Cooley–Tukey),
    int64 throughout: residues < 2^31, so every product is < 2^62."""
    n = values.shape[0]
    log_n = n.bit_length() - 1
    index = np.arange(n, dtype=np.int64)
    reverse = np.zeros(n, dtype=np.int64)
    for bit in range(log_n):
        reverse |= ((index >> bit) & 1) << (log_n - 1 - bit)
    a = values[reverse]
    omega = pow(root, (prime - 1) // n, prime) if n > 1 else 1
    if invert:
        omega = pow(omega, prime - 2, prime)
    if n > 1 and pow(omega, n // 2, prime) != prime - 1:
        raise ParameterError("internal: NTT root of unity has the wrong order")
    table = np.ones(max(1, n // 2), dtype=np.int64)  # table[j] = ω^j, j < n/2
    filled = 1
    while filled < n // 2:
        table[filled: 2 * filled] = table[:filled] * pow(omega, filled, prime) % prime
        filled *= 2
    half = 1
    while half < n:
        twiddle = table[:: n // (2 * half)][:half]
        blocks = a.reshape(-1, 2, half)
        u = blocks[:, 0, :]
        v = blocks[:, 1, :] * twiddle % prime
        a = np.stack(((u + v) % prime, (u - v) % prime), axis=1).reshape(n)
        half *= 2
    if invert:
        a = a * pow(n, prime - 2, prime) % prime
    return a


def _convolve_exact_small(r: np.ndarray, x: np.ndarray, horizon: int) -> np.ndarray:
    """(r * x)[:T] exactly when every output is below 2^60 in magnitude (checked by the caller):
    NTT modulo two primes, recombined by Garner's formula in int64."""
    size = 1 << (2 * horizon - 1).bit_length()
    residues = []
    for prime, root, _ in _PRIMES:
        fr = _ntt(np.pad(r % prime, (0, size - horizon)), prime, root, False)
        fx = _ntt(np.pad(x % prime, (0, size - horizon)), prime, root, False)
        residues.append(_ntt(fr * fx % prime, prime, root, True)[:horizon])
    (p1, _, _), (p2, _, _) = _PRIMES
    a1, a2 = residues
    k = (a2 - a1) % p2 * pow(p1, p2 - 2, p2) % p2
    value = a1 + p1 * k  # in [0, p1·p2) < 2^62
    return np.where(value > (p1 * p2) // 2, value - p1 * p2, value)


def toeplitz_int(r: object, x: object) -> np.ndarray:
    """(Ř x)_t = Σ_{j≤t} ř_j x_{t−j} for integer vectors of length T, exactly, in O(T log T).

    Exact NTTs (no floating point); x is split into 2^s-limbs when one product could reach 2^60,
    and the limbs recombined in Python ints. Returns int64 when every bound fits below 2^62, else an
    object array of Python ints.
    """
    coeffs = integer_vector(r, "r")
    values = integer_vector(x, "x", coeffs.shape[0])
    horizon = coeffs.shape[0]
    if horizon == 0:
        return np.zeros(0, dtype=np.int64)
    if horizon > _MAX_HORIZON:
        raise ParameterError("toeplitz_int: at most 2^25 steps")
    weight = sum(abs(int(v)) for v in coeffs.tolist())  # Σ|ř_j| bounds every row's gain
    if weight >= 2**40:
        raise ParameterError("toeplitz_int: coefficients too large")
    top = int(np.max(np.abs(values.astype(object))))
    if weight * top < _CRT_RANGE:
        return _convolve_exact_small(coeffs, values, horizon)
    shift = (_CRT_RANGE // max(weight, 1)).bit_length() - 2  # weight·2^shift < 2^60
    mask = (1 << shift) - 1
    total = np.zeros(horizon, dtype=object)
    rest, position = values.copy(), 0
    while True:
        if weight * int(np.max(np.abs(rest.astype(object)))) < _CRT_RANGE:  # top limb, signed
            total += _convolve_exact_small(coeffs, rest, horizon).astype(object) * (1 << position)
            break
        total += _convolve_exact_small(coeffs, rest & mask, horizon).astype(object) * (1 << position)
        rest >>= shift  # arithmetic shift: rest = (rest >> shift)·2^shift + (rest & mask)
        position += shift
    if weight * top < 2**62:
        return total.astype(np.int64)
    return total


# --------------------------------------------------------------------------- batch mechanism


@dataclass(frozen=True)
class FactorizedRelease:
    """One batch run: ``estimates[t-1]`` the noisy prefix sum at t (int64), ``std[t-1]`` the
    bound σ̌·√S_ℓ̌(t) on its noise std (count units, before the ≤ 1/2 rounding), ``sigma`` = σ̌/2^k,
    ``sigma2_int`` = σ̌² (exact), ``noise`` the public record(s) of the draws."""

    estimates: np.ndarray
    std: np.ndarray
    sigma: float
    sigma2_int: Fraction
    noise: tuple[NoiseDraw, ...]


def _sigma2_int(sigma: object, sigma2: object, bits: int) -> Fraction:
    if (sigma is None) == (sigma2 is None):
        raise ParameterError("give exactly one of sigma and sigma2")
    if sigma2 is None:
        value = to_fraction(_checks.positive(sigma, "sigma"), "sigma") ** 2
    else:
        value = to_fraction(sigma2, "sigma2")
    if value <= 0:
        raise ParameterError("sigma2 must be > 0")
    return rational_sigma2(value * 4**bits)


def factorized_counts(
    stream: object,
    sigma: float | None,
    rng: np.random.Generator,
    *,
    flippancy_bound: int,
    relation: str = "subset",
    step: str = "counter",
    bits: int = DEFAULT_BITS,
    sigma2: object = None,
) -> FactorizedRelease:
    """Noisy prefix sums of the integer difference stream ``stream`` (length T = 2^m) by the
    square-root factorization with exact integer noise (the module's batch scheme).

    ``sigma`` (or exact ``sigma2``) is σ in count units: σ̌² = ``rational_sigma2``(4^k σ²) ≥ 4^k σ²
    is drawn per coordinate of Ř x. If ``stream`` is w-truncated (w = ``flippancy_bound``), the
    release is B_ř(w)/(2σ̌²)-zCDP ≤ (B_ř(w)/4^k)/(2σ²) under ``relation`` (item level, Jain et al.
    2023 Definition 1.2 for "subset"); :func:`sigma2_for_flippancy` gives σ² for a budget ρ. The
    record's cost (``NoiseDraw.cost``) is that ρ. Every estimate is post-processing of y = Ř x + Z.
    """
    check_rng(rng)
    values = integer_vector(stream, "stream")
    horizon = _checks.horizon(values.shape[0], "len(stream)")
    bits = _checks.integer(bits, "bits", 1, _MAX_BITS)
    w = _checks.integer(flippancy_bound, "flippancy_bound", 1)
    relation = check_relation(relation)
    noise_var = _sigma2_int(sigma, sigma2, bits)
    coeffs = sqrt_int_coefficients(horizon, bits)
    strategy = toeplitz_int(coeffs, values)  # exact integers
    draws = discrete_gaussian_batch_wide(noise_var, horizon, rng)
    if strategy.dtype == np.int64 and int(np.max(np.abs(strategy))) + int(np.max(np.abs(draws))) < 2**63:
        noisy = strategy + draws
    else:  # beyond int64: Python ints (representation only)
        noisy = strategy.astype(object) + draws.astype(object)
    # ---- post-processing of y only (float; accuracy, not privacy)
    ell = prefix_coefficients(horizon, bits)
    scale = float(1 << bits)
    estimates = np.rint(_fft_convolve(ell * scale, np.asarray(noisy, dtype=np.float64) / scale, horizon))
    estimates = estimates.astype(np.int64)
    std = np.sqrt(float(noise_var) * partial_square_sums(ell)[1:])
    sens2 = sensitivity2(horizon, w, relation, bits)
    sigma_counts = math.sqrt(noise_var) / scale
    record = NoiseDraw(step, "factorized-counter", scale=sigma_counts, std=sigma_counts,
                       sensitivity=math.sqrt(sens2) / scale, draws=horizon,
                       target=(f"the square-root-factorized stream (integer strategy, 2^-{bits} grid) "
                               f"truncated at flippancy {w}"),
                       parameters={"flippancy_bound": w, "norm": 2})
    return FactorizedRelease(estimates=estimates, std=std, sigma=sigma_counts, sigma2_int=noise_var,
                             noise=(record,))
