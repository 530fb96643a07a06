"""Private Count Release and the bounded baseline: mechanism layer (numpy only).

Statistical tests use fixed seeds and state their tolerances; property tests
run on random histograms (hypothesis)."""

from __future__ import annotations

import math
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import kstest, norm

from dp_spark.accounting import bounded_range_to_zcdp
from dp_spark.noise import discrete_gaussian
from dp_spark.mechanisms.count_release import (
    bounded_plan,
    gaussian_threshold_select,
    item_generator,
    keyed_noisy_counts,
    keyed_uniforms,
    noise_key,
    pcr_sigma,
    private_count_release,
    selection_probability,
    within_relative_error_probability,
)
from dp_spark.mechanisms.count_release.keyed import encode_item
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.top_k import (
    cdp_peel_epsilon_per_step,
    unknown_domain_calibration,
    unknown_domain_threshold,
)


def rng(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def epsilon_schedule(result, epsilon_min):
    """Rebuild every selection's ε from the outputs alone: ε* first, ×√2
    after each ⊥ (rounds not in ``released`` returned ⊥)."""
    found = {r.round for r in result.released}
    eps, out = epsilon_min, []
    for call in range(1, result.selection_calls + 1):
        out.append(eps)
        if call not in found:
            eps *= math.sqrt(2.0)
    return out, eps


# ------------------------------------------------------------------ PCR: filter

@st.composite
def histograms(draw):
    kbar = draw(st.integers(1, 40))
    n = draw(st.integers(0, kbar + 5))
    counts = np.sort(np.array(draw(st.lists(st.integers(0, 5000), min_size=n, max_size=n)), dtype=np.int64))[::-1]
    top, rest = counts[:kbar], counts[kbar:]
    return top, int(rest[0]) if rest.size else 0, kbar


@settings(max_examples=60, deadline=None)
@given(
    hist=histograms(),
    rho=st.floats(1e-3, 2.0),
    delta_steps=st.integers(1, 400),
    eps_min=st.floats(1e-3, 0.3),
    r=st.floats(0.01, 0.5),
    seed=st.integers(0, 2**32 - 1),
)
def test_filter_never_overspends_and_stops_only_when_the_next_round_cannot_fit(hist, rho, delta_steps, eps_min, r, seed):
    top, next_count, kbar = hist
    delta_min = 1e-9
    delta = delta_steps * delta_min * 1.0000001
    if rho < eps_min**2 / 4:
        rho = eps_min**2 / 4 * 1.5
    res = private_count_release(top, next_count, rho, delta, r, kbar, rng(seed),
                                epsilon_min=eps_min, delta_min=delta_min)
    # never over budget, exactly (sums of the exact costs of the floats given)
    exact_rho = sum((Fraction(cost.rho) for _, cost in res.ledger.ledger), Fraction(0))
    exact_delta = sum((Fraction(cost.delta) for _, cost in res.ledger.ledger), Fraction(0))
    assert exact_rho <= Fraction(rho) and exact_delta <= Fraction(delta)
    # every count's true cost 1/(2σ²) (σ as used by the sampler) is within its round's ε²/8
    for x in res.released:
        assert 1 / (2 * Fraction(x.sigma) ** 2) <= Fraction(x.epsilon) ** 2 / 8
    # stopped only because the next round could not fit (or kbar counts are out)
    if res.stopped == "kbar":
        assert len(res.released) == kbar
    elif res.stopped == "rho":
        assert exact_rho + 2 * Fraction(bounded_range_to_zcdp(res.final_epsilon)) > Fraction(rho)
    else:
        assert res.spent.delta + delta_min > delta
    # the accounting is exactly the paper's: ε²/8 + δ* per selection, 1/(2σ²) per count
    eps_seq, final = epsilon_schedule(res, eps_min)
    assert final == pytest.approx(res.final_epsilon, rel=1e-12)
    assert res.selection_spent.rho == pytest.approx(sum(e * e / 8 for e in eps_seq), rel=1e-9)
    assert res.selection_spent.delta == pytest.approx(res.selection_calls * delta_min, rel=1e-9)
    assert res.count_spent.rho == pytest.approx(sum(1 / (2 * x.sigma**2) for x in res.released), rel=1e-9)
    assert res.spent.rho == pytest.approx(res.selection_spent.rho + res.count_spent.rho, rel=1e-9)
    # each count: σ = max(σ_r(ε), 2/ε) with the shrinking k̄, and a distinct item with count > 0
    for n, x in enumerate(res.released):
        assert x.epsilon == pytest.approx(eps_seq[x.round - 1], rel=1e-12)
        assert x.sigma == pcr_sigma(x.epsilon, r, kbar - n, delta_min)
        assert x.threshold == unknown_domain_threshold(x.epsilon, delta_min, kbar - n)
        assert x.sigma >= 2 / x.epsilon * (1 - 1e-15)
        assert top[x.index] > 0
    assert len({x.index for x in res.released}) == len(res.released)
    # every round began with room for its largest possible cost ε²/4 and δ*
    before = Fraction(0)
    for label, cost in res.ledger.ledger:
        if label.startswith("selection"):
            assert before + 2 * Fraction(cost.rho) <= Fraction(rho)
        before += Fraction(cost.rho)


@pytest.mark.parametrize("rho", [0.082, 0.5])  # 0.082: the ε²/4 rule stops one call before an ε²/8 rule
def test_all_zero_histogram_returns_only_bottoms_with_the_paper_schedule(rho):
    eps_min = 0.0005
    res = private_count_release(np.zeros(20, dtype=np.int64), 0, rho, 1e-6, 0.1, 20, rng(1))
    # deterministic: every call is ⊥ (no count > 0), ε grows by √2 until ε²/4 no longer fits
    spent, eps, calls = 0.0, eps_min, 0
    while spent + eps * eps / 4 <= rho:
        spent, eps, calls = spent + eps * eps / 8, eps * math.sqrt(2), calls + 1
    assert res.released == [] and res.bottoms == res.selection_calls == calls
    assert res.stopped == "rho" and res.spent.rho == pytest.approx(spent, rel=1e-12)
    # the δ budget binds first when it allows only 3 selections
    res = private_count_release(np.zeros(0, dtype=np.int64), 0, rho, 3.5e-11, 0.1, 5, rng(1))
    assert res.selection_calls == 3 and res.stopped == "delta"


def test_huge_counts_are_released_in_order_until_kbar_runs_out():
    top = np.array([10**9 - j * 10**7 for j in range(5)], dtype=np.int64)
    res = private_count_release(top, 0, 1.0, 1e-6, 0.1, 5, rng(2))
    # first selection's threshold ≈ ln(5/1e-11)/5e-4 ≈ 5.4e4 ≪ counts, noise scale 2000 ≪ gaps
    assert [x.index for x in res.released] == [0, 1, 2, 3, 4]
    assert res.stopped == "kbar" and res.bottoms == 0
    for n, x in enumerate(res.released):
        expected = max(0.1 / 1.5 * unknown_domain_threshold(0.0005, 1e-11, 5 - n), 2 / 0.0005)
        assert x.sigma == pytest.approx(expected, rel=1e-12)
        assert abs(x.count - top[x.index]) < 6 * x.sigma


def test_released_count_noise_has_the_stated_sigma():
    """k̄ = 1, one count of 10⁶: exactly one round, count + N_Z(0, σ²) with
    σ = 2/ε* = 4000. 3000 runs: the sample mean is within 4 standard errors
    of the truth, the sample standard deviation within 6% of σ (SE ≈ 1.3%)."""
    g = rng(3)
    draws = []
    for _ in range(3000):
        res = private_count_release(np.array([10**6]), 0, 1.0, 1e-6, 0.1, 1, g)
        (x,) = res.released
        draws.append(x.count - 10**6)
    sigma = res.released[0].sigma
    assert sigma == pytest.approx(4000.0)
    draws = np.array(draws)
    assert abs(draws.mean()) < 4 * sigma / math.sqrt(len(draws))
    assert draws.std() == pytest.approx(sigma, rel=0.06)
    assert draws.dtype.kind == "i"


def test_first_selection_probability_matches_unknown_domain_gumbel():
    """One item, k̄ = 1, budget for exactly one round: released with
    probability P[c + G₁ > T + G₂] = 1/(1 + exp((T − c)ε)) (G₁ − G₂ is
    logistic with scale 1/ε). c = T + 1/ε·ln(3) gives 3/4. 4000 runs,
    tolerance 4 standard errors (≈ 0.027)."""
    eps, delta_min = 0.01, 1e-6
    thr = unknown_domain_threshold(eps, delta_min, 1)
    count = int(round(thr + math.log(3) / eps))
    p = 1 / (1 + math.exp((thr - count) * eps))
    g = rng(4)
    hits = 0
    n = 4000
    for _ in range(n):
        res = private_count_release(np.array([count]), 0, eps**2 / 4, delta_min, 0.1, 1, g,
                                    epsilon_min=eps, delta_min=delta_min)
        assert res.selection_calls == 1
        hits += len(res.released)
    assert abs(hits / n - p) < 4 * math.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rho": 0.0}, {"rho": -1.0}, {"rho": float("nan")},
        {"delta": 0.0}, {"delta": 1.0}, {"delta": 2.0},
        {"relative_error": 0.0}, {"relative_error": -0.1},
        {"kbar": 0}, {"kbar": 2.5},
        {"rho": 1e-9},  # below ε*²/4: no round fits
        {"delta": 1e-12},  # below δ*
        {"epsilon_min": 0.0}, {"delta_min": 0.0}, {"accuracy_factor": 0.0},
    ],
)
def test_pcr_rejects_bad_parameters(kwargs):
    args = {"rho": 0.5, "delta": 1e-6, "relative_error": 0.1, "kbar": 3}
    extra = {k: kwargs.pop(k) for k in ("epsilon_min", "delta_min", "accuracy_factor") if k in kwargs}
    args.update(kwargs)
    with pytest.raises(ParameterError):
        private_count_release([5, 4, 3], 0, args["rho"], args["delta"], args["relative_error"],
                              args["kbar"], rng(0), **extra)


def test_pcr_rejects_inconsistent_summaries():
    with pytest.raises(ParameterError, match="more than kbar"):
        private_count_release([5, 4, 3], 0, 0.5, 1e-6, 0.1, 2, rng(0))
    with pytest.raises(ParameterError, match="must be 0"):
        private_count_release([5, 4], 1, 0.5, 1e-6, 0.1, 3, rng(0))
    with pytest.raises(ParameterError, match="must not exceed"):
        private_count_release([5, 4], 9, 0.5, 1e-6, 0.1, 2, rng(0))
    with pytest.raises(ParameterError, match="whole-number"):
        private_count_release([5.5], 0, 0.5, 1e-6, 0.1, 2, rng(0))
    with pytest.raises(ParameterError, match="Generator"):
        private_count_release([5], 0, 0.5, 1e-6, 0.1, 2, 1)


def test_pcr_sigma_floor_keeps_the_count_cost_within_the_round():
    for eps in np.geomspace(1e-4, 10, 57):
        sigma = pcr_sigma(float(eps), 1e-3, 10, 1e-11)  # tiny r: the 2/ε floor binds
        assert 1 / (2 * Fraction(sigma) ** 2) <= Fraction(float(eps)) ** 2 / 8  # exactly, on the floats
        assert sigma == pytest.approx(2 / eps, rel=1e-12)


@settings(max_examples=300, deadline=None)
@given(st.floats(1e-6, 1e3))
def test_pcr_sigma_is_rounded_up_exactly(eps):
    sigma = pcr_sigma(eps, 1e-3, 10, 1e-11)
    assert (Fraction(sigma) * Fraction(eps)) ** 2 >= 4  # 1/(2σ²) <= ε²/8 exactly
    below = math.nextafter(sigma, 0.0)
    assert (Fraction(below) * Fraction(eps)) ** 2 < 4 or below < 2 / eps * (1 - 1e-15)


@settings(max_examples=200, deadline=None)
@given(st.floats(1e-4, 50), st.floats(1e-12, 0.1), st.integers(1, 10**4), st.floats(0.01, 0.99))
def test_bounded_plan_never_overspends_exactly(rho, delta, m, alpha):
    plan = bounded_plan(rho, delta, m, alpha)
    sel, cnt = plan.selection_cost.rho, plan.count_cost.rho
    assert Fraction(sel) + Fraction(cnt) <= Fraction(rho)
    assert m / (2 * Fraction(plan.selection_sigma) ** 2) <= Fraction(sel)
    assert m / (2 * Fraction(plan.count_sigma) ** 2) <= Fraction(cnt)


# --------------------------------------------------------- unknown-domain (ε, δ)

@pytest.mark.parametrize("epsilon, delta, k", [(1.0, 1e-6, 1), (1.0, 1e-6, 10), (0.1, 1e-9, 200), (5.0, 1e-3, 7)])
def test_unknown_domain_calibration_meets_the_target(epsilon, delta, k):
    eps_item, d_thr, d_conv = unknown_domain_calibration(epsilon, delta, k)
    assert d_thr + d_conv == pytest.approx(delta)
    rho = k * eps_item**2 / 8
    implied = rho + 2 * math.sqrt(rho * math.log(1 / d_conv))
    assert implied <= epsilon and implied == pytest.approx(epsilon, rel=1e-9)
    assert eps_item == pytest.approx(
        math.sqrt(8 * (math.log(1 / d_conv) + epsilon) / k) - math.sqrt(8 * math.log(1 / d_conv) / k), rel=1e-9)
    assert eps_item <= cdp_peel_epsilon_per_step(epsilon, d_conv, k) * (1 + 1e-12)


# ---------------------------------------------------------------- bounded plan

@pytest.mark.parametrize("rho, delta, m, alpha, r", [(0.5, 1e-6, 10, 0.5, 0.1), (1.0, 1e-8, 1, 0.3, 0.2),
                                                     (0.1, 1e-6, 554, 0.5, 0.1)])
def test_bounded_plan_calibration(rho, delta, m, alpha, r):
    plan = bounded_plan(rho, delta, m, alpha, r)
    assert m / (2 * plan.selection_sigma**2) == pytest.approx(alpha * rho, rel=1e-12)
    assert m / (2 * plan.count_sigma**2) == pytest.approx((1 - alpha) * rho, rel=1e-12)
    # at most m new items (count 1) of the added person clear τ: total probability δ
    assert m * norm.sf((plan.selection_threshold - 1) / plan.selection_sigma) == pytest.approx(delta, rel=1e-6)
    assert plan.count_threshold == pytest.approx((2 + r) * plan.count_sigma / r)
    t, s = plan.count_threshold, plan.count_sigma
    assert (t + s) / (t - s) == pytest.approx(1 + r)
    total = plan.selection_cost + plan.count_cost
    assert total.rho == pytest.approx(rho) and total.delta == delta
    assert Fraction(plan.selection_cost.rho) + Fraction(plan.count_cost.rho) <= Fraction(rho)


@pytest.mark.parametrize(
    "args",
    [(0, 1e-6, 5), (0.5, 0, 5), (0.5, 1, 5), (0.5, 1e-6, 0), (0.5, 1e-6, 2.5), (0.5, 1e-6, 5, 0.0),
     (0.5, 1e-6, 5, 1.0), (0.5, 1e-6, 5, 0.5, 0.0)],
)
def test_bounded_plan_rejects_bad_parameters(args):
    with pytest.raises(ParameterError):
        bounded_plan(*args)


def test_gaussian_threshold_select_is_keyed_per_item_and_has_the_stated_probability():
    """20,000 items with count 10, σ = 4, τ = 12: P[keep] = P[N(0,16) > 2]
    ≈ 0.309; tolerance 4 standard errors (≈ 0.013). Each item's decision
    depends on (key, item) only: the same in any order or batch split (as
    Spark's partitioning may give), and under another key an independent
    one (correlation of the two masks within ±0.04 ≈ 5.7 SE of 0.007)."""
    key = noise_key(rng(5))
    items = np.array([f"w{i}" for i in range(20000)], dtype=object)
    counts = np.full(items.size, 10)
    a = gaussian_threshold_select(items, counts, sigma=4.0, threshold=12.0, key=key)
    order = rng(1).permutation(items.size)
    parts = np.array_split(order, 7)
    b = np.empty_like(a)
    for part in parts:
        b[part] = gaussian_threshold_select(items[part], counts[part], sigma=4.0, threshold=12.0, key=key)
    c = gaussian_threshold_select(items, counts, sigma=4.0, threshold=12.0, key=noise_key(rng(6)))
    p = selection_probability(10, 4.0, 12.0)
    assert p == pytest.approx(norm.sf(0.5))
    assert np.array_equal(a, b)
    for mask in (a, c):
        assert abs(mask.mean() - p) < 4 * math.sqrt(p * (1 - p) / counts.size)
    assert abs(np.corrcoef(a, c)[0, 1]) < 0.04
    assert noise_key(rng(5)) == key and noise_key(rng(6)) != key
    with pytest.raises(ParameterError, match="same length"):
        gaussian_threshold_select(items[:3], counts[:2], sigma=4.0, threshold=12.0, key=key)


def test_keyed_uniforms_are_uniform_injective_and_stream_separated():
    """Kolmogorov–Smirnov against U(0, 1) on 20,000 string and 20,000
    integer items (p > 0.001, fixed key); the string "7" and the integer 7
    get different draws; another stream gives an unrelated draw; floats and
    bools are refused without quoting the value."""
    key = noise_key(rng(8))
    words = np.array([f"item-{i}" for i in range(20000)], dtype=object)
    ints = np.arange(-10000, 10000, dtype=np.int64)
    for items in (words, ints):
        u = keyed_uniforms(items, key, "test")
        assert np.all((u > 0) & (u < 1))
        assert kstest(u, "uniform").pvalue > 0.001
        other = keyed_uniforms(items, key, "other")
        assert abs(np.corrcoef(u, other)[0, 1]) < 0.04
    assert encode_item("7") != encode_item(7) and encode_item(np.int64(7)) == encode_item(7)
    assert keyed_uniforms(np.array(["7"], dtype=object), key, "s")[0] != keyed_uniforms(np.array([7]), key, "s")[0]
    for bad in (7.0, True, None):
        with pytest.raises(ParameterError, match="strings or integers"):
            encode_item(bad)


def test_keyed_noisy_counts_are_exact_discrete_gaussian_per_item():
    """4,000 items with count 100, σ = 3: integer output, mean within 4 SE
    of 100, sample standard deviation within 6% of σ (SE ≈ 1.1%); each item's
    noise is the discrete Gaussian drawn from its own keyed generator,
    whatever the batch split."""
    key = noise_key(rng(7))
    items = np.arange(4000, dtype=np.int64)
    out = keyed_noisy_counts(items, np.full(4000, 100), sigma=3.0, key=key)
    assert out.dtype == np.int64
    assert abs(out.mean() - 100) < 4 * 3.0 / math.sqrt(4000)
    assert out.std() == pytest.approx(3.0, rel=0.06)
    split = np.concatenate([keyed_noisy_counts(items[i:i + 333], np.full(len(items[i:i + 333]), 100),
                                               sigma=3.0, key=key) for i in range(0, 4000, 333)])
    assert np.array_equal(out, split)
    assert out[17] == 100 + discrete_gaussian(3.0, item_generator(17, key, "pcr-bounded-cnt"))
    assert keyed_noisy_counts(items[:0], np.zeros(0, dtype=np.int64), sigma=3.0, key=key).size == 0


@pytest.mark.parametrize("sigma", [0.7, 1.0, 2.5, 13.3, 160.0])
def test_within_relative_error_probability_bounds_the_exact_discrete_gaussian(sigma):
    """Against brute force: the exact P[|N_Z(0, σ²)| <= r·c] from the
    normalised pmf on [−60σ, 60σ] lies between the bound 2Φ(⌊rc⌋/σ) − 1
    and 2Φ((⌊rc⌋ + 1)/σ) − 1 (+ the θ − 1 < 1e-8 slack for σ >= 0.7)."""
    support = np.arange(-math.ceil(60 * sigma), math.ceil(60 * sigma) + 1)
    pmf = np.exp(-support.astype(float) ** 2 / (2 * sigma**2))
    pmf /= pmf.sum()
    for r, c in [(0.1, 0.0), (0.1, 9.0), (0.1, 10.0), (0.05, 333.0), (0.5, 47.5), (1.0, 3 * sigma), (0.1, 5e4)]:
        m = math.floor(r * c)
        exact = pmf[np.abs(support) <= m].sum()
        bound = within_relative_error_probability(sigma, r, c)
        assert bound <= exact + 1e-12
        assert exact <= 2 * norm.cdf((m + 1) / sigma) - 1 + 1e-8
    with pytest.raises(ParameterError):
        within_relative_error_probability(0.0, 0.1, 10)


def test_within_relative_error_probability_against_the_sampler_when_the_floor_binds():
    """The reviewer's case: r = 0.05, k̄_t = 1, ε = 0.0005, δ* = 1e-11 — σ is
    the floor 2/ε = 4000 (σ_r ≈ 1.7e3), and an item at the threshold
    T ≈ 5.07e4 is within r with probability ≈ 0.47, far below 87%. 3,000
    draws of the exact sampler: the empirical share is within 4 SE of the
    bound (which is tight here: ⌊rT⌋ ≫ 1)."""
    eps, r = 0.0005, 0.05
    threshold = unknown_domain_threshold(eps, 1e-11, 1)
    sigma = pcr_sigma(eps, r, 1, 1e-11)
    assert sigma == pytest.approx(2 / eps)
    p = within_relative_error_probability(sigma, r, threshold)
    assert 0.4 < p < 0.55
    draws = np.asarray(discrete_gaussian(sigma, rng(9), size=3000))
    share = np.mean(np.abs(draws) <= r * threshold)
    assert abs(share - p) < 4 * math.sqrt(p * (1 - p) / draws.size)


def test_mechanism_layer_imports_neither_pyspark_nor_pandas():
    code = ("import sys, dp_spark.mechanisms.count_release, dp_spark.mechanisms.top_k; "
            "bad = [m for m in ('pyspark', 'pandas') if m in sys.modules]; "
            "sys.exit(1 if bad else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


# ------------------------------------------------------------------ the plan

def test_pcr_plan_spends_the_whole_budget_in_the_adaptive_loop():
    """pcr's plan: δ-approximate ρ-zCDP, one step (the loop, spent adaptively
    under its filter), the (ε, δ + δ') equivalent with δ' = δ by default."""
    from dp_spark.accounting import ZCDP
    from dp_spark.plans.count_release import plan

    p = plan(rho=0.5, delta=1e-6, kbar=50)
    assert p.guarantee == ZCDP(0.5, 1e-6)
    assert [cost for _, cost in p.steps] == [ZCDP(0.5, 1e-6)]
    assert p.equivalent == ZCDP(0.5, 1e-6).to_approx(1e-6)
    assert p.equivalent.epsilon == pytest.approx(0.5 + 2 * math.sqrt(0.5 * math.log(1e6)))
    assert dict(p.parameters) == {
        "rho": 0.5, "delta": 1e-6, "relative_error": 0.1, "method": "pcr", "person_col": "person_id",
        "item_col": "item", "conversion_delta": 1e-6, "noise": "discrete gaussian", "kbar": 50,
        "epsilon_min": 0.0005, "delta_min": 1e-11, "accuracy_factor": 1.5}
    assert p.privacy()["approx_dp_equivalent"]["delta"] == pytest.approx(2e-6)
    assert plan(rho=0.5, delta=1e-6, conversion_delta=1e-3).equivalent == ZCDP(0.5, 1e-6).to_approx(1e-3)
    local = p.spend()
    assert local.remaining.rho == 0.0 and local.remaining.delta == 0.0


def test_bounded_plan_split_is_the_calibrated_selection_and_counts():
    from dp_spark.plans.count_release import calibration, plan

    p = plan(rho=0.5, delta=1e-6, method="bounded", max_items=4, alpha=0.3, count_threshold=True)
    calibrated = bounded_plan(0.5, 1e-6, 4, 0.3, 0.1)
    assert calibration(p) == calibrated
    assert [cost for _, cost in p.steps] == [calibrated.selection_cost, calibrated.count_cost]
    assert f"σ = {math.sqrt(4 / (2 * 0.3 * 0.5)):.4g}" in p.steps[0][0]  # σ_s = sqrt(m/(2αρ))
    assert f"sqrt(4), σ = {math.sqrt(4 / (2 * 0.7 * 0.5)):.4g}" in p.steps[1][0]
    assert {k: p[k] for k in ("max_items", "alpha", "count_threshold")} == {
        "max_items": 4, "alpha": 0.3, "count_threshold": True}
    assert "kbar" not in p.parameters and f"{calibrated.count_threshold:.4g}" in p.notes[0]
    p.spend()  # the steps fit the guarantee exactly


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"method": "magic"}, "method must be one of pcr, bounded"),
        ({"rho": 0.0}, "rho must be"),
        ({"rho": float("inf")}, "rho must be"),
        ({"delta": 1.0}, "delta must be"),
        ({"relative_error": -0.1}, "relative_error must be"),
        ({"kbar": 0}, "kbar must be a whole number from 1 to 1,000,000"),
        ({"kbar": 1_000_001}, "kbar must be a whole number from 1 to 1,000,000"),
        ({"kbar": 2.0}, "kbar must be a whole number"),
        ({"max_items": 100_001}, "max_items must be a whole number from 1 to 100,000"),
        ({"method": "bounded"}, "needs max_items"),
        ({"method": "bounded", "max_items": 3, "alpha": 1.0}, "alpha must be"),
        ({"count_threshold": "yes"}, "count_threshold must be True or False"),
        ({"rho": 1e-9}, "epsilon_min"),
        ({"delta": 1e-12}, "delta_min"),
        ({"epsilon_min": 0.0}, "epsilon_min must be"),
        ({"accuracy_factor": -1.0}, "accuracy_factor must be"),
        ({"conversion_delta": 0.0}, "conversion_delta must be"),
        ({"delta": 0.6, "conversion_delta": 0.5}, "delta + conversion_delta must stay below 1"),
        ({"seed": -1}, "seed must be"),
    ],
)
def test_plan_refuses_bad_parameters(kwargs, fragment):
    from dp_spark.plans.count_release import plan

    with pytest.raises(ParameterError, match=fragment.replace("(", r"\(").replace("+", r"\+")):
        plan(**{"rho": 0.5, "delta": 1e-6, **kwargs})


def test_plan_is_keyword_only_and_the_cli_dry_run_prints_it(capsys, tmp_path):
    """--dry-run prints the same plan as the API's, and reads nothing (the
    input does not exist: the dry run prints the plan, then reports that
    refusal of the real run, exit 2)."""
    import json

    from dp_spark.cli import main
    from dp_spark.plans.count_release import plan

    with pytest.raises(TypeError):
        plan(0.5, 1e-6)
    code = main(["count-release", "--input", str(tmp_path / "missing.parquet"), "--rho", "0.25", "--method",
                 "bounded", "--max-items", "6", "--dry-run", "--quiet"])
    out, err = capsys.readouterr()
    assert code == 2 and "missing.parquet' does not exist" in err, err
    document = json.loads(out)
    expected = plan(rho=0.25, delta=1e-6, method="bounded", max_items=6).to_dict()
    assert document == expected and document["plan"] is True
    assert main(["count-release", "--kbar", "0", "--dry-run"]) == 2
    assert "kbar must be" in capsys.readouterr().err
