"""The Release every release returns, without Spark: frozen, its nested
versioned report (``to_dict``) checked against the shipped JSON Schema, the
attribute lookup (artifacts, then values), and the refusals of ``write``
that need no data. Writing an artifact is tests/spark/test_release_write.py.

The releases here are built from the distinct-count plan with made-up
released values (no data)."""

from __future__ import annotations

import dataclasses
import json

import jsonschema
import pytest

from dp_spark.errors import InputError
from dp_spark.plan import FORMAT_VERSION
from dp_spark.plans.distinct_count import plan as distinct_count_plan
from dp_spark.report import SEEDED_WARNING, Release

VALUES = {"estimate": 412, "lower_bound": 380, "bound": 6, "method": "greedy", "confidence": 0.95,
          "noise_scale": 12.0, "noise_std": 16.9}


def _release(seeded=True, values=VALUES, artifacts=None, **plan_kwargs) -> Release:
    plan = distinct_count_plan(**{"epsilon": 1.0, **plan_kwargs})
    return Release.from_plan(
        plan, values=dict(values), errors={"estimate": "noise", "lower_bound": "holds w.p. 0.95"},
        statement="a statement", seeded=seeded, budget_split=plan.budget_split(),
        parameters={"shards": 3, "shards_chosen": "automatically (noisy person count)"}, artifacts=artifacts,
    )


def test_the_report_follows_the_schema(report_schema):
    for seeded in (True, False):
        doc = json.loads(_release(seeded).to_json())
        jsonschema.validate(doc, report_schema)
        assert doc["version"] == FORMAT_VERSION and doc["library"]["name"] == "dp_spark"
        assert doc["seeded"] is seeded and doc["publishable"] is (not seeded)
        assert (doc.get("warning") == SEEDED_WARNING) if seeded else ("warning" not in doc)


def test_the_report_nests_privacy_parameters_and_result():
    release = _release(method="matching", max_bound=6)
    doc = release.to_dict()
    assert doc["privacy"] == release.privacy == {
        "kind": "pure-dp", "epsilon": 1.0, "description": "ε = 1 (pure differential privacy)", "delta": 0.0,
        "privacy_unit": "person", "neighbouring": "add or remove one person (all rows sharing a person_id value)"}
    assert doc["result"] == VALUES == release.result
    assert doc["parameters"]["method"] == "matching" and doc["parameters"]["shards"] == 3  # released choice wins
    assert doc["parameters"]["edge_limit"] == 20_000_000
    assert doc["budget_split"] == release.budget_split and len(doc["budget_split"]) == 3
    assert {"estimate", "epsilon", "guarantee", "bound"}.isdisjoint(doc)  # nothing left at the top level


@pytest.mark.parametrize("broken", [
    lambda d: d["result"].pop("lower_bound"),
    lambda d: d["result"].update(estimate=-1),
    lambda d: d["result"].update(estimate=3.5),
    lambda d: d["privacy"].update(kind="zcdp"),
    lambda d: d["privacy"].pop("epsilon"),
    lambda d: d.pop("warning"),
    lambda d: d.update(publishable=True),
    lambda d: d.update(version="1.0"),
    lambda d: d.update(epsilon=1.0),
    lambda d: d.update(budget_split=[]),
])
def test_the_schema_refuses_a_broken_distinct_count_report(report_schema, broken):
    doc = json.loads(_release(seeded=True).to_json())
    broken(doc)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, report_schema)


def test_a_release_is_frozen():
    release = _release()
    with pytest.raises(dataclasses.FrozenInstanceError):
        release.statement = "changed"
    with pytest.raises(dataclasses.FrozenInstanceError):
        release.seeded = False


def test_attributes_are_artifacts_first_then_values():
    table = object()  # stands in for a Spark DataFrame
    release = _release(artifacts={"items": table, "estimate": "the artifact"})
    assert release.items is table and release.estimate == "the artifact"
    assert release.lower_bound == 380 and release.result["estimate"] == 412
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        release.nothing
    assert "items" not in release.to_dict()["result"]  # an artifact is not in the report


def test_write_refuses_an_unknown_artifact_or_an_existing_path(tmp_path):
    release = _release()
    with pytest.raises(InputError, match="has no artifact 'items'; it has: none"):
        release.write("items", str(tmp_path / "out"))
    taken = tmp_path / "taken"
    taken.mkdir()
    with pytest.raises(InputError, match="already exists; pass overwrite=True"):
        _release(artifacts={"items": object()}).write("items", str(taken))


def test_the_summary_shows_values_errors_and_the_seeded_warning():
    text = _release().summary()
    assert text.splitlines()[0] == "distinct-count: ε = 1 (pure differential privacy), unit: one person"
    assert "estimate" in text and "412" in text and "holds w.p. 0.95" in text
    assert text.endswith("WARNING: " + SEEDED_WARNING)
    assert "WARNING" not in _release(seeded=False).summary()
