"""The Gaussian policies' exact noise step (dp_spark.mechanisms.set_union.gaussian_grid): the draws
go through the exact samplers only, the decision is X + Z > R on integers, the grid statistic's ℓ2
sensitivity and the new items' cells on random add/remove-one-person neighbours of the sharded policy
histograms (exact integers), the released probability against the closed form, and an item's draws
independent of where the batches break."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pytest

from dp_spark.errors import ParameterError
from dp_spark.mechanisms.set_union import SetUnionPlan, ThresholdStep, plan_set_union, release_mask
from dp_spark.noise.rng import StreamRoot
from dp_spark.mechanisms.set_union import gaussian_grid
from dp_spark.mechanisms.set_union.gaussian_grid import (
    GAUSSIAN_POLICIES,
    GaussianGridMask,
    ROW_ROOT,
    gaussian_grid_cells,
    gaussian_grid_mask,
    new_item_cells,
    plan_gaussian_grid,
)
from dp_spark.mechanisms.set_union.thresholds import _double_up
from dp_spark.noise.discrete_batch import discrete_gaussian_batch_wide
from tests.unit.test_set_union import random_sharded_case, sharded_histogram
from tests.unit.test_set_union_discrete import NoFloatDraws, pmf
from tests.unit.test_set_union_laplace_grid import assert_batch_invariant


@pytest.mark.parametrize("method", GAUSSIAN_POLICIES)
def test_the_mask_draws_only_through_the_exact_samplers(method):
    plan = plan_set_union(1.0, 1e-6, 3, method)
    assert plan.grid_bits == 40 and plan.noise_record.kind == "discrete-gaussian"
    weights = np.tile([0.0, plan.rho / 2, 10 * plan.rho, -1.0, plan.rho], 40)
    mask = release_mask(weights, plan, NoFloatDraws(np.random.PCG64(5))).reshape(40, 5)
    assert not mask[:, [0, 1, 3]].any() and mask[:, 2].all()  # ρ/2 is ~5σ below ρ
    assert 0 < mask[:, 4].sum() < 40


def test_a_plan_without_a_grid_is_refused():
    plan = plan_set_union(1.0, 1e-6, 3, "policy-gaussian")
    floating = SetUnionPlan(**{**plan.__dict__, "grid_bits": None})
    with pytest.raises(ParameterError, match="float Laplace or Gaussian noise is refused"):
        release_mask(np.ones(4), floating, np.random.default_rng(0))


@pytest.mark.parametrize("method", GAUSSIAN_POLICIES)
def test_the_decision_is_the_integer_comparison_with_the_draws(method):
    """The mask is ⌊min(w, C)·2^g⌋ + Z > R with Z the i-th of exactly len(weights) exact draws, the
    weight capped."""
    plan = plan_set_union(0.5, 1e-5, 4, method)
    g, s, r = plan.grid_bits, plan.grid_sigma, plan.grid_threshold
    weights = np.random.default_rng(1).uniform(-1.0, 2 * plan.rho, 5000)
    weights[:3] = [2.0**30, np.inf, 2.0**22]  # capped at 2^22: X = 2^(22 + g), no overflow
    got = gaussian_grid_mask(weights, plan.scale, plan.rho, np.random.default_rng(9), g)
    rng = np.random.default_rng(9)
    z = discrete_gaussian_batch_wide(s * s, weights.size, rng)
    x = [math.floor(math.ldexp(min(float(w), 2.0**22), g)) for w in weights]
    want = np.array([w > 0 and xi + int(zi) > r for w, xi, zi in zip(weights, x, z)])
    assert np.array_equal(got, want) and got[:3].all()
    assert gaussian_grid_cells(weights[:3], g).tolist() == [2 ** (22 + g)] * 3


@lru_cache(maxsize=None)
def grid_of(method: str, max_items: int):
    return plan_gaussian_grid(method, 1.0, 1e-6, max_items)


@pytest.mark.parametrize("method", GAUSSIAN_POLICIES)
@pytest.mark.parametrize("shards", [1, 3])
def test_sensitivity_and_new_items_on_random_neighbours(method, shards):
    """Sharded histograms as the stage builds them, one person removed: ‖X − X'‖₂² <= Δ² and an item
    only that person holds has X <= x_j, in exact integers; the floor's slack is reached (the bound
    2^g alone fails) and the new items come within a few cells of x_j."""
    rng = np.random.default_rng(400 + 10 * shards + GAUSSIAN_POLICIES.index(method))
    over_real = new_seen = 0
    closest = math.inf
    for case in range(200):
        max_items, n_items, sets, persons, shard_of, order_of = random_sharded_case(rng, shards)
        plan = plan_set_union(1.0, 1e-6, max_items, method)
        gamma = plan.gamma
        extra = persons[int(rng.integers(0, len(persons)))]
        h1 = sharded_histogram(persons, sets, n_items, method, gamma, shards, shard_of, order_of)
        h2 = sharded_histogram([p for p in persons if p != extra], sets, n_items, method, gamma,
                               shards, shard_of, order_of)
        grid = grid_of(method, max_items)
        assert grid.grid_bits == plan.grid_bits
        x1 = gaussian_grid_cells(h1, grid.grid_bits).tolist()
        x2 = gaussian_grid_cells(h2, grid.grid_bits).tolist()
        moved = sum((a - b) ** 2 for a, b in zip(x1, x2))  # Python ints: exact
        assert moved <= grid.l2_squared, (method, case)
        over_real += moved > 1 << (2 * grid.grid_bits)
        new = [a for a, w1, w2 in zip(x1, h1, h2) if w1 > 0 and w2 == 0]
        if new:
            new_seen += 1
            bound = new_item_cells(method, len(new), max_items, grid.grid_bits)
            assert max(new) <= bound, (method, case)
            closest = min(closest, bound - max(new))
    assert new_seen >= 20 and closest <= 3
    if method == "policy-gaussian":
        assert over_real >= 1  # the floor's √N term is needed: 2^g·1 alone is exceeded
    else:
        assert over_real == 0 and grid.l2_squared <= 1 << (2 * grid.grid_bits)  # whole units: no slack


def test_the_sensitivity_constants():
    grid = plan_gaussian_grid("policy-gaussian", 1.0, 1e-6, 10)
    assert grid.l2_squared == ((1 << 40) + ROW_ROOT) ** 2 and ROW_ROOT**2 > 2**63 - 1 >= (ROW_ROOT - 1) ** 2
    assert grid.sigma**2 * 2 * grid.noise_rho >= grid.l2_squared > (grid.sigma - 1) ** 2 * 2 * grid.noise_rho
    weighted = plan_gaussian_grid("weighted-gaussian", 1.0, 1e-6, 10)
    assert weighted.l2_squared == max(t * (math.isqrt(2**60 // t) << 10) ** 2 for t in range(1, 11))
    tiny = plan_gaussian_grid("policy-gaussian", 1e-4, 1e-6, 5)  # s would pass 2^47 at g = 40
    assert tiny.grid_bits < 40 and tiny.sigma < 2**47


def closed_form(x: int, sigma: int, threshold: int) -> float:
    k, p = pmf(sigma)
    return float(p[k > threshold - x].sum())


@pytest.mark.parametrize("sigma", [2, 7])
def test_the_released_probability_matches_the_closed_form_on_a_tiny_input(sigma):
    """A coarse grid (g = 2, s = 2 or 7 cells): the release rate of each weight against
    P[Z > R − X] summed from the pmf; σ halved is rejected."""
    g, r, trials = 2, 5, 40_000
    weights = np.array([0.5, 1.0, 1.3, 1.75, 2.0, 3.1])
    x = gaussian_grid_cells(weights, g).tolist()
    mask = gaussian_grid_mask(np.tile(weights, trials), math.ldexp(sigma, -g), math.ldexp(r, -g),
                              np.random.default_rng(sigma), g).reshape(trials, -1)
    rate = mask.mean(axis=0)
    for i, xi in enumerate(x):
        p = closed_form(xi, sigma, r)
        assert abs(rate[i] - p) <= 4.5 * math.sqrt(p * (1 - p) / trials) + 1e-9
    half = [closed_form(xi, max(1, sigma // 2), r) for xi in x]
    assert max(abs(rate[i] - half[i]) / math.sqrt(half[i] * (1 - half[i]) / trials + 1e-12)
               for i in range(len(x))) > 4.5


@pytest.mark.parametrize("method", GAUSSIAN_POLICIES)
def test_the_plan_release_probability_matches_the_mask(method):
    """The plan's (normal-approximation) release probability, which the report states, against the
    release rate at weights near ρ."""
    plan = plan_set_union(1.0, 1e-4, 4, method)
    trials = 20_000
    weights = np.array([plan.rho - plan.scale, plan.rho, plan.rho + plan.scale, plan.weight_for(0.95)])
    mask = release_mask(np.tile(weights, trials), plan, np.random.default_rng(4)).reshape(trials, -1)
    for i, w in enumerate(weights):
        p = plan.release_probability(float(w))
        assert abs(mask[:, i].mean() - p) <= 4.5 * math.sqrt(p * (1 - p) / trials)
    assert plan.release_probability(plan.weight_for(0.95)) >= 0.95


@pytest.mark.parametrize("method", GAUSSIAN_POLICIES)
def test_an_items_draws_do_not_depend_on_where_the_batches_break(method):
    plan = plan_set_union(1.0, 0.05, 3, method)
    assert isinstance(ThresholdStep(plan, StreamRoot(1))(0), GaussianGridMask)
    assert_batch_invariant(plan, gaussian_grid.BLOCK,
                           lambda part, rng: gaussian_grid_mask(part, plan.scale, plan.rho, rng, plan.grid_bits))


@pytest.mark.parametrize("grid_bits", [30, 32, 40])
def test_the_weighted_units_are_whole_cells_up_to_the_cap(grid_bits):
    """The weighted histogram's long sum U of units 2^-30, cast to a double as the stage does: X is
    exactly min(U, 2^52)·2^(g − 30) at every g, also where the cast rounds (U > 2^53)."""
    units = [1, 12345, 2**52 - 1, 2**52, 2**52 + 1, 2**53 + 1, 2**60 + 7, 2**62 - 1]
    weights = np.array([float(u) for u in units]) * 2.0**-30
    got = gaussian_grid_cells(weights, grid_bits).tolist()
    assert got == [min(u, 2**52) << (grid_bits - 30) for u in units]


def test_a_delta_too_small_for_the_threshold_is_refused():
    with pytest.raises(ParameterError, match="too small for the threshold"):
        plan_gaussian_grid("policy-gaussian", 1.0, 5e-323, 100)
    assert plan_gaussian_grid("policy-gaussian", 1.0, 1e-300, 100).threshold > 0


@pytest.mark.parametrize("method", GAUSSIAN_POLICIES)
def test_the_smallest_epsilon_plans_and_reads_back_at_least_its_integers(method):
    """ε = 1e-6 (the range's end): g = 30 (policy: R above 2^53 cells); the plan's doubles, read back by
    the mask, are never below the integers the proof needs."""
    grid = plan_gaussian_grid(method, 1e-6, 1e-6, 100)
    plan = plan_set_union(1e-6, 1e-6, 100, method)
    assert grid.grid_bits == plan.grid_bits == 30 and (grid.threshold > 2**53) == (method == "policy-gaussian")
    mask = GaussianGridMask(plan.scale, plan.rho, np.random.default_rng(0), plan.grid_bits)
    assert grid.sigma <= mask.sigma <= grid.sigma * (1 + 2.0**-52) and mask.sigma == plan.grid_sigma
    assert grid.threshold <= mask.threshold <= grid.threshold * (1 + 2.0**-52)
    assert [_double_up(n) for n in (2**53 + 1, 2**53 + 3, 2**60 - 1, 7)] == [2.0**53 + 2, 2.0**53 + 4, 2.0**60, 7.0]
