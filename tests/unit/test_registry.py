"""One registry of the releases, ``dp_spark.releases.RELEASES``: every place
that lists the releases agrees with it (the lazy exports, the ``dp-spark``
subcommands, the scripts in jobs/, the HTML report's charts, the report
schema's release names), and a release added to it without one of its files
fails here, naming what is missing. A release needs no command module, job
script, config or schema entry of its own: its subcommand is built from its
spec and ``Params``, ``jobs/release.py`` runs it by name."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

import dp_spark
from dp_spark.releases import RELEASES, Example, ReleaseSpec

REPO = Path(__file__).resolve().parents[2]


def _job_command(path: Path) -> str | None:
    """The release a jobs/ script runs: the argument of its ``run("...")`` call."""
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "run"
                and len(node.args) == 1 and isinstance(node.args[0], ast.Constant)):
            return node.args[0].value
    return None


def _schema() -> dict:
    return json.loads((REPO / "dp_spark" / "schemas" / "release.schema.json").read_text())


def _schema_named() -> set[str]:
    """The releases the schema's conditions name (``{"release": {"const": ...}}``)."""
    named = set()
    for rule in _schema()["allOf"]:
        release = rule["if"].get("properties", {}).get("release")
        if release is not None:
            named.add(release["const"])
    return named


def missing_files(spec: ReleaseSpec) -> list[str]:
    """What a release needs beside its entry in RELEASES and does not have
    (each a file of its own, found by the release's Python name)."""
    from dp_spark import html_report

    py = spec.python_name
    problems = [f"no module {module}" for module in (spec.module, f"dp_spark.plans.{py}")
                if importlib.util.find_spec(module) is None]
    if not spec.help:
        problems.append("no help line (ReleaseSpec help=...: what dp-spark --help says it releases)")
    job = REPO / "jobs" / f"{py}.py"  # optional: jobs/release.py runs every release
    if job.is_file() and _job_command(job) != spec.name:
        problems.append(f"jobs/{py}.py runs {_job_command(job)!r}, not {spec.name!r}")
    if spec.chart is not None and not callable(getattr(html_report, spec.chart, None)):
        problems.append(f"no chart function dp_spark.html_report.{spec.chart}")
    own = f"tests/spark/test_{py}.py"
    if not (REPO / own).is_file():
        problems.append(f"no test module {own}")
    elif "SEEDED_CASES" not in _top_level_names(REPO / own):
        problems.append(f"{own} has no SEEDED_CASES (its seeded cases, pinned values and noise kinds)")
    return problems


def _top_level_names(path: Path) -> set[str]:
    """The names a module assigns at its top level."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def test_every_release_has_its_files():
    assert {name: missing_files(spec) for name, spec in RELEASES.items()} == {name: [] for name in RELEASES}


def test_a_release_added_without_its_files_fails_loudly():
    """A new name in RELEASES with nothing else: every missing piece is named."""
    problems = missing_files(ReleaseSpec("new-release", privacy_unit="person", chart="_new_release_chart",
                                         example=Example("persons", epsilon=1.0, method="x")))
    assert problems == [
        "no module dp_spark.releases.new_release", "no module dp_spark.plans.new_release",
        "no help line (ReleaseSpec help=...: what dp-spark --help says it releases)",
        "no chart function dp_spark.html_report._new_release_chart", "no test module tests/spark/test_new_release.py"]


def test_a_spec_states_its_chart_and_its_example():
    """A release drawn without a chart says so (``chart=None``): no default;
    every release has its example (the tables that run each release read it)."""
    with pytest.raises(TypeError):
        ReleaseSpec("new-release", privacy_unit="person", example=Example("persons"))  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ReleaseSpec("new-release", privacy_unit="person", chart=None)  # type: ignore[call-arg]
    assert {f.name for f in dataclasses.fields(ReleaseSpec) if f.default is dataclasses.MISSING} >= {"chart", "example"}


def test_every_example_is_a_valid_call_of_its_release():
    """Each example's parameters are the release's keywords and pass its
    plan's checks (no Spark), with its privacy parameter and method; its
    input is one of the demo tables."""
    for name, spec in RELEASES.items():
        parameters = dict(spec.example.parameters)
        assert spec.example.input in ("persons", "events") and "method" in parameters
        assert ("rho" in parameters) != ("epsilon" in parameters), name
        assert "seed" not in parameters and "budget" not in parameters and "ledger" not in parameters
        plan = spec.plan(**parameters)
        assert plan.release == name and (plan.guarantee.kind == "zcdp") == spec.example.zcdp, name
    with pytest.raises(ValueError, match="'persons' or 'events'"):
        Example("people", epsilon=1.0)


def test_the_registry_is_read_only_and_named_as_the_command_line():
    with pytest.raises(TypeError):
        RELEASES["new-release"] = RELEASES["top-k"]  # type: ignore[index]
    for name, spec in RELEASES.items():
        assert spec.name == name and name == name.lower() and " " not in name and "_" not in name
        assert spec.privacy_unit in ("person", "item")


def test_the_lazy_exports_are_the_releases():
    names = [spec.python_name for spec in RELEASES.values()]
    lazy = [name for name, (module, _) in dp_spark._LAZY.items() if module.startswith("dp_spark.releases.")]
    assert lazy == names
    assert all(dp_spark._LAZY[n] == (RELEASES[n.replace("_", "-")].module, n) for n in names)
    assert set(names) <= set(dp_spark.__all__)


def test_the_subcommands_are_the_releases():
    from dp_spark.cli import build_parser
    from dp_spark.commands import COMMANDS

    assert list(COMMANDS) == list(RELEASES)
    assert all(command.name == name for name, command in COMMANDS.items())
    subcommands = next(a for a in build_parser()._actions if a.dest == "command").choices
    assert [name for name in subcommands if name not in ("ledger", "sample-data")] == list(RELEASES)


def test_each_job_script_runs_the_release_it_is_named_for():
    """A release's own script (optional: the five have one) is
    ``jobs/<python_name>.py`` running ``run("<name>")``; jobs/release.py runs
    the release named first."""
    jobs = {path.stem: _job_command(path) for path in (REPO / "jobs").glob("*.py")
            if path.name not in ("_entry.py", "release.py")}
    assert jobs and all(command in RELEASES and RELEASES[command].python_name == stem
                        for stem, command in jobs.items()), jobs
    assert _job_command(REPO / "jobs" / "release.py") is None


def _job(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "jobs" / "release.py"), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_the_generic_job_runs_any_release_by_name():
    """jobs/release.py RELEASE: the command line of ``dp-spark RELEASE`` (a
    dry run here: no Spark); no release, or another name, refused."""
    spec = RELEASES["top-k"]
    ran = _job(spec.name, "--dry-run", "--quiet", *spec.example.argv())
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert json.loads(ran.stdout)["release"] == spec.name
    missing = _job()
    assert missing.returncode == 1 and "usage:" in missing.stderr
    unknown = _job("no-such-release", "--dry-run")
    assert unknown.returncode == 1 and "is not a release" in unknown.stderr


def test_the_charts_are_the_releases():
    from dp_spark.html_report import _CHARTS

    assert list(_CHARTS) == [name for name, spec in RELEASES.items() if spec.chart is not None]
    assert all(_CHARTS[name].__name__ == RELEASES[name].chart for name in _CHARTS)


def test_the_report_schema_takes_the_releases_and_shapes_only_theirs():
    """A release's name needs no entry in the schema file: its pattern takes
    every well-formed name and refuses a malformed one, the report schema
    narrows it to exactly the registry's names, and each result shape the
    schema states is that of a release of the registry."""
    from dp_spark.report import report_schema

    schema = report_schema()
    assert schema["properties"]["release"].pop("enum") == list(RELEASES)
    assert schema == _schema()
    release = {"type": "object", "properties": {"release": schema["properties"]["release"]}}
    for name in RELEASES:
        jsonschema.validate({"release": name}, release)
    strict = {"type": "object", "properties": {"release": report_schema()["properties"]["release"]}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"release": "count-rows"}, strict)
    for bad in ("Top-K", "top_k", "top-k ", "", "-top"):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"release": bad}, release)
    assert _schema_named() and _schema_named() <= set(RELEASES)


def test_the_registry_imports_no_release_and_no_pyspark():
    code = ("from tests.unit.helpers import block_pyspark, pyspark_loaded\n"
            "block_pyspark()\n"
            "import sys, dp_spark, dp_spark.releases, dp_spark.commands, dp_spark.html_report\n"
            "from dp_spark.releases import RELEASES\n"
            "assert [s.plan_parameters() for s in RELEASES.values()]\n"
            "assert not pyspark_loaded()\n"
            "assert not [s.module for s in RELEASES.values() if s.module in sys.modules]\n"
            "print('ok')\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


def test_each_plan_names_its_release_and_privacy_unit():
    """The plan the CLI builds from a command's defaults is the release's:
    its name and privacy unit are the spec's (they reach the report and the ledger)."""
    from dp_spark.commands import COMMANDS
    from dp_spark.commands.base import options_of, plan_of

    for name, spec in RELEASES.items():
        command = COMMANDS[name]
        opts = {o.name: o.default for o in options_of(command)}
        plan = plan_of(command, command.complete(opts))
        assert (plan.release, plan.privacy_unit) == (name, spec.privacy_unit)


#: Literals today that name every release, each a table a new release must be
#: added to by hand (to be read from RELEASES; not this file's to change):
#: path -> how many. Nothing else may list them all.
_KNOWN_RELEASE_TABLES: dict[str, int] = {}


def release_tables(path: Path) -> int:
    """How many dict/list/tuple/set literals of ``path`` name every release
    (by its name, its Python name or as ``<python_name>/<case>``): a shared
    per-release table, which a new release would have to be added to."""
    by_text = {}
    for name, spec in RELEASES.items():
        by_text[name] = by_text[spec.python_name] = name
    count = 0
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        elements = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
        if not isinstance(node, (ast.Dict, ast.List, ast.Tuple, ast.Set)) or elements is None:
            continue
        named = {by_text.get(e.value.split("/")[0]) for e in elements
                 if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        count += named >= set(RELEASES)
    return count


def test_no_shared_table_of_the_releases():
    """Tests, examples, jobs and benchmarks read RELEASES (and each release's
    own test module its cases): a literal listing every release is a table
    a new release would have to be added to (issue 23: <= 12 files)."""
    found = {}
    for folder in ("dp_spark", "tests", "examples", "jobs", "benchmarks"):
        for path in sorted((REPO / folder).rglob("*.py")):
            if (n := release_tables(path)):
                found[path.relative_to(REPO).as_posix()] = n
    assert found == _KNOWN_RELEASE_TABLES


def test_the_shared_table_check_finds_a_table(tmp_path):
    table = tmp_path / "t.py"
    table.write_text("CASES = {" + ", ".join(f"'{s.python_name}/a': 1" for s in RELEASES.values()) + "}\n"
                     "NAMES = [" + ", ".join(repr(name) for name in RELEASES) + "]\n"
                     "SOME = [" + repr(next(iter(RELEASES))) + "]\n")
    assert release_tables(table) == 2
