"""Privacy audits of count-release's mechanisms (Rogers, Private Count Release).

1. One round of Private Count Release (Algorithm 2): Unknown Domain Gumbel
   top-1 (k = 1) at ε, then the discrete Gaussian count with σ = pcr_sigma.
   The round costs ρ = ε²/8 + 1/(2σ²) with δ = δ*; claimed (ε, δ* + δ')
   from Bun–Steinke's conversion. Worst case: a one-item histogram whose
   count straddles the selection threshold T, D = [c + 1], D' = [c] (add
   one person holding the item); event S = "the item is released with a
   noisy count >= c + 2" (likelier on D through both the selection and the
   count).

   The loop is run for real (private_count_release with a budget of exactly
   one round) on a few hundred seeds and must equal, draw for draw, a
   replica of the round built from the same public functions (threshold,
   coefficient, σ) and the same exact samplers; the audit's 100,000 runs per
   input use the replica vectorised (the same exponential mechanism over the
   item and ⊥, by the row sampler). The broken variant halves both noise
   scales (the selection's coefficient doubled, σ halved), in the real loop
   (monkeypatched) and in the replica alike.

2. The bounded baseline (contribution bounding, m = 1): its two noises as
   drawn inside Spark, through the real keyed functions over many distinct
   items (one keyed draw per item = one independent run per item):
   Gaussian-threshold selection (ρ_s = αρ, δ) with the count just under
   the threshold τ, and the discrete Gaussian count (ρ_c = (1 − α)ρ).
   Broken variant: σ halved.
"""

from __future__ import annotations

import numpy as np
import pytest

from dp_spark.accounting import ZCDP, bounded_range_to_zcdp, gaussian_zcdp
from dp_spark.noise import discrete_gaussian
from dp_spark.noise.selection import exponential_mechanism_rows
from dp_spark.noise.weighted import exponential_peel
from dp_spark.mechanisms.count_release import (
    bounded_plan,
    gaussian_threshold_select,
    keyed_noisy_counts,
    noise_key,
    pcr_sigma,
    private_count_release,
)
from dp_spark.mechanisms.count_release import loop as pcr_loop
from dp_spark.mechanisms.top_k import unknown_domain as topk
from dp_spark.mechanisms.top_k import unknown_domain_threshold
from dp_spark.mechanisms.top_k.unknown_domain import bottom_score
from tests.audit.stats import assert_detects
from tests.audit.stats import epsilon_lower_bound

#: δ' of the claimed conversion ρ-zCDP -> (ρ + 2·sqrt(ρ·ln(1/δ')), δ + δ')-DP.
DELTA_PRIME = 0.01

# One PCR round: ε = 2, δ* = 1e-6, k̄ = 1, tiny r so that σ = 2/ε = 1.
EPS, DELTA_STAR, KBAR, R = 2.0, 1e-6, 1, 1e-3
ROUND_RHO = 2 * bounded_range_to_zcdp(EPS)  # budget of exactly one round (ε²/4)
T = unknown_domain_threshold(EPS, DELTA_STAR, KBAR)  # the threshold: a public constant, not noise
C = int(T)  # T = 7.9: D = [8], D' = [7]


def _round_claim() -> tuple[float, float]:
    sigma = pcr_sigma(EPS, R, KBAR, DELTA_STAR)
    rho = bounded_range_to_zcdp(EPS) + gaussian_zcdp(1.0, sigma)
    claimed = ZCDP(rho, DELTA_STAR).to_approx(DELTA_PRIME)
    return claimed.epsilon, claimed.delta


def _real_round(count: int, seed: int) -> int | None:
    """The released noisy count of one real PCR run (None: nothing released)."""
    res = private_count_release(np.array([count]), 0, ROUND_RHO, DELTA_STAR, R, KBAR,
                                np.random.default_rng(seed), epsilon_min=EPS, delta_min=DELTA_STAR)
    assert res.selection_calls == 1  # the budget holds exactly one round
    return res.released[0].count if res.released else None


def _bottom_score() -> float:
    """⊥'s score in a round with an empty base: T on its 2^-20 grid (the release's public rule)."""
    return bottom_score(T, 0.0)


def _replica_round(count: int, rng: np.random.Generator, scale: float = 1.0) -> int | None:
    """One round in the loop's order of draws: Unknown Domain Gumbel (k = 1, empty base) as the
    exponential mechanism over the item and ⊥ at coefficient ε (the one-shot Gumbel(1/ε) it
    equals), then the discrete Gaussian count. ``scale`` multiplies both noise scales (the
    coefficient is divided by it)."""
    chosen = exponential_peel(np.array([float(count), _bottom_score()]), EPS / scale, 1, rng, stop=1)
    if chosen.shape[0] == 0:
        return None
    return count + int(discrete_gaussian(pcr_sigma(EPS, R, KBAR, DELTA_STAR) * scale, rng))


def _halve_pcr_noise(monkeypatch) -> None:
    """The broken variant: both noise scales halved (the selection's coefficient doubled), the
    threshold T kept."""
    real_peel, real_dg = topk.exponential_peel, pcr_loop.discrete_gaussian
    monkeypatch.setattr(topk, "exponential_peel",
                        lambda scores, c, k, rng, stop=None: real_peel(scores, 2 * c, k, rng, stop))
    monkeypatch.setattr(pcr_loop, "discrete_gaussian", lambda sigma, rng: real_dg(sigma / 2, rng))


@pytest.mark.parametrize("broken", [False, True])
def test_replica_is_the_real_round_draw_for_draw(monkeypatch, broken):
    scale = 0.5 if broken else 1.0
    if broken:
        _halve_pcr_noise(monkeypatch)
    released = 0
    for seed in range(300):
        for count in (C, C + 1):
            real = _real_round(count, seed)
            assert real == _replica_round(count, np.random.default_rng(seed), scale), (seed, count)
            released += real is not None
    assert 100 < released < 500  # both outcomes occur: the comparison covers both branches


def _batched_round(count: int, n: int, rng: np.random.Generator, scale: float = 1.0) -> np.ndarray:
    """n independent rounds (the replica, vectorised: the same exponential mechanism over the
    item and ⊥, exactly, one row per round): noisy counts, or a sentinel below any count for
    "nothing released"."""
    scores = np.tile(np.array([float(count), _bottom_score()]), (n, 1))
    selected = exponential_mechanism_rows(scores, EPS / scale, rng) == 0
    out = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    sigma = pcr_sigma(EPS, R, KBAR, DELTA_STAR) * scale
    out[selected] = count + discrete_gaussian(sigma, rng, size=int(selected.sum()))
    return out


def _round_bound(n: int, seed: int, scale: float) -> float:
    rng = np.random.default_rng(seed)
    on_d = _batched_round(C + 1, n, rng, scale)  # D: one more person holds the item
    on_d2 = _batched_round(C, n, rng, scale)
    k1, k2 = int((on_d >= C + 2).sum()), int((on_d2 >= C + 2).sum())
    _, delta = _round_claim()
    return epsilon_lower_bound(k1, n, k2, n, delta=delta)


def test_pcr_round_audit(audit_record):
    claimed, delta = _round_claim()
    n = 100_000
    audit_record("PCR round (UD Gumbel k=1 + discrete Gaussian)", claimed, _round_bound(n, 11, 1.0), n, delta)
    assert_detects("PCR round, both noise scales halved", claimed, _round_bound(n, 12, 0.5))


# ------------------------------------------------------------- bounded baseline

PLAN = bounded_plan(rho=1.0, delta=1e-6, max_items=1, alpha=0.5)


def _claim(rho: float, delta: float) -> tuple[float, float]:
    claimed = ZCDP(rho, delta).to_approx(DELTA_PRIME)
    return claimed.epsilon, claimed.delta


def _items(n: int, tag: str) -> list[str]:
    return [f"{tag}{j}" for j in range(n)]


def _selection_bound(n: int, seed: int, sigma: float) -> float:
    """Count c + 1 on D, c on D', with c + 1 the largest count below τ
    (where the selection's likelihood ratio is large and its probability is
    not small). One keyed draw per distinct item: n runs per input."""
    rng = np.random.default_rng(seed)
    c1 = int(np.floor(PLAN.selection_threshold))
    kept = [gaussian_threshold_select(_items(n, tag), np.full(n, count), sigma=sigma,
                                      threshold=PLAN.selection_threshold, key=noise_key(rng))
            for tag, count in (("d", c1), ("e", c1 - 1))]
    _, delta = _claim(PLAN.selection_cost.rho, PLAN.selection_cost.delta)
    return epsilon_lower_bound(int(kept[0].sum()), n, int(kept[1].sum()), n, delta=delta)


def test_bounded_selection_audit(audit_record):
    claimed, delta = _claim(PLAN.selection_cost.rho, PLAN.selection_cost.delta)
    n = 50_000
    audit_record("bounded baseline: Gaussian-threshold selection", claimed,
                 _selection_bound(n, 21, PLAN.selection_sigma), n, delta)
    assert_detects("bounded selection, σ halved", claimed, _selection_bound(n, 22, PLAN.selection_sigma / 2))


def _count_bound(n: int, seed: int, sigma: float) -> float:
    rng = np.random.default_rng(seed)
    c = 50
    noisy = [keyed_noisy_counts(_items(n, tag), np.full(n, count), sigma=sigma, key=noise_key(rng))
             for tag, count in (("d", c + 1), ("e", c))]
    _, delta = _claim(PLAN.count_cost.rho, 0.0)
    return epsilon_lower_bound(int((noisy[0] >= c + 2).sum()), n, int((noisy[1] >= c + 2).sum()), n, delta=delta)


def test_bounded_count_audit(audit_record):
    claimed, delta = _claim(PLAN.count_cost.rho, 0.0)
    n = 20_000
    audit_record("bounded baseline: discrete Gaussian counts", claimed, _count_bound(n, 31, PLAN.count_sigma), n, delta)
    assert_detects("bounded counts, σ halved", claimed, _count_bound(n, 32, PLAN.count_sigma / 2))
