"""The Laplace policies' exact noise step (dp_spark.mechanisms.set_union.laplace_grid):
the draws go through the exact samplers only and lie on the grid, the random
rounding's Lemma, the released probability against the closed form, and the
privacy loss on random add/remove-one-person neighbours, computed exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dp_spark.mechanisms.set_union import (
    HELD_SUPPORT,
    ThresholdStep,
    build_histogram,
    plan_set_union,
    release_mask,
)
from dp_spark.noise.rng import StreamRoot
from dp_spark.mechanisms.set_union import laplace_grid
from dp_spark.mechanisms.set_union.laplace_grid import (
    greedy_grid_failure,
    grid_release_probability,
    grid_scale,
    laplace_grid_mask,
    tail_above,
)
from dp_spark.noise.discrete_batch import bernoulli_double
from tests.unit.test_set_union_discrete import NoFloatDraws

LAPLACE = ("count", "weighted-laplace", "policy-laplace", "policy-greedy")


def pmf(beta: float, top: int) -> tuple[np.ndarray, np.ndarray]:
    """Discrete Laplace(β) by brute force: (k, P[k]) over |k| <= top."""
    k = np.arange(-top, top + 1)
    w = np.exp(-np.abs(k) / beta)
    return k, w / w.sum()


def mixture(x: float, beta: float, top: int) -> tuple[np.ndarray, np.ndarray]:
    """P[⌊x⌋ + B + Z = k], B ~ Bernoulli(x − ⌊x⌋), by brute force."""
    k, p = pmf(beta, top)
    n = math.floor(x)
    f = x - n
    out = np.zeros(k.size + 1)
    out[:-1] += (1 - f) * p
    out[1:] += f * p
    return np.arange(-top + n, top + n + 2), out


@pytest.mark.parametrize("method", LAPLACE)
@pytest.mark.parametrize("epsilon", [3.0, 1e-8])  # the int64 batch sampler, then the Fraction one
def test_the_mask_draws_only_through_the_exact_samplers(method, epsilon):
    plan = plan_set_union(epsilon, 1e-6, 3, method)
    assert plan.grid_bits == 20 and plan.noise_record.kind == "discrete-laplace"
    assert (plan.grid_beta * 1024 < 2**55) == (epsilon == 3.0)
    weights = np.tile([0.0, plan.rho / 2, 10 * plan.rho, -1.0, 0.3], 40)
    mask = release_mask(weights, plan, NoFloatDraws(np.random.PCG64(5))).reshape(40, 5)
    assert mask[:, 2].all() and not mask[:, 3].any()


def test_the_noise_is_an_integer_on_the_grid(monkeypatch):
    """With the sampler replaced by zeros, a weight on the grid is released
    iff its cell count exceeds R: nothing but the integer draw moves it."""
    calls = []

    def zeros(beta, size, rng):
        calls.append((beta, size))
        return np.zeros(size, dtype=np.int64)

    monkeypatch.setattr(laplace_grid, "discrete_laplace_batch", zeros)
    plan = plan_set_union(2.0, 1e-6, 5, "policy-laplace")
    cell = 2.0 ** -plan.grid_bits
    r = plan.grid_threshold
    weights = np.array([(r - 1) * cell, r * cell, (r + 1) * cell, 0.0])
    mask = release_mask(weights, plan, np.random.default_rng(1))
    assert mask.tolist() == [False, False, True, False]
    assert calls == [(grid_scale(2.0, 1.0), weights.size)]  # exactly one draw per item, at the plan's β


@pytest.mark.parametrize("beta", [0.7, 2.0, 5.0])
def test_the_random_rounding_lemma(beta):
    """|ln m_x(k) − ln m_x'(k)| <= (e^(1/β) − 1)·|x − x'|, tight, and above
    1/β (the loss of noise on an exact integer): the scale must pay it."""
    lip = math.expm1(1.0 / beta)
    xs = np.linspace(-2.0, 3.0, 201)
    top = 30
    worst = 0.0
    prev = None
    for x in xs:
        ks, m = mixture(float(x), beta, top)
        cur = np.log(m[(ks >= -20) & (ks <= 20)])  # the same integers k for every x
        if prev is not None:
            worst = max(worst, float(np.max(np.abs(cur - prev))) / (xs[1] - xs[0]))
        prev = cur
    assert worst <= lip * (1 + 1e-9)
    assert worst > 0.9 * lip and worst > 1.0 / beta


def test_the_grid_scale_meets_the_lemma_and_is_the_least():
    for epsilon, sensitivity in [(3.0, 1.0), (0.1, 1.0), (1.0, 100.0)]:
        beta = grid_scale(epsilon, sensitivity)
        per_cell = epsilon / math.ldexp(sensitivity, 20)
        assert math.expm1(1 / float(beta)) <= per_cell
        assert math.expm1(1 / (float(beta) - 2.0**-10)) > per_cell * (1 - 1e-9)
        assert beta.denominator <= 1024


def test_the_release_probability_is_the_closed_form():
    beta, threshold = 1.7, 3
    k, p = pmf(beta, 200)
    for x in [-1.5, 0.0, 0.25, 2.5, 3.0, 3.75, 9.2]:
        n, f = math.floor(x), x - math.floor(x)
        brute = (1 - f) * p[k > threshold - n].sum() + f * p[k > threshold - n - 1].sum()
        assert grid_release_probability(x, beta, threshold, 0) == pytest.approx(brute, rel=1e-12, abs=1e-15)
    assert tail_above(-1, beta) == pytest.approx(p[k > -1].sum(), rel=1e-12)


def test_the_released_probability_matches_the_closed_form_on_a_tiny_input():
    """A coarse grid (g = 1) where the rounding matters: 200,000 runs per
    weight; the frequency is the closed form's within 5 s.d., and a floor
    instead of the random rounding would be far outside."""
    scale, rho, g = 0.8, 1.5, 1  # β = 1.6 cells, R = 3 cells
    beta, threshold = scale * 2**g, 3
    weights = np.array([0.2, 0.9, 1.3, 1.75, 2.6])
    runs = 200_000
    rng = np.random.default_rng(2024)
    mask = laplace_grid_mask(np.tile(weights, runs), scale, rho, False, rng, g).reshape(runs, -1)
    rate = mask.mean(axis=0)
    floor_differs = 0
    for w, r in zip(weights, rate):
        exact = grid_release_probability(float(w), beta, threshold, g)
        sd = math.sqrt(exact * (1 - exact) / runs)
        assert abs(r - exact) <= 5 * sd
        floored = tail_above(threshold - math.floor(w * 2**g), beta)
        floor_differs += abs(r - floored) > 10 * sd
    assert floor_differs >= 3


def test_bernoulli_double_is_exact_at_the_ends_and_unbiased():
    rng = np.random.default_rng(8)
    p = np.array([0.0, 2.0**-1074, 0.5, 0.3, 1 - 2.0**-53])
    draws = np.stack([bernoulli_double(p, rng) for _ in range(20_000)])
    assert not draws[:, 0].any() and not draws[:, 1].any() and draws[:, 4].all()
    for j in (2, 3):
        assert abs(draws[:, j].mean() - p[j]) <= 5 * math.sqrt(p[j] * (1 - p[j]) / 20_000)
    with pytest.raises(Exception):
        bernoulli_double(np.array([1.0]), rng)


def csr(sets):
    indptr = np.concatenate(([0], np.cumsum([len(s) for s in sets]))).astype(np.int64)
    codes = np.array([c for s in sets for c in s], dtype=np.int64)
    return indptr, codes


def exact_losses(h: np.ndarray, h2: np.ndarray, plan) -> tuple[float, float]:
    """(max over outputs of the privacy loss on the common support, P[an item outside it is released])
    between histograms h (with the person) and h2 (without), computed exactly from the release
    probabilities: the loss of an output set is Σ_u ln(P[o_u | h]/P[o_u | h2])."""
    held = plan.method in HELD_SUPPORT
    small = h2 >= 0 if held else h2 > 0
    big = h >= 0 if held else h > 0
    q = np.array([plan.release_probability(float(x)) for x in h])
    q2 = np.array([plan.release_probability(float(x)) for x in h2])
    common = small & big
    up = np.maximum(np.abs(np.log(q[common] / q2[common])), np.abs(np.log1p(-q[common]) - np.log1p(-q2[common])))
    new = big & ~small
    return float(up.sum()), float(1 - np.prod(1 - q[new]))


@pytest.mark.parametrize("method", LAPLACE)
def test_the_privacy_loss_on_random_neighbours_is_at_most_epsilon(method):
    """Random persons (Δ0 = 4, a vocabulary of 12), one removed at random:
    the exact loss of the grid mechanism on the common support is <= ε and an
    item only the removed person keeps is released with probability <= δ."""
    rng = np.random.default_rng(77)
    epsilon, delta, max_items = 0.5, 1e-3, 4
    plan = plan_set_union(epsilon, delta, max_items, method)
    loss_max = 0.0
    for _ in range(60):
        persons = [sorted(rng.choice(12, size=rng.integers(1, max_items + 1), replace=False).tolist())
                   for _ in range(rng.integers(2, 9))]
        gone = int(rng.integers(len(persons)))
        gamma = plan.gamma if plan.gamma is not None else 0.0
        with_y = build_histogram(*csr(persons), 12, method, gamma)
        without = build_histogram(*csr(persons[:gone] + persons[gone + 1:]), 12, method, gamma)
        if method in HELD_SUPPORT:  # the candidates are the kept items, weight 0 included; mark the others
            kept_with = np.zeros(12, bool)
            kept_with[[c for s in persons for c in s]] = True
            kept_without = np.zeros(12, bool)
            kept_without[[c for i, s in enumerate(persons) if i != gone for c in s]] = True
            with_y = np.where(kept_with, with_y, -1.0)
            without = np.where(kept_without, without, -1.0)
        loss, leak = exact_losses(with_y, without, plan)
        assert loss <= epsilon * (1 + 1e-9)
        assert leak <= delta * (1 + 1e-9)
        loss_max = max(loss_max, loss)
    assert loss_max > 0.3 * epsilon  # the neighbours reach the bound's order


@pytest.mark.parametrize("max_items", [1, 5, 40])
def test_the_greedy_grid_threshold_covers_every_split_of_the_new_weight(max_items):
    plan = plan_set_union(1.0, 1e-4, max_items, "policy-greedy")
    beta, r = plan.grid_beta, plan.grid_threshold
    assert greedy_grid_failure(r, beta, max_items) <= 1e-4
    assert greedy_grid_failure(r - 1, beta, max_items) > 1e-4 * (1 - 1e-9)
    rng = np.random.default_rng(max_items)
    for _ in range(200):
        h = rng.dirichlet(np.ones(max_items)) * rng.uniform(0, 1)
        fail = 1 - np.prod([1 - plan.release_probability(float(x)) for x in h])
        assert fail <= greedy_grid_failure(r, beta, max_items) * (1 + 1e-9)


@pytest.mark.parametrize("method", LAPLACE)
def test_an_items_draws_do_not_depend_on_where_the_batches_break(method):
    """A partition's stream (what the Spark stage feeds batch after batch):
    any split into batches, across the sampler's blocks, gives the one-call
    mask; drawing per batch with the rejection samplers would not."""
    plan = plan_set_union(1.0, 0.05, 3, method)
    assert_batch_invariant(plan, laplace_grid.BLOCK,
                           lambda part, rng: laplace_grid_mask(part, plan.scale, plan.rho, method in HELD_SUPPORT, rng))


def assert_batch_invariant(plan, block: int, per_batch_mask) -> None:
    """A partition's stream of 3 blocks and a bit through ``ThresholdStep(plan, root)(1)``: every split
    into batches gives the one-call mask; ``per_batch_mask(part, rng)`` (the mask drawing per batch)
    on the same generator gives a different one."""
    weights = np.random.default_rng(3).uniform(-0.5, 2 * plan.rho, 3 * block + 17)
    root = StreamRoot(99, (2,))
    whole = ThresholdStep(plan, root)(1)(weights)
    assert 0 < whole.sum() < whole.size
    for cuts in ([5, 4096, 4100, 9000], [1, 2, 3, 8191, 12000], list(range(0, weights.size, 997))):
        mask_of = ThresholdStep(plan, root)(1)
        got = np.concatenate([mask_of(part) for part in np.split(weights, cuts)])
        assert np.array_equal(got, whole)
    rng = root.stream(1)  # per-batch draws (no blocks): a different stream
    per_batch = np.concatenate([per_batch_mask(part, rng) for part in np.split(weights, [5, 4096, 4100, 9000])])
    assert not np.array_equal(per_batch, whole)
