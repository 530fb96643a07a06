"""The square-root factorized counter (issue 38, mechanism layer): coefficients, variances
against the tree, the flippancy sensitivity bounds, the exact integer product, the wide
discrete Gaussian sampler and the batch mechanism's noise. No Spark."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dp_spark.errors import ParameterError
from dp_spark.mechanisms.continual_distinct import factorized as fz
from dp_spark.mechanisms.continual_distinct.tree import BinaryTreeMechanism
from dp_spark.noise import discrete_batch
from dp_spark.noise.discrete_batch import (
    _bernoulli_wide,
    discrete_gaussian_batch,
    discrete_gaussian_batch_wide,
    discrete_laplace_batch,
)
from dp_spark.noise.rng import make_rng
from dp_spark.summaries.continual_distinct import existence_and_flippancy, truncate_existence
from dp_spark.mechanisms.continual_distinct import continual_counts, stream_summaries
from tests.unit.test_continual import _summaries, _synthetic_stream

# ---------------------------------------------------------------- coefficients


def _c_exact(j: int) -> Fraction:
    return Fraction(math.comb(2 * j, j), 4**j)


def test_square_root_coefficients_square_to_the_counting_matrix_exactly():
    """c(z)² = 1/(1 − z): Σ_{i≤j} c_i c_{j−i} = 1 for every j (exact rationals), and the float
    coefficients are those rationals."""
    c = [_c_exact(j) for j in range(64)]
    assert all(sum(c[i] * c[j - i] for i in range(j + 1)) == 1 for j in range(64))
    floats = fz.sqrt_coefficients(64)
    assert np.allclose(floats, [float(v) for v in c], rtol=1e-14, atol=0)


@pytest.mark.parametrize("bits", [6, 20])
def test_integer_coefficients_are_the_exact_rounding_and_non_increasing(bits):
    horizon = 1 << 12
    r = fz.sqrt_int_coefficients(horizon, bits)
    # round half up of 2^k·c_j, by exact rationals (the first 600; the enclosure covers the rest)
    exact = [math.floor(_c_exact(j) * 2**bits + Fraction(1, 2)) for j in range(600)]
    assert r[:600].tolist() == exact
    assert r[0] == 2**bits and np.all(np.diff(r) <= 0) and np.all(r >= 0)
    assert np.max(np.abs(r / 2.0**bits - fz.sqrt_coefficients(horizon))) <= 2.0 ** -(bits + 1)


# ---------------------------------------------------------------- golden variances


GOLDEN = {  # T: (S_c(T), tree/sqrt max-variance ratio, mean ratio), issue-38 notes results §1
    1 << 12: (3.713884, 11.3101, 6.1850),
    1 << 16: (4.596444, 12.8743, 6.9161),
    1 << 20: (5.478988, 13.9910, 7.4270),
}


@pytest.mark.parametrize("horizon", sorted(GOLDEN))
def test_golden_variance_ratios_tree_over_square_root(horizon):
    """Single participation (w = 1, item removal): the tree as allocated today (σ² = L,
    var_t = L·popcount(t)) against the square root (σ² = S_c(T), var_t = S_c(T)·S_c(t))."""
    norm, max_ratio, mean_ratio = GOLDEN[horizon]
    tree = fz.tree_variance(horizon, 0.5, 1, "item-removal")
    sqrt = fz.factorized_variance(horizon, 0.5, 1, "item-removal")
    levels = horizon.bit_length()
    assert tree.max() == levels * (levels - 1)
    assert fz.partial_square_sums(fz.sqrt_coefficients(horizon))[-1] == pytest.approx(norm, abs=1e-6)
    assert sqrt.max() == pytest.approx(norm**2, rel=1e-6)
    assert tree.max() / sqrt.max() == pytest.approx(max_ratio, rel=1e-4)
    assert tree.mean() / sqrt.mean() == pytest.approx(mean_ratio, rel=1e-4)


def test_tree_variance_is_the_tree_mechanisms_own():
    for relation, w in (("subset", 4), ("item-removal", 2)):
        tree = BinaryTreeMechanism.for_flippancy(256, 0.3, w, relation)
        assert np.allclose(fz.tree_variance(256, 0.3, w, relation), tree.output_std() ** 2, rtol=1e-12)


@pytest.mark.parametrize("horizon", [1 << 12, 1 << 16])
def test_integer_strategy_costs_nothing_against_the_real_square_root(horizon):
    """k = 20: the variance the batch mechanism states is within 1e-5 of the real square root's
    (ℓ̌ = coefficients of 1/((1−z)ř(z)) ≈ 2^−20 c)."""
    for relation, w in (("subset", 1), ("subset", 8), ("item-removal", 2)):
        real = fz.factorized_variance(horizon, 0.7, w, relation)
        integer = fz.factorized_variance(horizon, 0.7, w, relation, bits=20)
        assert np.max(np.abs(integer / real - 1)) < 1e-5
    ell = fz.prefix_coefficients(horizon)
    r = fz.sqrt_int_coefficients(horizon).astype(float)
    ones = np.convolve(r, ell)[:horizon]  # ř(z)·ℓ̌(z) = 1/(1 − z)
    assert np.max(np.abs(ones - 1)) < 1e-9


# ---------------------------------------------------------------- sensitivity bounds


def _u_by_enumeration(r, horizon, w):
    """max Σ S(g_i) over all compositions of T into min(w, T) parts (independent of the closed form)."""
    squares = fz.partial_square_sums(r)
    m = min(w, horizon)
    best = 0
    for cuts in itertools.combinations(range(1, horizon), m - 1):
        gaps = np.diff((0,) + cuts + (horizon,))
        best = max(best, sum(squares[g] for g in gaps))
    return best


def _v_by_sorting(r, horizon, w):
    """Sum of the T largest elements of the explicit multiset (independent of the merge)."""
    sq = [int(v) ** 2 if np.asarray(r).dtype.kind in "iu" else float(v) ** 2 for v in r[:horizon]]
    pool = sq * 2 if w == 1 else [4 * v for v in sq] * (w - 1) + sq * (w + 1)
    return sum(sorted(pool, reverse=True)[:horizon])


@pytest.mark.parametrize("horizon,w", [(8, 1), (8, 2), (8, 3), (16, 2), (16, 5), (8, 8), (4, 16)])
def test_closed_forms_equal_their_definitions(horizon, w):
    """U against every composition of T into w gaps, V against sorting the explicit multiset:
    exact for ř, to float rounding for c."""
    r_int = fz.sqrt_int_coefficients(horizon, 6)
    u = _u_by_enumeration(r_int, horizon, w)
    assert fz.removal_bound(r_int, horizon, w) == u
    assert fz.subset_bound(r_int, horizon, w) == min(4 * u, _v_by_sorting(r_int, horizon, w))
    c = fz.sqrt_coefficients(horizon)
    u = _u_by_enumeration(c, horizon, w)
    assert fz.removal_bound(c, horizon, w) == pytest.approx(u, rel=1e-12)
    assert fz.subset_bound(c, horizon, w) == pytest.approx(min(4 * u, _v_by_sorting(c, horizon, w)), rel=1e-12)


def _flip_vectors(horizon, w):
    """Every 0/1 existence vector on 1..T (e(0) = 0) with ≤ w flips."""
    out = []
    for m in range(w + 1):
        for cuts in itertools.combinations(range(horizon), m):
            e = np.zeros(horizon, dtype=np.int64)
            for k, cut in enumerate(cuts):
                e[cut:] = (k + 1) % 2
            out.append(e)
    return np.array(out)


def _strategy_matrix(r, horizon):
    return np.array([[r[i - j] if j <= i else 0 for j in range(horizon)] for i in range(horizon)])


@pytest.mark.parametrize("horizon,w", [(8, 1), (8, 2), (8, 3), (16, 1), (16, 2), (16, 3)])
def test_bounds_hold_over_every_neighbouring_pair_at_small_horizons(horizon, w):
    """Brute force over ALL ≤ w-flip vectors: item removal (Δ = De) never exceeds U and reaches it
    at w = 1 (Lemma A is tight there); every pair (Δ = De − De', a superset of the subset
    relation's pairs) stays within min(4U, V), which is below 4U at w ≤ 2; exact integers for ř."""
    for r in (fz.sqrt_int_coefficients(horizon, 8), fz.sqrt_coefficients(horizon)):
        integer = r.dtype.kind in "iu"
        matrix = _strategy_matrix(r.astype(object) if integer else r, horizon)
        vectors = _flip_vectors(horizon, w)
        diffs = np.diff(np.concatenate([np.zeros((len(vectors), 1), dtype=np.int64), vectors], axis=1), axis=1)
        images = diffs.astype(object if integer else float) @ matrix.T
        removal = max(sum(v * v for v in row) for row in images)
        pairs = max(sum((a - b) ** 2 for a, b in zip(x, y)) for x in images for y in images)
        u, b = fz.removal_bound(r, horizon, w), fz.subset_bound(r, horizon, w)
        assert removal <= u * (1 + 1e-12)
        assert pairs <= b * (1 + 1e-12)
        if w == 1:
            assert removal == (u if integer else pytest.approx(u, rel=1e-12))
        else:
            assert removal >= 0.6 * u  # not a vacuous bound
        assert pairs >= 0.55 * b
        if w <= 2:
            assert b < 4 * u


def test_a_realisable_subset_pair_exceeds_the_removal_bound():
    """The anti-phase construction (jumps −1, +2, −1 at w = 2), built with dp_spark's reference
    semantics, moves Ř x by more than U(2): the subset relation needs its own bound."""
    horizon, w = 64, 2
    events = [(1, 1), (1, -1), (22, 1), (22, 1), (22, -1), (43, -1)]
    dropped = {1, 2, 3}

    def truncated(evs):
        table = existence_and_flippancy([t for t, _ in evs], [0] * len(evs), [o for _, o in evs], horizon)
        assert int(table.flippancy[0]) <= w
        return truncate_existence(table.existence, w)[0].astype(np.int64)

    x = np.diff(np.concatenate([[0], truncated(events)]))
    x2 = np.diff(np.concatenate([[0], truncated([e for i, e in enumerate(events) if i not in dropped])]))
    moved = fz.toeplitz_int(fz.sqrt_int_coefficients(horizon), x - x2).astype(object)
    norm2 = sum(v * v for v in moved)
    assert sorted(set((x - x2).tolist())) == [-1, 0, 2]
    assert norm2 > 2 * fz.removal_bound(fz.sqrt_int_coefficients(horizon), horizon, w)
    assert norm2 <= fz.sensitivity2(horizon, w, "subset")


@st.composite
def _neighbouring_streams(draw):
    horizon = draw(st.sampled_from([16, 64, 256]))
    n_items = draw(st.integers(1, 4))
    events = draw(st.lists(st.tuples(st.integers(1, horizon), st.integers(0, n_items - 1),
                                     st.sampled_from([-1, 1]), st.integers(0, 3)), min_size=1, max_size=80))
    item = draw(st.sampled_from(sorted({e[1] for e in events})))
    relation = draw(st.sampled_from(["subset", "item-removal"]))
    if relation == "item-removal":
        neighbour = [e for e in events if e[1] != item]
    else:
        neighbour = [e for e in events if e[1] != item or draw(st.booleans())]
    return horizon, relation, events, neighbour


@settings(max_examples=250, deadline=None)
@given(_neighbouring_streams())
def test_random_neighbours_move_the_integer_strategy_within_the_bound(case):
    """Random multi-item streams and neighbours (whole item removed, or any subset of its
    events), through dp_spark's stream summaries: for every w = 2^j, ‖Ř(z_w − z'_w)‖² ≤ B_ř(w),
    exactly in integers (k = 20)."""
    horizon, relation, events, neighbour = case
    x, y = _summaries(events, horizon), _summaries(neighbour, horizon)
    r = fz.sqrt_int_coefficients(horizon)
    for j, w in enumerate(x.flippancy_bounds):
        moved = fz.toeplitz_int(r, x.z_truncated[j] - y.z_truncated[j]).astype(object)
        assert sum(v * v for v in moved) <= fz.sensitivity2(horizon, int(w), relation)


def test_random_single_item_neighbours_at_a_longer_horizon():
    """T = 1024, 300 random single-item streams (up to 120 events, both relations, w up to 16),
    dp_spark's reference existence vectors: every ‖ŘΔ‖² within B_ř(w) exactly, and the item-removal
    bound nearly reached at w = 1 (the bound is not vacuous)."""
    horizon = 1024
    rng = make_rng(5)
    r = fz.sqrt_int_coefficients(horizon)

    def truncated(times, ops, w):
        if not times:
            return np.zeros(horizon, dtype=np.int64)
        table = existence_and_flippancy(times, [0] * len(times), ops, horizon)
        return truncate_existence(table.existence, w)[0].astype(np.int64)

    worst = {}
    for _ in range(300):
        w = int(rng.choice([1, 2, 4, 8, 16]))
        n = int(rng.integers(1, 120))
        times = np.sort(rng.integers(1, horizon + 1, n)).tolist()
        ops = rng.choice([1, -1], n, p=[0.55, 0.45]).tolist()
        relation = "subset" if rng.random() < 0.7 else "item-removal"
        keep = [i for i in range(n) if rng.random() < rng.uniform(0.2, 0.9)] if relation == "subset" else []
        delta = np.diff(np.concatenate([[0], truncated(times, ops, w)])) - np.diff(
            np.concatenate([[0], truncated([times[i] for i in keep], [ops[i] for i in keep], w)]))
        norm2 = sum(v * v for v in fz.toeplitz_int(r, delta).astype(object))
        bound = fz.sensitivity2(horizon, w, relation)
        assert norm2 <= bound
        worst[(relation, w)] = max(worst.get((relation, w), 0.0), norm2 / bound)
    assert worst[("item-removal", 1)] > 0.99


def test_bound_arguments_are_checked():
    with pytest.raises(ParameterError, match="non-increasing"):
        fz.removal_bound(np.array([1, 2, 1, 0]), 4, 1)
    with pytest.raises(ParameterError):
        fz.sensitivity2(12, 1)
    with pytest.raises(ParameterError, match="relation"):
        fz.sensitivity2(16, 1, "anything")


# ---------------------------------------------------------------- exact integer product


def _toeplitz_reference(r, x):
    r, x = [int(v) for v in r], [int(v) for v in x]
    return [sum(r[j] * x[t - j] for j in range(t + 1)) for t in range(len(x))]


@pytest.mark.parametrize("horizon", [1, 2, 8, 64, 256])
def test_toeplitz_product_is_exact_on_adversarial_magnitudes(horizon):
    rng = make_rng(horizon)
    r = fz.sqrt_int_coefficients(horizon, 20)
    cases = [
        rng.integers(-3, 4, horizon),  # one limb
        np.full(horizon, 2**63 - 1, dtype=np.int64),  # largest int64, many limbs
        np.full(horizon, -(2**63), dtype=np.int64),
        rng.integers(-(2**62), 2**62, horizon),
        np.where(np.arange(horizon) % 2 == 0, 2**40 + 1, -(2**40) - 3).astype(np.int64),
    ]
    for x in cases:
        got = fz.toeplitz_int(r, x)
        assert [int(v) for v in got] == _toeplitz_reference(r, x)
    small = fz.toeplitz_int(r, cases[0])
    assert small.dtype == np.int64


def test_toeplitz_product_is_exact_at_a_long_horizon():
    """T = 2^12 with values near the one-limb limit: rows checked against Python ints."""
    horizon = 1 << 12
    r = fz.sqrt_int_coefficients(horizon, 20)
    x = make_rng(3).integers(-(2**25), 2**25, horizon)
    got = fz.toeplitz_int(r, x)
    rows = [0, 1, 2, 1000, 2047, 4094, 4095]
    ri, xi = [int(v) for v in r], [int(v) for v in x]
    for t in rows:
        assert int(got[t]) == sum(ri[j] * xi[t - j] for j in range(t + 1))


# ---------------------------------------------------------------- wide discrete Gaussian sampler


def _dg_pmf(sigma2: float, support: np.ndarray) -> np.ndarray:
    span = np.arange(-int(40 * math.sqrt(sigma2)) - 40, int(40 * math.sqrt(sigma2)) + 41)
    norm = np.exp(-(span.astype(float) ** 2) / (2 * sigma2)).sum()
    return np.exp(-(support.astype(float) ** 2) / (2 * sigma2)) / norm


@pytest.mark.parametrize("sigma2", [Fraction(1, 4), Fraction(7, 3), 30])
def test_wide_sampler_matches_the_exact_pmf(sigma2):
    """Chi-square of 60 000 draws against the brute-force pmf (tails pooled)."""
    draws = discrete_gaussian_batch_wide(sigma2, 60_000, make_rng(11))
    half = int(3 * math.sqrt(float(sigma2))) + 1
    support = np.arange(-half, half + 1)
    probs = _dg_pmf(float(sigma2), support)
    observed = np.array([np.sum(draws == k) for k in support] + [np.sum(np.abs(draws) > half)])
    expected = np.concatenate([probs, [1 - probs.sum()]]) * draws.shape[0]
    keep = expected >= 5
    observed = np.concatenate([observed[keep], [observed[~keep].sum()]])
    expected = np.concatenate([expected[keep], [expected[~keep].sum()]])
    if expected[-1] == 0:
        observed, expected = observed[:-1], expected[:-1]
    assert stats.chisquare(observed, expected).pvalue > 1e-3


def test_wide_sampler_at_a_wide_sigma():
    """σ̌² ≈ 20·2^40 (the k = 20 strategy's scale; int64 sampler refuses it): 40 000 draws binned
    into 40 equiprobable bins of the normal law (the discrete Gaussian's binned law at this σ),
    and mean / variance against 0 / σ̌²."""
    sigma2 = 20 * 2**40 + 12345
    with pytest.raises(ParameterError):
        discrete_gaussian_batch(sigma2, 1, make_rng(1))
    draws = discrete_gaussian_batch_wide(sigma2, 40_000, make_rng(12)).astype(float)
    sigma = math.sqrt(sigma2)
    edges = stats.norm.ppf(np.linspace(0, 1, 41)[1:-1]) * sigma
    observed = np.bincount(np.searchsorted(edges, draws), minlength=40)
    assert stats.chisquare(observed).pvalue > 1e-3
    assert abs(draws.mean()) < 5 * sigma / math.sqrt(draws.shape[0])
    assert abs(draws.var() / sigma2 - 1) < 5 * math.sqrt(2 / draws.shape[0])


def test_wide_and_int64_samplers_agree_in_distribution():
    a = discrete_gaussian_batch_wide(Fraction(41, 8), 40_000, make_rng(21))
    b = discrete_gaussian_batch(Fraction(41, 8), 40_000, make_rng(22))
    support = np.arange(-8, 9)
    table = np.array([[np.sum(v == k) for k in support] + [np.sum(np.abs(v) > 8)] for v in (a, b)])
    table = table[:, table.sum(axis=0) > 0]
    assert stats.chi2_contingency(table).pvalue > 1e-3


class _ScriptedWords:
    """Stands in for the generator: returns the scripted 64-bit words (tests the tie branch)."""

    def __init__(self, words):
        self._words = list(words)

    def integers(self, low, high, size=None, dtype=None, endpoint=False):
        if size is None:  # one word (a tie reads on)
            return np.uint64(self._words.pop(0))
        return np.array([self._words.pop(0) for _ in range(size)], dtype=np.uint64)


def test_wide_bernoulli_is_exact_at_a_wide_denominator_and_on_ties():
    den = 3 * 2**100 + 7
    num = den // 3
    hits = _bernoulli_wide([num] * 40_000, den, make_rng(31))
    assert stats.binomtest(int(hits.sum()), hits.shape[0], num / den).pvalue > 1e-3
    top, rest = divmod(num * 2**64, den)
    # a tie on the first word defers to the remaining fraction, decided by the next word
    assert _bernoulli_wide([num], den, _ScriptedWords([top, 0])).tolist() == [rest > 0]
    next_top = rest * 2**64 // den
    assert _bernoulli_wide([num], den, _ScriptedWords([top, next_top + 1])).tolist() == [False]
    assert _bernoulli_wide([num], den, _ScriptedWords([top - 1])).tolist() == [True]
    assert _bernoulli_wide([num], den, _ScriptedWords([top + 1])).tolist() == [False]


def _forced_geometric(count):
    """Stands in for the Bernoulli(exp(−1)) success count: every draw is ``count`` (an event of
    probability e^−count per draw, forced to reach the int64 edge of the proposal X = U + t·V)."""

    def geometric(n, rng):
        return np.full(n, count, dtype=np.int64)

    return geometric


def test_discrete_laplace_proposal_never_wraps_past_int64(monkeypatch):
    """X = U + t·V at a scale the batch sampler accepts (t = 2^56 − 1) and a geometric count that
    takes t·V past 2^63 (V = 256: t·V ≡ −256 mod 2^64, a small wrapped value in int64): the sampler
    forms X exactly and raises when the draw itself does not fit int64, and returns the exact
    ⌊X/s⌋ when it does (s = 7)."""
    t = 2**56 - 1
    monkeypatch.setattr(discrete_batch, "_geometric_exp1", _forced_geometric(256))
    with pytest.raises(ParameterError, match="exceeds int64"):
        discrete_laplace_batch(t, 50, make_rng(41))
    draws = np.abs(discrete_laplace_batch(Fraction(t, 7), 200, make_rng(42)).astype(object))
    assert all(256 * t // 7 <= d <= (257 * t - 1) // 7 for d in draws)  # U < t
    monkeypatch.setattr(discrete_batch, "_geometric_exp1", _forced_geometric(100))  # fits: exact in int64
    draws = np.abs(discrete_laplace_batch(t, 200, make_rng(43)).astype(object))
    assert all(100 * t <= d <= 101 * t - 1 for d in draws)


def test_wide_sampler_keeps_the_int64_proposal_below_2_48(monkeypatch):
    """Above σ = 2^48 the wide sampler draws in Python ints (no int64 discrete-Laplace proposal,
    whose t·V could leave int64 with probability e^−(2^63/t)), with the right law: σ ≈ 2^50,
    400 draws, mean and variance against 0 and σ²; at σ ≈ 2^40 the int64 proposal is used."""
    scales = []
    proposal = discrete_batch.discrete_laplace_batch

    def spy(scale, size, rng):
        scales.append(int(scale))
        return proposal(scale, size, rng)

    monkeypatch.setattr(discrete_batch, "discrete_laplace_batch", spy)
    sigma2 = 2**100 + 12345
    draws = discrete_gaussian_batch_wide(sigma2, 400, make_rng(44))
    assert draws.dtype == np.int64 and not scales
    values = draws.astype(float)
    sigma = math.sqrt(sigma2)
    assert abs(values.mean()) < 5 * sigma / math.sqrt(values.shape[0])
    assert abs(values.var() / sigma2 - 1) < 5 * math.sqrt(2 / values.shape[0])
    discrete_gaussian_batch_wide(2**80 + 1, 10, make_rng(45))
    assert scales and max(scales) < 2**48


# ---------------------------------------------------------------- the batch mechanism


def test_release_is_post_processing_of_the_exact_strategy_plus_the_drawn_noise():
    """Same seed: y = Ř x (exact) + N_Z(0, σ̌²) draws; the estimates are round(ℓ̌ * y)."""
    horizon = 64
    x = make_rng(4).integers(-5, 6, horizon)
    sigma2 = fz.sigma2_for_flippancy(horizon, 0.8, 4, "subset")
    release = fz.factorized_counts(x, None, make_rng(9), flippancy_bound=4, sigma2=sigma2)
    assert release.sigma2_int == sigma2 * 4**fz.DEFAULT_BITS
    z = discrete_gaussian_batch_wide(release.sigma2_int, horizon, make_rng(9))
    y = np.array(_toeplitz_reference(fz.sqrt_int_coefficients(horizon), x), dtype=np.int64) + z
    ell = [float(v) for v in fz.prefix_coefficients(horizon)]
    expected = [round(sum(ell[j] * float(y[t - j]) for j in range(t + 1))) for t in range(horizon)]
    assert release.estimates.dtype == np.int64
    assert release.estimates.tolist() == expected


@pytest.mark.parametrize("relation,w", [("subset", 1), ("subset", 4), ("item-removal", 2)])
def test_noise_record_costs_rho(relation, w):
    horizon, rho = 256, 0.37
    sigma2 = fz.sigma2_for_flippancy(horizon, rho, w, relation)
    release = fz.factorized_counts(np.zeros(horizon, dtype=np.int64), None, make_rng(1),
                                   flippancy_bound=w, relation=relation, sigma2=sigma2, step="rest")
    (record,) = release.noise
    assert record.kind == "factorized-counter" and record.draws == horizon and record.step == "rest"
    assert record.parameters == {"flippancy_bound": w, "norm": 2}
    assert record.sensitivity ** 2 == pytest.approx(fz.sensitivity2(horizon, w, relation) / 4.0**20, rel=1e-12)
    assert rho * (1 - 1e-5) <= record.cost().rho <= rho * (1 + 1e-12)
    with pytest.raises(ValueError, match="no interval"):
        record.half_width(0.05)


def test_released_minus_true_has_mean_zero_and_the_stated_variance():
    """2 000 runs at T = 16: per step, the mean error is 0 and its variance is the stated
    σ̌²·S_ℓ̌(t) plus the rounding's (at most 1/4, about 1/12), within 5 standard errors."""
    horizon, runs = 16, 2000
    x = np.array([1, 1, 0, -1, 2, 0, 0, 1, -1, -1, 0, 3, 0, 0, -2, 1])
    truth = np.cumsum(x)
    sigma2 = fz.sigma2_for_flippancy(horizon, 0.5, 1, "subset")
    rng = make_rng(2026)
    errors = np.empty((runs, horizon))
    for i in range(runs):
        release = fz.factorized_counts(x, None, rng, flippancy_bound=1, sigma2=sigma2)
        errors[i] = release.estimates - truth
    stated = release.std**2
    assert np.allclose(stated, fz.factorized_variance(horizon, 0.5, 1, "subset", bits=20), rtol=1e-12)
    assert np.allclose(stated, float(sigma2) * fz.partial_square_sums(fz.sqrt_coefficients(horizon))[1:], rtol=1e-4)
    mean_se = np.sqrt(stated / runs)
    assert np.all(np.abs(errors.mean(axis=0)) < 5 * mean_se)
    ratio = errors.var(axis=0) / (stated + 1 / 12)
    assert np.all(np.abs(ratio - 1) < 5 * math.sqrt(2 / runs))
    # and the noise is correlated as L·Lᵀ says: covariance of steps 1 and 16
    ell = fz.prefix_coefficients(horizon)
    cov = float(sigma2) * 4**fz.DEFAULT_BITS * float(np.dot(ell[:1], ell[15:16]))
    assert abs(np.cov(errors[:, 0], errors[:, 15])[0, 1] - cov) < 5 * math.sqrt(stated[0] * stated[15] / runs)


def test_error_bound_holds_per_step_at_its_union_bound_share():
    """The release's per-step statement error_bound_t = std_t·sqrt(2 ln(2T/β)) + 1/2 rests on
    P(|error_t| > error_bound_t) ≤ β/T at every step (the discrete Gaussian's sub-Gaussian tail at
    the stated std, then a union bound), so the expected number of uncovered steps per run is at
    most β. 400 runs at T = 1024 (flippancy ≤ w = 4, so the truth is the plain prefix count),
    β = 0.2: the mean number of uncovered steps stays ≤ β. Sharp where a coverage rate is not:
    the statement is about 0.005 here, and a bound 20 % too small leaves about 0.5 steps per run
    uncovered (while all steps would still be covered in ~80 % of runs)."""
    horizon, beta, runs = 1024, 0.2, 400
    s = stream_summaries(*_synthetic_stream(make_rng(1), horizon, horizon // 2, 4), horizon)
    truth = np.cumsum(s.z)
    uncovered = 0
    for run in range(runs):
        out = continual_counts(s, 0.3, "bounded", max_flippancy=4, counter="factorized",
                               rng=np.random.default_rng(run), beta=beta)
        uncovered += int(np.sum(np.abs(out.estimates - truth) > out.error_bound))
    assert uncovered / runs <= beta


def test_factorized_counts_refuses_bad_input():
    with pytest.raises(ParameterError, match="exactly one"):
        fz.factorized_counts(np.zeros(4, dtype=np.int64), 1.0, make_rng(1), flippancy_bound=1, sigma2=1)
    with pytest.raises(ParameterError, match="power of two"):
        fz.factorized_counts(np.zeros(6, dtype=np.int64), 1.0, make_rng(1), flippancy_bound=1)
    with pytest.raises(ParameterError, match="integers"):
        fz.factorized_counts(np.full(4, 0.5), 1.0, make_rng(1), flippancy_bound=1)
