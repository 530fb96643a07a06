"""The multi-round exact weighted Gaussian (dp_spark.mechanisms.set_union.sips): its constants
against the budget, exactly, and each round's sensitivity on random add/remove-one-person
neighbours with a fixed history of released items."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dp_spark.accounting.exact import exact
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.set_union.discrete import grid_statistic, plan_discrete_set_union, zcdp_for_dp
from dp_spark.mechanisms.set_union.sips import (
    SIPS_SHARES,
    kept_sets,
    plan_sips,
    round_histogram,
    sips_release,
)
from dp_spark.summaries.set_union import UNIT, UNIT_BITS, person_units


@pytest.mark.parametrize("epsilon, delta, max_items", [(3.0, math.exp(-10), 100), (1.0, 1e-6, 7), (0.5, 0.1, 1)])
def test_the_rounds_fit_the_budget_exactly(epsilon, delta, max_items):
    plan = plan_sips(epsilon, delta, max_items)
    assert len(plan.rounds) == len(SIPS_SHARES) and sum(SIPS_SHARES) == 1
    assert plan.noise_rho == zcdp_for_dp(epsilon, delta / 2)
    spent = [Fraction(r.l2_squared) / (2 * r.sigma * r.sigma) for r in plan.rounds]
    assert sum(spent) <= exact(plan.noise_rho)
    for share, used, r in zip(SIPS_SHARES, spent, plan.rounds):
        assert used <= share * exact(plan.noise_rho)  # each round within its share
        assert r.sigma == 1 or Fraction(r.l2_squared) / (2 * (r.sigma - 1) ** 2) > share * exact(plan.noise_rho)
    assert len(plan.rounds) * exact(plan.rounds[0].threshold_delta) <= exact(plan.threshold_delta)
    assert exact(plan.noise_delta) + exact(plan.threshold_delta) <= exact(delta)
    assert plan.rounds[0].sigma > plan.rounds[-1].sigma  # the first round is the small one


def test_one_round_is_the_exact_weighted_gaussian():
    assert plan_sips(3.0, math.exp(-10), 100, (1,)).rounds[0] == plan_discrete_set_union(3.0, math.exp(-10), 100)
    with pytest.raises(ParameterError):
        plan_sips(3.0, 1e-6, 10, (Fraction(1, 2), Fraction(3, 5)))


def test_each_rounds_sensitivity_on_random_neighbours():
    """Random persons over 15 items (Δ0 = 3), a random history of released items and a random
    round order; removing one person y: every other person keeps the same items, the histograms
    differ by y's own vector exactly (in units), the grid statistic's ℓ2² is within the plan's Δ²,
    and an item only y keeps is within the threshold's bound x_j."""
    rng = np.random.default_rng(39)
    plan = plan_sips(1.0, 1e-3, 3)
    r = plan.rounds[-1]
    cell = 1 << (UNIT_BITS - r.grid_bits)
    worst = 0
    for _ in range(400):
        n = int(rng.integers(2, 9))
        sets = [rng.choice(15, size=int(rng.integers(1, 6)), replace=False).tolist() for _ in range(n)]
        released = set(rng.choice(15, size=int(rng.integers(0, 6)), replace=False).tolist())
        rank = rng.permutation(15)
        y = int(rng.integers(n))
        others = sets[:y] + sets[y + 1:]
        kept_with = kept_sets(sets, released, 3, rank)
        kept_without = kept_sets(others, released, 3, rank)
        assert kept_with[:y] + kept_with[y + 1:] == kept_without
        h_with, h_without = round_histogram(kept_with, 15), round_histogram(kept_without, 15)
        mine = kept_with[y]
        diff = h_with - h_without
        assert set(np.flatnonzero(diff).tolist()) == set(mine)
        if mine:
            assert (diff[mine] == person_units("weighted-gaussian", len(mine))).all()
        x_with = grid_statistic(h_with * UNIT, r.grid_bits)
        x_without = grid_statistic(h_without * UNIT, r.grid_bits)
        l2 = int(((x_with - x_without) ** 2).sum())
        assert l2 <= r.l2_squared
        worst = max(worst, l2)
        new = [u for u in mine if h_without[u] == 0]
        for u in new:  # an item only y keeps weighs at most a_j, j = the number of such items
            assert x_with[u] <= person_units("weighted-gaussian", len(new)) // cell
    assert worst >= 0.25 * r.l2_squared  # the neighbours reach the bound's order


def test_the_later_round_sees_only_the_unreleased_items():
    # a run where round 1 releases everything frequent: round 2's histogram holds no released item
    plan = plan_sips(3.0, 1e-6, 2)
    sets = [[0, 1]] * 400 + [[2, 3]] * 3
    mask = sips_release(sets, 4, plan, np.random.default_rng(1))
    assert mask[0] and mask[1]  # 400 persons: far above every round's threshold
    kept = kept_sets(sets, {0, 1}, 2, np.arange(4))
    assert all(set(k) <= {2, 3} for k in kept)
