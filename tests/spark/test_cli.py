"""``dp-spark distinct-count`` end to end: in process on the shared local
session, and once as a real subprocess through the console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from dp_spark.releases import RELEASES

from tests.unit.helpers import assert_one_line_error, run_cli as _run_cli

REPO = Path(__file__).resolve().parents[2]
KEYS = {"estimate", "lower_bound", "bound", "confidence", "method"}  # of the report's "result"


def run_cli(capsys, *argv):
    return _run_cli(capsys, "distinct-count", *argv)


def test_default_data(capsys, tmp_path, spark, report_schema):
    out_path = tmp_path / "report.json"
    code, out, err = run_cli(capsys, "--rows", "20000", "--seed", "1", "--max-bound", "20",
                             "--output", str(out_path))
    assert code == 0, err
    report = json.loads(out_path.read_text())
    jsonschema.validate(report, report_schema)
    assert KEYS <= set(report["result"]) and report["result"]["method"] == "greedy"
    assert report["privacy"]["epsilon"] == 1.0 and report["parameters"]["method"] == "greedy"
    assert "estimate" in out and "lower_bound" in out and "NOT private" in out


def test_amazon_fashion_words(capsys, tmp_path, amazon_path, spark):
    out_path = tmp_path / "amazon.json"
    code, out, err = run_cli(
        capsys, "--input", str(amazon_path), "--person-col", "reviewerID", "--item-col", "reviewText",
        "--tokenize", "words", "--max-bound", "99", "--epsilon", "2", "--seed", "3",
        "--output", str(out_path),
    )
    assert code == 0, err
    report = json.loads(out_path.read_text())
    assert report["parameters"]["item_col"] == "reviewText"
    assert 1000 <= report["result"]["lower_bound"] <= 1464  # true vocabulary: 1,464 words


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_input_formats(capsys, tmp_path, spark, fmt):
    df = spark.createDataFrame([(p, f"i{p % 7}") for p in range(50)], "user string, thing string")
    path = tmp_path / f"events.{fmt}"
    writer = df.coalesce(1).write
    (writer.option("header", "true").csv(str(path)) if fmt == "csv" else getattr(writer, fmt)(str(path)))
    code, out, err = run_cli(capsys, "--input", str(path), "--person-col", "user", "--item-col", "thing",
                             "--max-bound", "3", "--seed", "1", "--quiet")
    assert code == 0, err
    assert KEYS <= set(json.loads(out)["result"])


def test_catalog_table(capsys, spark):
    spark.createDataFrame([(1, "a"), (2, "b")], "person_id long, item string").createOrReplaceTempView("cli_events")
    code, out, err = run_cli(capsys, "--input", "table:cli_events", "--max-bound", "2", "--seed", "1", "--quiet")
    assert code == 0, err


def test_config_file_and_flag_precedence(capsys, tmp_path, spark):
    config = tmp_path / "job.yaml"
    config.write_text("rows: 5000\nepsilon: 0.5\nmax-bound: 7\nmethod: sampling\n")
    code, out, err = run_cli(capsys, "--config", str(config), "--epsilon", "0.25", "--seed", "2", "--quiet")
    assert code == 0, err
    report = json.loads(out)
    assert report["privacy"]["epsilon"] == 0.25 and report["result"]["method"] == "sampling"
    assert report["parameters"]["max_bound"] == 7


@pytest.mark.parametrize(
    "argv, fragment",
    [
        # parameter and budget refusals (before any Spark): tests/unit/test_cli_plan.py
        (["--input", "/no/such/file.parquet"], "does not exist"),
        (["--input", "table:no_db.no_table"], "TABLE_OR_VIEW_NOT_FOUND"),
        (["--input", "{tmp}/data.xyz"], "cannot tell the format"),
        (["--input", "{tmp}/events.parquet", "--person-col", "who"], "'who' is not in the input"),
        (["--config", "{tmp}/missing.yaml"], "config file"),
        (["--config", "{tmp}/bad.yaml"], "unusable value"),
    ],
)
def test_bad_input_one_line_exit_2_and_output_kept(capsys, tmp_path, spark, argv, fragment):
    (tmp_path / "data.xyz").write_text("x")
    (tmp_path / "bad.yaml").write_text("max_bound: lots\n")
    spark.createDataFrame([(1, "a")], "person_id long, item string").write.parquet(str(tmp_path / "events.parquet"))
    out_path = tmp_path / "report.json"
    out_path.write_text('{"release": "distinct-count", "version": "2.0", "earlier": true}')  # an earlier dp_spark report
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, out, err = run_cli(capsys, *argv, "--rows", "100", "--output", str(out_path), "--overwrite")
    assert code == 2
    assert_one_line_error(err, fragment)
    assert json.loads(out_path.read_text()) == {"release": "distinct-count", "version": "2.0", "earlier": True}


def test_console_script_subprocess(tmp_path):
    """The installed ``dp-spark`` command on a fresh JVM, as a user runs it."""
    exe = Path(sys.executable).parent / "dp-spark"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    bad = subprocess.run([str(exe), "distinct-count", "--epsilon", "-1"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    out_path = tmp_path / "r.json"
    good = subprocess.run(
        [str(exe), "distinct-count", "--rows", "20000", "--max-bound", "10", "--seed", "5",
         "--master", "local[2]", "--output", str(out_path)],
        capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path,
    )
    assert good.returncode == 0, good.stderr[-2000:]
    assert "at org.apache" not in good.stderr
    assert KEYS <= set(json.loads(out_path.read_text())["result"])


@pytest.mark.parametrize("name", list(RELEASES))
def test_the_cli_builds_the_plan_once_and_runs_the_release_on_it(capsys, spark, monkeypatch, name):
    """The plan the CLI checks (dry run, budget) is the plan the release
    spends: ``spec.run(plan, df, ...)``, never the keyword function, which
    would build a second one (issue 23)."""
    import functools
    import importlib

    from dp_spark.cli import main

    spec = RELEASES[name]
    plans = importlib.import_module(f"dp_spark.plans.{spec.python_name}")
    release_module = importlib.import_module(spec.module)
    built, real = [], plans.plan
    monkeypatch.setattr(plans, "plan", functools.wraps(real)(lambda *a, **k: built.append(1) or real(*a, **k)))
    monkeypatch.setattr(release_module, spec.python_name, lambda *a, **k: pytest.fail("the keyword function ran"))
    rebuilt = [] if name == "top-k" else None  # top-k rebuilds only with its domain's size, and has none here
    monkeypatch.setattr(release_module, "make_plan",
                        lambda *a, **k: rebuilt.append(1) if rebuilt is not None else pytest.fail("plan rebuilt"))
    code = main([name, *spec.example.argv(), "--rows", "3000", "--seed", "1", "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert built == [1] and not rebuilt
    assert json.loads(out)["release"] == name
