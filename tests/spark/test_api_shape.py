"""One API shape: the same script, changed only in the release's name and its
own parameters, calls each of the five releases and reads ``.privacy``,
``.budget_split``, ``.statement`` and ``to_dict()``; every report validates
against the shipped JSON Schema."""

from __future__ import annotations

import dataclasses
import inspect
import json

import pytest

import dp_spark
from dp_spark.releases import RELEASES

PERSONS = [(p, f"item{(p * 7 + j) % 23}") for p in range(60) for j in range(1 + p % 4)]
EVENTS = [(t, f"i{t % 9}", 1 if (t // 9) % 2 == 0 else -1) for t in range(1, 40)]

#: release (Python name) -> (its own parameters, the input it reads): each
#: release's registry example (``ReleaseSpec.example``), so none is missing.
CASES = {spec.python_name: (dict(spec.example.parameters), spec.example.input) for spec in RELEASES.values()}


#: Every release's Python name (the tests run over these: a release without a case fails).
NAMES = [spec.python_name for spec in RELEASES.values()]


def _input(spark, kind):
    if kind == "persons":
        return spark.createDataFrame(PERSONS, "person_id long, item string")
    return spark.createDataFrame(EVENTS, "time long, item string, op int")


@pytest.mark.parametrize("name", NAMES)
def test_the_same_script_runs_every_release(spark, name, report_schema):
    import jsonschema

    parameters, kind = CASES[name]
    release_function = getattr(dp_spark, name)
    budget = dp_spark.PrivacyFilter(dp_spark.ZCDP(10.0, 1e-3) if "rho" in parameters
                                    else dp_spark.ApproxDP(10.0, 1e-3))
    # --- the script: only the name above and `parameters` change ---------------
    release = release_function(_input(spark, kind), **parameters, seed=7, budget=budget)
    privacy = release.privacy
    split = release.budget_split
    statement = release.statement
    document = release.to_dict()
    # -----------------------------------------------------------------------------
    assert privacy["kind"] in ("pure-dp", "approx-dp", "zcdp") and privacy["privacy_unit"]
    assert split and all("step" in part for part in split)
    assert isinstance(statement, str) and statement
    jsonschema.validate(json.loads(json.dumps(document)), report_schema)
    assert document["release"] == name.replace("_", "-")
    assert document["parameters"]["method"] == parameters["method"]
    assert document["seeded"] is True and document["publishable"] is False
    assert budget.spent.to_dict() != dp_spark.PrivacyFilter(budget.budget).spent.to_dict()  # it was charged
    assert sorted(release.artifacts) == sorted(RELEASES[name.replace("_", "-")].artifacts)
    with pytest.raises(dataclasses.FrozenInstanceError):
        release.statement = "changed"


@pytest.mark.parametrize("name", NAMES)
def test_every_release_has_the_one_signature_shape(name):
    """``df`` the only positional parameter; privacy parameters required and
    keyword-only; ``method``, ``seed=None`` and ``budget=None`` everywhere."""
    parameters = inspect.signature(getattr(dp_spark, name)).parameters
    positional = [p for p in parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    assert [p.name for p in positional] == ["df"]
    privacy = [n for n in ("epsilon", "rho") if n in parameters]
    assert privacy and all(parameters[n].default is inspect.Parameter.empty for n in privacy)
    assert parameters["seed"].default is None and parameters["budget"].default is None
    assert "method" in parameters and "mechanism" not in parameters and "policy" not in parameters


@pytest.mark.parametrize("name", list(RELEASES))
def test_the_public_function_is_the_one_the_registry_calls(name):
    """``dp_spark.<release>`` (the lazy export) is the function the CLI and
    jobs call through the release's spec, and its plan is the plan's."""
    spec = RELEASES[name]
    assert getattr(dp_spark, spec.python_name) is spec.function
    assert spec.function.__module__ == spec.module
    assert set(spec.release_parameters()) >= {"method", "seed", "budget"}
    assert set(spec.plan_parameters()) <= set(spec.release_parameters()) | {"domain_size", "stream"}
    # the CLI's call, spec.run(plan, df, ...): the module's run, on a plan built once
    import importlib

    run = inspect.signature(importlib.import_module(spec.module).run).parameters
    assert list(run)[:2] == ["plan", "df"] and {"budget", "ledger", "before_spend"} <= set(run)


def _unreadable(spark, tmp_path, kind):
    """The release's demo input, its files deleted: reading any row fails."""
    import shutil

    path = tmp_path / f"{kind}.parquet"
    _input(spark, kind).write.parquet(str(path))
    df = spark.read.parquet(str(path))
    shutil.rmtree(path)
    return df


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("via", ["ledger", "budget"])
def test_a_seeded_run_never_charges_a_ledger(spark, tmp_path, name, via):
    """seed= with a persisted budget (ledger=, or a ledger budget as budget=)
    is refused in one line, before any data is read or anything charged: a
    seeded run is not private (the CLI's --seed with --ledger, in the API)."""
    from dp_spark.errors import ParameterError
    from dp_spark.ledger import open_ledger

    parameters, kind = CASES[name]
    df = _unreadable(spark, tmp_path, kind)
    with open_ledger(tmp_path / "l.db", create=True) as ledger:
        ledger.create_budget("b", dp_spark.ZCDP(10.0, 1e-3) if "rho" in parameters else dp_spark.ApproxDP(10.0, 1e-3))
        with pytest.raises(ParameterError) as refused:
            getattr(dp_spark, name)(df, **parameters, seed=3, **{via: ledger.budget("b")})
        assert str(refused.value).startswith("seed= makes the output reproducible and so not private")
        assert "\n" not in str(refused.value)
        assert ledger.history() == [] and ledger.state("b").charges == 0


def test_a_seeded_stream_never_charges_a_ledger(spark, tmp_path):
    """continual_distinct_stream with seed= and a ledger budget: refused like
    the batch releases, before the source is read, a checkpoint created or
    anything charged."""
    import json as _json

    from dp_spark.errors import ParameterError
    from dp_spark.ledger import open_ledger
    from dp_spark.streaming import continual_distinct_stream

    source = tmp_path / "in"
    source.mkdir()
    (source / "events-0001.json").write_text(_json.dumps({"time": 1.0, "item": "a", "op": 1}) + "\n")
    with open_ledger(tmp_path / "l.db", create=True) as ledger:
        ledger.create_budget("b", dp_spark.ZCDP(10.0))
        with pytest.raises(ParameterError) as refused:
            continual_distinct_stream(spark, str(source), checkpoint=str(tmp_path / "ckpt"), sink=str(tmp_path / "out"),
                                      rho=0.5, horizon=4, seed=3, budget=ledger.budget("b"), state_partitions=1)
        assert str(refused.value).startswith("seed= makes the output reproducible and so not private")
        assert ledger.history() == [] and ledger.state("b").charges == 0
    assert not (tmp_path / "ckpt").exists() and not (tmp_path / "out").exists()
