"""Method "select" of continual-distinct: one counter chosen privately from the finished stream."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings

from dp_spark.accounting import ZCDP
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.continual_distinct import ContinualCounter, continual_counts, stream_summaries
from dp_spark.mechanisms.continual_distinct.auto import auto_plan, level_counter
from dp_spark.mechanisms.continual_distinct.mechanisms import budget_split, group_factor
from dp_spark.mechanisms.continual_distinct.select import select_plan, select_run, staleness
from dp_spark.noise.records import overspent_steps, uncharged_records
from tests.unit.test_continual import _summaries
from tests.unit.test_factorized import _neighbouring_streams


def _private_vector(summaries, plan):
    counts = np.cumsum(summaries.z)
    return np.asarray([summaries.over_counts[j, -1] for j in plan.levels]
                      + [staleness(counts, b) for b in plan.blocks], dtype=np.int64)


@pytest.mark.parametrize("horizon", [16, 1024, 1 << 16])
@pytest.mark.parametrize("relation", ["subset", "item-removal"])
def test_plan_splits_the_budget_exactly_and_keeps_only_undominated_levels(horizon, relation):
    plan = select_plan(horizon, 0.5, relation=relation)
    split = budget_split("select", 0.5, horizon, relation=relation)
    assert sum(Fraction(part) for _, part in split) <= Fraction(0.5)
    assert [part for _, part in split] == [plan.rho_select, plan.rho_estimate, plan.rho_counter]
    assert plan.levels == tuple(range(len(plan.levels)))
    # every kept level's noise bound beats the block-1 baseline's; the next one does not
    assert all(a < plan.block_bounds[0] for a in plan.level_bounds)
    nxt = len(plan.levels)
    if (1 << nxt) <= horizon:
        assert level_counter(horizon, plan.rho_counter, 1 << nxt, relation, plan.quantile)[2] >= plan.block_bounds[0]
    assert plan.blocks[0] == 1 and all(b * b * b <= horizon * horizon for b in plan.blocks)
    # the choice's noise is calibrated to its l2 sensitivity: #levels + κ_B²·#blocks
    kappa = 2 if relation == "subset" else 1
    assert plan.select_sensitivity2 == len(plan.levels) + kappa * kappa * len(plan.blocks)
    assert Fraction(plan.select_sensitivity2) / (2 * plan.select_sigma2) <= Fraction(plan.rho_select)


@settings(max_examples=300, deadline=None)
@given(_neighbouring_streams())
def test_random_neighbours_move_the_choice_vector_within_its_sensitivity(case):
    """Random multi-item streams, one item's events removed (all, or any subset): each truncation
    count moves by <= 1, each staleness by <= κ_B (2 subset, 1 item removal), so the vector's
    ℓ2² is within ``select_sensitivity2``; the stated term's sensitivity holds per coordinate."""
    horizon, relation, events, neighbour = case
    plan = select_plan(horizon, 0.5, relation=relation)
    x, y = _summaries(events, horizon), _summaries(neighbour, horizon)
    moved = _private_vector(x, plan) - _private_vector(y, plan)
    k = len(plan.levels)
    assert np.max(np.abs(moved[:k]), initial=0) <= 1
    assert np.max(np.abs(moved[k:])) <= plan.staleness_sensitivity
    assert int(np.sum(moved * moved)) <= plan.select_sensitivity2


def test_subset_staleness_sensitivity_two_is_reached():
    """Under "subset" a block's staleness can move by 2, so κ_B = 2 is needed there. Item 0 is in
    and out at step 1, deleted (no-op) at 3, back at 4; item 1 arrives at 3. Keeping only item 0's
    insert at 1 and delete at 3 turns its +1 over the block into −1, cancelling item 1's +1:
    staleness of block 4 is 2 on D, 0 on D'."""
    events = [(1, 0, 1, 0), (1, 0, -1, 1), (3, 0, -1, 0), (4, 0, 1, 0), (3, 1, 1, 0)]
    neighbour = [(1, 0, 1, 0), (3, 0, -1, 0), (3, 1, 1, 0)]
    x, y = _summaries(events, 4), _summaries(neighbour, 4)
    assert staleness(np.cumsum(x.z), 4) - staleness(np.cumsum(y.z), 4) == 2
    assert select_plan(4, 0.5, relation="subset").staleness_sensitivity == 2


def _stream(rng, horizon, items, heavy, heavy_flips):
    """items flipping once or twice, ``heavy`` of them ``heavy_flips`` times (alternating)."""
    times, labels, ops = [], [], []
    for item in range(items):
        flips = heavy_flips if item < heavy else int(rng.integers(1, 3))
        steps = np.sort(rng.choice(horizon, size=flips, replace=False)) + 1
        times += steps.tolist()
        labels += [item] * flips
        ops += [1 if i % 2 == 0 else -1 for i in range(flips)]
    return stream_summaries(times, labels, ops, horizon)


def test_statement_covers_the_truth_at_its_confidence_and_needs_its_margin():
    """Over 400 seeded runs on a stream where truncation matters (20 items flip 40 times):
    every step's |error| <= error_bound in at least 1 − β of the runs (β = 0.05; the two parts
    fail with ≤ β/2 each), and the stated truncation term covers the true count of items over the
    chosen bound. The same statement without its one-sided margin σ·q₁ fails far more often."""
    horizon = 256
    summaries = _stream(np.random.default_rng(3), horizon, 300, 20, 40)
    truth = np.cumsum(summaries.z)
    plan = select_plan(horizon, 2.0)
    failures, term_failures, bare_failures, runs, truncated = 0, 0, 0, 400, 0
    for seed in range(runs):
        out = select_run(summaries, plan, np.random.default_rng(seed))
        failures += bool(np.any(np.abs(out["estimates"] - truth) > out["error_bound"]))
        choice = out["choice"]
        if "flippancy_bound" in choice:
            j = choice["flippancy_bound"].bit_length() - 1
            true_term = int(summaries.over_counts[j, -1])
            stated = choice["truncation_bound"]
        else:
            true_term = staleness(truth, choice["block"])
            stated = choice["staleness_bound"]
        truncated += true_term > 0
        term_failures += stated < true_term
        sigma = float(plan.estimate_sigma2("level" if "flippancy_bound" in choice else "block")) ** 0.5
        bare_failures += stated - sigma * plan.quantile_one < true_term
    assert truncated > runs // 2  # the chosen counters do truncate: the term is exercised
    assert failures <= 0.05 * runs
    assert term_failures <= 0.025 * runs + 3 * np.sqrt(0.025 * runs)
    assert bare_failures >= 0.25 * runs


def test_the_choice_is_within_its_noise_of_the_best_true_score():
    """3000 items flipping once or twice: the truncation count is large at w = 1 and 0 from w = 2 on.
    In every run the chosen candidate's true score (public noise bound + true truncation or
    staleness) is within 2·σ_sel·sqrt(2 ln(2K/0.001)) of the best true score (the Gaussian
    report-noisy-min guarantee); a choice that ignored the private terms (the smallest public
    bound: the longest block, stale by ~300) would miss by far more."""
    horizon = 1024
    summaries = _stream(np.random.default_rng(4), horizon, 3000, 0, 0)
    plan = select_plan(horizon, 1.0)
    true = np.asarray(plan.level_bounds + plan.block_bounds) + _private_vector(summaries, plan)
    k = true.shape[0]
    margin = 2 * float(plan.select_sigma2) ** 0.5 * np.sqrt(2 * np.log(2 * k / 0.001))
    for seed in range(40):
        choice = select_run(summaries, plan, np.random.default_rng(seed))["choice"]
        index = (plan.levels.index(choice["flippancy_bound"].bit_length() - 1) if "flippancy_bound" in choice
                 else len(plan.levels) + plan.blocks.index(choice["block"]))
        assert true[index] <= true.min() + margin
    public_only = int(np.argmin(np.asarray(plan.level_bounds + plan.block_bounds)))
    assert true[public_only] > true.min() + margin


def test_records_are_charged_within_the_split_and_name_their_role():
    summaries = _stream(np.random.default_rng(5), 128, 50, 2, 9)
    result = continual_counts(summaries, 0.5, "select", rng=np.random.default_rng(1))
    split = budget_split("select", 0.5, 128)
    report = [{"step": label, **ZCDP(part).to_dict()} for label, part in split]
    assert not uncharged_records(result.noise, report)
    assert not overspent_steps(result.noise, report)
    costs = [r.cost().rho for r in result.noise]
    assert all(cost <= part * (1 + 1e-12) for cost, (_, part) in zip(costs, split))
    assert costs[0] > 0.9 * split[0][1]  # the choice's noise is not over-calibrated either
    assert [r.parameters.get("role") for r in result.noise[:2]] == ["choice", "statement"]
    assert result.noise[2].parameters.get("role") is None
    assert result.estimates.dtype == np.int64 and result.estimates.shape == (128,)
    assert result.method == "select" and "choice" in result.parameters


def test_neighbouring_streams_give_the_same_shape_and_no_refusal():
    """Adding or removing one item changes neither the number of rows nor whether it runs."""
    base = [(t, i, 1 if (t + i) % 2 else -1, 0) for i in range(6) for t in range(1, 64, 5 + i)]
    heavy = base + [(t, 99, 1 if t % 2 else -1, 0) for t in range(1, 64)]
    for events in (base, heavy):
        out = continual_counts(_summaries(events, 64), 0.5, "select", rng=np.random.default_rng(0))
        assert out.estimates.shape == (64,) and np.all(np.isfinite(out.error_bound))


def test_select_is_batch_only_and_grouped_at_factor_2m():
    with pytest.raises(ParameterError, match="batch only"):
        ContinualCounter(64, 0.5, "select")
    assert group_factor("select", 3) == 6 and group_factor("select", 3, 4) == 4


def test_the_streamed_auto_plan_is_the_online_counters_split():
    """At T = 2^18, ρ = 50 the crossover (the trees' rule) plans one level, and the online counter
    runs it as the BLT counter (smaller bound), not the batch square root: the stream's plan must
    split ρ as the online counter runs, so its records name steps of that split and the level's
    counter is calibrated at the plan's ρ_0."""
    from dp_spark.plans.continual_distinct import plan as continual_plan

    horizon, rho = 1 << 18, 50.0
    batch = continual_plan(rho=rho, horizon=horizon)
    streamed = continual_plan(rho=rho, horizon=horizon, stream=True)
    assert streamed["method"] == "auto"
    online = budget_split("auto", rho, horizon, online=True)
    assert [(label, cost.rho) for label, cost in streamed.steps] == online
    assert len(online) == 2  # the sparse vector, then the counters and baseline under the filter
    plan = auto_plan(horizon, rho, online=True)
    assert plan.top_level == 0 and plan.counters == ("factorized",)
    counter = ContinualCounter(horizon, rho, "auto")
    assert counter.to_dict()["trees"][0]["kind"].endswith("BLTCounter")
    z = {"z": 0, "z_truncated": np.zeros(19, dtype=np.int64), "over_counts": np.zeros(19, dtype=np.int64)}
    counter.step(np.random.default_rng(0), **z)
    labels = [{"step": label} for label, _ in streamed.steps]
    assert counter.noise_records() and not uncharged_records(counter.noise_records(), labels)
    assert batch["method"] == "select"


@pytest.mark.parametrize("online", [False, True])
def test_auto_plans_levels_by_the_trees_rule_whatever_counter_runs_them(online):
    """A level the data leaves wastes its budget, so "auto" plans the same levels (crossover j*) and
    the same split whichever counter runs them; the smaller-bound counter only replaces the tree
    at a planned level. (With the factorized bound in the rule, T = 2^20, ρ = 0.5 started a w = 1
    counter that streams with w ≥ 2 left at once: largest error 428 against the trees' 314.)"""
    for log2_t, rho in ((12, 0.5), (18, 0.5), (18, 50.0), (20, 0.5), (20, 8.0), (20, 32.0)):
        T = 1 << log2_t
        tree, best = auto_plan(T, rho, counter="tree"), auto_plan(T, rho, online=online)
        assert best.top_level == tree.top_level and best.tree_rho == tree.tree_rho, (log2_t, rho)
        assert best.budget_split() == tree.budget_split()
        assert all(b <= t for b, t in zip(best.bounds, tree.bounds))
    assert auto_plan(1 << 20, 32.0, online=online).counters == ("factorized", "factorized")
