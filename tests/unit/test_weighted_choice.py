"""Tests for dp_spark.noise.weighted: exact Bernoulli(a·exp(−x)·2^−s), the choice among candidates
of weight a·exp(−x) by rejection from a dyadic envelope, and the exact peel; and the joint
mechanism's exact group sizes, which its exact sampler accepts against.

Statistical tests use fixed seeds and accept at p > 1e-4; each is paired with a wrong law that
the same counts reject, so they can fail. Decisions near the boundary are checked word by word
against the exact rule, computed independently with 120-digit decimals."""

from __future__ import annotations

import decimal
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dp_spark.mechanisms.top_k import joint as joint_module
from dp_spark.noise import weighted
from dp_spark.noise.weighted import bernoulli_scaled_exp, exponential_peel, weighted_choice

P_ACCEPT = 1e-4


def binomial_p(hits: int, n: int, p: float) -> float:
    return float(stats.binomtest(hits, n, p).pvalue)


def _chi2_p(counts: np.ndarray, probs: np.ndarray) -> float:
    keep = probs * counts.sum() > 0
    return float(stats.chisquare(counts[keep], probs[keep] * counts.sum()).pvalue)


#: (a, x, shift): p = a·exp(−x)·2^−shift in (0, 1]: shifts of both signs, a large a, a dyadic x
#: with many bits, x = 0, p near 1.
CASES = [
    (1, Fraction(1, 2), 0), (3, Fraction(5, 4), 2), (1, Fraction(0), 1), (7, Fraction(3), -1),
    (2**70 + 1, Fraction(50), 0), (1, Fraction(2**53 - 1, 2**53), -1), (5, Fraction(1, 2**40), 3),
]


def _p(a: int, x: Fraction, shift: int) -> float:
    return a * math.exp(-float(x)) * 2.0**-shift


@pytest.mark.parametrize("a, x, shift", CASES)
def test_bernoulli_scaled_exp_has_the_exact_probability(a, x, shift):
    p = _p(a, x, shift)
    assert 0 < p <= 1
    n = 30_000
    rng = np.random.default_rng(a % 1000 + shift + 17)
    hits = sum(bernoulli_scaled_exp(a, x, shift, rng) for _ in range(n))
    if p == 1.0:
        assert hits == n
        return
    assert binomial_p(hits, n, p) > P_ACCEPT
    assert binomial_p(hits, n, min(1.0, 1.15 * p)) < P_ACCEPT  # the test can fail


class _Words:
    """A stand-in generator handing out given 64-bit words (then ``tail``)."""

    def __init__(self, words, tail=0):
        self.words, self.tail = list(words), tail

    def integers(self, *args, **kwargs):
        return np.uint64(self.words.pop(0) if self.words else self.tail)


def _exact_threshold(a: int, x: Fraction, shift: int, words: int) -> Fraction:
    """p·2^(64·words), to 120 digits (independent of the sampler's precision)."""
    ctx = decimal.Context(prec=120, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
    e = ctx.exp(ctx.divide(-decimal.Decimal(x.numerator), decimal.Decimal(x.denominator)))
    return Fraction(e) * a * Fraction(2) ** (64 * words - shift)


@pytest.mark.parametrize("a, x, shift", CASES[:-2] + [(1, Fraction(3, 8), 1)])
def test_words_near_the_threshold_are_decided_as_the_exact_rule(a, x, shift):
    """First words around ⌊p·2^64⌋ (ties continue on a second word): every decision is U < p."""
    target = _exact_threshold(a, x, shift, 1)
    if target >= 2**64:
        pytest.skip("p = 1")
    top = math.floor(target)
    for d in range(-3, 4):
        w = top + d
        if not 0 <= w < 2**64:
            continue
        for tail in (0, 2**63, 2**64 - 1):
            u = Fraction(w) + Fraction(tail, 2**64)  # U·2^64 (to two words; later words are tail too)
            want = u < target if w != top else (Fraction(w * 2**64 + tail) < _exact_threshold(a, x, shift, 2))
            assert bernoulli_scaled_exp(a, x, shift, _Words([w, tail], tail)) == want, (d, tail)


def test_tiny_probabilities_need_zero_words_first():
    """p <= 2^-128: a nonzero first or second word decides "no" without decimals; zero words go on."""
    a, x, shift = 1, Fraction(100), 0  # p = e^-100 ≈ 2^-144.3: two zero words needed
    assert bernoulli_scaled_exp(a, x, shift, _Words([1])) is False
    assert bernoulli_scaled_exp(a, x, shift, _Words([0, 1])) is False
    assert bernoulli_scaled_exp(a, x, shift, _Words([0, 0, 0], tail=0)) is True  # U = 0 < p
    assert bernoulli_scaled_exp(a, x, shift, _Words([0, 0, 2**63])) is False


def test_a_zero_multiplicity_never_accepts():
    assert not bernoulli_scaled_exp(0, Fraction(0), 0, _Words([]))


def test_a_probability_above_one_is_an_internal_error():
    with pytest.raises(RuntimeError, match="internal error"):
        bernoulli_scaled_exp(5, Fraction(0), 2, np.random.default_rng(0))


# --------------------------------------------------------------------- the choice


def _choice_law(a, x):
    w = np.array([ai * math.exp(-float(xi)) for ai, xi in zip(a, x)])
    return w / w.sum()


@pytest.mark.parametrize("perturb", [0.0, 2.0**-11, -(2.0**-11)])
def test_weighted_choice_has_the_exact_law_whatever_the_doubles(perturb):
    """Multiplicities, gaps, a zero weight and a candidate 2^70 times lighter (lumped): the law is
    w_j/Σw with the doubles ℓ_j exact or off by up to the tolerance."""
    a = [1, 3, 2**40, 0, 7, 1]
    x = [Fraction(0), Fraction(1, 2), Fraction(30), Fraction(0), Fraction(3, 4), Fraction(49)]
    lw = np.array([math.log(ai) - float(xi) if ai else -np.inf for ai, xi in zip(a, x)]) + perturb
    law = _choice_law(a, x)
    rng = np.random.default_rng(5)
    n = 40_000
    counts = np.bincount([weighted_choice(lw, lambda j: (a[j], x[j]), rng) for _ in range(n)], minlength=len(a))
    assert counts[3] == 0
    assert _chi2_p(counts, law) > P_ACCEPT
    wrong = _choice_law(a, [xi * Fraction(6, 5) for xi in x])
    assert _chi2_p(counts, wrong) < P_ACCEPT


def test_weighted_choice_refuses_doubles_far_from_the_weights():
    """ℓ a whole nat below ln w breaks the envelope: the exact acceptance sees p > 1 and stops."""
    lw = np.array([0.0, -1.0])
    with pytest.raises(RuntimeError, match="internal error"):
        for seed in range(200):
            weighted_choice(lw, lambda j: (1, Fraction(0)), np.random.default_rng(seed))


def test_lumped_candidates_are_proposed_and_located():
    """Candidates beyond 2^64 below the heaviest share one class; forcing proposals into it (a stand-in
    uniform integer) locates each of them in index order and accepts none at its tiny weight."""
    lw = np.array([0.0, -100.0, -120.0, -200.0])
    e = weighted.dyadic_exponents(lw)
    top = int(e.max())
    classes, held = weighted.class_weights(e, top)
    assert classes[0] == top - weighted.LUMP_DEPTH and held[0] == 3
    for r in range(3):
        j, shift = weighted.locate(e, top, int(classes[0]), r)
        assert j == r + 1 and shift == top - weighted.LUMP_DEPTH


# --------------------------------------------------------------------- the peel


def _sequential_law(scores, c, k, stop=None):
    """P[output] of the peel by recursion over its rounds."""
    law = {}

    def walk(left, out, p):
        if len(out) == k:
            law[tuple(out)] = law.get(tuple(out), 0.0) + p
            return
        z = sum(math.exp(c * scores[i]) for i in left)
        for j in left:
            q = p * math.exp(c * scores[j]) / z
            if j == stop:
                law[tuple(out)] = law.get(tuple(out), 0.0) + q
            else:
                walk([i for i in left if i != j], out + [j], q)

    walk(list(range(len(scores))), [], 1.0)
    return law


@pytest.mark.parametrize("small", [True, False])  # Python scalars for few candidates, numpy otherwise
@pytest.mark.parametrize("stop", [None, 3])
def test_exponential_peel_has_the_sequential_law(monkeypatch, stop, small):
    if not small:
        monkeypatch.setattr(weighted, "_SMALL", 0)
    scores, c, k = np.array([3.0, 2.5, 1.0, 2.0, 0.0]), 0.9, 2
    law = _sequential_law(scores, c, k, stop)
    rng = np.random.default_rng((11 if stop is None else 12) + 10 * small)
    n = 30_000
    keys = sorted(law)
    seen = {key: 0 for key in keys}
    for _ in range(n):
        seen[tuple(exponential_peel(scores, c, k, rng, stop=stop).tolist())] += 1
    counts = np.array([seen[key] for key in keys])
    assert _chi2_p(counts, np.array([law[key] for key in keys])) > P_ACCEPT
    wrong = _sequential_law(scores, 1.2 * c, k, stop)
    assert _chi2_p(counts, np.array([wrong[key] for key in keys])) < P_ACCEPT


def test_exponential_peel_takes_at_most_the_candidates():
    out = exponential_peel(np.array([1.0, 2.0]), 1.0, 5, np.random.default_rng(0))
    assert sorted(out.tolist()) == [0, 1]


def test_the_doubles_decide_as_the_decimals(monkeypatch):
    """The doubles' first-word decision never differs from the decimal bounds' on the same words:
    the same (a, x, shift) through both paths on 20,000 seeded words each."""
    cases = [(1, Fraction(5, 8), 1), (3, Fraction(1, 4), 2), (2**60 + 3, Fraction(45), 0),
             (1, Fraction(300), -430), (5, Fraction(1, 2**30), 3)]
    for a, x, shift in cases:
        fast = [bernoulli_scaled_exp(a, x, shift, np.random.default_rng(seed)) for seed in range(4000)]
        monkeypatch.setattr(weighted, "_FAST_X", 0)
        slow = [bernoulli_scaled_exp(a, x, shift, np.random.default_rng(seed)) for seed in range(4000)]
        monkeypatch.undo()
        assert fast == slow, (a, x, shift)


def test_exp_neg_is_within_its_bound():
    """The doubles' e^-x (tables and a Taylor polynomial) against 50-digit decimals on 20,000 points,
    grid points and their neighbours: within 14 units of 2^-53, as the module docstring claims."""
    rng = np.random.default_rng(3)
    xs = np.concatenate([rng.uniform(0, 512, 8000), rng.uniform(0, 1 / 64, 4000),
                         np.arange(0, 512 * 64) [::7] / 64.0, np.nextafter(np.arange(1, 4001) / 64.0, 0)])
    ctx = decimal.Context(prec=50)
    for x in xs.tolist():
        want = ctx.exp(-decimal.Decimal(x))
        assert abs(decimal.Decimal(weighted._exp_neg(x)) - want) <= want * decimal.Decimal(14) / 2**53, x


# ------------------------------------------------------- the joint mechanism's group sizes


@settings(max_examples=60, deadline=None)
@given(counts=st.lists(st.integers(0, 6), min_size=1, max_size=6), k=st.integers(1, 3))
def test_joint_entry_counts_are_the_exact_group_sizes(counts, k):
    """m(e) from the row counts (exact integers, what the sampler accepts against) equals the number
    of length-k sequences whose largest D~ entry is e, by brute force, and exp(ln m) of the sweep."""
    k = min(k, len(counts))
    c = np.asarray(counts, dtype=np.int64)
    prep = joint_module._joint_prepare(c, k)
    cs = prep.cs
    sizes: dict[tuple[int, int], int] = {}
    for seq in itertools.permutations(range(len(c)), k):  # positions in the sorted order
        keys = [(int(cs[i] - cs[j]), int(prep.row_tie[i]) + j, i, j) for i, j in enumerate(seq)]
        _, _, r, j = max(keys)
        sizes[(r, j)] = sizes.get((r, j), 0) + 1
    for rows, cols, _, log_count in joint_module._joint_entry_blocks(prep):
        for r, j, lc in zip(rows.tolist(), cols.tolist(), log_count.tolist()):
            m = joint_module._entry_count(prep, r, j)
            assert m == sizes.get((r, j), 0), (r, j)
            assert (m == 0) == (lc == -np.inf)
            if m:
                assert lc == pytest.approx(math.log(m), abs=1e-9)


# ------------------------------------------------------------------ review findings (2026-11-30)


@pytest.mark.parametrize("a, x, shift", [(1, Fraction(5, 8), 1), (3, Fraction(1, 4), 2), (2**60 + 3, Fraction(45), 0),
                                         (1, Fraction(300), -430)])
def test_words_at_the_doubles_margin_are_decided_as_the_exact_rule(a, x, shift):
    """First words around the doubles' decision bounds p_f·2^64(1 ± 2^-38) ∓ 2^13 and around p·2^64
    itself (±2^13 .. ±2^34): every decision is U < p by 120-digit decimals (later words: 2^63)."""
    target = _exact_threshold(a, x, shift, 1)
    p_f = math.ldexp(float(a) * weighted._exp_neg(float(x)), -shift)
    centres = [math.floor(target), math.floor(math.ldexp(p_f * (1 - weighted._FAST_SLACK), 64)),
               math.floor(math.ldexp(p_f * (1 + weighted._FAST_SLACK), 64))]
    offsets = [0, 1, 2**11, 2**13 - 1, 2**13, 2**13 + 2**11, 2**14, 2**20, 2**32, 2**34]
    for centre in centres:
        for d in offsets + [-o for o in offsets]:
            w = centre + d
            if not 0 <= w < 2**64:
                continue
            got = bernoulli_scaled_exp(a, x, shift, _Words([w], tail=2**63))
            want = Fraction(w * 2**64 + 2**63) < _exact_threshold(a, x, shift, 2)  # U ≈ (w + 1/2)/2^64
            assert got == want, (centre - math.floor(target), d)


@pytest.mark.parametrize("mutation", ["slack", "exp"])
def test_the_margin_test_catches_a_looser_double(monkeypatch, mutation):
    """The test above fails when the doubles' p is 2^-30 off (the bound's slack exceeded) or the
    slack is dropped along with the word margin: it can see a wrong margin."""
    if mutation == "slack":
        monkeypatch.setattr(weighted, "_FAST_SLACK", 0.0)
        monkeypatch.setattr(weighted, "_WORD_MARGIN", -(2.0**20))
    else:
        real = weighted._exp_neg
        monkeypatch.setattr(weighted, "_exp_neg", lambda v: real(v) * (1 + 2.0**-30))
    with pytest.raises(AssertionError):
        test_words_at_the_doubles_margin_are_decided_as_the_exact_rule(3, Fraction(1, 4), 2)


def _decimal_decision(a, x, shift, seed):
    """The decimal path alone on four seeded words (then 2^63)."""
    source = np.random.default_rng(seed).integers(0, 2**63, size=4).tolist()
    words: list[int] = []

    def word():
        words.append(int(source.pop(0)) if source else 2**63)
        return words[-1]

    return weighted._bernoulli_decimal(a, x, shift, words, word)


def test_the_thread_decimal_context_does_not_matter():
    """A caller's decimal context (low precision, traps on rounding) changes no decision and no table."""
    cases = [(3, Fraction(1, 4), 2), (2**70 + 1, Fraction(50), 0)]

    def run():
        return ([[bernoulli_scaled_exp(a, x, shift, np.random.default_rng(s)) for s in range(300)]
                 for a, x, shift in cases],
                [[_decimal_decision(a, x, shift, s) for s in range(50)] for a, x, shift in cases])

    want = run()
    saved = list(weighted._EXP_WHOLE), list(weighted._EXP_SIXTYFOURTHS)
    weighted._EXP_WHOLE.clear()
    weighted._EXP_SIXTYFOURTHS.clear()
    try:
        with decimal.localcontext() as ctx:
            ctx.prec = 3
            ctx.traps[decimal.Rounded] = True
            got = run()
        assert (list(weighted._EXP_WHOLE), list(weighted._EXP_SIXTYFOURTHS)) == saved
    finally:
        weighted._EXP_WHOLE[:], weighted._EXP_SIXTYFOURTHS[:] = saved
    assert got == want


def test_an_envelope_below_a_positive_gap_weight_is_refused():
    """ℓ too low for a weight with x > 0 (the doubles' path): p > 1 is an internal error, not a draw."""
    lw = np.array([0.0, -1.5 - 0.5])  # true ln w = 0 and -0.5: the second envelope is 2^-2 < e^-0.5
    with pytest.raises(RuntimeError, match="internal error"):
        for seed in range(300):
            weighted_choice(lw, lambda j: (1, Fraction(j, 2)), np.random.default_rng(seed))


def test_a_gap_that_underflows_is_not_taken_for_zero():
    """x = 2^-1080 (its double is 0): the acceptance is p = e^-x·2^-1 (not exactly 1/2): a first word of
    exactly 2^63 (U >= 1/2 only by later words) goes to the exact comparison, U = 1/2 + 0 < p fails."""
    x = Fraction(1, 2**1080)
    assert float(x) == 0.0
    assert bernoulli_scaled_exp(1, x, 1, _Words([2**63], tail=0)) is False
    assert bernoulli_scaled_exp(1, x, 1, _Words([2**63 - 1], tail=0)) is True  # U = 1/2 − 2^-64 < p


def _gumbel_threshold_outputs(counts, k, eps, bottom, n, rng):
    """Unknown Domain Gumbel's definition with numpy Gumbel draws (the reference law): items whose
    count + Gumbel(1/ε) beats ⊥'s score + Gumbel(1/ε), by decreasing noisy count, at most k."""
    noisy = counts[None, :] + rng.gumbel(scale=1 / eps, size=(n, counts.shape[0]))
    thr = bottom + rng.gumbel(scale=1 / eps, size=(n, 1))
    order = np.argsort(-noisy, axis=1)
    out = []
    for row, o in zip(noisy > thr, order):
        out.append(tuple(int(j) for j in o if row[j])[:k])
    return out


def test_unknown_domain_gumbel_has_the_threshold_law():
    """Three counts around the threshold, k = 2: the exact peel's outputs against the definition's
    (numpy Gumbel draws, 200,000 runs), two-sample χ²; the definition at ε/2 is rejected."""
    from dp_spark.mechanisms.top_k.unknown_domain import (bottom_score, unknown_domain_gumbel,
                                                          unknown_domain_threshold)

    eps, delta, kbar, k = 1.0, 0.5, 3, 2
    counts = np.array([12.0, 10.0, 9.0])
    bottom = bottom_score(unknown_domain_threshold(eps, delta, kbar), 0.0)
    rng = np.random.default_rng(8)
    n = 20_000
    exact = [tuple(unknown_domain_gumbel(counts, k, eps, delta, kbar, rng).indices.tolist()) for _ in range(n)]
    reference = _gumbel_threshold_outputs(counts, k, eps, bottom, 200_000, np.random.default_rng(9))
    wrong = _gumbel_threshold_outputs(counts, k, eps / 2, bottom, 200_000, np.random.default_rng(10))
    keys = sorted(set(exact) | set(reference))

    def p_value(other):
        table = np.array([[exact.count(key) for key in keys], [other.count(key) for key in keys]])
        table = table[:, table.sum(axis=0) > 0]
        return float(stats.chi2_contingency(table)[1])

    assert p_value(reference) > P_ACCEPT
    assert p_value(wrong) < P_ACCEPT


def test_bottom_score_is_exact_on_its_grid_and_rounded_up_past_it():
    from dp_spark.mechanisms.top_k.unknown_domain import bottom_score

    t = 7.123456789
    grid = math.ceil(t * 2**20) / 2**20
    assert grid >= t and Fraction(bottom_score(t, 1000.0)) == Fraction(grid) + 1000
    assert Fraction(bottom_score(t, 1001.0)) - Fraction(bottom_score(t, 1000.0)) == 1  # moves as the count
    big = 2.0**53
    assert bottom_score(big, 1.0) == big + 2  # 2^53 (on the grid) + 1 is no double: rounded up, not to even
    assert Fraction(bottom_score(0.1, 0.2)) >= Fraction(0.1) + Fraction(0.2)
