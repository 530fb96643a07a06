"""The frozen Plan (dp_spark.plan) through the distinct-count plan, and the
run budget from the --budget-* values (budget_filter): no data, no Spark.

The distinct-count plan (dp_spark.plans.distinct_count) is the one place
its parameters are checked and ε is split (Knop & Steinke 2023: ε/100 for
a noisy size step where one is needed, the rest halved between the GEM bound
selection and the discrete Laplace count)."""

from __future__ import annotations

import dataclasses
import json
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_spark.accounting import ZCDP, ApproxDP, PrivacyFilter, PureDP
from dp_spark.errors import BudgetExceededError, ParameterError
from dp_spark.plan import FORMAT_VERSION, Plan, budget_filter
from dp_spark.plans import distinct_count as dc
from dp_spark.plans.distinct_count import plan as distinct_count_plan

SPLITS = {  # method (and shards) -> step labels, in the order spent
    ("greedy", None): [dc.SHARD_STEP, dc.SELECT_STEP, dc.COUNT_STEP],
    ("greedy", 4): [dc.SELECT_STEP, dc.COUNT_STEP],
    ("matching", None): [dc.MATCHING_STEP, dc.SELECT_STEP, dc.COUNT_STEP],
    ("sampling", None): [dc.SELECT_STEP, dc.COUNT_STEP],
}


@pytest.mark.parametrize("method, shards", list(SPLITS))
def test_the_budget_split_of_every_method(method, shards):
    plan = distinct_count_plan(epsilon=2.0, method=method, shards=shards)
    assert [label for label, _ in plan.steps] == SPLITS[method, shards]
    epsilons = [cost.epsilon for _, cost in plan.steps]
    if len(epsilons) == 3:
        assert epsilons[0] == pytest.approx(0.02)  # ε/100 for the noisy size
    assert epsilons[-1] == epsilons[-2] == pytest.approx((2.0 - (0.02 if len(epsilons) == 3 else 0)) / 2)
    assert plan.guarantee == PureDP(2.0) and plan.equivalent is None
    assert plan.budget_split() == [{"step": label, "kind": "pure-dp", "epsilon": e}
                                   for label, e in zip(SPLITS[method, shards], epsilons)]


@settings(max_examples=300, deadline=None)
@given(st.floats(1e-6, 50.0), st.sampled_from(list(SPLITS)))  # the plan's range (checks.EPSILON_RANGE)
def test_the_steps_never_add_up_to_more_than_the_guarantee(epsilon, how):
    plan = distinct_count_plan(epsilon=epsilon, method=how[0], shards=how[1])
    total = sum(Fraction(cost.epsilon) for _, cost in plan.steps)
    assert total <= Fraction(epsilon)
    assert total >= Fraction(epsilon) * (1 - Fraction(1, 10**12))  # and nothing is left unused
    local = plan.spend()  # the run's own filter takes every step (it would raise otherwise)
    assert [label for label, _ in local.ledger] == [label for label, _ in plan.steps]


def test_parameters_by_method():
    greedy = distinct_count_plan(epsilon=1.0)
    assert dict(greedy.parameters) == {"epsilon": 1.0, "beta": 0.05, "max_bound": 65_536, "method": "greedy",
                                       "person_col": "person_id", "item_col": "item",
                                       "noise": "discrete laplace", "shards": None}
    matching = distinct_count_plan(epsilon=1.0, method="matching", max_bound=7, edge_limit=1000)
    assert matching["edge_limit"] == 1000 and matching["items_per_person"] == 7
    # no max_bound given: matching's own default (its size check counts each person's first max_bound items)
    assert distinct_count_plan(epsilon=1.0, method="matching").parameters["max_bound"] == dc.MATCHING_MAX_BOUND
    sampling = distinct_count_plan(epsilon=1.0, method="sampling", shards=3)
    assert "shards" not in sampling.parameters and "edge_limit" not in sampling.parameters
    assert greedy.privacy_unit == "person" and "person_id" in greedy.neighbouring
    assert "95% lower bound" in greedy.releases
    assert "user" in distinct_count_plan(epsilon=1.0, person_col="user").neighbouring


@pytest.mark.parametrize("kwargs, message", [
    ({"epsilon": 0}, "epsilon must be a positive finite number"),
    ({"epsilon": -1.0}, "epsilon must be a positive finite number"),
    ({"epsilon": float("inf")}, "epsilon must be a positive finite number"),
    ({"epsilon": float("nan")}, "epsilon must be a positive finite number"),
    ({"epsilon": "1"}, "epsilon must be a positive finite number"),
    ({"beta": 0.0}, "beta must be strictly between 0 and 1"),
    ({"beta": 1.0}, "beta must be strictly between 0 and 1"),
    ({"max_bound": 0}, "max_bound must be a whole number from 1 to 1,000,000"),
    ({"max_bound": 2.5}, "max_bound must be a whole number"),
    ({"max_bound": True}, "max_bound must be a whole number"),
    ({"max_bound": 1_000_001}, r"max_bound must be a whole number from 1 to 1,000,000 \(the driver"),
    ({"shards": 0}, "shards must be a whole number from 1 to 10,000"),
    ({"shards": 10**6}, r"shards must be a whole number from 1 to 10,000 \(each shard is a Spark task"),
    ({"method": "matching", "edge_limit": 10**10}, r"edge_limit must be a whole number from 1 to 200,000,000"),
    ({"method": "magic"}, "method must be one of greedy, matching, sampling"),
    ({"seed": -3}, "seed must be a whole number >= 0"),
])
def test_every_parameter_is_checked_by_the_plan(kwargs, message):
    with pytest.raises(ParameterError, match=message):
        distinct_count_plan(**{"epsilon": 1.0, **kwargs})


def test_epsilon_has_no_default():
    with pytest.raises(TypeError, match="epsilon"):
        distinct_count_plan()


def test_a_plan_is_frozen():
    plan = distinct_count_plan(epsilon=1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.guarantee = PureDP(100.0)
    with pytest.raises(TypeError):
        plan.parameters["epsilon"] = 100.0
    assert isinstance(plan.steps, tuple) and plan["epsilon"] == 1.0


# -- the budget -------------------------------------------------------------------


def test_check_refuses_an_overspend_and_spends_nothing():
    plan = distinct_count_plan(epsilon=1.0)
    plan.check(None)
    budget = PrivacyFilter(PureDP(1.5))
    plan.check(budget)
    assert budget.spent == PureDP(0.0)
    budget.spend(PureDP(1.0), "earlier")
    with pytest.raises(BudgetExceededError, match="No data was read and nothing was charged"):
        plan.check(budget)
    assert budget.spent == PureDP(1.0)


def test_spend_charges_the_guarantee_once_and_returns_the_steps():
    plan = distinct_count_plan(epsilon=1.0, method="matching")
    budget = PrivacyFilter(ApproxDP(3.0, 1e-6))  # ε-DP counts in an (ε, δ) budget
    local = plan.spend(budget)
    assert [label for label, _ in budget.ledger] == ["distinct-count"]
    assert budget.spent == ApproxDP(1.0, 0.0)
    assert local.budget == plan.guarantee and local.ledger == list(plan.steps)
    with pytest.raises(BudgetExceededError):  # nothing more than the steps fits in the run's filter
        local.spend(PureDP(1e-3), "more noise")


def test_spend_refuses_before_charging():
    plan = distinct_count_plan(epsilon=1.0)
    budget = PrivacyFilter(PureDP(0.5))
    with pytest.raises(BudgetExceededError):
        plan.spend(budget)
    assert budget.ledger == [] and budget.spent == PureDP(0.0)


def test_a_pure_plan_cannot_be_paid_from_an_incompatible_budget():
    plan = distinct_count_plan(epsilon=1.0)
    assert plan.spend(PrivacyFilter(ZCDP(1.0))).budget == PureDP(1.0)  # ε-DP is ε²/2-zCDP
    with pytest.raises(BudgetExceededError):
        plan.spend(PrivacyFilter(ZCDP(0.4)))  # 1²/2 = 0.5 > 0.4


# -- documents --------------------------------------------------------------------------


def test_to_dict_is_the_json_plan():
    plan = distinct_count_plan(epsilon=0.5, method="matching", max_bound=9)
    doc = json.loads(plan.to_json())
    assert doc == plan.to_dict()
    assert doc["release"] == "distinct-count" and doc["version"] == FORMAT_VERSION and doc["plan"] is True
    assert doc["privacy"] == {"kind": "pure-dp", "epsilon": 0.5, "description": "ε = 0.5 (pure differential privacy)",
                              "delta": 0.0, "privacy_unit": "person", "neighbouring": plan.neighbouring}
    assert doc["parameters"] == dict(plan.parameters) and doc["budget_split"] == plan.budget_split()
    assert doc["releases"] == plan.releases and doc["notes"] == []


def test_describe_names_every_step_and_set_parameter():
    plan = distinct_count_plan(epsilon=1.0, max_bound=12)
    text = plan.describe()
    assert text.splitlines()[0] == "distinct-count (dry run: no data read, nothing spent)"
    assert "spends   ε = 1 (pure differential privacy), unit: one person" in text
    for label, cost in plan.steps:
        assert f"{cost.describe():<24} {label}" in text
    assert "max_bound   12" in text and "shards" not in text  # None is not shown


def test_a_zcdp_plan_reports_its_approx_dp_equivalent():
    plan = Plan(release="continual-distinct", guarantee=ZCDP(0.5), steps=[("all", ZCDP(0.5))],
                parameters={"method": "x", "horizon": (1, 2)}, privacy_unit="item", neighbouring="n",
                releases="r", equivalent=ApproxDP(4.0, 1e-6), notes=["a note"])
    doc = plan.to_dict()
    assert doc["privacy"]["kind"] == "zcdp" and doc["privacy"]["rho"] == 0.5
    assert doc["privacy"]["approx_dp_equivalent"] == {"kind": "approx-dp", "epsilon": 4.0, "delta": 1e-6}
    assert doc["parameters"]["horizon"] == [1, 2] and doc["notes"] == ["a note"]
    assert "note: a note" in plan.describe()


# -- the run budget of --budget-epsilon / --budget-delta / --budget-rho ---------------------


@pytest.mark.parametrize("kwargs, budget", [
    ({}, None),
    ({"epsilon": 2.0}, PureDP(2.0)),
    ({"epsilon": 2.0, "delta": 0.0}, PureDP(2.0)),
    ({"epsilon": 2.0, "delta": 1e-6}, ApproxDP(2.0, 1e-6)),
    ({"rho": 0.5}, ZCDP(0.5)),
    ({"rho": 0.5, "delta": 1e-6}, ZCDP(0.5, 1e-6)),
])
def test_budget_filter_kinds(kwargs, budget):
    made = budget_filter(**kwargs)
    assert (made is None) if budget is None else (made.budget == budget and made.ledger == [])


@pytest.mark.parametrize("kwargs, message", [
    ({"delta": 1e-6}, "budget_delta needs budget_epsilon or budget_rho"),
    ({"epsilon": 1.0, "rho": 0.5}, "give budget_epsilon or budget_rho, not both"),
    ({"epsilon": 0.0}, "budget_epsilon must be a positive finite number"),
    ({"epsilon": float("nan")}, "budget_epsilon must be a positive finite number"),
    ({"rho": -1.0}, "budget_rho must be a positive finite number"),
    ({"epsilon": 1.0, "delta": 1.0}, "budget_delta must lie in"),
    ({"rho": 1.0, "delta": -1e-9}, "budget_delta must lie in"),
])
def test_budget_filter_refuses_bad_values(kwargs, message):
    with pytest.raises(ParameterError, match=message):
        budget_filter(**kwargs)


def test_a_budget_filter_pays_for_a_plan_or_refuses_it():
    plan = distinct_count_plan(epsilon=1.0)
    plan.check(budget_filter(epsilon=1.0))
    plan.check(budget_filter(epsilon=1.0, delta=1e-6))
    with pytest.raises(BudgetExceededError):
        plan.check(budget_filter(epsilon=0.999))


def test_person_sample_keeps_the_shard_counts_noise_within_6400_persons():
    """The automatic shard count reads 1 in r persons, r a power of two up to
    64 chosen from the step's ε alone, so that the scaled-up noise (scale
    r/ε_shards persons) stays within 6,400 persons (3% of a 200,000-person
    shard): 64 from ε = 1 (ε_shards = ε/100), 16 at 0.25, every person at 0.01."""
    from dp_spark.plans.distinct_count import SAMPLE_NOISE_PERSONS, person_sample

    expected = {10.0: 64, 1.0: 64, 0.5: 32, 0.25: 16, 0.1: 4, 0.02: 1, 0.01: 1}
    assert {eps: person_sample(eps / 100) for eps in expected} == expected
    for eps in np.geomspace(1e-4, 100, 60):
        r = person_sample(eps / 100)
        assert r in (1, 2, 4, 8, 16, 32, 64)
        assert r == 1 or r / (eps / 100) <= SAMPLE_NOISE_PERSONS * (1 + 1e-9)
        assert r == 64 or 2 * r / (eps / 100) > SAMPLE_NOISE_PERSONS  # the largest such power of two
