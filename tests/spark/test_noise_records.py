"""Noise as data (issue 23) on the five releases: for every release and
method, ``Release.noise`` holds one record per privacy draw the mechanism
made, each charged to a step of the budget split; the JSON report writes them
(and validates), a release replayed from its record keeps them, an older
record without them still loads, and the error statements are made from them.
The releases are the seeded ones of ``test_seeded_values`` (run once); the
kinds each case's records must have, and any further check of them
(``check_noise_records``), are in the release's own test module
(tests/spark/seeded.py collects them through ``RELEASES``)."""

from __future__ import annotations

import dataclasses
import json

import jsonschema
import pytest

import dp_spark
from dp_spark.accounting import ZCDP, PureDP
from dp_spark.errors import AccountingError
from dp_spark.noise.kinds import KINDS
from dp_spark.noise.records import overspent_steps
from dp_spark.releases import template
from dp_spark.report import Release
from tests.spark.seeded import seeded_cases, seeded_release

#: budget steps that draw nothing themselves (set-union's threshold is a
#: constant; pcr's unused rest; adaptive's counters and auto parts the path never reached)
_NO_DRAW = ("threshold", "held by the privacy filter", "binary tree mechanism, w =", "factorized counter, w =",
            "binary trees (Algorithm 1)")


def test_every_case_has_expected_records():
    """Each case states its records' kinds, or leaves them (None) to its module's check_noise_records."""
    for name, case in seeded_cases().items():
        assert isinstance(case.kinds, list) or (case.kinds is None and case.check_noise_records is not None), \
            (name, case.module.__name__)


@pytest.mark.parametrize("case", sorted(seeded_cases()))
def test_records_are_complete_and_charged_to_the_split(spark, case):
    release = seeded_release(spark, case)
    kinds = [r.kind for r in release.noise]
    labels = [part["step"] for part in release.budget_split]
    assert release.noise, case
    assert all(r.step in labels for r in release.noise), (case, [r.step for r in release.noise], labels)
    drawn = {r.step for r in release.noise}
    assert all(label in drawn or label.startswith(_NO_DRAW) for label in labels), (case, labels)
    expected = seeded_cases()[case].kinds
    if expected is not None:
        assert kinds == expected, case
    check = seeded_cases()[case].check_noise_records
    if check is not None:
        check(case, release)


@pytest.mark.parametrize("case", sorted(seeded_cases()))
def test_the_report_writes_the_records_and_a_replay_keeps_them(spark, case, report_schema):
    release = seeded_release(spark, case)
    document = json.loads(release.to_json())
    jsonschema.validate(document, report_schema)
    assert document["noise"] == [r.to_dict() for r in release.noise]
    replayed = Release.from_record(document)
    assert replayed.noise == release.noise and replayed.to_dict()["noise"] == document["noise"]
    older = {k: v for k, v in document.items() if k != "noise"}  # a report recorded before noise records
    jsonschema.validate(older, report_schema)
    assert Release.from_record(older).noise == ()
    assert Release.from_record(older).to_html()  # renders, without the intervals it has no records for


def test_error_statements_are_made_from_the_records(spark):
    counted = seeded_release(spark, "distinct_count/greedy-auto-shards")
    assert counted.noise[-1].describe() in counted.errors["estimate"]
    top = seeded_release(spark, "top_k/cdp-peel")
    assert top.noise[-1].describe() in top.errors["items"]
    assert f"{top.noise[-1].half_width(1.0 - 0.95):,.1f}" in top.errors["items"]
    bounded = seeded_release(spark, "count_release/bounded")
    assert bounded.noise[1].describe() in bounded.errors["items"]
    assert bounded.noise[0].describe() in bounded.errors["selected"]
    union = seeded_release(spark, "set_union/policy-gaussian")
    assert union.noise[0].describe() in union.errors["items"]


@pytest.mark.parametrize("case", sorted(seeded_cases()))
def test_the_records_of_each_step_cost_what_the_step_charged(spark, case):
    """Σ cost(records of a step) <= the step's cost (issue 37 §3, checked by
    every release before it is recorded); and where every record of a step
    has a closed-form cost, they add up to the step's cost (to rounding): a
    record stating less sensitivity or more noise than was drawn would pass
    the bound and fail here. pcr's budget split is what it spent, so the same holds."""
    release = seeded_release(spark, case)
    assert overspent_steps(release.noise, release.budget_split) == [], case
    for part in release.budget_split:
        records = [r for r in release.noise if r.step == part["step"]]
        costs = [r.cost() for r in records]
        if not records or any(c is None for c in costs) or part["kind"] == "approx-dp" and part["delta"] > 0:
            continue
        unit = "rho" if part["kind"] == "zcdp" else "epsilon"
        spent = sum(c.rho if isinstance(c, ZCDP) else (c.epsilon ** 2 / 2 if unit == "rho" else c.epsilon)
                    for c in costs)
        assert spent == pytest.approx(part[unit], rel=1e-6), (case, part["step"], spent)


def test_a_release_whose_noise_would_cost_more_than_its_step_is_withheld(spark, monkeypatch):
    """The check runs in the release flow: a record costing more than its
    step (here: discrete Laplace said to cost 100 ε) stops the release before
    it is recorded or returned, with a message naming the step by its
    position only (a label may hold released values)."""
    kind = KINDS["discrete-laplace"]
    monkeypatch.setitem(KINDS, "discrete-laplace", dataclasses.replace(kind, cost=lambda *a: PureDP(100.0)))
    df = spark.createDataFrame([(p, f"i{p % 7}") for p in range(50)], "person_id long, item string")
    with pytest.raises(AccountingError, match="budget step") as raised:
        dp_spark.distinct_count(df, epsilon=1.0, max_bound=4, shards=1, seed=3)
    assert "step(s) 2 of 2 " in str(raised.value) and "withheld" in str(raised.value)
    assert "discrete Laplace" not in str(raised.value)  # the step's label is not quoted


def test_a_release_with_a_draw_charged_to_no_step_is_withheld(spark, monkeypatch):
    """A record whose step is not in the budget split escapes the per-step
    check, so the release flow counts such records apart and withholds the
    release; the message gives their number and no label."""
    real = template.check_noise_charged

    def relabelled(release):  # the release's records, the last moved to a step the split lacks
        noise = (*release.noise[:-1], release.noise[-1].at("a step the plan never charged"))
        return real(dataclasses.replace(release, noise=noise))

    monkeypatch.setattr(template, "check_noise_charged", relabelled)
    df = spark.createDataFrame([(p, f"i{p % 7}") for p in range(50)], "person_id long, item string")
    with pytest.raises(AccountingError, match="name no step") as raised:
        dp_spark.distinct_count(df, epsilon=1.0, max_bound=4, shards=1, seed=3)
    assert "1 of distinct-count's noise records" in str(raised.value) and "withheld" in str(raised.value)
    assert "never charged" not in str(raised.value)
