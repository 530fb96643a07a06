"""Vectorised exact samplers: discrete Laplace and discrete Gaussian in numpy int64.

The same algorithms as ``dp_spark.noise.discrete`` (Canonne, Kamath and
Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020,
Algorithms 1–3), run on whole arrays at once so that the O(T log T) node
draws of a continual-release tree at T = 2^20 take seconds, not minutes.

Exactness. Every random decision compares a uniform *integer* from
``rng.integers`` with an integer threshold: Bernoulli(a/b) is "U < a" with U
uniform on {0, …, b−1}. The parameters are rationals (σ² = n/d, Laplace scale
t an integer) and every threshold is computed in int64 from them; the code
checks, before each computation, that no intermediate exceeds int64, and
hands the (rare) elements whose numbers would not fit to the Fraction-based
scalar sampler of ``dp_spark.noise.discrete``, which is exact for any size.
No sample is a rounded floating-point value, so the output has exactly the
stated distribution (up to the uniformity of ``rng``'s bits). The one place
doubles appear, the wide sampler's acceptance test, uses them only to settle
an integer comparison that a proven error bound settles, and the integers
otherwise: the same outcome on every random word as the all-integer test.

- ``bernoulli_exp_batch(a, b, rng)``: Bernoulli(exp(−a/b)) element-wise (Alg. 1).
- ``discrete_laplace_batch(b, size, rng)``: P[k] ∝ exp(−|k|/b), rational b > 0 (Alg. 2);
  ``rational_scale`` rounds a float scale up onto a 2^−10 grid.
- ``discrete_laplace_batch_any(b, size, rng)``: the same for any rational b (the scalar exact
  sampler where b's numerator or denominator exceeds int64).
- ``discrete_gaussian_batch(sigma2, size, rng)``: P[k] ∝ exp(−k²/(2σ²)) for a
  rational σ² (Alg. 3). Added to an integer statistic of ℓ2 sensitivity Δ it
  is Δ²/(2σ²)-zCDP (CKS 2020, Theorem 14); its variance is at most σ².
- ``discrete_gaussian_batch_wide(sigma2, size, rng)``: the same distribution for σ² whose
  acceptance integers exceed int64 (e.g. noise on a factorized counter's 2^20-scaled integer
  strategy): for σ < 2^48 the proposal stays in int64 and the acceptance test runs on Python ints,
  its comparisons settled first in doubles with a proven error bound where every Bernoulli
  denominator is at least 2^62 (bit for bit the all-integer test's draws); larger σ go to the
  Fraction-based scalar sampler of ``dp_spark.noise.discrete``.
- ``rational_sigma2(sigma2)``: σ² rounded up onto a binary grid (relative
  change < 2^−19 for σ² ≥ 1), so a mechanism that rounds its σ² with it never spends more than planned.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dp_spark.errors import ParameterError
from dp_spark.noise.discrete import bernoulli_exp_fraction, discrete_laplace, to_fraction
from dp_spark.noise.rng import check_rng
from dp_spark.noise.words import below, bernoulli_bounded, draw_words

__all__ = [
    "bernoulli_double",
    "bernoulli_exp_batch",
    "discrete_laplace_batch",
    "discrete_laplace_batch_any",
    "discrete_gaussian_batch",
    "discrete_gaussian_batch_wide",
    "rational_sigma2",
    "rational_scale",
]

_SAFE = 2**62  # products are checked against this before they are formed
_INT64_MAX = 2**63 - 1


def rational_sigma2(sigma2: object) -> Fraction:
    """Round σ² up (exactly) to a multiple of 2^−k with σ²·2^k about 2^20: the σ² a mechanism uses.

    The relative change is below 2^−19 for σ² ≥ 1 (2^−9 below 1), and rounding up never spends more
    privacy than the unrounded σ² would; the grid keeps the integers of
    ``discrete_gaussian_batch`` inside int64 up to σ² ≈ 10^8.
    """
    value = to_fraction(sigma2, "sigma2")
    if value <= 0:
        raise ParameterError("sigma2 must be > 0")
    if value < Fraction(1, 2**20):  # rounding a tiny σ² up to 2^−20 only adds privacy
        return Fraction(1, 2**20)
    magnitude = value.numerator.bit_length() - value.denominator.bit_length()  # ≈ log2 σ² (±1)
    bits = 21 if magnitude >= 0 else 11  # below σ² = 1 a coarser grid keeps n·d small
    grid = 1 << max(0, bits - magnitude)
    return Fraction(math.ceil(value * grid), grid)


def bernoulli_double(p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(p) element-wise for doubles p in [0, 1), exactly: p·2^64 =
    m + r (m an integer, r in [0, 1), both exact); a uniform 64-bit integer U
    decides (U < m: 1, U > m: 0) and a tie (probability 2^-64) recurses on r.
    P[1] = m/2^64 + r/2^64 = p. Only integer comparisons. (The random rounding of
    :mod:`dp_spark.mechanisms.set_union.laplace_grid`, whose privacy map covers it.)"""
    p = np.asarray(p, dtype=np.float64).reshape(-1)
    if p.size and not (np.all(p >= 0.0) and np.all(p < 1.0)):
        raise ParameterError("bernoulli_double needs probabilities in [0, 1)")
    out = np.zeros(p.size, dtype=bool)
    todo = np.arange(p.size)
    rest = p
    while todo.size:
        scaled = np.ldexp(rest, 64)
        whole = np.floor(scaled)
        u = rng.integers(0, 2**64, size=todo.size, dtype=np.uint64)
        m = whole.astype(np.uint64)
        out[todo[u < m]] = True
        tie = u == m
        rest = (scaled - whole)[tie]
        todo = todo[tie]
    return out


def _bernoulli_ratio(num: np.ndarray, den: np.ndarray | int, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(num/den) element-wise (0 ≤ num ≤ den, den ≥ 1, int64; ``den`` an array or one int
    for all: numpy's int64 bounded integers draw the same words for a bound given once or repeated,
    an implementation fact of numpy's generator, pinned by tests/unit/test_wide_sampler_certified.py)."""
    if num.shape[0] == 0:
        return np.zeros(0, dtype=bool)
    if np.ndim(den) == 0:
        return rng.integers(0, int(den), size=num.shape[0], dtype=np.int64) < num
    return rng.integers(0, den, dtype=np.int64) < num


def _bernoulli_exp_unit(a: np.ndarray, b: np.ndarray | int, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(−a/b)) for 0 ≤ a ≤ b (CKS Algorithm 1, first part), vectorised; ``b`` an
    array or one int for all.

    Draw A_k ~ Bernoulli(a/(b·k)) for k = 1, 2, … until the first failure K;
    P[K odd] = exp(−a/b). Requires b·k < 2^62 for the k reached (checked).
    """
    n = a.shape[0]
    result = np.zeros(n, dtype=bool)
    active = np.arange(n)
    scalar = np.ndim(b) == 0
    k = 1
    while active.shape[0]:
        bk = b if scalar else b[active]
        if (bk if scalar else bk.max()) > _SAFE // k:  # active is not empty here
            raise ParameterError("internal: Bernoulli denominator exceeds int64")
        success = _bernoulli_ratio(a[active], bk * k, rng)
        done = active[~success]
        result[done] = k % 2 == 1
        active = active[success]
        k += 1
    return result


def _bernoulli_exp_minus_one(m: int, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(−1)), ``m`` times: :func:`_bernoulli_exp_unit` with a = b = 1 (A_k ~
    Bernoulli(1/k), the same words), without its per-step checks and copies. A_1 ~ Bernoulli(1)
    always succeeds and numpy draws no word for the range {0} (checked by the tests' stream pin),
    so the loop starts at k = 2."""
    result = np.zeros(m, dtype=bool)
    active = np.arange(m)
    k = 2
    while active.shape[0]:
        success = rng.integers(0, k, size=active.shape[0], dtype=np.int64) < 1
        result[active[~success]] = k % 2 == 1
        active = active[success]
        k += 1
    return result


def _exp1_run_at_least(need: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """True where `need[i]` independent Bernoulli(exp(−1)) trials all succeed."""
    n = need.shape[0]
    ok = need == 0
    active = np.flatnonzero(~ok)
    count = np.zeros(n, dtype=np.int64)
    while active.shape[0]:
        success = _bernoulli_exp_minus_one(active.shape[0], rng)
        active = active[success]
        count[active] += 1
        reached = count[active] >= need[active]
        ok[active[reached]] = True
        active = active[~reached]
    return ok


def _geometric_exp1(n: int, rng: np.random.Generator) -> np.ndarray:
    """Number of Bernoulli(exp(−1)) successes before the first failure, n times."""
    count = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    while active.shape[0]:
        success = _bernoulli_exp_minus_one(active.shape[0], rng)
        active = active[success]
        count[active] += 1
    return count


def bernoulli_exp_batch(a: object, b: object, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(−a/b)) element-wise for int64 arrays a ≥ 0, b ≥ 1 (CKS Algorithm 1).

    exp(−a/b) = exp(−1)^⌊a/b⌋ · exp(−(a mod b)/b): ⌊a/b⌋ Bernoulli(exp(−1))
    trials must all succeed, then one Bernoulli(exp(−(a mod b)/b)).
    Releases nothing by itself.
    """
    check_rng(rng)
    a = np.asarray(a, dtype=np.int64).ravel()
    b = np.asarray(b, dtype=np.int64).ravel()
    if a.shape != b.shape or (a < 0).any() or (b < 1).any():
        raise ParameterError("bernoulli_exp_batch needs equal-length arrays with a >= 0 and b >= 1")
    whole, rest = np.divmod(a, b)
    ok = _exp1_run_at_least(whole, rng)
    idx = np.flatnonzero(ok)
    ok[idx] = _bernoulli_exp_unit(rest[idx], b[idx], rng)
    return ok


def _bernoulli_exp(a: np.ndarray, b: int, rng: np.random.Generator) -> np.ndarray:
    """:func:`bernoulli_exp_batch` for int64 ``a`` >= 0 and one int ``b`` >= 1 for all (the same
    words), without its argument checks."""
    whole, rest = np.divmod(a, b)
    ok = _exp1_run_at_least(whole, rng)
    idx = np.flatnonzero(ok)
    ok[idx] = _bernoulli_exp_unit(rest[idx], b, rng)
    return ok


def _check_count(size: object) -> int:
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or int(size) < 0:
        raise ParameterError(f"size must be a non-negative int, got {size!r}")
    return int(size)


def discrete_laplace_batch(scale: object, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` draws with P[k] ∝ exp(−|k|/b) for a rational scale b = t/s > 0 (CKS Algorithm 2).

    Per attempt: U uniform on {0..t−1}, accept with probability exp(−U/t);
    V = geometric count of Bernoulli(exp(−1)) successes; X = U + t·V has
    P[X = x] ∝ exp(−x/t); Y = ⌊X/s⌋ has P[Y = y] ∝ exp(−y·s/t); a fair sign
    is attached, rejecting (negative, 0). Adding it with b = Δ/ε to an
    integer statistic of ℓ1 sensitivity Δ is ε-DP. X is formed in int64 only
    where it fits (V ≤ (2^63 − t)/t), otherwise in Python ints; a draw beyond
    int64 (probability below exp(−2^63/t + 1), i.e. below e^−127 for t < 2^56)
    raises instead of wrapping.
    """
    check_rng(rng)
    b = to_fraction(scale, "scale")
    if b <= 0:
        raise ParameterError(f"scale must be > 0, got {float(b)!r}")
    t, s = b.numerator, b.denominator
    n = _check_count(size)
    if t >= _SAFE // 64 or s >= _SAFE:
        raise ParameterError("discrete_laplace_batch: scale numerator/denominator too large for int64; "
                             "use dp_spark.noise.discrete_laplace")
    out = np.zeros(n, dtype=np.int64)
    todo = np.arange(n)
    while todo.shape[0]:
        m = todo.shape[0]
        u = rng.integers(0, t, size=m, dtype=np.int64)
        accept = _bernoulli_exp_unit(u, t, rng)  # u < t: bernoulli_exp_batch(u, t)'s draws
        v = _geometric_exp1(m, rng)
        fits = v <= (_INT64_MAX - (t - 1)) // t  # then u + t·v ≤ 2^63 − 1
        y = np.zeros(m, dtype=np.int64)
        y[fits] = (u[fits] + t * v[fits]) // s
        for i in np.flatnonzero(~fits):  # exact in Python ints
            value = (int(u[i]) + t * int(v[i])) // s
            if value > _INT64_MAX:
                raise ParameterError("discrete_laplace_batch: a draw exceeds int64; "
                                     "use dp_spark.noise.discrete_laplace for this scale")
            y[i] = value
        negative = rng.integers(0, 2, size=m, dtype=np.int64) == 1
        accept &= ~(negative & (y == 0))
        out[todo[accept]] = np.where(negative, -y, y)[accept]
        todo = todo[~accept]
    return out


def discrete_laplace_batch_any(scale: object, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` draws with P[k] ∝ exp(−|k|/b) for ANY rational scale b > 0 (e.g. a float's exact
    value, whose numerator or denominator may exceed int64): :func:`discrete_laplace_batch` when b's
    numerator and denominator fit its int64 arithmetic, else the Fraction-based scalar sampler of
    :mod:`dp_spark.noise.discrete` one draw at a time (exact at any size). The same distribution
    either way (CKS 2020, Algorithm 2); the choice is a function of b alone. Adding it with
    b = Δ/ε to an integer statistic of ℓ1 sensitivity Δ is ε-DP."""
    b = to_fraction(scale, "scale")
    if b <= 0:
        raise ParameterError(f"scale must be > 0, got {float(b)!r}")
    n = _check_count(size)
    if b.numerator < _SAFE // 64 and b.denominator < _SAFE:
        return discrete_laplace_batch(b, n, rng)
    return np.asarray(discrete_laplace(b, rng, size=n), dtype=np.int64)


def rational_scale(scale: float) -> Fraction:
    """Round a Laplace scale up (exactly) to a multiple of 2^−10: more noise, never less privacy."""
    value = to_fraction(scale, "scale")
    if value <= 0:
        raise ParameterError("scale must be > 0")
    return Fraction(math.ceil(value * 1024), 1024)


def _gaussian_setup(sigma2: object, size: int, rng: np.random.Generator) -> tuple[int, int, int, int]:
    """(n, d, t, size) for CKS Algorithm 3 with σ² = n/d > 0 and proposal scale t = ⌊σ⌋ + 1."""
    check_rng(rng)
    s2 = to_fraction(sigma2, "sigma2")
    if s2 <= 0:
        raise ParameterError("sigma2 must be > 0 (the discrete Gaussian's variance parameter)")
    num, den = s2.numerator, s2.denominator
    return num, den, math.isqrt(num * den) // den + 1, _check_count(size)


def discrete_gaussian_batch(sigma2: object, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` exact draws with P[k] ∝ exp(−k²/(2σ²)) (CKS Algorithm 3), as int64.

    ``sigma2`` is σ² (an int, a Fraction, or a float taken at its exact
    rational value). Propose Y from the discrete Laplace of scale
    t = ⌊σ⌋ + 1 and accept with probability exp(−(|Y| − σ²/t)²/(2σ²)); with
    σ² = n/d that exponent is (|Y|·t·d − n)² / (2·n·d·t²), an integer
    ratio. Added to an integer statistic of ℓ2 sensitivity Δ the release is
    Δ²/(2σ²)-zCDP (Canonne–Kamath–Steinke 2020).
    """
    num, den, t, n_draws = _gaussian_setup(sigma2, size, rng)
    denominator = 2 * num * den * t * t
    if denominator >= _SAFE // 64 or t * den >= _SAFE:
        raise ParameterError(
            "discrete_gaussian_batch: sigma2 has too large a numerator/denominator for int64; "
            "round it with rational_sigma2 or use dp_spark.noise.discrete_gaussian"
        )
    out = np.zeros(n_draws, dtype=np.int64)
    todo = np.arange(n_draws)
    td = t * den
    limit = math.isqrt(_SAFE)  # | |Y|·t·d − n | must stay below this to square it in int64
    while todo.shape[0]:
        m = todo.shape[0]
        y = discrete_laplace_batch(t, m, rng)
        mag = np.abs(y)
        fits = mag <= (limit + num) // td
        accept = np.zeros(m, dtype=bool)
        idx = np.flatnonzero(fits)
        diff = mag[idx] * td - num
        accept[idx] = _bernoulli_exp(diff * diff, denominator, rng)
        for i in np.flatnonzero(~fits):  # astronomically rare: exact Fraction path
            gamma = Fraction((int(mag[i]) * td - num) ** 2, denominator)
            accept[i] = bernoulli_exp_fraction(gamma, rng)
        out[todo[accept]] = y[accept]
        todo = todo[~accept]
    return out



_WHOLE_LIMIT = 2**40  # ⌊γ⌋ above this (probability ~exp(−2^40)) goes to the Fraction path
_WIDE_PROPOSAL_LIMIT = 2**48  # proposal scale t from which the wide sampler draws in Python ints


def _bernoulli_wide(nums: list[int], den: int, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(num/den) element-wise for Python ints 0 ≤ num ≤ den of any size, exactly: a
    uniform integer below ``den`` where it is small, else one 64-bit word per element by the word
    rule (:mod:`dp_spark.noise.words`: W < ⌊p·2^64⌋ succeeds, W > it fails, a tie reads on)."""
    m = len(nums)
    if m == 0:
        return np.zeros(0, dtype=bool)
    if den < _SAFE:
        return rng.integers(0, den, size=m, dtype=np.int64) < np.asarray(nums, dtype=np.int64)
    words = draw_words(m, rng).tolist()
    return np.array([below(w, num, den, rng) for w, num in zip(words, nums)], dtype=bool)


def _bernoulli_exp_unit_wide(nums: list[int], den: int, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(−num/den)) for Python ints 0 ≤ num ≤ den (CKS Algorithm 1, first part):
    A_k ~ Bernoulli(num/(den·k)) for k = 1, 2, … until the first failure K; P[K odd] = exp(−num/den)."""
    result = np.zeros(len(nums), dtype=bool)
    active = np.arange(len(nums))
    k = 1
    while active.shape[0]:
        success = _bernoulli_wide([nums[i] for i in active.tolist()], den * k, rng)
        result[active[~success]] = k % 2 == 1
        active = active[success]
        k += 1
    return result


#: A float interval around γ (:func:`_gamma_intervals`) is γ_f ± 2^-40·(1 + γ_f + 1/σ²_f); the
#: rounding error it must cover is below 2^-48·(1/(2σ²) + γ) (derivation there): a factor 256 to spare.
_GAMMA_SLACK = 2.0**-40
#: |m'| below this is exact in a double (:func:`_gamma_intervals`).
_EXACT_DOUBLE = 2**52


def _certified_ok(num: int, den: int, t: int) -> bool:
    """Whether the certified path of :func:`discrete_gaussian_batch_wide` applies to σ² = n/d with
    proposal scale t: every Bernoulli there has a denominator 2·n·d·t²·k >= 2^62 (so the exact path
    draws 64-bit words for each, as :func:`_bernoulli_wide` does), and n, d, t·d convert to finite
    doubles."""
    return 2 * num * den * t * t >= _SAFE and num.bit_length() < 1000 and (t * den).bit_length() < 1000


def _gamma_intervals(mags: np.ndarray, num: int, den: int, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lo, hi, ok): for each proposal magnitude |Y| a float interval [lo, hi] that holds
    γ = (|Y|·t·d − n)²/(2·n·d·t²) (the exponent of Algorithm 3's acceptance, σ² = n/d), where
    ``ok`` and both ends are finite (else nothing is claimed: an overflow gives inf or NaN, which
    :func:`_split_gammas` never takes as certain; an underflow's absolute error, below 2^-1022, is
    inside the half-width's 2^-40).

    With c = ⌊n/(t·d)⌋, r0 = n − c·t·d and m' = |Y| − c (int64; ``ok`` where |m'| < 2^52, exact as
    a double): |Y|·t·d − n = t·d·x with x = m' − r0/(t·d), so γ = x²/(2σ²). In doubles (unit
    roundoff u = 2^-53): a = fl(fl(r0)/fl(t·d)) is within 3.01u of r0/(t·d) < 1; x_f = fl(m' − a)
    within 4u(1 + |x|) of x; s2 = fl(fl(n)/fl(d)) = σ²(1 + e), |e| <= 3.01u; γ_f =
    fl(fl(x_f²)/fl(2·s2)) = (x_f²/(2σ²))(1 + η), |η| <= 5.1u. As |x_f² − x²| <= 9u(1 + |x|)² <=
    18u(1 + x²): |γ_f − γ| <= 25u·(1/(2σ²) + γ) < 2^-48·(1/(2σ²) + γ). The interval's half-width
    2^-40·(1 + γ_f + 1/s2) exceeds that bound by a factor over 200 (γ <= γ_f·(1 + 2^-45) + 2^-48/σ²
    and 1/σ² <= (1/s2)(1 + 4u)), more than the roundings of lo and hi themselves (u·|γ_f| each)."""
    gamma, ok = _gamma_estimates(mags, num, den, t)
    half = _GAMMA_SLACK * (1.0 + gamma + 1.0 / (float(num) / float(den)))
    return gamma - half, gamma + half, ok


def _gamma_estimates(mags: np.ndarray, num: int, den: int, t: int) -> tuple[np.ndarray, np.ndarray]:
    """(γ_f, ok): the doubles of :func:`_gamma_intervals`' derivation, before the interval."""
    td = t * den
    c, r0 = divmod(num, td)
    m = mags - np.int64(c)  # mags >= 0 and 0 <= c < 2^48 here (t < 2^48): no overflow
    ok = np.abs(m) < _EXACT_DOUBLE
    x = m.astype(np.float64) - float(r0) / float(td)
    s2 = float(num) / float(den)
    return (x * x) / (2.0 * s2), ok


def _bernoulli_wide_certified(p_lo: np.ndarray, p_hi: np.ndarray, num_of, den: int,
                              rng: np.random.Generator) -> np.ndarray:
    """:func:`_bernoulli_wide` (Bernoulli(num/den), den >= 2^62) on the same words, with most
    comparisons made in doubles (:func:`dp_spark.noise.words.bernoulli_bounded`): ``p_lo[i] <=
    num_i/den <= p_hi[i]`` up to one rounding each, ``num_of(i)`` the exact numerator (a Python int,
    asked for only where the doubles cannot decide). The loose bounds of :func:`_split_gammas` only
    send more words to the exact comparison. The output, and the words drawn, are
    :func:`_bernoulli_wide`'s."""
    return bernoulli_bounded(p_lo, p_hi, lambda i: (num_of(i), den), rng)


def _bernoulli_exp_unit_certified(f_lo: np.ndarray, f_hi: np.ndarray, num_of, den: int,
                                  rng: np.random.Generator) -> np.ndarray:
    """:func:`_bernoulli_exp_unit_wide` (Bernoulli(exp(−num/den)), den >= 2^62) with the
    comparisons of :func:`_bernoulli_wide_certified`: ``f_lo[i] <= num_i/den <= f_hi[i]``, the k-th
    Bernoulli's probability num/(den·k) bounded by fl(f_lo/k) and fl(f_hi/k) widened by one
    rounding (u relative; the word margin covers it). The same words and the same outcomes."""
    result = np.zeros(f_lo.shape[0], dtype=bool)
    active = np.arange(f_lo.shape[0])
    k = 1
    while active.shape[0]:
        at = active
        lo = f_lo[at] / k
        hi = f_hi[at] / k
        success = _bernoulli_wide_certified(lo, hi, lambda j, at=at: num_of(int(at[j])), den * k, rng)
        result[at[~success]] = k % 2 == 1
        active = at[success]
        k += 1
    return result


def discrete_gaussian_batch_wide(sigma2: object, size: int, rng: np.random.Generator, *,
                                 _certified: bool = True) -> np.ndarray:
    """``size`` exact draws with P[k] ∝ exp(−k²/(2σ²)) (CKS Algorithm 3), as int64, for large σ².

    The distribution and guarantee of :func:`discrete_gaussian_batch` (added to an integer
    statistic of ℓ2 sensitivity Δ: Δ²/(2σ²)-zCDP, Canonne–Kamath–Steinke 2020), for σ² whose
    acceptance integers do not fit int64 (``discrete_gaussian_batch`` refuses σ² ≳ 2^27). For
    t = ⌊σ⌋ + 1 < 2^48 the discrete-Laplace proposal of scale t is drawn in int64 (its
    t·V stays below 2^63 unless V ≥ 2^15, probability e^−32768, and even then it is formed
    exactly); the acceptance probability exp(−(|Y|·t·d − n)²/(2·n·d·t²)) (σ² = n/d) is split into
    exp(−1)^⌊γ⌋ · exp(−frac γ): the ⌊γ⌋ Bernoulli(exp(−1)) trials run in int64, the fractional
    part by Algorithm 1 with every Bernoulli(a/b) decided exactly on a uniform 64-bit word
    (:func:`_bernoulli_wide`). Larger σ are drawn one at a time by the Fraction-based sampler of
    :mod:`dp_spark.noise.discrete` (exact at any size, slower).

    Where every such Bernoulli's denominator is at least 2^62 (:func:`_certified_ok`; e.g. set
    union's grid noise, σ ≈ 2^43), ⌊γ⌋ and each word's comparison are first tried in doubles with
    a proven error bound (:func:`_gamma_intervals`, :func:`_bernoulli_wide_certified`) and made in
    Python ints only where the bound cannot decide (probability about 2^-39 a comparison): the
    same decision on every word, so the same draws from the same generator, bit for bit, as the
    all-integer path (``_certified=False``, kept for that comparison in the tests); with the
    trials' fewer numpy calls 1.7 to 3.2 times faster per draw than before, by block size
    (benchmarks/results/2026-11-30-wide-sampler.md). A float only
    ever decides a comparison its error bound settles; no sample is a rounded float.
    """
    num, den, t, n_draws = _gaussian_setup(sigma2, size, rng)
    if t >= _WIDE_PROPOSAL_LIMIT:  # Algorithm 3 in Python ints and Fractions, one draw at a time
        shift, two_sigma2 = Fraction(num, den * t), Fraction(2 * num, den)
        out = np.zeros(n_draws, dtype=np.int64)
        for i in range(n_draws):
            while True:
                value = discrete_laplace(t, rng)  # exact Python int
                if bernoulli_exp_fraction((abs(value) - shift) ** 2 / two_sigma2, rng):
                    break
            if abs(value) > _INT64_MAX:
                raise ParameterError("discrete_gaussian_batch_wide: a draw exceeds int64; "
                                     "use dp_spark.noise.discrete_gaussian")
            out[i] = value
        return out
    denominator = 2 * num * den * t * t
    td = t * den
    certified = _certified and _certified_ok(num, den, t)
    out = np.zeros(n_draws, dtype=np.int64)
    todo = np.arange(n_draws)
    while todo.shape[0]:
        m = todo.shape[0]
        y = discrete_laplace_batch(t, m, rng)
        mags = np.abs(y)
        if certified:
            whole, f_lo, f_hi, rests, huge = _split_gammas(mags, num, den, t, denominator)
        else:
            whole = np.zeros(m, dtype=np.int64)
            rest: list[int] = []
            huge = []
            for i, mag in enumerate(mags.tolist()):
                q, r = divmod((mag * td - num) ** 2, denominator)
                if q > _WHOLE_LIMIT:
                    huge.append((i, Fraction((mag * td - num) ** 2, denominator)))
                    q, r = 0, 0
                whole[i] = q
                rest.append(r)
        accept = _exp1_run_at_least(whole, rng)
        idx = np.flatnonzero(accept)
        if certified:
            accept[idx] = _bernoulli_exp_unit_certified(f_lo[idx], f_hi[idx],
                                                         lambda j: rests(int(idx[j])), denominator, rng)
        else:
            accept[idx] = _bernoulli_exp_unit_wide([rest[i] for i in idx.tolist()], denominator, rng)
        for i, gamma in huge:  # astronomically rare: exact Fraction path
            accept[i] = bernoulli_exp_fraction(gamma, rng)
        out[todo[accept]] = y[accept]
        todo = todo[~accept]
    return out


def _split_gammas(mags: np.ndarray, num: int, den: int, t: int, denominator: int):
    """(whole, f_lo, f_hi, rest_of, huge) of the proposals' γ = (|Y|·t·d − n)²/denominator, as the
    exact loop of :func:`discrete_gaussian_batch_wide` splits it (⌊γ⌋, the remainder, the γ above
    2^40 sent to the Fraction path with ⌊γ⌋ and remainder 0), with the remainder's fraction given
    by a float interval [f_lo, f_hi] and ``rest_of(i)`` its exact numerator (Python int, computed
    on demand). ⌊γ⌋ comes from the interval of :func:`_gamma_intervals` where both ends have the
    same floor below 2^40; elsewhere (an end near an integer, |m'| >= 2^52, γ near 2^40 or more, an
    end not finite) from the exact Python-int division, with the interval [−1, 2] (true bounds of a
    fraction in [0, 1): the k-th word is then decided exactly unless it lies above (2/k)·2^64).
    Float exceptions are off in this section (under ``np.errstate(all="raise")`` an underflow
    would raise where the integer path does not); they decide nothing."""
    td = t * den
    with np.errstate(all="ignore"):
        lo, hi, ok = _gamma_intervals(mags, num, den, t)
        floor_lo = np.floor(lo)
        certain = ok & (floor_lo == np.floor(hi)) & (hi < _WHOLE_LIMIT)
        whole = np.where(certain, floor_lo, 0.0).astype(np.int64)
        f_lo = np.where(certain, lo - floor_lo, -1.0)  # lo − ⌊lo⌋ is exact (Sterbenz)
        f_hi = np.where(certain, hi - floor_lo, 2.0)
    exact_rest: dict[int, int] = {}
    huge = []
    for i in np.flatnonzero(~certain).tolist():
        a2 = (int(mags[i]) * td - num) ** 2
        q, r = divmod(a2, denominator)
        if q > _WHOLE_LIMIT:
            huge.append((i, Fraction(a2, denominator)))
            q, r = 0, 0
        whole[i] = q
        exact_rest[i] = r

    def rest_of(i: int) -> int:
        if i in exact_rest:
            return exact_rest[i]
        return (int(mags[i]) * td - num) ** 2 % denominator

    return whole, f_lo, f_hi, rest_of, huge
