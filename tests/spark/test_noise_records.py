"""Noise as data (issue 23) on the five releases: for every release and
method, ``Release.noise`` holds one record per privacy draw the mechanism
made, each charged to a step of the budget split; the JSON report writes them
(and validates), a release replayed from its record keeps them, an older
record without them still loads, and the error statements are made from them.
The releases are the seeded ones of ``test_seeded_values`` (run once)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from dp_spark.report import Release
from tests.spark.test_seeded_values import CASES, seeded_release

#: case -> the kinds of its records, in the order drawn (None: checked by count below)
EXPECTED = {
    "distinct_count/greedy-auto-shards": ["discrete-laplace", "gem", "discrete-laplace"],
    "distinct_count/greedy-2-shards": ["gem", "discrete-laplace"],
    "distinct_count/matching": ["discrete-laplace", "gem", "discrete-laplace"],
    "distinct_count/sampling": ["gem", "discrete-laplace"],
    "top_k/auto-no-domain": ["gumbel"],
    "top_k/auto-domain": ["exponential-mechanism"],  # k <= 10ε: chosen from public parameters, nothing drawn
    "top_k/auto-domain-pure": ["exponential-mechanism"],
    "top_k/auto-domain-choice": None,  # a Laplace choice, then the chosen mechanism's record
    "top_k/joint": ["exponential-mechanism"],
    "top_k/pnf-joint": ["exponential-mechanism"],
    "top_k/pnf-peel": ["exponential"],
    "top_k/cdp-peel": ["gumbel"],
    "top_k/unknown-domain": ["gumbel"],
    "count_release/pcr": None,  # one Gumbel record per selection, one discrete Gaussian per count
    "count_release/bounded": ["gaussian", "discrete-gaussian"],
    "count_release/bounded-threshold": ["gaussian", "discrete-gaussian"],
    "set_union/count": ["laplace"],
    "set_union/weighted-laplace": ["laplace"],
    "set_union/policy-laplace": ["laplace"],
    "set_union/weighted-gaussian": ["gaussian"],
    "set_union/policy-gaussian": ["gaussian"],
    "continual_distinct/bounded": ["binary-tree"],
    "continual_distinct/baseline": ["discrete-gaussian"],
    "continual_distinct/adaptive": None,  # the sparse vector, then one tree per level the path used
    # at T = 64 no tree beats the recompute baseline: auto spends everything on it
    # (auto with trees: tests/unit/test_noise_records.py)
    "continual_distinct/auto": ["discrete-gaussian"],
}

#: budget steps that draw nothing themselves (set-union's threshold is a
#: constant; pcr's unused rest; trees and auto parts the path never reached)
_NO_DRAW = ("threshold", "held by the privacy filter", "binary tree mechanism, w =", "binary trees (Algorithm 1)")


def test_every_case_has_expected_records():
    assert sorted(EXPECTED) == sorted(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_records_are_complete_and_charged_to_the_split(spark, case):
    release = seeded_release(spark, case)
    kinds = [r.kind for r in release.noise]
    labels = [part["step"] for part in release.budget_split]
    assert release.noise, case
    assert all(r.step in labels for r in release.noise), (case, [r.step for r in release.noise], labels)
    drawn = {r.step for r in release.noise}
    assert all(label in drawn or label.startswith(_NO_DRAW) for label in labels), (case, labels)
    expected = EXPECTED[case]
    if expected is not None:
        assert kinds == expected, case
    v = release.values
    if case == "count_release/pcr":
        assert kinds.count("gumbel") == v["selection_calls"] and kinds.count("discrete-gaussian") == v["released_count"]
        assert [r.scale for r in release.noise if r.kind == "discrete-gaussian"] == [x["sigma"] for x in v["items"]]
    if case == "top_k/auto-domain-choice":
        assert kinds[0] == "laplace" and len(kinds) == 2 and release.noise[0].step == labels[0]
    if case == "continual_distinct/adaptive":
        assert kinds[0] == "sparse-vector" and "binary-tree" in kinds
        assert all(k in ("binary-tree", "discrete-gaussian") for k in kinds[1:])
        used = {int(w) for w in release.series.toPandas()["flippancy_bound"].dropna() if int(w) > 0}
        assert {r.parameters["flippancy_bound"] for r in release.noise if r.kind == "binary-tree"} == used
    if case.startswith("distinct_count/"):
        assert release.noise[-1].scale == v["noise_scale"] and release.noise[-1].std == v["noise_std"]
        assert release.noise[-1].sensitivity == v["bound"]


@pytest.mark.parametrize("case", sorted(CASES))
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
