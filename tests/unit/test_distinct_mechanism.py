"""The driver half of the distinct-count release (numpy only)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dp_spark.noise import discrete_laplace_upper_quantile
from dp_spark.mechanisms.distinct_count.bound import noise_margins, release_from_counts


def test_margins_are_the_discrete_laplace_quantiles():
    m = noise_margins(1.0, 0.05, 4)
    assert m.tolist() == [discrete_laplace_upper_quantile(2.0 * l, 0.05) for l in range(1, 5)]
    # close to the continuous margin (2l/eps) ln(1/(2 beta)) of the paper
    for l, value in enumerate(m, start=1):
        assert abs(value - 2 * l * math.log(10)) <= 2 * l * 0.2 + 1


def test_lower_bound_holds_with_probability_about_one_minus_beta():
    """P[lower_bound > c_l̂] must be <= beta; and the margin is tight, so the
    failure rate is not far below beta either (the test can fail both ways)."""
    rng = np.random.default_rng(2024)
    counts = np.full(20, 5000, dtype=np.int64)
    counts[:5] = [1000, 2000, 3000, 4000, 4500]
    beta, runs = 0.1, 4000
    fails = 0
    for _ in range(runs):
        out = release_from_counts(counts, 1.0, beta, rng)
        fails += out["lower_bound"] > counts[out["bound"] - 1]
    rate = fails / runs
    sd = math.sqrt(beta * (1 - beta) / runs)
    assert rate <= beta + 4 * sd, rate
    assert rate >= beta - 0.05, rate  # discrete quantile: P[X > m] is within a step of beta


def test_estimate_noise_is_discrete_laplace_with_the_stated_scale():
    rng = np.random.default_rng(7)
    counts = np.full(10, 10_000, dtype=np.int64)  # every bound equally good: l̂ is small
    noise, scales = [], set()
    for _ in range(3000):
        out = release_from_counts(counts, 2.0, 0.05, rng)
        noise.append(out["estimate"] - 10_000)
        scales.add((out["bound"], out["noise_scale"]))
        assert out["noise_scale"] == 2.0 * out["bound"] / 2.0
    # GEM prefers the smallest bound when counts are flat (smaller margin)
    bounds = [b for b, _ in scales]
    assert min(bounds) == 1
    assert abs(np.mean(noise)) < 0.5


def test_gem_picks_a_bound_near_the_knee():
    rng = np.random.default_rng(1)
    l = np.arange(1, 100)
    counts = np.minimum(1450, 150 * l).astype(np.int64)  # saturates at l = 10
    bounds = [release_from_counts(counts, 1.0, 0.05, rng)["bound"] for _ in range(300)]
    assert 5 <= np.median(bounds) <= 16


def test_released_values_are_clamped_at_zero_and_integers():
    rng = np.random.default_rng(0)
    for _ in range(200):
        out = release_from_counts(np.zeros(5, dtype=np.int64), 0.5, 0.05, rng)
        assert isinstance(out["estimate"], int) and out["estimate"] >= 0
        assert 0 <= out["lower_bound"] <= out["estimate"]


def test_release_only_depends_on_counts_through_the_mechanism():
    """Same seed, same counts -> same release; a different seed differs."""
    counts = np.arange(1, 31, dtype=np.int64) * 10
    a = release_from_counts(counts, 1.0, 0.05, np.random.default_rng(5))
    b = release_from_counts(counts, 1.0, 0.05, np.random.default_rng(5))
    assert a == b
    others = {release_from_counts(counts, 1.0, 0.05, np.random.default_rng(s))["estimate"] for s in range(10)}
    assert len(others) > 1


def test_end_to_end_privacy_ratio_on_neighbouring_counts():
    """Exact output distribution of l̂ on neighbouring count vectors, for the
    paper's GEM and the release's choice (max-denominator scores,
    permute-and-flip): the probability ratio is within e^{ε/2} (the choice's
    half of the budget)."""
    from dp_spark.mechanisms.distinct_count.gem import (
        generalized_exponential_probabilities,
        generalized_permute_and_flip_probabilities,
    )

    eps, beta = 1.0, 0.05
    counts = np.array([10, 18, 24, 28, 30, 31], dtype=np.float64)
    l = np.arange(1, 7, dtype=np.float64)
    margins = noise_margins(eps, beta, 6)
    neighbour = counts + l  # a new person adding l items at every bound
    for probs, kw in ((generalized_exponential_probabilities, {}),
                      (generalized_permute_and_flip_probabilities, {"monotone": True})):
        p = probs(counts - margins, l, eps / 2, beta, **kw)
        q = probs(neighbour - margins, l, eps / 2, beta, **kw)
        assert np.max(np.abs(np.log(p) - np.log(q))) <= eps / 2 + 1e-9


# ------------------------------------------------------------- issue 25: the bound's candidates

from fractions import Fraction  # noqa: E402

from hypothesis import given, settings, strategies as st  # noqa: E402

from dp_spark.accounting.exact import exact  # noqa: E402
from dp_spark.mechanisms.distinct_count.bound import select_bound  # noqa: E402
from dp_spark.mechanisms.distinct_count.gem import (  # noqa: E402
    gem_normalized_scores,
    generalized_exponential_probabilities,
    generalized_permute_and_flip,
    generalized_permute_and_flip_probabilities,
)
from dp_spark.plans.distinct_count import (  # noqa: E402
    DEFAULT_MAX_BOUND,
    MATCHING_MAX_BOUND,
    MAX_BOUND_LIMIT,
    SELECTION_BETA,
    SELECTION_REFERENCE_CANDIDATES,
    bound_candidates,
    candidate_betas,
    gem_shifts,
)
from dp_spark.stages.kernels import counts_from_rounds, flow_bounded_counts, greedy_match_rounds  # noqa: E402


def test_candidates_are_the_powers_of_four_below_max_bound_and_max_bound():
    """The top is always a candidate (issue 36: with max_bound 100 the grid
    1, 4, 16, 64 left every l in (64, 100] unreachable)."""
    assert bound_candidates(1) == [1]
    assert bound_candidates(3) == [1, 3]
    assert bound_candidates(4) == [1, 4]
    assert bound_candidates(100) == [1, 4, 16, 64, 100]
    assert bound_candidates(DEFAULT_MAX_BOUND) == [4**i for i in range(9)] == bound_candidates(65_536)
    assert bound_candidates(MATCHING_MAX_BOUND) == [1, 4, 16, 64, 256, 1024]
    assert bound_candidates(1_000_000) == [4**i for i in range(10)] + [1_000_000]


def test_each_candidate_has_its_own_gem_threshold():
    """The near candidates (1, 4, 16, 64) keep t = (2/ε)·ln 20 whatever the
    grid's top; each further one a failure share 4 times smaller; the
    shares sum below 0.22 on every grid up to the public limit (GEM's
    guarantee: far candidates keep a small total chance). The shift e_j
    turns GEM's one t = (2/ε)·ln(k/0.2) into t_j = (2/ε)·ln(1/β_j)."""
    eps = 0.7
    for top in (1, 4, 100, DEFAULT_MAX_BOUND, MAX_BOUND_LIMIT):
        k = len(bound_candidates(top))
        betas = candidate_betas(k)
        assert sum(betas) < 0.22 and all(0 < b < 1 for b in betas)
        assert betas[:SELECTION_REFERENCE_CANDIDATES] == [SELECTION_BETA / 4] * min(k, 4)
        for j, (b, e) in enumerate(zip(betas, gem_shifts(k, eps))):
            t = (2 / eps) * np.log(k / SELECTION_BETA)
            assert t + e == pytest.approx((2 / eps) * np.log(1 / b))
            if j < 4:
                assert t + e == pytest.approx((2 / eps) * np.log(20))


def test_far_candidates_keep_a_small_total_chance():
    """Issue 36's review: with one threshold for all, every candidate far
    above the data's scale had the same weight, a 3 % chance of l̂ >= 1,024
    on counts that are flat from l = 4 (MovieLens-like). With per-candidate
    thresholds that chance is below 0.5 % at every ε."""
    from dp_spark.mechanisms.distinct_count.accuracy import release_distribution

    cands = np.array(bound_candidates(DEFAULT_MAX_BOUND))
    values = np.minimum(cands * 600, 1_600)  # flat past l = 4: 1,600 items held by many persons
    for eps in (0.25, 1.0, 4.0):
        dist = release_distribution(values, cands, eps, 0.05)
        assert dist.bound_at_least(1024) < 0.005, (eps, dist.bound_probabilities)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5000), min_size=1, max_size=120), st.integers(0, 2**32))
def test_released_bound_is_always_a_public_candidate(raw, seed):
    """Whatever the counts, l̂ is one of bound_candidates(len(counts)): the
    candidate set is a function of max_bound, never of the data (the old
    selection over 1..L fails this on most inputs)."""
    counts = np.maximum.accumulate(np.asarray(raw, dtype=np.int64))
    out = release_from_counts(counts, 1.0, 0.05, np.random.default_rng(seed))
    assert out["bound"] in bound_candidates(len(counts))


def _person_sets(rng, n_persons, n_items, max_items):
    return [np.unique(rng.integers(0, n_items, rng.integers(1, max_items + 1))) for _ in range(n_persons)]


def _exact_counts(persons, n_items, max_bound):
    codes = np.concatenate([[p] * len(u) for p, u in enumerate(persons)]).astype(np.int64)
    return flow_bounded_counts(codes, np.concatenate(persons).astype(np.int64), len(persons), n_items, max_bound)


def _greedy_counts(persons, n_items, max_bound):
    indptr = np.concatenate([[0], np.cumsum([len(u) for u in persons])]).astype(np.int64)
    rounds = greedy_match_rounds(indptr, np.concatenate(persons).astype(np.int64), n_items, max_bound)
    return counts_from_rounds(rounds, max_bound)


def _sharded_greedy_counts(persons, n_items, max_bound, ids, shards=3):
    """The Spark stage's combine rule in numpy: a person's shard is a public
    function of its id (id mod shards), the greedy runs per shard in list
    order, round(x) = min over shards."""
    best = np.zeros(n_items, dtype=np.int64)
    for s in range(shards):
        mine = [u for p, u in zip(ids, persons) if p % shards == s]
        if not mine:
            continue
        indptr = np.concatenate([[0], np.cumsum([len(u) for u in mine])]).astype(np.int64)
        rounds = greedy_match_rounds(indptr, np.concatenate(mine).astype(np.int64), n_items, max_bound)
        rounds = rounds.astype(np.int64)
        hit = rounds > 0
        best[hit] = np.where(best[hit] > 0, np.minimum(best[hit], rounds[hit]), rounds[hit])
    return counts_from_rounds(best, max_bound)


def _sampled_counts(persons, n_items, max_bound, ids, salt=7):
    """The sampling baseline: each person keeps its first l items in a
    salted order that depends on its own (person, item) ids only."""
    ranked = [u[np.argsort([hash((salt, p, int(x))) for x in u], kind="stable")] for p, u in zip(ids, persons)]
    return np.array([len(set().union(*(set(u[:l].tolist()) for u in ranked))) for l in range(1, max_bound + 1)])


COUNTERS = {"exact": lambda persons, n_items, max_bound, ids: _exact_counts(persons, n_items, max_bound),
            "greedy": lambda persons, n_items, max_bound, ids: _greedy_counts(persons, n_items, max_bound),
            "sharded": _sharded_greedy_counts, "sampling": _sampled_counts}


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from([1, 4, 5, 16, 20, 64]), st.sampled_from(sorted(COUNTERS)),
       st.floats(0.1, 4.0))
def test_selection_sensitivity_on_random_add_remove_one_person_neighbours(seed, max_bound, how, epsilon):
    """The privacy claim of the kept selection, on real neighbours: D and D
    plus one person (anywhere in the order), for every counting method. For
    every candidate l (1, 4, 16, …), q_l = c_l − m_l moves by 0..l, all in
    the same direction (m_l is public; removing the person is the same pair
    read backwards); hence q_l − q_l' moves by at most max(l, l'), and the
    max-denominator normalised scores by at most 1; so the exact
    distribution of l̂ (permute-and-flip, and the exponential mechanism on
    the same scores) changes by at most e^{ε/2}, the selection's share."""
    rng = np.random.default_rng(seed)
    n_items = int(rng.integers(3, 30))
    persons = _person_sets(rng, int(rng.integers(1, 12)), n_items, 8)
    extra = np.unique(rng.integers(0, n_items, rng.integers(1, 2 * max_bound + 3)))
    at = int(rng.integers(0, len(persons) + 1))  # the new person's place in the (hash) order
    neighbour, ids = list(persons), list(range(len(persons)))
    neighbour.insert(at, extra)
    ids2 = ids[:at] + [len(persons)] + ids[at:]  # a new id; the others keep theirs
    count = COUNTERS[how]
    c, c2 = count(persons, n_items, max_bound, ids), count(neighbour, n_items, max_bound, ids2)
    cands = np.asarray(bound_candidates(max_bound))
    margins = noise_margins(epsilon, 0.05, max_bound)
    q, q2 = c[cands - 1] - margins[cands - 1], c2[cands - 1] - margins[cands - 1]
    assert np.all(q2 - q >= 0) and np.all(q2 - q <= cands)  # same direction, at most l
    moved = (q2 - q)[:, None] - (q2 - q)[None, :]
    assert np.all(np.abs(moved) <= np.maximum(cands[:, None], cands[None, :]))
    eps_select = epsilon / 2
    s = gem_normalized_scores(q, cands, eps_select, SELECTION_BETA, monotone=True)
    s2 = gem_normalized_scores(q2, cands, eps_select, SELECTION_BETA, monotone=True)
    assert np.max(np.abs(s2 - s)) <= 1  # exactly (the scores are computed exactly, then rounded to a grid)
    for probs in (generalized_permute_and_flip_probabilities, generalized_exponential_probabilities):
        p = probs(q, cands, eps_select, SELECTION_BETA, monotone=True)
        p2 = probs(q2, cands, eps_select, SELECTION_BETA, monotone=True)
        assert np.max(np.abs(np.log(p) - np.log(p2))) <= eps_select + 1e-9


def test_max_denominators_need_same_direction_moves():
    """Why the release may divide by max(l, l') and not l + l': only because
    the counts move in the same direction. Moves of opposite signs (q_1 up
    by 1, q_4 down by 4: no neighbouring counts do this) shift a
    max-denominator score by 5/4 > 1, while GEM's own l + l' keeps it at 1."""
    cands = np.array([1, 4])
    q = np.array([100.0, 100.0])
    q2 = q + np.array([1.0, -4.0])
    same = gem_normalized_scores(q, cands, 0.5, SELECTION_BETA, monotone=True)
    same2 = gem_normalized_scores(q2, cands, 0.5, SELECTION_BETA, monotone=True)
    assert np.max(np.abs(same2 - same)) == pytest.approx(1.25)
    paper = gem_normalized_scores(q, cands, 0.5, SELECTION_BETA)
    paper2 = gem_normalized_scores(q2, cands, 0.5, SELECTION_BETA)
    assert np.max(np.abs(paper2 - paper)) <= 1 + 1e-12


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(-1e4, 1e4), min_size=1, max_size=12), st.integers(0, 2**32))
def test_max_denominator_scores_are_the_definition(raw, seed):
    """s_i = min_j (a_i − a_j)/max(Δ_i, Δ_j) with a = q − tΔ, t = (2/ε)ln(k/β):
    computed independently here, exactly; the release's score is it rounded
    down to a multiple of 2^-20 (below it by less than 2^-20); s <= 0 and
    the best a scores 0."""
    from fractions import Fraction

    rng = np.random.default_rng(seed)
    q = np.asarray(raw)
    d = rng.integers(1, 100, len(q)).astype(np.float64)
    eps, beta = float(rng.uniform(0.1, 3)), 0.2
    t = Fraction((2 / eps) * math.log(len(q) / beta))
    a = [Fraction(x) - t * Fraction(y) for x, y in zip(q, d)]
    expected = [min((a[i] - a[j]) / Fraction(max(d[i], d[j])) for j in range(len(q))) for i in range(len(q))]
    got = gem_normalized_scores(q, d, eps, beta, monotone=True)
    for g, e in zip(got, expected):
        assert Fraction(g) <= e < Fraction(g) + Fraction(1, 2**20)
        assert (Fraction(g) * 2**20).denominator == 1  # on the public grid
    assert got.max() == 0.0 and np.all(got <= 0.0)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=10), st.integers(0, 2**32), st.booleans())
def test_max_denominator_scores_have_sensitivity_exactly_one(raw, seed, up):
    """Same-direction neighbours (every q_j moves by at most Δ_j, all one
    way, by random non-integer amounts): the released monotone scores differ
    by at most 1 exactly, with no floating-point slack (exact computation,
    rounding down to a whole-inverse grid)."""
    from fractions import Fraction

    rng = np.random.default_rng(seed)
    q = np.asarray(raw)
    d = rng.uniform(0.01, 100, len(q))
    # moves of 0 or the full Δ_j (the extreme neighbours) or in between
    share = np.where(rng.random(len(q)) < 0.8, rng.integers(0, 2, len(q)), rng.uniform(0, 1, len(q)))
    moved = q + (1 if up else -1) * d * share
    # keep only moves that are exactly within Δ_j and of one sign (float rounding of q + δ)
    ok = [(Fraction(m) - Fraction(x)) * (1 if up else -1) for m, x in zip(moved, q)]
    if any(v < 0 or v > Fraction(y) for v, y in zip(ok, d)):
        return
    eps = float(rng.uniform(0.05, 3))
    s = gem_normalized_scores(q, d, eps, 0.1, monotone=True)
    s2 = gem_normalized_scores(moved, d, eps, 0.1, monotone=True)
    assert max(abs(Fraction(x) - Fraction(y)) for x, y in zip(s, s2)) <= 1


def test_permute_and_flip_probabilities_match_every_visiting_order():
    """The exact distribution (Gauss–Legendre integral) against the
    definition: average over all k! visiting orders of 'first accepted'."""
    import itertools

    q = np.array([300.0, 520.0, 610.0, 640.0, 700.0])
    d = np.array([1.0, 4.0, 16.0, 64.0, 128.0])
    eps, beta = 0.5, 0.2
    from dp_spark.accounting.exact import ratio_down

    s = gem_normalized_scores(q, d, eps, beta, monotone=True)
    accept = np.exp(ratio_down(eps, 2.0) * (s - s.max()))
    want = np.zeros(len(q))
    orders = list(itertools.permutations(range(len(q))))
    for order in orders:
        left = 1.0
        for i in order:
            want[i] += left * accept[i]
            left *= 1.0 - accept[i]
    want /= len(orders)
    np.testing.assert_allclose(generalized_permute_and_flip_probabilities(q, d, eps, beta, monotone=True), want,
                               rtol=1e-10)


def test_permute_and_flip_sampler_matches_its_distribution():
    """Chi-square goodness of fit (p > 1e-4, fixed seed) of the sampler the
    release uses against the exact distribution, and rejection of the
    distribution at 1.2·ε (the test can fail)."""
    from scipy import stats

    q = np.array([1340.0, 1380.0, 1560.0, 2100.0])  # candidates near each other in GEM units
    d = np.array([1.0, 4.0, 16.0, 64.0])
    eps, beta, n = 0.5, 0.2, 20_000
    probs = generalized_permute_and_flip_probabilities(q, d, eps, beta, monotone=True)
    assert probs.min() > 0.01
    rng = np.random.default_rng(11)
    draws = np.bincount([generalized_permute_and_flip(q, d, eps, beta, rng, monotone=True) for _ in range(n)],
                        minlength=4)
    assert stats.chisquare(draws, probs * n).pvalue > 1e-4
    wrong = generalized_permute_and_flip_probabilities(q, d, 1.2 * eps, beta, monotone=True)
    assert stats.chisquare(draws, wrong * n).pvalue < 1e-4


def test_release_selection_picks_the_best_candidate_at_least_as_often_as_the_papers_gem():
    """On neighbour-free shapes (Amazon-like knee, flat, saturated large
    table), the kept choice gives the likeliest-best candidate at least the
    probability of the paper's GEM over the same grid (both exact)."""
    for counts in (_knee(), np.full(100, 2406), _knee(178_000, 40)):
        cands = np.asarray(bound_candidates(len(counts)))
        q = counts[cands - 1] - noise_margins(1.0, 0.05, len(counts))[cands - 1]
        ours = generalized_permute_and_flip_probabilities(q, cands, 0.5, SELECTION_BETA, monotone=True)
        paper = generalized_exponential_probabilities(q, cands, 0.5, SELECTION_BETA)
        best = int(np.argmax(q - 0.0))
        assert ours[best] >= paper[best]


@settings(max_examples=200, deadline=None)
@given(st.floats(1e-4, 1e3), st.sampled_from([0.5, 0.25, 0.1, 0.3, 0.7]), st.integers(0, 2**32))
def test_split_composes_to_at_most_epsilon_and_noise_matches_the_count_share(epsilon, share, seed):
    """ε_select + ε_count <= ε exactly, and the count noise is never below
    l̂/ε_count (the default share 1/2 gives the plan's 2l̂/ε)."""
    from dp_spark.mechanisms.distinct_count import bound as dc

    seen = []
    real = dc.discrete_laplace_batch_any
    dc.discrete_laplace_batch_any = lambda scale, size, rng: (seen.append(scale), real(scale, size, rng))[1]
    try:
        out = release_from_counts(np.arange(1, 21) * 10, epsilon, 0.05, np.random.default_rng(seed),
                                  select_share=share)
    finally:
        dc.discrete_laplace_batch_any = real
    eps_select = epsilon * share
    from dp_spark.accounting import remainder

    eps_count = remainder(epsilon, eps_select)
    assert exact(eps_select) + exact(eps_count) <= exact(epsilon)
    assert Fraction(seen[0]) >= out["bound"] / Fraction(eps_count)
    if share == 0.5:
        assert Fraction(seen[0]) >= 2 * out["bound"] / Fraction(epsilon)


def test_select_bound_is_what_release_from_counts_uses():
    counts = np.minimum(1400, 90 * np.arange(1, 101)).astype(np.int64)
    margins = noise_margins(1.0, 0.05, 100)
    for seed in range(20):
        chosen = select_bound(counts, 0.5, margins, np.random.default_rng(seed))
        assert chosen == release_from_counts(counts, 1.0, 0.05, np.random.default_rng(seed))["bound"]


def _knee(true=1464, knee=18, max_bound=100):
    """A concave curve shaped like Amazon Fashion's greedy counts (no data):
    c_l rises steeply and saturates near l = knee."""
    l = np.arange(1, max_bound + 1)
    return np.round(true * (1 - np.exp(-l / (knee / 3.5)))).astype(np.int64)


def test_knee_near_twenty_is_chosen_better_than_by_the_papers_selection():
    """Issue 25: a knee near l = 20 (Amazon Fashion's shape; the best
    non-private q_l is 91.7% of the truth at l = 22). The paper's selection
    over 1..100 with GEM β = β settles at small l: median lower bound 86.3%,
    10th percentile 76.2% over 400 seeds; the grid with the paper's GEM gives
    90.5% / 85.0%, the kept choice (max denominators, permute-and-flip)
    90.4% / 86.4% in its exact distribution (the release's own sampler is
    checked against that distribution by
    test_release_distribution_matches_the_release_it_describes), which this
    asserts; 400 seeded releases land near it."""
    from dp_spark.mechanisms.distinct_count.accuracy import release_distribution
    from dp_spark.mechanisms.distinct_count.bound import bound_candidates

    counts = _knee()
    cands = np.asarray(bound_candidates(len(counts)), dtype=np.int64)
    exact = release_distribution(counts[cands - 1], cands, 1.0, 0.05)
    assert exact.lower_bound_quantile(0.5) >= 0.9 * counts[-1]
    assert exact.lower_bound_quantile(0.1) >= 0.86 * counts[-1]
    lows = [release_from_counts(counts, 1.0, 0.05, np.random.default_rng(s))["lower_bound"] for s in range(400)]
    assert abs(np.median(lows) - exact.lower_bound_quantile(0.5)) <= 0.01 * counts[-1]
    assert abs(np.percentile(lows, 10) - exact.lower_bound_quantile(0.1)) <= 0.015 * counts[-1]


def test_flat_counts_choose_bound_one_at_least_four_times_in_five():
    """Issue 25: 100,000 persons, 2,406 items, l = 1 already exact (flat
    counts). l̂ = 1 must be chosen in >= 80% of runs (the issue's goal). Over
    these 500 seeds the paper's GEM on the grid chose it 88.8% of the time,
    the kept choice 96.6%; >= 90% holds the gain."""
    counts = np.full(100, 2406, dtype=np.int64)
    bounds = [release_from_counts(counts, 1.0, 0.05, np.random.default_rng(s))["bound"] for s in range(500)]
    assert np.mean(np.asarray(bounds) == 1) >= 0.9


def test_release_distribution_matches_the_release_it_describes():
    """The exact distribution (accuracy tier, grid benchmark) is the
    release's: P[l̂] against 6,000 seeded releases (chi-square), and the
    lower bound's median and 10th percentile within the sampling error."""
    from scipy import stats

    from dp_spark.mechanisms.distinct_count.accuracy import release_distribution
    from dp_spark.mechanisms.distinct_count.bound import release_at_candidates

    cands = np.array([1, 4, 16, 64])
    values = np.array([200, 420, 520, 540])
    dist = release_distribution(values, cands, 1.0, 0.05)
    rng = np.random.default_rng(7)
    runs = [release_at_candidates(values, cands, 1.0, 0.05, rng) for _ in range(6_000)]
    probs = np.array([dist.bound_probabilities[int(c)] for c in cands])
    seen = np.array([sum(r["bound"] == c for r in runs) for c in cands])
    keep = probs * len(runs) >= 5
    assert stats.chisquare(seen[keep], probs[keep] / probs[keep].sum() * seen[keep].sum()).pvalue > 1e-4
    lows = np.array([r["lower_bound"] for r in runs])
    for q in (0.1, 0.5):
        exact = dist.lower_bound_quantile(q)
        # the exact quantile lies between the sample's (q ∓ 3 standard errors) quantiles
        se = 3 * np.sqrt(q * (1 - q) / len(runs))
        assert np.quantile(lows, q - se) <= exact <= np.quantile(lows, q + se)
    assert dist.estimate_quantile(0.5) == pytest.approx(np.median([r["estimate"] for r in runs]), abs=8)


def test_flow_at_the_candidates_is_exact_there_and_a_lower_bound_between():
    rng = np.random.default_rng(4)
    persons = rng.integers(0, 30, 400)
    items = rng.integers(0, 120, 400)
    pairs = np.unique(np.stack([persons, items], axis=1), axis=0)
    full = flow_bounded_counts(pairs[:, 0], pairs[:, 1], 30, 120, 40)
    cands = [1, 4, 16, 40]
    at = flow_bounded_counts(pairs[:, 0], pairs[:, 1], 30, 120, 40, cands)
    assert all(at[c - 1] == full[c - 1] for c in cands)
    assert (at <= full).all() and (np.diff(at) >= 0).all()
    assert at[5] == full[3]  # l = 6 reads the count at 4, the largest candidate below it


def test_release_says_when_the_bound_is_the_top_candidate():
    """bound_is_top is a function of the released l̂: True exactly when
    l̂ is the largest candidate."""
    from dp_spark.mechanisms.distinct_count.bound import release_at_candidates

    cands = np.array([1, 4, 16])
    rng = np.random.default_rng(1)
    capped = release_at_candidates(np.array([10, 40, 10_000]), cands, 1.0, 0.05, rng)
    assert capped["bound"] == 16 and capped["bound_is_top"]
    small = release_at_candidates(np.array([10_000, 10_000, 10_000]), cands, 1.0, 0.05, rng)
    assert small["bound"] == 1 and not small["bound_is_top"]
