"""Tests for dp_spark.mechanisms.top_k.auto: the private choice of mechanism
behind ``method="auto"`` (numpy only). Moved from tests/unit/test_topk.py."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dp_spark.errors import ParameterError
from dp_spark.mechanisms.top_k import auto as topk_auto

ALPHA = 1e-6  # chance that a correct sampler fails one distribution test for a random seed


def _discrete_laplace_pvalue(noise: np.ndarray, scale: float) -> float:
    """Chi-square p-value of integer ``noise`` against the discrete Laplace
    pmf P[x] = (1 − p)/(1 + p)·p^|x|, p = e^(−1/scale): bins |x| = 0, 1, …
    (each sign apart) while the expected count is at least 5, the rest pooled."""
    noise = np.asarray(noise)
    assert np.array_equal(noise, np.round(noise)), "the noise is not integer"
    n, p = len(noise), np.exp(-1.0 / scale)
    pmf = lambda x: (1 - p) / (1 + p) * p ** abs(x)  # noqa: E731
    observed, expected, edge = [], [], 0
    while n * pmf(edge + 1) >= 5:
        edge += 1
    for x in range(-edge, edge + 1):
        observed.append(np.sum(noise == x))
        expected.append(n * pmf(x))
    observed.append(np.sum(np.abs(noise) > edge))
    expected.append(n - sum(expected))
    return stats.chisquare(observed, expected).pvalue


def _counts(top: int, d: int = 1682, exponent: float = 0.6) -> np.ndarray:
    """A sorted power-law-like count vector with largest count ``top``."""
    return np.maximum(np.floor(top / np.arange(1, d + 1) ** exponent), 0).astype(np.int64)


def test_auto_with_delta_zero_is_pnf_joint_and_spends_nothing_on_the_choice():
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    choice = topk_auto.choose_mechanism([9, 5, 3, 1], 2, 1.0, 0.0, rng)
    assert choice == topk_auto.AutoChoice("pnf-joint", 0.0, 1.0, {})
    assert rng.bit_generator.state == state  # nothing drawn: the data is not looked at
    assert rng.bit_generator.seed_seq.n_children_spawned == 0  # and no child stream for a choice
    assert topk_auto.auto_share(2, 1.0, 0.0, 4) == 0.0


@pytest.mark.parametrize("k, epsilon", [(5, 0.5), (10, 1.0), (20, 2.0), (1, 0.1)])
def test_auto_small_k_is_a_public_choice(k, epsilon):
    """k ≤ 10ε with δ > 0: the joint mechanism, decided before reading the data."""
    rng = np.random.default_rng(1)
    state = rng.bit_generator.state
    for counts in (_counts(600), _counts(3), np.zeros(1682, dtype=np.int64)):
        choice = topk_auto.choose_mechanism(counts, k, epsilon, 1e-6, rng)
        assert choice == topk_auto.AutoChoice("pnf-joint", 0.0, epsilon, {})
    assert rng.bit_generator.state == state
    assert topk_auto.auto_share(k, epsilon, 1e-6, 1682) == 0.0
    assert topk_auto.public_choice(k, epsilon, 1e-6, 1682) == "pnf-joint"


def test_auto_past_the_pnf_joint_size_runs_joint():
    k = 50
    d = topk_auto.PNF_JOINT_MAX_ENTRIES // k + 1
    assert topk_auto.public_choice(k, 5.0, 0.0, d) == "joint"
    assert topk_auto.public_choice(k, 5.0, 0.0, d - 1) == "pnf-joint"


@pytest.mark.parametrize("k, epsilon", [(11, 1.0), (20, 0.5), (50, 2.0), (100, 1.0)])
def test_auto_budget_parts_sum_to_epsilon(k, epsilon):
    share = topk_auto.auto_share(k, epsilon, 1e-6, 1682)
    assert share == topk_auto.AUTO_SHARE
    choice = topk_auto.choose_mechanism(_counts(500), k, epsilon, 1e-6, np.random.default_rng(2), share)
    assert choice.epsilon_choice == pytest.approx(share * epsilon, rel=1e-15)
    assert choice.epsilon_choice + choice.epsilon_selection == pytest.approx(epsilon, rel=1e-15)
    assert choice.epsilon_choice + choice.epsilon_selection <= epsilon * (1 + 1e-15)
    assert set(choice.predicted) == {"top_count", "kth_count", "joint", "cdp-peel"}
    # the error scales are public: the selection's (ε, δ), k and d only
    assert choice.predicted["joint"] == pytest.approx(2 * k * np.log(1682) / choice.epsilon_selection)
    eps_step = topk_auto.cdp_peel_epsilon_per_step(choice.epsilon_selection, 1e-6, k)
    assert choice.predicted["cdp-peel"] == pytest.approx(np.log(1682) / eps_step)


def test_auto_choice_is_post_processing_of_the_noisy_counts(monkeypatch):
    """The choice reads the data only through noisy_rank_counts: given the same
    noisy values, neighbouring count vectors (one person added, holding any set
    of items) get the same choice; the noisy values are asked for at ranks 1
    and k with ε₀ = 5% of ε."""
    seen = []

    def fixed(counts, ranks, epsilon, rng):
        seen.append((tuple(ranks), epsilon, k))
        return np.array([value, value / 3], dtype=np.float64)

    monkeypatch.setattr(topk_auto, "noisy_rank_counts", fixed)
    rng = np.random.default_rng(3)
    for value in (5.0, 150.0, 400.0, 5000.0, -30.0):
        for _ in range(20):
            d = int(rng.integers(200, 2000))
            counts = rng.integers(0, 300, size=d)
            person = rng.random(d) < rng.random()
            k = int(rng.integers(11, 101))
            a = topk_auto.choose_mechanism(counts, k, 1.0, 1e-6, np.random.default_rng(0))
            b = topk_auto.choose_mechanism(counts + person, k, 1.0, 1e-6, np.random.default_rng(0))
            assert a == b and a.predicted["top_count"] == value and a.predicted["kth_count"] == value / 3
    assert len(seen) == 200 and all(r == (1, kk) and e == pytest.approx(0.05) for r, e, kk in seen)


@pytest.mark.parametrize("top, kth, k, epsilon, pick", [
    (5000.0, 320.0, 20, 1.0, "pnf-joint"),  # joint bound 2·20·ln d/0.95 ≈ 313 ≤ 320: joint ranks the top k
    (5000.0, 300.0, 20, 1.0, "pnf-joint"),  # ≈ 313 > 300, CDP noise ≈ 93 < 0.8·5000, modelled errors 0 and ≈ 38
    (600.0, 300.0, 20, 1.0, "cdp-peel"),    # ≈ 313 > 300, ≈ 93 < 480, modelled errors ≈ 74 > 0.8·50
    (600.0, 300.0, 50, 1.0, "cdp-peel"),    # joint bound ≈ 782 > 300; CDP noise ≈ 148 < 480; ≈ 198 > 0.8·144
    (150.0, 20.0, 100, 1.0, "pnf-joint"),   # CDP noise ≈ 209 ≥ 0.8·150: CDP-Peel near random
    (-40.0, -50.0, 25, 2.0, "pnf-joint"),   # negative noisy counts are read as 1: CDP-Peel near random
])
def test_auto_rule(monkeypatch, top, kth, k, epsilon, pick):
    monkeypatch.setattr(topk_auto, "noisy_rank_counts", lambda *a: np.array([top, kth]))
    choice = topk_auto.choose_mechanism(_counts(500), k, epsilon, 1e-6, np.random.default_rng(0))
    assert choice.method == pick
    model = topk_auto.model_errors(top, kth, k, choice.epsilon_selection, 1e-6, 1682)
    joint_wins = (choice.predicted["joint"] <= topk_auto.JOINT_BOUND_FRACTION * max(kth, 1.0)
                  or choice.predicted["cdp-peel"] >= topk_auto.CDP_NOISE_FRACTION * max(top, 1.0)
                  or model["joint"] <= topk_auto.JOINT_ERROR_FRACTION * model["cdp-peel"])
    assert joint_wins == (pick == "pnf-joint")


def test_auto_noisy_counts_are_discrete_laplace_with_scale_two_over_epsilon_choice():
    """The private step itself: predicted["top_count"] = c_(1) + discrete Laplace(2/ε₀)
    and predicted["kth_count"] = c_(k) + discrete Laplace(2/ε₀), independent, ε₀ =
    share·ε (the ℓ1 sensitivity of (c_(1), c_(k)) is 2); a scale off by 2
    either way is rejected."""
    rng = np.random.default_rng(4)
    counts = _counts(300)
    k, eps, share = 40, 0.8, 0.05
    draws = [topk_auto.choose_mechanism(counts, k, eps, 1e-6, rng, share).predicted for _ in range(3000)]
    top = np.array([p["top_count"] for p in draws]) - counts[0]
    kth = np.array([p["kth_count"] for p in draws]) - counts[k - 1]
    b = 2 / (share * eps)
    for noise in (top, kth):
        assert _discrete_laplace_pvalue(noise, b) > ALPHA
        assert _discrete_laplace_pvalue(noise, 2 * b) < ALPHA
        assert _discrete_laplace_pvalue(noise, b / 2) < ALPHA
    assert abs(stats.pearsonr(top, kth)[0]) < 0.1  # fresh noise for each rank


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


def test_noisy_rank_counts_are_discrete_laplace_with_scale_m_over_epsilon():
    rng = np.random.default_rng(3)
    counts = np.array([50, 40, 30, 20, 10])
    ranks = np.array([1, 3, 5])
    draws = np.array([topk_auto.noisy_rank_counts(counts, ranks, 0.5, rng) for _ in range(4000)])
    noise = draws - np.array([50, 30, 10])
    assert _discrete_laplace_pvalue(noise.ravel(), 3 / 0.5) > ALPHA
    assert _discrete_laplace_pvalue(noise.ravel(), 1.5 / 0.5) < ALPHA
    assert _discrete_laplace_pvalue(noise.ravel(), 6 / 0.5) < ALPHA


def test_noisy_rank_counts_draw_no_continuous_noise_and_refuse_fractional_counts():
    """The privacy noise comes from the exact integer sampler (dp_spark.noise),
    never from the generator's floating-point laplace."""
    class NoLaplace(np.random.Generator):
        def laplace(self, *args, **kwargs):
            raise AssertionError("continuous Laplace drawn")

    rng = NoLaplace(np.random.PCG64(0))
    out = topk_auto.noisy_rank_counts(np.array([9, 4, 1]), np.array([1, 3]), 1.0, rng)
    assert np.array_equal(out, np.round(out))
    with pytest.raises(ParameterError):
        topk_auto.noisy_rank_counts(np.array([9.5, 4.0]), np.array([1, 2]), 1.0, np.random.default_rng(0))


def test_auto_anchors_are_ranks_one_and_k():
    assert topk_auto.auto_anchor_ranks(5, 1000).tolist() == [1, 5]
    assert topk_auto.auto_anchor_ranks(1, 3).tolist() == [1]


def test_auto_with_k_one_uses_one_noisy_count(monkeypatch):
    calls = []
    monkeypatch.setattr(topk_auto, "noisy_rank_counts",
                        lambda c, r, e, g: calls.append(r.tolist()) or np.array([7.0]))
    choice = topk_auto.choose_mechanism(_counts(500), 1, 0.05, 1e-6, np.random.default_rng(0))
    assert calls == [[1]] and choice.predicted["top_count"] == choice.predicted["kth_count"] == 7.0


def test_auto_top_k_runs_the_chosen_mechanism_and_validates(monkeypatch):
    rng = np.random.default_rng(5)
    counts = rng.integers(0, 100, size=300)
    for k, eps, delta in ((20, 1.0, 1e-6), (5, 1.0, 1e-6), (30, 0.5, 0.0)):
        out, choice = topk_auto.auto_top_k(counts, k, eps, delta, rng)
        assert out.shape == (k,) and len(set(out.tolist())) == k
        assert choice.method in ("pnf-joint", "cdp-peel")
    ran = []
    for name in ("joint", "pnf-joint", "cdp-peel"):
        monkeypatch.setattr(topk_auto, f"{name.replace('-', '_')}_top_k",
                            lambda *a, _n=name: ran.append((_n, a[2:])) or np.arange(a[1]))
    for pick in ("joint", "pnf-joint", "cdp-peel"):
        monkeypatch.setattr(topk_auto, "choose_mechanism",
                            lambda *a, _p=pick: topk_auto.AutoChoice(_p, 0.05, 0.95, {}))
        topk_auto.auto_top_k(counts, 3, 1.0, 1e-6, rng)
    assert [(n, a[0]) for n, a in ran] == [("joint", 0.95), ("pnf-joint", 0.95), ("cdp-peel", 0.95)]
    assert ran[2][1][1] == 1e-6  # cdp-peel gets delta
    monkeypatch.undo()
    with pytest.raises(ParameterError, match="share"):
        topk_auto.choose_mechanism(counts, 50, 1.0, 1e-6, rng, share=0.9)
    with pytest.raises(ParameterError, match="k must be"):
        topk_auto.choose_mechanism(counts, 301, 1.0, 1e-6, rng)


@pytest.mark.parametrize("top, exponent, pick", [(600, 0.3, "cdp-peel"), (3, 0.6, "pnf-joint")])
def test_auto_selection_draws_what_the_chosen_mechanism_draws_alone(top, exponent, pick):
    """The choice's noise comes from a child stream (choice_stream), so with a
    given generator auto's selection is the chosen mechanism run alone at
    ε₁ = ε − ε₀ with a generator in the same state: the same items, draw for
    draw. (Common random numbers in benchmarks/topk_accuracy.py rely on it.)"""
    from dp_spark.mechanisms.top_k import cdp_peel_top_k, pnf_joint_top_k

    counts = np.random.default_rng(6).permutation(_counts(top, d=400, exponent=exponent))
    k, eps, delta = 40, 1.0, 1e-6
    for seed in range(5):
        out, choice = topk_auto.auto_top_k(counts, k, eps, delta, np.random.default_rng(seed))
        assert choice.method == pick and choice.epsilon_choice > 0
        alone = np.random.default_rng(seed)
        expected = (cdp_peel_top_k(counts, k, choice.epsilon_selection, delta, alone) if pick == "cdp-peel"
                    else pnf_joint_top_k(counts, k, choice.epsilon_selection, alone))
        assert out.tolist() == expected.tolist()


def test_choice_stream_is_a_spawned_child_and_leaves_the_stream_alone():
    rng = np.random.default_rng(7)
    state = rng.bit_generator.state
    child = topk_auto.choice_stream(rng)
    assert rng.bit_generator.state == state and child is not rng
    assert rng.bit_generator.seed_seq.n_children_spawned == 1
    # a bit generator with legacy seeding cannot spawn: the generator itself is used
    bits = np.random.MT19937()
    bits._legacy_seeding(1)
    legacy = np.random.Generator(bits)
    assert topk_auto.choice_stream(legacy) is legacy
