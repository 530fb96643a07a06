"""The joint choice of the group cap m and the bound l
(:mod:`dp_spark.mechanisms.distinct_count.cap_bound`): the public
candidates and margins, the scores and sensitivities, the wiring to GEM's
same-direction samplers (the draw is exactly theirs on the flattened (m, l)
grid, so their distribution tests cover it), and the counts at the chosen
(m, l)."""

from __future__ import annotations

import numpy as np
import pytest

from dp_spark.mechanisms.distinct_count.cap_bound import (
    cap_candidates,
    choose_cap_and_bound,
    count_noise,
    joint_margins,
    joint_scores,
    joint_shifts,
    release_at_bound,
)
from dp_spark.mechanisms.distinct_count.gem import (
    generalized_exponential,
    generalized_exponential_probabilities,
    generalized_permute_and_flip,
    generalized_permute_and_flip_probabilities,
)
from dp_spark.noise.tails import discrete_gaussian_upper_quantile, discrete_laplace_upper_quantile
from dp_spark.settings.distinct_count import SELECTION_BETA


def test_cap_candidates_are_powers_of_two_and_the_number_of_keys():
    assert cap_candidates(1) == [1]
    assert cap_candidates(2) == [1, 2]
    assert cap_candidates(5) == [1, 2, 4, 5]
    assert cap_candidates(8) == [1, 2, 4, 8]
    assert cap_candidates(19) == [1, 2, 4, 8, 16, 19]
    assert len(cap_candidates(1024)) == 11
    with pytest.raises(ValueError):
        cap_candidates(0)


def test_count_noise_and_margins_are_the_released_noise():
    assert count_noise(4, 16, "laplace", 0.5) >= 4 * 16 / 0.5
    assert count_noise(4, 16, "laplace", 0.5) == pytest.approx(128)
    assert count_noise(4, 16, "gaussian", 0.5) == pytest.approx(2 * 16 / 1.0)
    margins = joint_margins([1, 4], [1, 16], 0.05, "laplace", 0.5)
    assert margins.shape == (2, 2)
    assert margins[1, 1] == discrete_laplace_upper_quantile(count_noise(4, 16, "laplace", 0.5), 0.05)
    gm = joint_margins([1, 4], [1, 16], 0.05, "gaussian", 0.5)
    assert gm[1, 0] == discrete_gaussian_upper_quantile(count_noise(4, 1, "gaussian", 0.5), 0.05)
    assert (np.diff(margins, axis=0) > 0).all() and (np.diff(margins, axis=1) > 0).all()  # more noise, more margin
    with pytest.raises(ValueError):
        count_noise(1, 1, "uniform", 1.0)


def test_joint_scores_sum_groups_minus_margins_with_sensitivity_m_l():
    at = np.arange(2 * 3 * 2).reshape(2, 3, 2)  # caps × groups × bounds
    margins = np.array([[1, 2], [3, 4]])
    q, d = joint_scores(at, [1, 4], [1, 16], margins)
    assert q.tolist() == [at[0, :, 0].sum() - 3, at[0, :, 1].sum() - 6, at[1, :, 0].sum() - 9, at[1, :, 1].sum() - 12]
    assert d.tolist() == [1, 16, 4, 64]
    with pytest.raises(ValueError):
        joint_scores(at, [1, 4, 8], [1, 16], margins)
    with pytest.raises(ValueError):
        joint_scores(at, [1, 4], [1, 16], margins[:1])


@pytest.mark.parametrize("sampler, draw", [("permute-and-flip", generalized_permute_and_flip),
                                           ("exponential", generalized_exponential)])
def test_the_choice_is_gem_same_direction_on_the_flattened_grid(sampler, draw):
    rng = np.random.default_rng(3)
    caps, bounds = [1, 2, 4], [1, 4, 16]
    at = rng.integers(0, 300, size=(3, 5, 3))
    margins = joint_margins(caps, bounds, 0.05, "laplace", 0.7)
    q, d = joint_scores(at, caps, bounds, margins)
    for seed in range(20):
        k, j = choose_cap_and_bound(at, caps, bounds, margins, 0.3, np.random.default_rng(seed), sampler=sampler,
                                    gem_beta=0.2)
        flat = draw(q, d, 0.3, 0.2, np.random.default_rng(seed), monotone=True)
        assert (k, j) == divmod(flat, len(bounds))
    with pytest.raises(ValueError):
        choose_cap_and_bound(at, caps, bounds, margins, 0.3, rng, sampler="uniform")


@pytest.mark.parametrize("sampler, draw", [("permute-and-flip", generalized_permute_and_flip),
                                           ("exponential", generalized_exponential)])
def test_the_release_choice_is_gem_on_the_shifted_scores(sampler, draw):
    """gem_beta=None (what the release runs): the per-bound thresholds subtracted, then GEM at
    SELECTION_BETA, draw for draw."""
    rng = np.random.default_rng(5)
    caps, bounds = [1, 2, 4], [1, 4, 16]
    at = rng.integers(0, 300, size=(3, 5, 3))
    margins = joint_margins(caps, bounds, 0.05, "laplace", 0.7)
    q, d = joint_scores(at, caps, bounds, margins)
    shifted = q - joint_shifts(caps, bounds, 0.3)
    for seed in range(20):
        k, j = choose_cap_and_bound(at, caps, bounds, margins, 0.3, np.random.default_rng(seed), sampler=sampler)
        flat = draw(shifted, d, 0.3, SELECTION_BETA, np.random.default_rng(seed), monotone=True)
        assert (k, j) == divmod(flat, len(bounds))


def test_the_choice_follows_the_exact_distribution():
    """A distribution test on a tiny score table: 4,000 draws against the
    sampler's exact output probabilities over the (m, l) grid."""
    caps, bounds = [1, 2], [1, 4]
    at = np.array([[[40, 50], [10, 12]], [[70, 80], [20, 22]]])
    margins = np.array([[3, 9], [6, 18]])
    q, d = joint_scores(at, caps, bounds, margins)
    for sampler, exact in (("permute-and-flip", generalized_permute_and_flip_probabilities),
                           ("exponential", generalized_exponential_probabilities)):
        p = exact(q, d, 2.0, 0.2, monotone=True)
        rng = np.random.default_rng(9)
        n = 4000
        hits = np.zeros(4)
        for _ in range(n):
            k, j = choose_cap_and_bound(at, caps, bounds, margins, 2.0, rng, sampler=sampler, gem_beta=0.2)
            hits[k * 2 + j] += 1
        assert np.abs(hits / n - p).max() < 4 * np.sqrt(p * (1 - p) / n).max() + 1e-3


def test_release_at_bound_adds_the_stated_noise_and_margin():
    rng = np.random.default_rng(1)
    out = release_at_bound([100, 0, 5_000], 4, 16, 0.05, rng, noise="laplace", count=0.5)
    scale = count_noise(4, 16, "laplace", 0.5)
    assert [r["bound"] for r in out] == [16, 16, 16]
    for r in out:
        assert r["noise_scale"] == scale and r["margin"] == discrete_laplace_upper_quantile(scale, 0.05)
        assert r["lower_bound"] == max(r["estimate"] - r["margin"], 0) or r["estimate"] == 0
        (record,) = r["noise"]
        assert record.step == "count" and record.kind == "discrete-laplace" and record.sensitivity == 16
    g = release_at_bound([100], 4, 16, 0.05, rng, noise="gaussian", count=0.5)
    assert g[0]["noise"][0].kind == "discrete-gaussian" and g[0]["noise_scale"] == count_noise(4, 16, "gaussian", 0.5)
    # the noise is drawn: over many draws the estimates spread with the stated scale
    draws = [release_at_bound([10_000], 1, 1, 0.05, np.random.default_rng(s), noise="laplace", count=1.0)[0]
             for s in range(400)]
    spread = np.std([r["estimate"] for r in draws])
    assert 0.8 * draws[0]["noise_std"] < spread < 1.2 * draws[0]["noise_std"]


def test_scores_that_could_round_in_float64_are_refused_by_the_plan_before_reading():
    """G·margin(M, L) >= 2^52 would let a score's float rounding depend on the private sum of counts
    (review finding): refused from public parameters when the plan is built; ordinary runs pass."""
    from dp_spark.errors import ParameterError
    from dp_spark.mechanisms.distinct_count.cap_bound import EXACT_SCORE_LIMIT, check_exact_scores
    from dp_spark.plans import distinct_count as plans

    check_exact_scores(1024, [1, 4, 16, 64], 0.05, "laplace", 0.75)
    with pytest.raises(ParameterError, match="give max_groups"):
        check_exact_scores(1024, [65536], 0.05, "laplace", 1e-9)
    with pytest.raises(ParameterError, match="give max_groups"):
        plans.plan(epsilon=1e-6, group_by="g", groups="keys.csv", max_bound=100_000)
    plans.plan(epsilon=1e-6, group_by="g", groups="keys.csv", max_bound=100_000, max_groups=4)  # a given cap: no choice
    assert EXACT_SCORE_LIMIT == 2 ** 59  # int64 scores, exact well inside the scorer's clip at 2^60


def test_joint_thresholds_are_the_previous_ones_for_four_bounds_and_larger_for_far_ones():
    """The joint choice's per-bound thresholds (issue 36): with the four
    bounds 1, 4, 16, 64 the shifts are 0 (GEM's t = (2/ε)·ln(20·K) as
    before); a fifth bound's shift is positive, larger for a larger cap,
    and every shift is an integer (the scores stay exact)."""
    from dp_spark.mechanisms.distinct_count.cap_bound import joint_shifts

    caps = [1, 2, 4]
    assert (joint_shifts(caps, [1, 4, 16, 64], 0.3) == 0).all()
    shifts = joint_shifts(caps, [1, 4, 16, 64, 256], 0.3).reshape(3, 5)
    assert (shifts[:, 4] > 0).all() and list(shifts[:, 4]) == sorted(shifts[:, 4])
    assert shifts.dtype.kind == "i"
