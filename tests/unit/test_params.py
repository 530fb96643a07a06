"""One declaration per parameter (issue 23): each release's typed ``Params``
(``dp_spark.plans.<release>.Params``) agrees with the release function's
keyword signature, the plan's signature, the CLI options and the YAML keys
the CLI accepts. A parameter added to one and not the others fails here."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest
import yaml

from dp_spark.commands import COMMANDS
from dp_spark.commands.base import ARTIFACT_OPTION, ARTIFACT_OUTPUTS, INPUT_OPTIONS, READ_OPTIONS, RUN_OPTIONS, options_of
from dp_spark.commands.params import budget_options, default_command
from dp_spark.config import load_config
from dp_spark.errors import ParameterError
from dp_spark.plan import Plan, Split, Step, field_default, params_fields
from dp_spark.releases import RELEASES as REGISTRY

RELEASES = [spec.python_name for spec in REGISTRY.values()]

#: Options a command has that are no release parameter: the shared input
#: and run options, the outputs of its artifacts, its budget; any other is
#: one the command declares itself (``Command.cli_only``).
SHARED = {o.name for o in INPUT_OPTIONS + READ_OPTIONS + RUN_OPTIONS}
BUDGETS = {"budget_epsilon", "budget_delta", "budget_rho"}


def _modules(name):
    spec = REGISTRY[name.replace("_", "-")]
    return spec.params, COMMANDS[spec.name]


def _declared_by(name) -> str | None:
    """The plan builder ``dp_spark.releases.<name>.<name>`` is declared by
    (``@release_api(<builder>)``), as the import of the builder's module
    names it, read from the source: the releases import pyspark, which
    tests/unit never does."""
    tree = ast.parse((_root() / "dp_spark" / "releases" / f"{name}.py").read_text(encoding="utf-8"))
    function = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    builders = {a.asname or a.name: f"{n.module}.{a.name}" for n in tree.body if isinstance(n, ast.ImportFrom)
                for a in n.names}
    for d in function.decorator_list:
        if isinstance(d, ast.Call) and getattr(d.func, "id", None) == "release_api" and len(d.args) == 1:
            return builders.get(getattr(d.args[0], "id", None))
    return None


def _keywords(function, skip=()) -> dict:
    return {n: p.default for n, p in inspect.signature(function).parameters.items() if n not in skip}


@pytest.mark.parametrize("name", RELEASES)
def test_params_is_a_frozen_keyword_dataclass(name):
    params, _ = _modules(name)
    assert dataclasses.is_dataclass(params)
    assert params.__dataclass_params__.frozen
    for f in dataclasses.fields(params):
        assert f.kw_only and f.metadata.get("help"), f"{name}.{f.name} needs help text"


@pytest.mark.parametrize("name", RELEASES)
def test_the_release_function_is_declared_by_its_plan_and_so_by_its_params(name):
    """Its signature is the Params' API fields (dp_spark.plan.release_api;
    tests/unit/test_release_function.py), so no keyword list is written twice."""
    assert _declared_by(name) == f"dp_spark.plans.{name}.plan"


@pytest.mark.parametrize("name", RELEASES)
def test_the_plan_signature_is_the_params_fields(name):
    params, _ = _modules(name)
    plan = REGISTRY[name.replace("_", "-")].plan_function
    assert _keywords(plan) == {f.name: field_default(f) for f in dataclasses.fields(params)}


@pytest.mark.parametrize("name", RELEASES)
def test_the_cli_options_are_the_cli_fields_and_the_declared_cli_only_ones(name):
    params, command = _modules(name)
    options = {o.name: o for o in options_of(command)}
    fields = params_fields(params, cli=True)
    for f in fields:
        assert f.name in options, f"--{f.name.replace('_', '-')} is missing from dp-spark {command.name}"
        opt = options[f.name]
        assert opt.default == f.metadata["cli_default"], f.name
        assert opt.help == f.metadata["help"], f.name
        assert tuple(opt.choices or ()) == tuple(f.metadata.get("choices") or ()), f.name
        assert opt.flag == bool(f.metadata.get("flag")), f.name
    extra = set(options) - {f.name for f in fields} - SHARED
    outputs = extra & set(ARTIFACT_OUTPUTS)
    assert outputs == {ARTIFACT_OPTION[artifact] for artifact in command.writers}, "an output option per writer"
    assert extra & BUDGETS, f"dp-spark {command.name} has no --budget-* option"
    assert extra - BUDGETS - outputs == set(command.cli_only), \
        "a CLI option that is a release parameter belongs in Params (else in its Command's cli_only)"
    for f in params_fields(params, cli=False):
        assert f.name not in options, f"{f.name} is marked Python-only but is a CLI option"


@pytest.mark.parametrize("name", RELEASES)
def test_the_yaml_config_takes_every_cli_field_and_nothing_else(name, tmp_path):
    params, command = _modules(name)
    allowed = {o.name for o in options_of(command)}
    fields = params_fields(params, cli=True)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({f.name.replace("_", "-"): 1 for f in fields}), encoding="utf-8")
    assert set(load_config(str(config), allowed)) == {f.name for f in fields}
    for f in params_fields(params, cli=False):
        config.write_text(f"{f.name}: 1\n", encoding="utf-8")
        with pytest.raises(ParameterError, match="unknown option"):
            load_config(str(config), allowed)
    conf = _root() / "conf" / f"{name}.yaml"  # an example config is optional
    shipped = (yaml.safe_load(conf.read_text(encoding="utf-8")) or {}) if conf.is_file() else {}
    assert {str(k).replace("-", "_") for k in shipped} <= allowed


def _root() -> Path:
    return Path(__file__).resolve().parents[2]


# -- the default command of a release without hooks ----------------------------------------


def test_a_release_without_hooks_gets_a_command_from_its_spec_and_params():
    """The input options, its Params' CLI fields, an output option per
    artifact (and --groups-output with group_by), the budget of its
    guarantee, the run options; the help line from its spec. Built here for
    top-k, whose own module adds hooks to the same flags."""
    spec = REGISTRY["top-k"]
    command = default_command(spec)
    fields = [f.name for f in params_fields(spec.params, cli=True) if f.name not in SHARED]
    assert (command.name, command.help) == (spec.name, spec.help)
    assert [o.name for o in command.options] == ([o.name for o in INPUT_OPTIONS] + fields
                                                 + ["items_output", "groups_output", "budget_epsilon", "budget_delta"]
                                                 + [o.name for o in RUN_OPTIONS])
    assert {o.name for o in command.options} == {o.name for o in COMMANDS["top-k"].options}
    assert set(command.writers) == {"items", "groups"} and command.run is None and command.cli_only == ()
    with pytest.raises(ParameterError, match="give --group-by"):
        command.plan_options({"groups_output": "g.parquet"})
    with pytest.raises(ParameterError, match="drop --items-output"):
        command.plan_options({"group_by": "g", "items_output": "i.parquet"})


def test_the_budget_options_follow_the_guarantee():
    assert [(o.name, o.help) for o in budget_options(REGISTRY["count-release"].params)] == [
        ("budget_rho", "total ρ budget; the run is refused before reading data if the release would exceed it"),
        ("budget_delta", "total δ budget (with --budget-rho; default 0)")]
    assert [o.name for o in budget_options(REGISTRY["distinct-count"].params)] == ["budget_epsilon"]
    top_k = {o.name: o.help for o in COMMANDS["top-k"].options}
    assert top_k["budget_epsilon"] == ("total ε budget; the run is refused before reading data if the release "
                                       "would exceed it")
    assert top_k["budget_delta"] == "total δ budget (with --budget-epsilon; default 0)"


def test_a_default_command_needs_a_help_line_and_writers_it_knows():
    with pytest.raises(TypeError, match="help="):
        default_command(dataclasses.replace(REGISTRY["top-k"], help=None))
    with pytest.raises(TypeError, match="no default writer for its 'series'"):
        default_command(REGISTRY["continual-distinct"])


# -- Params checks, plan(params), the typed split ------------------------------------------


def test_params_checks_with_the_plans_messages_and_plan_takes_either_form():
    from dp_spark.plans import distinct_count as dc

    with pytest.raises(ParameterError) as by_params:
        dc.Params(epsilon=1.0, method="nope")
    with pytest.raises(ParameterError) as by_plan:
        dc.plan(epsilon=1.0, method="nope")
    assert str(by_params.value) == str(by_plan.value)
    params = dc.Params(epsilon=1.0, max_bound=16)
    assert dc.plan(params) == dc.plan(epsilon=1.0, max_bound=16)
    assert dc.plan(params).params is params and dc.plan(epsilon=1.0).params.max_bound == dc.DEFAULT_MAX_BOUND
    with pytest.raises(dataclasses.FrozenInstanceError):
        params.epsilon = 2.0
    with pytest.raises(TypeError):
        dc.plan(params, epsilon=2.0)


def test_the_budget_split_is_read_by_step_name():
    from dp_spark.plans import distinct_count as dc, top_k

    auto = dc.plan(epsilon=1.0)
    assert [s.name for s in auto.split] == ["shards", "select", "count"]
    assert auto.split.epsilon("matching") == 0.0 and auto.split.epsilon("shards") == pytest.approx(0.01)
    assert sum(s.cost.epsilon for s in auto.split) <= 1.0
    assert auto.steps == tuple((s.label, s.cost) for s in auto.split)  # the report's budget split as before
    fixed = dc.plan(epsilon=1.0, shards=4)
    assert "shards" not in fixed.split and fixed.split.epsilon("select") == 0.5
    with pytest.raises(KeyError):
        fixed.split.cost("shards")
    pure = top_k.plan(epsilon=1.0, k=3, method="joint", domain=["a", "b", "c"])
    assert pure.split.epsilon("choice") == 0.0 and pure.split.epsilon("selection") == 1.0


def test_an_unnamed_step_still_makes_a_plan():
    from dp_spark.accounting import PureDP

    plan = Plan(release="r", guarantee=PureDP(1.0), steps=[("all", PureDP(1.0))], parameters={},
                privacy_unit="person", neighbouring="n", releases="r")
    assert plan.split == Split((Step(None, "all", PureDP(1.0)),)) and plan.params is None
