"""Tests for the refitted choice of top-k ``auto`` (dp_spark.mechanisms.top_k.auto,
2026-11-29): the modelled errors that decide between the joint mechanism and
CDP-Peel, and ``rule_pick``, the rule the fit benchmark scores
(benchmarks/topk_auto_fit.py). Numpy only."""

from __future__ import annotations

import numpy as np
import pytest

from dp_spark.mechanisms.top_k import auto as topk_auto
from dp_spark.mechanisms.top_k import cdp_peel_top_k, pnf_joint_top_k

D = 2000


def _zipf(exponent: float, top: int = 1000, d: int = D) -> np.ndarray:
    return np.floor(top / np.arange(1, d + 1) ** exponent).astype(np.int64)


def _median_error(run, counts, k, trials=31) -> float:
    """NON-PRIVATE: median ℓ∞ error of ``run`` over seeded shuffles (ties at random)."""
    ordered = np.sort(counts)[::-1][:k]
    errors = []
    for seed in range(trials):
        shuffled = np.random.default_rng([seed, 0]).permutation(counts)
        chosen = run(shuffled, np.random.default_rng([seed, 1]))
        errors.append(float(np.max(ordered - shuffled[chosen])))
    return float(np.median(errors))


@pytest.mark.parametrize("exponent, k, epsilon", [(1.0, 50, 1.0), (1.5, 20, 1.0), (0.3, 50, 1.0), (0.3, 50, 2.0)])
def test_model_errors_follow_the_measured_medians(exponent, k, epsilon):
    """On power-law profiles (what the model assumes) and the exact counts at
    ranks 1 and k, both modelled medians are within 1.5× (+ 10 persons) of the
    seeded medians of the mechanisms themselves: a model off by a factor 2
    either way (e.g. ε for ε/2 in either weight) fails."""
    counts = _zipf(exponent)
    model = topk_auto.model_errors(counts[0], counts[k - 1], k, epsilon, 1e-6, D)
    joint = _median_error(lambda c, g: pnf_joint_top_k(c, k, epsilon, g), counts, k)
    cdp = _median_error(lambda c, g: cdp_peel_top_k(c, k, epsilon, 1e-6, g), counts, k)
    for name, measured in (("joint", joint), ("cdp-peel", cdp)):
        assert measured / 1.5 - 10 <= model[name] <= 1.5 * measured + 10, (name, model, joint, cdp)


def test_the_choice_on_the_zipf_profile_it_used_to_lose():
    """Zipf ⌊1000/i⌋, k = 50, ε = 1, δ = 1e-6 (auto took CDP-Peel there at
    1.55× PNF-Joint's error, tests/accuracy/test_top_k.py): given the exact
    counts as its noisy values the choice is the joint mechanism; on the flat
    ⌊1000/i^0.3⌋ it is CDP-Peel (which wins there by 2.8×)."""
    for exponent, pick in ((1.0, "pnf-joint"), (0.3, "cdp-peel")):
        counts = _zipf(exponent)
        methods, share = topk_auto.rule_pick(counts[0], counts[49], 50, 1.0, 1e-6, D)
        assert methods.tolist() == [pick] and share == topk_auto.AUTO_SHARE


def test_rule_pick_is_choose_mechanisms_rule(monkeypatch):
    """rule_pick (what the fit benchmark scores) decides as choose_mechanism
    does on the same noisy counts, and spends nothing when the choice is public."""
    rng = np.random.default_rng(11)
    values = []
    monkeypatch.setattr(topk_auto, "noisy_rank_counts", lambda *a: np.array(values[-1]))
    counts = _zipf(0.8, d=500)
    for _ in range(60):
        k = int(rng.integers(1, 101))
        eps = float(rng.choice([0.2, 0.5, 1.0, 2.0, 4.0]))
        top = float(rng.integers(-50, 3000))
        values.append([top, top * float(rng.random())] if k > 1 else [top])
        choice = topk_auto.choose_mechanism(counts, k, eps, 1e-6, np.random.default_rng(0))
        methods, share = topk_auto.rule_pick(values[-1][0], values[-1][-1], k, eps, 1e-6, 500)
        assert methods.tolist() == [choice.method]
        assert share * eps == pytest.approx(choice.epsilon_choice, rel=1e-15)
        assert (share == 0.0) == (topk_auto.public_choice(k, eps, 1e-6, 500) is not None)


@pytest.mark.parametrize("top, kth, k, d", [
    (-40.0, -50.0, 25, 300),   # noisy counts below 1 are read as 1
    (30.0, 500.0, 10, 300),    # a noisy k-th count above the top count: a flat profile
    (7.0, 7.0, 1, 50),         # k = 1: one noisy count
    (2000.0, 3.0, 5000, 9000),  # k above the model's chunk of ranks
])
def test_model_errors_on_edge_inputs(top, kth, k, d):
    model = topk_auto.model_errors(top, kth, k, 0.5, 1e-6, d)
    assert set(model) == {"joint", "cdp-peel"}
    assert all(0.0 <= v <= max(top, 1.0) for v in model.values())
    assert model == topk_auto.model_errors(top, kth, k, 0.5, 1e-6, d)  # deterministic post-processing


def test_model_errors_fall_with_epsilon():
    counts = _zipf(1.0)
    errors = [topk_auto.model_errors(counts[0], counts[49], 50, eps, 1e-6, D) for eps in (0.25, 0.5, 1.0, 2.0, 4.0)]
    for name in ("joint", "cdp-peel"):
        series = [e[name] for e in errors]
        assert all(a >= b for a, b in zip(series, series[1:])) and series[0] > series[-1], (name, series)
