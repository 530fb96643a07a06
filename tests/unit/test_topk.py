"""Tests for dp_spark.mechanisms.top_k (numpy only).

Statistical tests compare the empirical distribution of n draws (fixed seed)
with the exact distribution of the mechanism's *definition*, computed by brute
force over every outcome (all length-k sequences of distinct items, d <= 6,
k <= 3). The statistic is the total-variation distance TV = ||p_hat - p||_1 / 2
and the tolerance comes from the L1 concentration bound of Weissman et al.
(2003) for an empirical distribution over N outcomes:

    P(||p_hat - p||_1 >= t) <= (2^N - 2) exp(-n t^2 / 2),

so with probability >= 1 - ALPHA a correct sampler has
TV <= tol = sqrt(2 (N ln 2 + ln(1/ALPHA)) / n) / 2. Every such test also
checks that the same draws are rejected against the distribution for a wrong
parameter (2ε, or ε/2 for the peeling scale): it first asserts that the exact
TV between the right and the wrong distribution exceeds 2·tol, so by the
triangle inequality the wrong distribution is necessarily rejected whenever
the right one is accepted -- the test can fail.
"""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.special import logsumexp

from dp_spark.errors import ParameterError
from dp_spark.noise.max_exponential import max_exponential as _max_exponential
from dp_spark.mechanisms.top_k import (
    JointLogWeights,
    UnknownDomainResult,
    cdp_peel_epsilon_per_step,
    cdp_peel_top_k,
    joint_top_k,
    joint_top_k_log_weights,
    pnf_joint_top_k,
    pnf_peel_top_k,
    unknown_domain_gumbel,
    unknown_domain_threshold,
)

ALPHA = 1e-6  # chance that a correct sampler fails one TV test for a random seed


# ---------------------------------------------------------------------------
# brute-force reference distributions
# ---------------------------------------------------------------------------


def sequences(d: int, k: int) -> list[tuple[int, ...]]:
    return list(itertools.permutations(range(d), k))


def joint_utility(counts, seq) -> float:
    """u(s) = -max_i (c_(i) - c_{s_i}) with c_(1) >= ... >= c_(d) (paper Sec. 3)."""
    c = np.asarray(counts, dtype=float)
    top = np.sort(c)[::-1]
    return -max(top[i] - c[s] for i, s in enumerate(seq))


def brute_em(counts, k, epsilon, sensitivity=1.0) -> dict:
    """Exponential mechanism over all sequences: Pr[s] ∝ exp(ε u(s) / (2Δ))."""
    seqs = sequences(len(counts), k)
    logw = np.array([epsilon * joint_utility(counts, s) / (2 * sensitivity) for s in seqs])
    p = np.exp(logw - logsumexp(logw))
    return dict(zip(seqs, p))


def report_noisy_max_exp_probs(log_a: np.ndarray) -> np.ndarray:
    """Exact win probabilities of argmax_s (log_a[s] + E_s), E_s ~ Exp(1) i.i.d.

    With a_s = exp(log_a[s] - max) in (0, 1] and y = e^{-z}:
    Pr[s] = a_s ∫_0^1 prod_{s' != s} (1 - a_{s'} y) dy, a polynomial of degree
    N - 1 in y, integrated exactly by Gauss-Legendre with >= N/2 nodes.
    """
    a = np.exp(np.asarray(log_a, dtype=float) - np.max(log_a))
    n_nodes = len(a) + 8
    x, w = np.polynomial.legendre.leggauss(n_nodes)
    y, w = (x + 1) / 2, w / 2
    logf = np.log1p(-np.outer(a, y))  # N × nodes; y < 1 so finite
    total = logf.sum(axis=0)
    probs = a * (np.exp(total[None, :] - logf) @ w)
    assert abs(probs.sum() - 1) < 1e-9
    return probs


def brute_pnf_joint(counts, k, epsilon, sensitivity=1.0) -> dict:
    """Permute-and-flip over all sequences with the joint utility, rate ε/(2Δ)."""
    seqs = sequences(len(counts), k)
    lam = epsilon / (2 * sensitivity)
    probs = report_noisy_max_exp_probs(np.array([lam * joint_utility(counts, s) for s in seqs]))
    return dict(zip(seqs, probs))


def brute_pnf_peel(counts, k, epsilon) -> dict:
    """k rounds of permute-and-flip (RNM with Exp(scale k/ε)) on the remaining counts."""
    c = np.asarray(counts, dtype=float)
    out = {}
    for s in sequences(len(c), k):
        p = 1.0
        remaining = list(range(len(c)))
        for item in s:
            probs = report_noisy_max_exp_probs(c[remaining] * epsilon / k)
            p *= probs[remaining.index(item)]
            remaining.remove(item)
        out[s] = p
    return out


def brute_gumbel_peel(counts, k, eps_step) -> dict:
    """Peeling exponential mechanism Pr[j] ∝ exp(ε' c_j) (= one-shot Gumbel top-k)."""
    c = np.asarray(counts, dtype=float)
    out = {}
    for s in sequences(len(c), k):
        p = 1.0
        remaining = list(range(len(c)))
        for item in s:
            lw = eps_step * c[remaining]
            p *= math.exp(eps_step * c[item] - logsumexp(lw))
            remaining.remove(item)
        out[s] = p
    return out


def tv_tolerance(n: int, n_outcomes: int) -> float:
    return 0.5 * math.sqrt(2 * (n_outcomes * math.log(2) + math.log(1 / ALPHA)) / n)


def tv(emp: dict, exact: dict) -> float:
    keys = set(emp) | set(exact)
    return 0.5 * sum(abs(emp.get(s, 0.0) - exact.get(s, 0.0)) for s in keys)


def empirical(draw, n: int) -> dict:
    freq: dict = {}
    for _ in range(n):
        s = tuple(int(x) for x in draw())
        freq[s] = freq.get(s, 0) + 1
    return {s: f / n for s, f in freq.items()}


def check_sampler(draw, exact: dict, wrong: dict | None, n: int) -> None:
    tol = tv_tolerance(n, len(exact))
    if wrong is not None:
        # precondition: the test has power against the wrong parameter
        assert tv(exact, wrong) > 2 * tol
    emp = empirical(draw, n)
    assert set(emp) <= set(exact), "drew a sequence outside the output space"
    assert tv(emp, exact) <= tol
    if wrong is not None:
        assert tv(emp, wrong) > tol


# ---------------------------------------------------------------------------
# joint exponential mechanism: exact log-weights vs brute force (no sampling)
# ---------------------------------------------------------------------------

SMALL_CASES = [
    ([5, 3, 3, 0], 2),
    ([4, 4, 2, 1, 1], 3),
    ([3, 2, 2, 2, 0, 0], 3),
    ([1, 1, 0], 3),  # k = d
    ([2, 2, 2, 2], 2),  # all equal
    ([7, 1, 0, 3, 3], 1),  # k = 1, unsorted input
    ([0, 0, 0, 0, 0, 0], 3),
    ([0, 9, 0, 9, 1, 2], 3),
    ([6], 1),
]


def brute_groups(counts, k):
    """Group every sequence by its largest D~ entry (exact integer pairs) and count.

    D~[i, j] = c_(i) - c_(j) + (d(k-i-1) + j + 1)/(2dk) compared exactly as the
    pair (c_(i) - c_(j), d(k-i-1) + j); sorted positions follow a stable
    descending sort of the counts (any fixed rule gives the same EM).
    """
    c = np.asarray(counts)
    d = len(c)
    perm = np.argsort(-c, kind="stable")
    cs = c[perm]
    pos = np.empty(d, dtype=int)
    pos[perm] = np.arange(d)
    groups: dict = {}
    for s in sequences(d, k):
        entries = [
            (int(cs[i] - c[item]), d * (k - 1 - i) + int(pos[item]), i, int(pos[item]))
            for i, item in enumerate(s)
        ]
        diff, _, row, col = max(entries)
        key = (row, col)
        m, f = groups.get(key, (0, diff))
        groups[key] = (m + 1, diff)
    return groups


@pytest.mark.parametrize("counts,k", SMALL_CASES)
@pytest.mark.parametrize("epsilon,sensitivity", [(1.0, 1), (0.7, 2)])
def test_joint_log_weights_match_brute_force(counts, k, epsilon, sensitivity):
    w = joint_top_k_log_weights(counts, k, epsilon, sensitivity=sensitivity)
    assert isinstance(w, JointLogWeights)
    d = len(counts)
    assert w.rows.shape == (d * k,)
    groups = brute_groups(counts, k)
    for r, col, fd, lc, lw in zip(w.rows, w.cols, w.floor_diff, w.log_count, w.log_weight):
        m, diff = groups.get((int(r), int(col)), (0, None))
        assert fd == int(np.sort(counts)[::-1][r]) - int(np.asarray(counts)[w.perm[col]])
        if m == 0:
            assert lc == -np.inf and lw == -np.inf
        else:
            assert diff == fd
            assert lc == pytest.approx(math.log(m), abs=1e-12)
            assert lw == pytest.approx(math.log(m) - epsilon * fd / (2 * sensitivity), abs=1e-12)
    # every sequence lands in exactly one group
    total = sum(m for m, _ in groups.values())
    assert total == math.perm(d, k)
    assert np.exp(logsumexp(w.log_count)) == pytest.approx(total, rel=1e-12)
    # the group probabilities add up to the brute-force EM probability per utility
    em = brute_em(counts, k, epsilon, sensitivity)
    by_util_em: dict = {}
    for s, p in em.items():
        u = joint_utility(counts, s)
        by_util_em[u] = by_util_em.get(u, 0.0) + p
    lp = w.log_probability()
    by_util_joint: dict = {}
    for fd, l in zip(w.floor_diff, lp):
        if np.isfinite(l):
            by_util_joint[-float(fd)] = by_util_joint.get(-float(fd), 0.0) + math.exp(l)
    assert by_util_joint.keys() == by_util_em.keys()
    for u in by_util_em:
        assert by_util_joint[u] == pytest.approx(by_util_em[u], rel=1e-10)


def direct_log_counts(counts, k, w: JointLogWeights) -> np.ndarray:
    """ln m(e) for the entries listed in ``w``, straight from Lemma 3.7 with
    n_i(e) counted by exact pair comparisons (no sweep, no binary search)."""
    c = np.asarray(counts, dtype=object)  # Python ints: no overflow
    d = len(c)
    cs = c[w.perm]
    diff_e = [cs[r] - cs[j] for r, j in zip(w.rows, w.cols)]
    tie_e = [d * (k - 1 - int(r)) + int(j) for r, j in zip(w.rows, w.cols)]
    pairs_e = list(zip(diff_e, tie_e))
    assert all(p < q for p, q in zip(pairs_e, pairs_e[1:])), "entries not strictly ascending"
    rank = {pe: p for p, pe in enumerate(pairs_e)}
    n = np.zeros((k, len(pairs_e)), dtype=np.int64)
    for i in range(k):
        row = [rank[(cs[i] - cs[j], d * (k - 1 - i) + j)] for j in range(d)]
        assert row == sorted(row), "row not increasing"
        n[i] = np.searchsorted(np.array(row), np.arange(len(pairs_e)), side="left")
    factors = n - np.arange(k)[:, None]
    factors[w.rows, np.arange(len(pairs_e))] = 1  # exclude the entry's own row
    logs = np.log(np.maximum(factors, 1).astype(float)).sum(axis=0)
    return np.where(np.all(factors > 0, axis=0), logs, -np.inf)


@pytest.mark.parametrize(
    "block,counts_fn,k,int_keys",
    [
        (997, lambda rng: rng.integers(0, 30, size=300), 20, True),  # many ties, 7 blocks
        (64, lambda rng: np.zeros(40, dtype=np.int64), 10, True),  # all equal
        # spreads too large for int64 keys: the (diff, tie) pair sort is used
        (100, lambda rng: np.concatenate([[2**53, 2**53 - 3], rng.integers(0, 5, size=30)]), 8, False),
    ],
)
def test_joint_log_counts_multi_block_match_direct_computation(monkeypatch, block, counts_fn, k, int_keys):
    """Blocks of the sweep (shrunk here) vs a direct evaluation of Lemma 3.7."""
    import dp_spark.mechanisms.top_k.joint as topk

    monkeypatch.setattr(topk, "_BLOCK", block)
    counts = counts_fn(np.random.default_rng(11))
    assert topk._joint_prepare(np.asarray(counts, dtype=np.int64), k).int_keys is int_keys
    w = joint_top_k_log_weights(counts, k, 1.0)
    assert len(w.rows) == len(counts) * k
    direct = direct_log_counts(counts, k, w)
    assert np.array_equal(np.isfinite(direct), np.isfinite(w.log_count))
    fin = np.isfinite(direct)
    np.testing.assert_allclose(w.log_count[fin], direct[fin], rtol=1e-12, atol=1e-9)


def test_joint_sampler_across_blocks(monkeypatch):
    """The exact choice across several (shrunk) blocks (each recomputed when proposed) samples the EM
    exactly; PNF-Joint across the same blocks its permute-and-flip."""
    import dp_spark.mechanisms.top_k.joint as topk

    monkeypatch.setattr(topk, "_BLOCK", 4)
    counts, k, eps = [4, 4, 2, 1, 1], 2, 1.0
    rng = np.random.default_rng(123)
    check_sampler(
        lambda: joint_top_k(counts, k, eps, rng), brute_em(counts, k, eps), brute_em(counts, k, 2 * eps), 4000
    )
    check_sampler(
        lambda: pnf_joint_top_k(counts, k, eps, rng),
        brute_pnf_joint(counts, k, eps),
        brute_pnf_joint(counts, k, 2 * eps),
        4000,
    )


@pytest.mark.parametrize("margin", [-1e9, 0.0, 2.0])
def test_joint_sampler_early_stop_is_exact(monkeypatch, margin):
    """The sweep's early stop (the unswept rest one envelope class, under its
    bound, swept only when proposed) keeps the EM distribution: force the stop
    at every block boundary with small blocks so proposals into the rest run."""
    import dp_spark.mechanisms.top_k.joint as topk

    monkeypatch.setattr(topk, "_BLOCK", 3)
    monkeypatch.setattr(topk, "_TAIL_MARGIN", margin)
    counts, k, eps = [6, 4, 4, 2, 1, 0], 2, 1.0
    rng = np.random.default_rng(77)
    check_sampler(lambda: joint_top_k(counts, k, eps, rng), brute_em(counts, k, eps),
                  brute_em(counts, k, 2 * eps), 12000)


def test_joint_early_stop_visits_only_the_head(monkeypatch):
    """On steep counts the sweep stops after the first block (d·k = 10^7)."""
    import dp_spark.mechanisms.top_k.joint as topk

    seen = []
    real = topk._joint_entry_blocks

    def counting(prep):
        for block in real(prep):
            seen.append(len(block[0]))
            yield block

    monkeypatch.setattr(topk, "_joint_entry_blocks", counting)
    counts = np.floor(10**6 / np.arange(1, 100_001) ** 1.1).astype(np.int64)
    out = joint_top_k(counts, 100, 1.0, np.random.default_rng(0))
    assert len(set(out.tolist())) == 100
    assert sum(seen) < 100_000 * 100 // 10


@settings(max_examples=60, deadline=None)
@given(
    counts=st.lists(st.integers(0, 6), min_size=1, max_size=5),
    k=st.integers(1, 3),
    eps=st.floats(0.1, 5.0),
)
def test_joint_log_weights_property(counts, k, eps):
    """Random small histograms: group counts and per-utility mass equal brute force."""
    k = min(k, len(counts))
    w = joint_top_k_log_weights(counts, k, eps)
    groups = brute_groups(counts, k)
    got = {(int(r), int(c)): lc for r, c, lc in zip(w.rows, w.cols, w.log_count) if np.isfinite(lc)}
    assert got.keys() == groups.keys()
    for key, (m, _) in groups.items():
        assert got[key] == pytest.approx(math.log(m), abs=1e-12)
    em = brute_em(counts, k, eps)
    lp = w.log_probability()
    for u in {joint_utility(counts, s) for s in em}:
        want = sum(p for s, p in em.items() if joint_utility(counts, s) == u)
        have = float(np.sum(np.exp(lp[(-w.floor_diff.astype(float)) == u])))
        assert have == pytest.approx(want, rel=1e-9)


# ---------------------------------------------------------------------------
# joint exponential mechanism: sampled distribution vs brute force
# ---------------------------------------------------------------------------

JOINT_SAMPLING_CASES = [
    # counts, k, epsilon, draws
    ([5, 3, 3, 0], 2, 1.0, 12000),
    ([4, 4, 2, 1, 1], 3, 1.0, 20000),
    ([3, 2, 2, 2, 0, 0], 3, 1.5, 20000),
    ([2, 1, 0], 3, 1.5, 8000),
    ([0, 9, 0, 8, 1, 2], 2, 0.5, 15000),
]


@pytest.mark.parametrize("counts,k,epsilon,n", JOINT_SAMPLING_CASES)
def test_joint_sampler_matches_brute_force_em(counts, k, epsilon, n):
    rng = np.random.default_rng(20220 + k + len(counts))
    exact = brute_em(counts, k, epsilon)
    wrong = brute_em(counts, k, 2 * epsilon)  # e.g. a forgotten factor 1/2
    check_sampler(lambda: joint_top_k(counts, k, epsilon, rng), exact, wrong, n)


def test_joint_sampler_uniform_on_equal_counts_and_sensitivity():
    rng = np.random.default_rng(5)
    exact = brute_em([2, 2, 2, 2], 2, 1.0)
    assert all(p == pytest.approx(1 / 12) for p in exact.values())
    check_sampler(lambda: joint_top_k([2, 2, 2, 2], 2, 1.0, rng), exact, None, 6000)
    # sensitivity 2 at ε equals sensitivity 1 at ε/2
    counts = [6, 4, 1, 0]
    exact = brute_em(counts, 2, 2.0, sensitivity=2)
    wrong = brute_em(counts, 2, 2.0, sensitivity=1)
    check_sampler(lambda: joint_top_k(counts, 2, 2.0, rng, sensitivity=2), exact, wrong, 12000)


def test_joint_output_shape_and_concentration():
    rng = np.random.default_rng(3)
    counts = np.array([10, 500, 30, 400, 20, 300, 0])
    out = joint_top_k(counts, 3, 50.0, rng)
    assert out.dtype == np.int64 and out.shape == (3,)
    assert list(out) == [1, 3, 5]  # gaps of 100 at ε = 50: the true order
    out = joint_top_k(counts, 7, 1.0, rng)
    assert sorted(out) == list(range(7))


def test_joint_speed_sanity():
    """d = 1e5, k = 100 runs (the paper's regime); no timing assert."""
    rng = np.random.default_rng(0)
    counts = np.minimum(rng.zipf(1.3, size=100_000), 10**7)
    out = joint_top_k(counts, 100, 1.0, rng)
    assert out.shape == (100,) and len(set(out.tolist())) == 100


# ---------------------------------------------------------------------------
# PNF-Joint
# ---------------------------------------------------------------------------

PNF_JOINT_CASES = [
    ([4, 4, 2, 1, 1], 3, 1.0, 20000),
    ([5, 3, 3, 0], 2, 1.0, 12000),
    ([3, 2, 2, 2, 0, 0], 2, 1.5, 15000),
]


@pytest.mark.parametrize("counts,k,epsilon,n", PNF_JOINT_CASES)
def test_pnf_joint_matches_brute_force_permute_and_flip(counts, k, epsilon, n):
    rng = np.random.default_rng(777 + k)
    exact = brute_pnf_joint(counts, k, epsilon)
    wrong = brute_pnf_joint(counts, k, 2 * epsilon)
    check_sampler(lambda: pnf_joint_top_k(counts, k, epsilon, rng), exact, wrong, n)


def _spy_settle(monkeypatch):
    """Record, per draw, how many entry groups reach the exact settling and the most bits of U read."""
    import dp_spark.mechanisms.top_k.joint as joint_mod

    seen = []
    settle = joint_mod._pnf_settle

    def spy(prep, coef, kept, rng):
        out = settle(prep, coef, kept, rng)
        seen.append((len(kept), max(c.bits for c in kept)))
        return out

    monkeypatch.setattr(joint_mod, "_pnf_settle", spy)
    return joint_mod, seen


PNF_SETTLING_CASES = [([5, 3, 3, 0], 2, 1.0, 2000), ([3, 1, 0], 2, 1.0, 2000)]


@pytest.mark.parametrize("counts,k,epsilon,n", PNF_SETTLING_CASES)
def test_pnf_joint_exact_settling_alone_matches_brute_force(monkeypatch, counts, k, epsilon, n):
    """Doubles so loose (2^-3 relative) that nearly every draw is decided by the decimal bounds of
    the exact path: the law is still permute-and-flip's."""
    import dp_spark.noise.max_exponential as maxexp_mod

    joint_mod, seen = _spy_settle(monkeypatch)
    monkeypatch.setattr(joint_mod, "FLOAT_ERROR", 2.0**-3)
    monkeypatch.setattr(maxexp_mod, "FLOAT_ERROR", 2.0**-3)
    rng = np.random.default_rng(31 + k)
    check_sampler(lambda: pnf_joint_top_k(counts, k, epsilon, rng), brute_pnf_joint(counts, k, epsilon),
                  brute_pnf_joint(counts, k, 2 * epsilon), n)
    assert sum(1 for kept, _ in seen if kept > 1) > 0.5 * n


@pytest.mark.parametrize("counts,k,epsilon,n", PNF_SETTLING_CASES)
def test_pnf_joint_reading_u_bit_by_bit_matches_brute_force(monkeypatch, counts, k, epsilon, n):
    """U's first word cut to 3 bits: ties within an eighth of U are common, so the settling reads
    64 more bits at a time (several rounds); the law is still permute-and-flip's."""
    import dp_spark.noise.max_exponential as maxexp_mod

    joint_mod, seen = _spy_settle(monkeypatch)
    monkeypatch.setattr(joint_mod, "FIRST_BITS", 3)
    monkeypatch.setattr(maxexp_mod, "FIRST_BITS", 3)
    rng = np.random.default_rng(41 + k)
    check_sampler(lambda: pnf_joint_top_k(counts, k, epsilon, rng), brute_pnf_joint(counts, k, epsilon),
                  brute_pnf_joint(counts, k, 2 * epsilon), n)
    assert sum(1 for kept, _ in seen if kept > 1) > 0.2 * n
    assert sum(1 for _, bits in seen if bits > 3) > 0.05 * n


def test_pnf_joint_with_scores_past_the_doubles():
    """ε so large that c·floor overflows a double: no group is dropped on a NaN bound (the true
    order comes out, as it must at such an ε) and no overflow warning escapes."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = pnf_joint_top_k([0, 10**15, 1], 2, 1e300, np.random.default_rng(0))
    assert out.tolist() == [1, 2]


def test_pnf_joint_is_not_the_exponential_mechanism():
    """Where PF and EM differ, the PNF-Joint draws are rejected against EM."""
    rng = np.random.default_rng(99)
    counts, k, eps = [2, 1, 0], 2, 3.0  # exact TV(PF, EM) ≈ 0.12
    exact = brute_pnf_joint(counts, k, eps)
    em = brute_em(counts, k, eps)
    check_sampler(lambda: pnf_joint_top_k(counts, k, eps, rng), exact, em, 8000)


def test_max_exponential_distribution():
    """MaxExpo draws: KS against (1 - e^{-y})^m, and against the Gumbel limit
    y - ln m for m far beyond double range (ln m = 2000, where the naive
    inverse CDF returns inf)."""
    rng = np.random.default_rng(42)
    n = 20000
    for m in (1, 2, 7, 1000, 10**12):
        y = _max_exponential(np.full(n, math.log(m)), rng.exponential(size=n))
        assert np.all(np.isfinite(y))
        p = stats.kstest(y, lambda x, m=m: np.exp(m * np.log1p(-np.exp(-np.maximum(x, 1e-300))))).pvalue
        assert p > 1e-4
    for big in (745.5, 2000.0):
        y = _max_exponential(np.full(n, big), rng.exponential(size=n))
        assert np.all(np.isfinite(y))
        assert stats.kstest(y - big, stats.gumbel_r.cdf).pvalue > 1e-4
    # edge values: E tiny, E huge, m = 1
    y = _max_exponential(np.array([0.0, 0.0, 50.0, 800.0]), np.array([1e-300, 0.0, 1.0, 1.0]))
    assert np.all(np.isfinite(y)) and np.all(y >= 0)


def test_pnf_joint_handles_huge_group_counts():
    """ln m(e) reaches ~1000 here (beyond the paper's float range); still the
    true order is returned when the gaps dominate."""
    rng = np.random.default_rng(8)
    d, k = 2000, 150
    counts = 10**7 - 1000 * np.arange(d)
    w = joint_top_k_log_weights(counts, k, 1.0)
    assert np.max(w.log_count[np.isfinite(w.log_count)]) > 750
    shuffle = rng.permutation(d)
    out = pnf_joint_top_k(counts[shuffle], k, 1.0, rng)
    assert np.array_equal(shuffle[out], np.arange(k))


# ---------------------------------------------------------------------------
# peeling baselines
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "counts,k,epsilon,n", [([4, 3, 1, 1, 0], 3, 2.0, 15000), ([6, 2, 2, 0], 2, 1.0, 10000)]
)
def test_pnf_peel_matches_definition(counts, k, epsilon, n):
    rng = np.random.default_rng(31 + k)
    exact = brute_pnf_peel(counts, k, epsilon)
    wrong = brute_pnf_peel(counts, k, epsilon / 2)  # scale 2k/ε instead of k/ε
    check_sampler(lambda: pnf_peel_top_k(counts, k, epsilon, rng), exact, wrong, n)


@pytest.mark.parametrize(
    "counts,k,epsilon,delta,n",
    [([4, 3, 1, 1, 0], 3, 1.0, 0.1, 15000), ([5, 2, 2, 0], 2, 2.0, 1e-3, 10000)],
)
def test_cdp_peel_matches_definition(counts, k, epsilon, delta, n):
    rng = np.random.default_rng(57 + k)
    eps_step = cdp_peel_epsilon_per_step(epsilon, delta, k)
    exact = brute_gumbel_peel(counts, k, eps_step)
    wrong = brute_gumbel_peel(counts, k, eps_step / 2)
    check_sampler(lambda: cdp_peel_top_k(counts, k, epsilon, delta, rng), exact, wrong, n)


def test_cdp_peel_epsilon_per_step():
    eps, delta, k = 1.0, 1e-6, 10
    e = cdp_peel_epsilon_per_step(eps, delta, k)
    # solves k e^2/8 + e sqrt(k ln(1/δ)/2) = ε (zCDP -> (ε, δ) conversion)
    assert k * e**2 / 8 + e * math.sqrt(k * math.log(1 / delta) / 2) == pytest.approx(eps, rel=1e-12)
    rho = k * e**2 / 8
    assert rho + 2 * math.sqrt(rho * math.log(1 / delta)) == pytest.approx(eps, rel=1e-12)
    assert e > eps / k
    # small k: basic composition wins
    assert cdp_peel_epsilon_per_step(1.0, 1e-6, 1) == pytest.approx(1.0)
    assert cdp_peel_epsilon_per_step(3.0, 0.0, 4) == 0.75
    for k in (1, 5, 50, 200):
        # basic composition's ε/k, rounded down so that k shares never exceed ε
        # (the float nearest 1/5 is above it)
        assert cdp_peel_epsilon_per_step(1.0, 1e-6, k) >= math.nextafter(1.0 / k, 0.0)


def test_peeling_outputs_distinct_in_rank_order():
    rng = np.random.default_rng(2)
    counts = np.array([0, 1000, 10, 2000, 5])
    assert list(pnf_peel_top_k(counts, 2, 100.0, rng)) == [3, 1]
    assert list(cdp_peel_top_k(counts, 2, 100.0, 1e-6, rng)) == [3, 1]
    for f in (lambda: pnf_peel_top_k(counts, 5, 0.1, rng), lambda: cdp_peel_top_k(counts, 5, 0.1, 1e-6, rng)):
        out = f()
        assert out.dtype == np.int64 and sorted(out.tolist()) == list(range(5))


# ---------------------------------------------------------------------------
# Unknown Domain Gumbel
# ---------------------------------------------------------------------------


def test_unknown_domain_threshold_formula():
    assert unknown_domain_threshold(1.0, 1e-6, 10) == pytest.approx(1 + math.log(1e7))
    assert unknown_domain_threshold(0.5, 1e-11, 10_000) == pytest.approx(1 + 2 * math.log(1e4 / 1e-11))


def test_unknown_domain_all_zero_counts_give_bottom():
    rng = np.random.default_rng(1)
    for eps in (0.1, 1.0, 1e6):  # even when T~ is tiny, zero counts are never selected
        for _ in range(50):
            res = unknown_domain_gumbel(np.zeros(10), 3, eps, 1e-6, 10, rng)
            assert isinstance(res, UnknownDomainResult)
            assert res.bottom is True and res.indices.size == 0
    res = unknown_domain_gumbel([], 1, 1.0, 1e-6, 10, rng)  # empty histogram
    assert res.bottom is True and res.indices.size == 0


def test_unknown_domain_huge_counts_give_k_items_in_order():
    rng = np.random.default_rng(2)
    kbar = 10
    top = 10**9 - 10**6 * np.arange(kbar)
    shuffle = rng.permutation(kbar)
    for _ in range(20):
        res = unknown_domain_gumbel(top[shuffle], 4, 1.0, 1e-6, kbar, rng, count_kbar_plus_1=5.0)
        assert res.bottom is False
        assert res.indices.dtype == np.int64
        assert np.array_equal(shuffle[res.indices], np.arange(4))


def test_unknown_domain_bottom_when_too_few_clear():
    rng = np.random.default_rng(3)
    top = np.array([0, 10**9, 3, 2 * 10**9, 0])
    res = unknown_domain_gumbel(top, 3, 1.0, 1e-6, 5, rng)
    assert res.bottom is True and list(res.indices) == [3, 1]
    res = unknown_domain_gumbel(top, 2, 1.0, 1e-6, 5, rng)
    assert res.bottom is False and list(res.indices) == [3, 1]


@pytest.mark.parametrize("shift_in_beta", [0.0, 2.0, -1.0])
def test_unknown_domain_selection_probability_pins_threshold_and_scale(shift_in_beta):
    """One item with count c, k = k̄ = 1: it is output iff c + G1 > T + c_(2) + G2,
    and G1 - G2 ~ Logistic(0, β), so Pr = 1/(1 + exp((T + c_(2) - c)/β)).
    Pins T = 1 + ln(k̄/δ)/ε, the shift by the (k̄+1)-th count and β = 1/ε."""
    rng = np.random.default_rng(4)
    eps, delta, base = 0.5, 1e-3, 3.0
    thr = 1 + math.log(1 / delta) / eps
    c = thr + base + shift_in_beta / eps
    n = 20000
    hits = sum(
        not unknown_domain_gumbel([c], 1, eps, delta, 1, rng, count_kbar_plus_1=base).bottom for _ in range(n)
    )
    p = 1 / (1 + math.exp(-shift_in_beta))
    sd = math.sqrt(p * (1 - p) / n)
    assert abs(hits / n - p) < 5 * sd  # 5 sd: two-sided p ≈ 6e-7


# ---------------------------------------------------------------------------
# the plan (dp_spark.plans.top_k): checks, guarantee and budget split
# ---------------------------------------------------------------------------

from fractions import Fraction  # noqa: E402

from dp_spark.accounting import ApproxDP, PureDP  # noqa: E402
from dp_spark.plans import top_k as topk_plan  # noqa: E402


@pytest.mark.parametrize(
    "method, delta, size, guarantee, steps",
    [
        ("joint", 0.0, 50, PureDP(2.0), 1),
        ("pnf-joint", 0.0, 50, PureDP(2.0), 1),
        ("pnf-peel", 0.0, 50, PureDP(2.0), 1),
        ("cdp-peel", 0.0, 50, PureDP(2.0), 1),
        ("cdp-peel", 1e-6, 50, ApproxDP(2.0, 1e-6), 1),
        ("unknown-domain", 1e-6, None, ApproxDP(2.0, 1e-6), 1),
        ("auto", 1e-6, None, ApproxDP(2.0, 1e-6), 1),  # no domain: unknown-domain
        ("auto", 0.0, 50, PureDP(2.0), 1),  # auto_share is 0: no choice step
        ("auto", 1e-6, 50, ApproxDP(0.25, 1e-6), 2),  # k > 10·ε: auto_share > 0 (a choice step)
    ],
)
def test_plan_guarantee_and_split(method, delta, size, guarantee, steps):
    epsilon = guarantee.epsilon
    plan = topk_plan.plan(epsilon=epsilon, k=5, delta=delta, method=method, domain_size=size)
    assert plan.guarantee == guarantee and len(plan.steps) == steps
    spent = sum((Fraction(cost.epsilon) for _, cost in plan.steps), Fraction(0))
    assert spent <= Fraction(epsilon) and float(spent) == pytest.approx(epsilon)
    assert all(getattr(cost, "delta", 0.0) <= delta for _, cost in plan.steps)
    assert plan["method"] == method and plan.to_dict()["privacy"]["kind"] == guarantee.kind
    assert ("kbar" in plan.parameters) == (method == "unknown-domain" or size is None)


@pytest.mark.parametrize("share", [0.05, 0.1, 0.3])
def test_plan_auto_split_follows_auto_share(monkeypatch, share):
    """The choice step is ε·auto_share(k, ε, δ, d) (public), the selection the
    exact remainder with δ; the steps do not depend on what auto picks."""
    seen = []
    monkeypatch.setattr(topk_plan, "auto_share", lambda *a: seen.append(a) or share)
    plan = topk_plan.plan(epsilon=3.0, k=4, delta=1e-6, domain="given", domain_size=40)
    assert seen == [(4, 3.0, 1e-6, 40)]
    (first, choice), (second, selection) = plan.steps
    assert first == topk_plan.AUTO_CHOICE_STEP and second == topk_plan.AUTO_SELECT_STEP
    assert choice == PureDP(3.0 * share) and selection.delta == 1e-6
    assert Fraction(choice.epsilon) + Fraction(selection.epsilon) <= Fraction(3.0)
    assert selection.epsilon == pytest.approx(3.0 * (1 - share), rel=1e-15)


def test_plan_auto_with_no_share_and_delta_is_one_approx_step(monkeypatch):
    monkeypatch.setattr(topk_plan, "auto_share", lambda *a: 0.0)
    plan = topk_plan.plan(epsilon=1.0, k=4, delta=1e-6, domain="given", domain_size=40)
    assert plan.steps == ((topk_plan.AUTO_PUBLIC_DELTA_STEP, ApproxDP(1.0, 1e-6)),)


def test_plan_without_the_domain_size_says_it_is_checked_later():
    plan = topk_plan.plan(epsilon=1.0, k=3, domain="domain.txt")
    assert plan["domain"] == "a public domain" and plan.notes and "before anything is spent" in plan.notes[0]
    sized = topk_plan.plan(epsilon=1.0, k=3, domain="domain.txt", domain_size=9)
    assert sized["domain"] == "9 public items" and sized.notes == ()
    assert topk_plan.plan(epsilon=1.0, k=3, delta=1e-6)["domain"] is None


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(k=0), "k must be a whole number >= 1"),
        (dict(k=1001), "k=1,001 is above the limit of 1,000"),
        (dict(k=2.0), "k must be a whole number"),
        (dict(epsilon=0.0), "epsilon must be a positive"),
        (dict(epsilon=float("nan")), "epsilon must be a positive"),
        (dict(delta=1.0), "delta must lie in"),
        (dict(delta=-1e-9), "delta must lie in"),
        (dict(method="magic"), "method must be one of auto, joint"),
        (dict(method="joint", domain_size=None), "needs a public domain"),
        (dict(method="unknown-domain", delta=0.0, domain_size=None), "'unknown-domain', which needs delta > 0"),
        (dict(delta=0.0, domain_size=None), "no public domain was given, so method 'auto' uses"),
        (dict(kbar=0, delta=1e-6, domain_size=None), "kbar must be"),
        (dict(kbar=100_001, delta=1e-6, domain_size=None), "kbar=100,001 is above the limit"),
        (dict(k=5, kbar=3, delta=1e-6, domain_size=None), "larger than kbar"),
        (dict(domain_size=4), "k=5 is larger than the domain (4 items)"),
        (dict(domain_size=0), "domain_size must be"),
        (dict(domain_size=10_000_001), "the domain size=10,000,001 is above the limit of 10,000,000"),
        (dict(k=1000, domain_size=1_000_001), "above the limit of 1,000,000,000 for the joint"),
        (dict(k=1000, method="pnf-joint", domain_size=1_000_001), "for the joint mechanisms"),
        (dict(persons=0), "persons must be"),
        (dict(seed=-1), "seed must be"),
    ],
)
def test_plan_refusals(kwargs, fragment):
    args = {"epsilon": 1.0, "k": 5, "domain_size": 50, **kwargs}
    with pytest.raises(ParameterError, match=re.escape(fragment)):
        topk_plan.plan(**args)


def test_plan_peeling_methods_have_no_joint_entry_limit():
    for method in ("cdp-peel", "pnf-peel"):
        assert topk_plan.plan(epsilon=1.0, k=1000, method=method, domain_size=1_000_001).guarantee == PureDP(1.0)


def test_plan_imports_without_pyspark():
    import subprocess
    import sys

    code = ("import sys, dp_spark.plans.top_k; "
            "assert not any(m.split('.')[0] == 'pyspark' for m in sys.modules), 'pyspark was imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# ---------------------------------------------------------------------------
# input validation
# ---------------------------------------------------------------------------

RNG = np.random.default_rng(0)
SECRET = 987654321  # a count value that must never appear in a message


def domain_calls(counts, k, epsilon, rng):
    """Each domain mechanism with the same arguments (log-weights take no rng)."""
    calls = [
        lambda: joint_top_k(counts, k, epsilon, rng),
        lambda: pnf_joint_top_k(counts, k, epsilon, rng),
        lambda: pnf_peel_top_k(counts, k, epsilon, rng),
        lambda: cdp_peel_top_k(counts, k, epsilon, 1e-6, rng),
    ]
    if rng is RNG:
        calls.append(lambda: joint_top_k_log_weights(counts, k, epsilon))
    return calls


@pytest.mark.parametrize(
    "counts,k,epsilon,rng",
    [
        ([SECRET, 2, 3], 0, 1.0, RNG),  # k < 1
        ([SECRET, 2, 3], 4, 1.0, RNG),  # k > d
        ([SECRET, 2, 3], 1.5, 1.0, RNG),
        ([SECRET, 2, 3], True, 1.0, RNG),
        ([SECRET, 2, 3], "2", 1.0, RNG),
        ([SECRET, 2, 3], 1, 0.0, RNG),
        ([SECRET, 2, 3], 1, -1.0, RNG),
        ([SECRET, 2, 3], 1, float("nan"), RNG),
        ([SECRET, 2, 3], 1, float("inf"), RNG),
        ([SECRET, 2, 3], 1, "1", RNG),
        ([SECRET, 2, 3], 1, 1.0, None),
        ([SECRET, 2, 3], 1, 1.0, 42),
        ([SECRET, 2, 3], 1, 1.0, np.random.RandomState(0)),
        ([], 1, 1.0, RNG),
        ([[SECRET, 2], [3, 4]], 1, 1.0, RNG),
        ([SECRET, -2, 3], 1, 1.0, RNG),
        ([SECRET, float("nan"), 3], 1, 1.0, RNG),
        ([SECRET, float("inf"), 3], 1, 1.0, RNG),
        (["a", "b"], 1, 1.0, RNG),
        ([True, False], 1, 1.0, RNG),
        ([SECRET, None, 3], 1, 1.0, RNG),
    ],
)
def test_domain_mechanisms_reject_bad_arguments(counts, k, epsilon, rng):
    for call in domain_calls(counts, k, epsilon, rng):
        with pytest.raises(ParameterError) as err:
            call()
        assert str(SECRET) not in str(err.value)
        assert "-2" not in str(err.value)


def test_joint_specific_validation():
    for f in (joint_top_k, pnf_joint_top_k):
        with pytest.raises(ParameterError, match="whole numbers") as err:
            f([SECRET, 2.5, 3], 1, 1.0, RNG)
        assert str(SECRET) not in str(err.value) and "2.5" not in str(err.value)
        with pytest.raises(ParameterError, match="2\\*\\*53"):
            f([2**60, 1], 1, 1.0, RNG)
        with pytest.raises(ParameterError, match="sensitivity"):
            f([3, 2, 1], 1, 1.0, RNG, sensitivity=0)
        f([3.0, 2.0, 1.0], 1, 1.0, RNG)  # whole floats are fine
    # the peeling mechanisms accept non-integer counts
    pnf_peel_top_k([3.5, 2.25, 1.0], 2, 1.0, RNG)
    cdp_peel_top_k([3.5, 2.25, 1.0], 2, 1.0, 1e-6, RNG)
    for bad in (-0.1, 1.0, 1.5, float("nan")):
        with pytest.raises(ParameterError, match="delta"):
            cdp_peel_top_k([3, 2, 1], 2, 1.0, bad, RNG)
        with pytest.raises(ParameterError, match="delta"):
            cdp_peel_epsilon_per_step(1.0, bad, 2)
    with pytest.raises(ParameterError):
        cdp_peel_epsilon_per_step(1.0, 1e-6, 0)


def test_unknown_domain_validation():
    ok = dict(k=1, epsilon=1.0, delta=1e-6, kbar=3, rng=RNG)

    def call(top=(SECRET, 5, 4), count_kbar_plus_1=0.0, **kw):
        a = {**ok, **kw}
        return unknown_domain_gumbel(
            list(top), a["k"], a["epsilon"], a["delta"], a["kbar"], a["rng"], count_kbar_plus_1=count_kbar_plus_1
        )

    call()
    call(count_kbar_plus_1=4)
    bad_calls = [
        dict(top=(SECRET, 5, 4, 1)),  # more than kbar counts
        dict(k=0),
        dict(k=4),  # k > kbar
        dict(kbar=0),
        dict(kbar=2.5),
        dict(epsilon=0.0),
        dict(delta=0.0),
        dict(delta=1.0),
        dict(rng=None),
        dict(top=(SECRET, -5, 4)),
        dict(top=(SECRET, float("nan"), 4)),
        dict(count_kbar_plus_1=5),  # exceeds a top count
        dict(count_kbar_plus_1=-1.0),
        dict(count_kbar_plus_1=float("inf")),
        dict(top=(SECRET, 5), count_kbar_plus_1=1.0),  # fewer than kbar counts: must be 0
    ]
    for kw in bad_calls:
        with pytest.raises(ParameterError) as err:
            call(**kw)
        assert str(SECRET) not in str(err.value)
    with pytest.raises(ParameterError):
        unknown_domain_threshold(1.0, 0.0, 10)
    with pytest.raises(ParameterError):
        unknown_domain_threshold(1.0, 1e-6, 0)
