"""Noise kinds own their math (issue 37 §3): each kind's sampler, cost and
tail in one object (dp_spark.noise.kinds), the records' tails and costs read
from it, and the check that the records of a budget step cost no more than
the step (dp_spark.noise.records.overspent_steps). No Spark."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import norm

from dp_spark.accounting import ZCDP, PureDP
from dp_spark.mechanisms.continual_distinct.mechanisms import merged_records
from dp_spark.noise import make_rng
from dp_spark.noise.kinds import KINDS, analytic_gaussian_delta
from dp_spark.noise.records import KINDS as PHRASES
from dp_spark.noise.records import NoiseDraw, overspent_steps, uncharged_records


def test_every_record_kind_is_a_kind_object_and_the_phrases_are_its():
    assert list(PHRASES) == list(KINDS)
    assert all(PHRASES[name] == kind.phrase for name, kind in KINDS.items())


@pytest.mark.parametrize("name", [n for n, k in KINDS.items() if k.sampler is not None])
def test_each_sampler_draws_its_kind(name):
    """The kind's sampler draws numbers whose spread follows the scale."""
    sampler = KINDS[name].sampler
    rng = make_rng(5)
    small = np.array([sampler(1.0, rng) for _ in range(400)], dtype=float)
    large = np.array([sampler(8.0, rng) for _ in range(400)], dtype=float)
    assert 4.0 < large.std() / small.std() < 16.0, name


@pytest.mark.parametrize("name", [n for n, k in KINDS.items() if k.tail is not None])
def test_a_tail_shrinks_as_beta_grows_and_refuses_beta_outside_the_unit_interval(name):
    kind, p = KINDS[name], {"spread": 10, "log_outcomes": 3.0}
    widths = [kind.half_width(4.0, beta, p) for beta in (0.001, 0.05, 0.5)]
    assert widths[0] >= widths[1] >= widths[2] > 0, widths
    for beta in (0.0, 1.0):
        with pytest.raises(ValueError):
            kind.half_width(4.0, beta, p)


def test_kinds_without_an_interval_say_so():
    for name in ("gem", "sparse-vector", "binary-tree"):
        with pytest.raises(ValueError, match="no interval"):
            NoiseDraw("s", name, scale=2.0, std=None, sensitivity=1.0).half_width(0.05)


def test_the_costs_are_the_privacy_maps():
    cost = lambda kind, scale, sens, **p: NoiseDraw("s", kind, scale, None, sens, parameters=p).cost()  # noqa: E731
    assert cost("discrete-laplace", 4.0, 2.0) == PureDP(0.5)
    assert cost("laplace", 0.5, 1.0) == PureDP(2.0)
    assert cost("discrete-gaussian", 2.0, 2.0) == ZCDP(0.5)
    assert cost("binary-tree", 7.0, math.sqrt(98.0)).rho == pytest.approx(1.0)
    assert cost("exponential-mechanism", 1.0, 1.0) == PureDP(2.0)
    assert cost("gem", 4.0, 1.0) == PureDP(0.5)
    assert cost("exponential", 1.5, 1.0, spread=9, rounds=3) == PureDP(2.0)
    assert cost("gumbel", 1.5, 1.0, spread=9) is None and cost("sparse-vector", 2.0, 1.0) is None


@pytest.mark.parametrize("sigma, sens, epsilon", [(1.0, 1.0, 0.5), (2.067, 1.0, 2.0), (3.0, 2.0, 1.0)])
def test_the_analytic_gaussian_delta_is_the_integral(sigma, sens, epsilon):
    """δ(ε) = ∫ max(0, p(x) − e^ε q(x)) dx for p = N(0, σ²), q = N(Δ, σ²),
    integrated numerically (brute force) against the closed form."""
    gap = lambda x: max(0.0, norm.pdf(x, 0, sigma) - math.exp(epsilon) * norm.pdf(x, sens, sigma))  # noqa: E731
    brute, _ = integrate.quad(gap, -40 * sigma, 40 * sigma, points=[sens / 2 - epsilon * sigma**2 / sens], limit=200)
    assert analytic_gaussian_delta(sigma, sens, epsilon) == pytest.approx(brute, rel=1e-6, abs=1e-14)


def _split(**cost):
    return [{"step": "s", **cost}]


def test_records_within_their_step_pass_and_one_more_draw_fails():
    at = NoiseDraw("s", "discrete-laplace", scale=4.0, std=None, sensitivity=2.0)  # ε = 0.5
    assert overspent_steps([at], _split(kind="pure-dp", epsilon=0.5)) == []
    assert overspent_steps([at, at], _split(kind="pure-dp", epsilon=0.5)) == ["s"]
    assert overspent_steps([at.at("other")], _split(kind="pure-dp", epsilon=0.1)) == []  # another step's record


def test_a_record_charged_to_no_step_of_the_split_is_counted():
    """overspent_steps checks a step's records; a record naming no step of
    the split escapes it, so it is counted apart (a defect the release
    withholds). Uncosted kinds count too: the step, not the cost, is missing."""
    at = NoiseDraw("s", "discrete-laplace", scale=4.0, std=None, sensitivity=2.0)
    gumbel = NoiseDraw("x", "gumbel", scale=1.0, std=None, sensitivity=1.0, parameters={"spread": 5})
    split = _split(kind="pure-dp", epsilon=0.5)
    assert uncharged_records([at, at], split) == 0
    assert uncharged_records([at, at.at("other"), gumbel], split) == 2
    assert uncharged_records([], split) == 0


def test_a_zcdp_step_adds_rho_and_converts_pure_records():
    g = NoiseDraw("s", "discrete-gaussian", scale=2.0, std=2.0, sensitivity=2.0)  # ρ = 0.5
    lap = NoiseDraw("s", "discrete-laplace", scale=1.0, std=None, sensitivity=1.0)  # ε = 1: ρ = 0.5
    assert overspent_steps([g, lap], _split(kind="zcdp", rho=1.0, delta=0.0)) == []
    assert overspent_steps([g, lap], _split(kind="zcdp", rho=0.99, delta=0.0)) == ["s"]


def test_a_gaussian_on_an_approximate_step_is_checked_by_its_exact_delta():
    sigma = 2.07  # δ(2) ≈ 4.95e-6 at Δ = 1
    g = NoiseDraw("s", "gaussian", scale=sigma, std=None, sensitivity=1.0, draws=None, parameters={"norm": 2})
    assert overspent_steps([g], _split(kind="approx-dp", epsilon=2.0, delta=5e-6)) == []
    assert overspent_steps([g], _split(kind="approx-dp", epsilon=2.0, delta=4e-6)) == ["s"]
    assert overspent_steps([g], _split(kind="pure-dp", epsilon=100.0)) == ["s"]  # no pure guarantee at all


def test_a_step_holding_an_uncosted_kind_is_left_to_its_module():
    gumbel = NoiseDraw("s", "gumbel", scale=0.001, std=None, sensitivity=1.0, parameters={"spread": 5})
    lap = NoiseDraw("s", "laplace", scale=0.001, std=None, sensitivity=1.0)
    assert overspent_steps([gumbel, lap], _split(kind="pure-dp", epsilon=1.0)) == []
    assert overspent_steps([lap], _split(kind="pure-dp", epsilon=1.0)) == ["s"]


def test_a_bounded_range_selection_costs_an_eighth_of_its_epsilon_squared_under_zcdp():
    em = NoiseDraw("s", "gem", scale=2.0, std=None, sensitivity=1.0, parameters={"bounded_range": True})  # ε = 1
    pnf = NoiseDraw("s", "gem", scale=2.0, std=None, sensitivity=1.0)
    assert overspent_steps([em], _split(kind="zcdp", rho=0.125, delta=0.0)) == []
    assert overspent_steps([pnf], _split(kind="zcdp", rho=0.125, delta=0.0)) == ["s"]  # ε²/2 = 0.5
    assert overspent_steps([pnf], _split(kind="zcdp", rho=0.5, delta=0.0)) == []


def test_parallel_records_of_a_step_count_once_at_their_largest():
    """Per-group counts split by their bound: the records cover disjoint
    groups of one step, so together they count once, at their largest."""
    by_bound = [NoiseDraw("s", "discrete-laplace", scale=2.0 * b, std=None, sensitivity=2.0 * b, draws=3,
                          parameters={"bound": b, "parallel": True}) for b in (1, 4, 16)]  # m = 2: ε = 1 each
    assert overspent_steps(by_bound, _split(kind="pure-dp", epsilon=1.0)) == []
    plain = [dataclasses.replace(r, parameters={"bound": r.parameters["bound"]}) for r in by_bound]
    assert overspent_steps(plain, _split(kind="pure-dp", epsilon=1.0)) == ["s"]
    louder = dataclasses.replace(by_bound[0], scale=1.0)  # ε = 2 for that part
    assert overspent_steps([louder, *by_bound[1:]], _split(kind="pure-dp", epsilon=1.0)) == ["s"]


def test_rounds_compose_round_by_round_under_zcdp():
    peel = NoiseDraw("s", "exponential", scale=1.5, std=1.5, sensitivity=1.0, draws=None,
                     parameters={"spread": 9, "rounds": 3})  # ε' = 2/3 per round, ε = 2 in all
    rho = 3 * (2 / 3) ** 2 / 2  # not (3ε')²/2 = 2
    assert overspent_steps([peel], _split(kind="zcdp", rho=rho * 1.0001, delta=0.0)) == []
    assert overspent_steps([peel], _split(kind="zcdp", rho=rho * 0.99, delta=0.0)) == ["s"]


def test_grouped_continual_records_whose_paths_differ_by_group_pass_their_step():
    """Each group's counter took its own path (a recompute baseline from its
    own step), so its records differ; merged, they are parts over disjoint
    groups of one step, charged factor·ρ_g (a false failure withheld a
    correct grouped run at large T and ρ, depending on the data)."""
    def group(start):
        tree = NoiseDraw("rest", "binary-tree", scale=1.0, std=1.0, sensitivity=math.sqrt(2.0), draws=7,
                         parameters={"levels": 3, "flippancy_bound": 1, "norm": 2})  # ρ = 1
        base = NoiseDraw("rest", "discrete-gaussian", scale=1.0, std=1.0, sensitivity=math.sqrt(2.0), draws=2,
                         target=f"from step {start}", parameters={"norm": 2})  # ρ = 1
        return [tree, base]

    records = merged_records([group(s) for s in (5, 9, 13, 17)], factor=2)
    label = records[0].step
    assert all(r.parameters.get("parallel") for r in records) and len(records) == 5
    assert overspent_steps(records, [{"step": label, "kind": "zcdp", "rho": 4.0, "delta": 0.0}]) == []
    one = merged_records([group(5)], factor=1)
    assert not any("parallel" in r.parameters for r in one)  # one group: the ungrouped records, unchanged
