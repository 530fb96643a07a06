"""Tests for dp_spark.mechanisms.top_k.auto: the private choice of mechanism
behind ``method="auto"`` (numpy only). Moved from tests/unit/test_topk.py."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dp_spark.errors import ParameterError
from dp_spark.mechanisms.top_k import auto as topk_auto

ALPHA = 1e-6  # chance that a correct sampler fails one distribution test for a random seed


def test_auto_with_delta_zero_is_joint_and_spends_nothing_on_the_choice():
    choice = topk_auto.choose_mechanism([9, 5, 3, 1], 2, 1.0, 0.0, np.random.default_rng(0))
    assert choice.mechanism == "joint" and choice.epsilon_choice == 0.0 and choice.epsilon_selection == 1.0


def test_auto_splits_epsilon_and_picks_by_predicted_error():
    rng = np.random.default_rng(1)
    steep = np.floor(10**6 / np.arange(1, 20_001) ** 1.1).astype(np.int64)
    choice = topk_auto.choose_mechanism(steep, 10, 1.0, 1e-6, rng)
    assert choice.mechanism == "joint"
    assert choice.epsilon_choice == pytest.approx(0.05) and choice.epsilon_selection == pytest.approx(0.95)
    assert choice.predicted["joint"] <= choice.predicted["cdp-peel"]


@pytest.mark.parametrize("joint_err, cdp_err, pick", [(100.0, 50.0, "cdp-peel"), (100.0, 70.0, "joint"),
                                                      (0.0, 0.0, "joint"), (5.0, 40.0, "joint")])
def test_auto_rule_prefers_joint_unless_cdp_peel_is_clearly_better(monkeypatch, joint_err, cdp_err, pick):
    monkeypatch.setattr(topk_auto, "predict_errors",
                        lambda *a: {"joint": joint_err, "cdp-peel": cdp_err})
    counts = np.arange(100)
    choice = topk_auto.choose_mechanism(counts, 5, 1.0, 1e-6, np.random.default_rng(0))
    assert choice.mechanism == pick and set(choice.predicted) == {"joint", "cdp-peel", "top_count"}


def test_auto_order_statistics_move_by_at_most_one_on_random_neighbours():
    """The sensitivity claim behind noisy_rank_counts: adding one person (who
    may hold any set of items) moves every c_(r) by 0 or 1."""
    rng = np.random.default_rng(2)
    for _ in range(300):
        d = int(rng.integers(1, 40))
        counts = rng.integers(0, 20, size=d)
        person = rng.random(d) < rng.random()
        before, after = np.sort(counts)[::-1], np.sort(counts + person)[::-1]
        assert np.all((after - before >= 0) & (after - before <= 1))


def test_noisy_rank_counts_are_laplace_with_scale_m_over_epsilon():
    rng = np.random.default_rng(3)
    counts = np.array([50, 40, 30, 20, 10])
    ranks = np.array([1, 3, 5])
    draws = np.array([topk_auto.noisy_rank_counts(counts, ranks, 0.5, rng) for _ in range(4000)])
    noise = draws - np.array([50, 30, 10])
    assert stats.kstest(noise.ravel(), stats.laplace(scale=3 / 0.5).cdf).pvalue > ALPHA
    assert stats.kstest(noise.ravel(), stats.laplace(scale=1.5 / 0.5).cdf).pvalue < ALPHA


def test_synthetic_profile_is_sorted_and_passes_the_anchors():
    prof = topk_auto.synthetic_profile(np.array([1, 10, 40]), np.array([500.0, 120.0, 30.0]), 1000)
    assert prof.shape == (1000,) and np.all(np.diff(prof) <= 0) and prof[-1] <= 1
    assert (prof[0], prof[9], prof[39]) == (500, 120, 30)
    # noisy anchors out of order or negative are made monotone and positive
    prof = topk_auto.synthetic_profile(np.array([1, 10]), np.array([-5.0, 40.0]), 50)
    assert np.all(prof >= 0) and np.all(np.diff(prof) <= 0)


def test_auto_top_k_returns_k_distinct_items_and_validates():
    rng = np.random.default_rng(4)
    counts = rng.integers(0, 100, size=300)
    out, choice = topk_auto.auto_top_k(counts, 20, 1.0, 1e-6, rng)
    assert out.shape == (20,) and len(set(out.tolist())) == 20 and choice.mechanism in ("joint", "cdp-peel")
    with pytest.raises(ParameterError, match="share"):
        topk_auto.choose_mechanism(counts, 5, 1.0, 1e-6, rng, share=0.9)
    with pytest.raises(ParameterError, match="k must be"):
        topk_auto.choose_mechanism(counts, 301, 1.0, 1e-6, rng)
