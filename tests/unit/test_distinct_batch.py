"""The grouped distinct-count vectorised over groups (issue 40): the batch
(cap_bound.release_groups_batch, counts_at_bound) is the per-group loop of the
scalar mechanism (bound.release_from_counts / release_group_zcdp_at), in
distribution, and its exact scores are the scalar path's, float for float.
Pure numpy: no pyspark."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats

from dp_spark.accounting.exact import ratio_down
from dp_spark.mechanisms.distinct_count.bound import (count_split, margins_at, release_from_counts,
                                                      release_group_zcdp_at, selection_scores)
from dp_spark.mechanisms.distinct_count.cap_bound import (counts_at_bound, release_at_bound, release_groups,
                                                          release_groups_batch)
from dp_spark.mechanisms.distinct_count.gem import (exponential_rows, gem_normalized_scores,
                                                    generalized_permute_and_flip_probabilities,
                                                    permute_and_flip_rows, same_direction_scores_batch)
from dp_spark.mechanisms.groups import group_noise_scale, group_selection_epsilon
from dp_spark.mechanisms.exponential import exponential_mechanism, permute_and_flip
from dp_spark.noise.tails import discrete_gaussian_upper_quantile

CANDS = [1, 4, 16]
#: three groups' counts at the candidates: one that prefers l = 1, one l = 4, one torn between 4 and 16
AT = np.array([[40, 41, 41], [10, 60, 64], [5, 30, 52]], dtype=np.int64)


def _scalar_scores(q, d, eps, beta):
    return np.array([gem_normalized_scores(row.astype(np.float64), np.asarray(d, dtype=np.float64), eps, beta,
                                           monotone=True) for row in q])


@pytest.mark.parametrize("seed", range(6))
def test_batch_scores_are_the_scalar_scores_float_for_float(seed):
    rng = np.random.default_rng(seed)
    for _ in range(40):
        k = int(rng.integers(1, 10))
        d = np.sort(rng.choice(np.arange(1, 70_000), size=k, replace=False))
        eps, beta = float(10 ** rng.uniform(-6, 1)), float(rng.uniform(0.01, 0.5))
        span = int(10 ** rng.integers(0, 15))
        q = rng.integers(-span, span + 1, size=(12, k))
        q[0] = q[0, 0]  # all candidates tied
        assert np.array_equal(same_direction_scores_batch(q, d, eps, beta), _scalar_scores(q, d, eps, beta))


def test_batch_scores_at_a_tiny_epsilon_take_the_exact_fraction_path():
    q, d = np.array([[5, 9, 2], [0, 0, 0]]), np.array([1, 4, 16])
    assert np.array_equal(same_direction_scores_batch(q, d, 1e-12, 0.2), _scalar_scores(q, d, 1e-12, 0.2))


def test_batch_scores_clip_huge_utilities_without_refusing():
    """No refusal may depend on the (private) utilities: beyond ±2^60 they are clipped (1-Lipschitz,
    monotone: the sensitivity argument holds), and the scores of values far apart are the floor."""
    q = np.array([[2**62, 0, -2**62], [2**61, 2**61 + 5, 2**61 - 3]], dtype=np.int64)
    s = same_direction_scores_batch(q, np.array([1, 4, 16]), 1.0, 0.2)
    assert s[0, 0] == 0.0 and s[0, 2] == -2.0**32
    equal = same_direction_scores_batch(np.zeros((1, 3), dtype=np.int64), np.array([1, 4, 16]), 1.0, 0.2)
    assert np.array_equal(s[1], equal[0])  # all three clipped to 2^60: scored as equal utilities
    with pytest.raises(Exception, match="sensitivities"):
        same_direction_scores_batch(q, np.array([1, 4, 2**41]), 1.0, 0.2)


def test_one_row_samplers_draw_what_the_scalar_samplers_draw():
    """With G = 1 the row samplers are the scalar GEM samplers: same generator state, same index
    (the ungrouped release is the one-key grouped release, draw for draw)."""
    rows = [[0.0, -1.5, -3.0], [-0.5, 0.0, -9.0], [0.0, 0.0, 0.0], [-2.0, -1.0, 0.0]]
    for seed in range(20):
        for row in rows:
            s = np.array([row])
            pf = permute_and_flip_rows(s, 0.7, np.random.default_rng(seed))
            em = exponential_rows(s, 0.7, np.random.default_rng(seed))
            assert pf.tolist() == [permute_and_flip(row, 0.7, 1.0, np.random.default_rng(seed))]
            assert em.tolist() == [exponential_mechanism(row, 0.7, 1.0, np.random.default_rng(seed))]


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
@pytest.mark.parametrize("seed", range(5))
def test_one_group_batch_is_the_scalar_release_draw_for_draw(noise, seed):
    """An ungrouped release (release_from_counts; under zCDP release_group_zcdp_at) is the one-key
    grouped release: same seed, same values (the scores, samplers and stream order are the same)."""
    for v in AT:
        batch, _ = release_groups_batch(v[None, :], CANDS, 16, 1, 0.05, np.random.default_rng(seed), noise=noise,
                                        select=0.25, count=0.25)
        rng = np.random.default_rng(seed)
        if noise == "laplace":
            one = release_from_counts(v, ratio_down(0.5, 1), 0.05, rng, candidates=CANDS)
        else:
            sigmas = {c: group_noise_scale(1, c, rho=0.25).scale for c in CANDS}
            margins = [discrete_gaussian_upper_quantile(sigmas[c], 0.05) for c in CANDS]
            one = release_group_zcdp_at(v, group_selection_epsilon(1, rho=0.25), sigmas, margins, 0.05, rng)
        mine = batch.as_dicts()[0]
        assert {k: x for k, x in mine.items() if k != "noise"} == {k: x for k, x in one.items() if k != "noise"}
        assert [dataclasses.replace(r, target="") for r in mine["noise"]] == \
            [dataclasses.replace(r, target="") for r in one["noise"]]  # the same records, up to their wording


def _batch(noise, copies, seed, m=2, select=0.5, count=0.5):
    released, _ = release_groups_batch(np.tile(AT, (copies, 1)), CANDS, 16, m, 0.05, np.random.default_rng(seed),
                                       noise=noise, select=select, count=count)
    return released.bound.reshape(copies, len(AT)), released.estimate.reshape(copies, len(AT))


def _loop(noise, copies, seed, m=2, select=0.5, count=0.5):
    """The per-group loop of the scalar mechanism: the release before the batch."""
    rng = np.random.default_rng(seed)
    if noise == "laplace":
        eps = ratio_down(select + count, m)
        out = [release_from_counts(v, eps, 0.05, rng, candidates=CANDS) for _ in range(copies) for v in AT]
    else:
        sigmas = {c: group_noise_scale(m, c, rho=count).scale for c in CANDS}
        margins = [discrete_gaussian_upper_quantile(sigmas[c], 0.05) for c in CANDS]
        eps = group_selection_epsilon(m, rho=select)
        out = [release_group_zcdp_at(v, eps, sigmas, margins, 0.05, rng) for _ in range(copies) for v in AT]
    bounds = np.array([r["bound"] for r in out]).reshape(copies, len(AT))
    return bounds, np.array([r["estimate"] for r in out]).reshape(copies, len(AT))


def _cells(bounds, estimates, g):
    """Group g's (bound, estimate) outcomes as cells: bound × estimate in bins of 8 (outer bins open)."""
    est = np.clip((estimates[:, g] - AT[g].min()) // 8, -3, 12) + 3
    return np.searchsorted(CANDS, bounds[:, g]) * 16 + est


def _two_sample_p(a, b):
    """Chi-square homogeneity p-value of two samples of cells (cells with <5 expected merged away)."""
    cells = np.union1d(a, b)
    table = np.array([[np.count_nonzero(x == c) for c in cells] for x in (a, b)])
    keep = table.sum(axis=0) >= 10
    table = np.column_stack([table[:, keep], table[:, ~keep].sum(axis=1)]) if (~keep).any() else table[:, keep]
    table = table[:, table.sum(axis=0) > 0]
    return stats.chi2_contingency(table)[1]


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_the_batch_is_the_per_group_loop_in_distribution(noise):
    """Every group's joint law of (bound, estimate): the batch (one call over 3 × 3000 groups) against
    the scalar loop (9000 calls), a two-sample chi-square per group; and the test has the power to see
    the loop at twice the budget."""
    copies = 3000
    batch = _batch(noise, copies, 11)
    loop = _loop(noise, copies, 12)
    double = _loop(noise, copies, 13, select=1.0, count=1.0)
    for g in range(len(AT)):
        assert _two_sample_p(_cells(*batch, g), _cells(*loop, g)) > 1e-4, (noise, g)
    assert min(_two_sample_p(_cells(*batch, g), _cells(*double, g)) for g in range(len(AT))) < 1e-6


def test_the_batch_choice_has_the_exact_gem_probabilities():
    """Each group's chosen bound against the exact permute-and-flip probabilities of its scores."""
    copies = 4000
    bounds, _ = _batch("laplace", copies, 21)
    eps_select, eps_count = count_split(ratio_down(1.0, 2))
    margins = margins_at(2.0 * eps_count, 0.05, CANDS)
    for g, v in enumerate(AT):
        scores, beta = selection_scores(v, CANDS, margins, eps_select)
        probs = generalized_permute_and_flip_probabilities(scores, np.array(CANDS, float), eps_select, beta,
                                                           monotone=True)
        observed = np.array([np.count_nonzero(bounds[:, g] == c) for c in CANDS])
        keep = probs * copies >= 5
        assert stats.chisquare(observed[keep], probs[keep] * copies * observed[keep].sum()
                               / (probs[keep] * copies).sum()).pvalue > 1e-4


def test_records_are_per_step_and_count_the_groups():
    released, per_group = release_groups_batch(np.tile(AT, (50, 1)), CANDS, 16, 3, 0.05, np.random.default_rng(2),
                                               noise="laplace", select=0.5, count=0.5)
    select, *counts = released.records
    assert select.step == "select" and select.draws == 150 and select.scale == 2.0 / (per_group["epsilon_per_group"]
                                                                                     / 2)
    assert [r.step for r in counts] == ["count"] * len(counts) and sum(r.draws for r in counts) == 150
    for r in counts:  # one record per released bound, drawn that many times, at that bound's scale
        j = CANDS.index(r.parameters["bound"])
        assert r.draws == np.count_nonzero(released.bound == r.parameters["bound"])
        assert r.scale == released.scales[j] and r.sensitivity == r.parameters["bound"] and r.parameters["parallel"]
    lower = released.estimate - released.margins[released.chosen]
    assert np.array_equal(released.lower_bound, np.maximum(lower, 0))
    dicts, _ = release_groups(AT, CANDS, 16, 3, 0.05, np.random.default_rng(2), noise="laplace", select=0.5,
                              count=0.5)
    assert len(dicts) == 3 and all(d["noise"][0].draws == 1 and d["noise"][1].step == "count" for d in dicts)
    assert release_groups_batch(np.zeros((0, 3)), CANDS, 16, 3, 0.05, np.random.default_rng(2), noise="laplace",
                                select=0.5, count=0.5) == (None, {})


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_counts_at_bound_batch_is_the_scalar_count_in_distribution(noise):
    """The joint path's counts: one batch at (m, l) against the scalar loop (release_at_bound is the
    batch's dict view, so the loop draws each count by the scalar sampler here)."""
    from dp_spark.mechanisms.distinct_count.cap_bound import count_noise
    from dp_spark.noise import discrete_gaussian, discrete_laplace

    n, scale = 20_000, count_noise(4, 16, noise, 0.5)
    batch = counts_at_bound(np.full(n, 1000), 4, 16, 0.05, np.random.default_rng(3), noise=noise, count=0.5)
    draw = discrete_laplace if noise == "laplace" else discrete_gaussian
    rng = np.random.default_rng(4)
    loop = np.array([1000 + draw(scale, rng) for _ in range(n)])
    assert stats.ks_2samp(batch.estimate, loop).pvalue > 1e-4
    assert stats.ks_2samp(batch.estimate, 1000 + 1.5 * (loop - 1000)).pvalue < 1e-6  # power: a wider noise is seen
    (record,) = batch.records
    assert record.draws == n and record.scale == scale and record.parameters["bound"] == 16
    assert [r["bound"] for r in release_at_bound([5, 6], 4, 16, 0.05, np.random.default_rng(1), noise=noise,
                                                 count=0.5)] == [16, 16]


def test_any_float_scale_is_drawn_exactly_and_never_refused():
    """A float scale's exact fraction may not fit the batch's int64 arithmetic (a tiny scale: the
    denominator; a huge one: the numerator): the scalar exact sampler draws it, with no refusal after
    spending (a large ε, review finding on the matching shape test)."""
    from fractions import Fraction

    from dp_spark.noise import discrete_laplace
    from dp_spark.noise.discrete_batch import discrete_laplace_batch_any

    tiny = 3 / (1e4 * 0.99)
    assert Fraction(tiny).denominator >= 2**62
    assert not discrete_laplace_batch_any(tiny, 500, np.random.default_rng(1)).any()  # P[k != 0] ~ e^-3300
    huge = 2.0**57 + 2.0**5
    batch = discrete_laplace_batch_any(huge, 2000, np.random.default_rng(2)) / huge
    scalar = discrete_laplace(huge, np.random.default_rng(3), size=2000) / huge
    assert stats.ks_2samp(batch, scalar).pvalue > 1e-4 and 0.8 < np.std(batch) / np.sqrt(2) < 1.2
    released, _ = release_groups_batch(AT, CANDS, 16, 1, 0.05, np.random.default_rng(4), noise="laplace",
                                       select=5e3, count=5e3)
    assert np.array_equal(released.estimate, AT[np.arange(len(AT)), released.chosen])  # ε = 10^4: no noise
