"""``dp-spark distinct-count`` up to its plan, without Spark: ``--dry-run``
prints the plan (the same one the Python API builds), and every parameter or
budget refusal is a one-line error before any Spark session exists.

These run in process under the unit tier's pyspark blocker, so a path that
imported pyspark would fail here; the dry run is also run in a fresh
interpreter where pyspark cannot be imported at all."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dp_spark import session
from dp_spark.plans.distinct_count import plan as distinct_count_plan
from tests.unit.helpers import assert_one_line_error, pyspark_loaded, run_cli

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_spark(monkeypatch):
    """Fail the test if the CLI asks for a Spark session."""

    def refuse(*args, **kwargs):
        raise AssertionError("a Spark session was requested")

    monkeypatch.setattr(session, "get_session", refuse)
    loaded = pyspark_loaded()
    yield
    assert pyspark_loaded() == loaded, "the CLI imported pyspark"


def run(capsys, *argv):
    return run_cli(capsys, "distinct-count", *argv)


def test_dry_run_prints_the_plan_the_api_builds(capsys, no_spark):
    code, out, err = run(capsys, "--dry-run", "--epsilon", "0.5", "--max-bound", "12", "--method", "matching")
    assert code == 0, err
    expected = distinct_count_plan(epsilon=0.5, max_bound=12, method="matching")
    assert out.strip() == expected.describe()
    code, out, err = run(capsys, "--dry-run", "--quiet", "--epsilon", "0.5", "--max-bound", "12",
                         "--method", "matching")
    assert code == 0 and json.loads(out) == expected.to_dict()


def test_dry_run_takes_the_config_file_by_the_same_names(capsys, tmp_path, no_spark):
    config = tmp_path / "job.yaml"
    config.write_text("epsilon: 0.5\nmax_bound: 7\nmethod: sampling\nperson_col: user\n")
    code, out, err = run(capsys, "--config", str(config), "--epsilon", "0.25", "--dry-run", "--quiet")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["privacy"]["epsilon"] == 0.25  # the flag wins over the file
    assert doc["parameters"] == dict(distinct_count_plan(epsilon=0.25, max_bound=7, method="sampling",
                                                         person_col="user").parameters)


def test_dry_run_reads_nothing_and_spends_nothing(capsys, tmp_path, no_spark):
    missing = tmp_path / "not-there.parquet"
    report = tmp_path / "report.json"
    budget = tmp_path / "ledger.db"
    code, out, err = run(capsys, "--dry-run", "--input", str(missing), "--output", str(report),
                         "--ledger", str(budget), "--ledger-budget", "team")
    # The input is not opened and nothing is charged; the missing ledger is
    # reported (the real run would refuse it), never created.
    assert code == 2 and "ledger" in err and "does not exist" in err, err
    assert not report.exists() and not budget.exists() and "dry run" in out


def test_dry_run_in_a_fresh_interpreter_never_imports_pyspark():
    code = ("import sys\n"
            "from tests.unit.helpers import block_pyspark, pyspark_loaded\n"
            "block_pyspark()\n"
            "from dp_spark.cli import main\n"
            "code = main(['distinct-count', '--dry-run', '--quiet', '--method', 'greedy', '--shards', '3'])\n"
            "assert not pyspark_loaded()\n"
            "sys.exit(code)\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    doc = json.loads(result.stdout)
    assert doc["plan"] is True and doc["parameters"]["shards"] == 3 and len(doc["budget_split"]) == 2


@pytest.mark.parametrize("argv, fragment", [
    (["--epsilon", "0"], "epsilon must be a positive finite number (> 0)"),
    (["--epsilon", "nan"], "epsilon must be a positive finite number (> 0)"),
    (["--beta", "1.5"], "beta must be strictly between 0 and 1"),
    (["--max-bound", "0"], "max_bound must be a whole number from 1 to 1,000,000"),
    (["--shards", "100000"], "shards must be a whole number from 1 to 10,000"),
    (["--method", "magic"], "invalid choice"),
    (["--budget-epsilon", "0.5", "--epsilon", "1"], "the budget has only ε = 0.5"),
    (["--budget-epsilon", "-1"], "budget_epsilon must be a positive finite number"),
    (["--item-col", "person_id"], "person_col and item_col both name the column 'person_id'"),
    (["--seed", "1", "--ledger", "never_opened.db", "--ledger-budget", "b"],
     "drop --seed for a release to publish"),
    # issue 42 §4: a repeated single-valued flag kept the last value silently; an abbreviation was accepted
    (["--epsilon", "1", "--epsilon", "10"], "--epsilon is given more than once; give it once"),
    (["--max-bound", "16", "--max-bound", "64"], "--max-bound is given more than once"),
    (["--config", "a.yaml", "--config", "b.yaml"], "--config is given more than once"),
    (["--eps", "5"], "unrecognized arguments: --eps 5"),
    (["--quiet", "--verbose"], "--quiet and --verbose ask for opposite things"),
])
def test_bad_parameters_are_one_line_exit_2_before_spark(capsys, tmp_path, no_spark, argv, fragment):
    out_path = tmp_path / "report.json"
    out_path.write_text('{"release": "distinct-count", "version": "2.0", "earlier": true}')  # an earlier dp_spark report
    code, out, err = run(capsys, *argv, "--rows", "100", "--output", str(out_path), "--overwrite")
    assert code == 2
    assert err.count("\n") == 1
    assert_one_line_error(err, fragment)
    assert json.loads(out_path.read_text()) == {"release": "distinct-count", "version": "2.0", "earlier": True}


@pytest.mark.parametrize("flag, value, fragment", [
    ("--output", "", "--output is empty: give a path"),
    ("--report-html", "", "--report-html is empty"),
    ("--output", "-", "--output - would write a file named '-'"),
])
def test_an_empty_or_dash_output_is_refused_before_spark(capsys, tmp_path, no_spark, monkeypatch, flag, value,
                                                         fragment):
    """Issue 42 §5: ``--output ''`` wrote nothing silently after the charge;
    ``--output -`` wrote a file named '-'."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "--rows", "100", flag, value)
    assert code == 2
    assert_one_line_error(err, fragment)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["--epsilon", "0", "--dry-run"], ["--max-bound", "0", "--dry-run"]])
def test_a_dry_run_refuses_the_same_bad_parameters(capsys, no_spark, argv):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and "must be" in err


def test_main_leaves_the_callers_logging_as_it_found_it(capsys, no_spark):
    """The CLI configures dp_spark's logger for its run only: a process that
    calls ``main`` (a test run, a notebook) keeps propagation, level and
    handlers (before, propagate stayed False and caplog saw nothing)."""
    import logging

    log = logging.getLogger("dp_spark")
    marker = logging.NullHandler()
    log.addHandler(marker)
    try:
        before = (list(log.handlers), log.level, log.propagate)
        for argv in (["--dry-run"], ["--epsilon", "0", "--dry-run"]):
            run(capsys, *argv)
            assert (list(log.handlers), log.level, log.propagate) == before
    finally:
        log.removeHandler(marker)


def test_a_bad_master_is_one_line_exit_2_before_spark(capsys, no_spark):
    """Before: Spark started, printed a 21-line Java stack trace and the run
    ended with 'Spark error Py4JJavaError' (exit 1)."""
    code, out, err = run(capsys, "--master", "local[abc]", "--rows", "100")
    assert code == 2
    assert_one_line_error(err, "--master 'local[abc]' is not a Spark master URL")


def test_help_texts_say_what_the_flags_take(capsys, no_spark):
    """Issue 42 §1: continual-distinct's group flags described the
    person-level rules (its unit is the item, --max-groups is required,
    private keys are refused); --schema was shown as a PATH (it is a DDL
    string)."""
    code, out, _ = run_cli(capsys, "continual-distinct", "--help")
    assert code == 0
    flat = " ".join(out.split())
    assert "every item's events count in at most --max-groups" in flat
    assert "every person's rows count in" not in flat and "most groups one person contributes to" not in flat
    assert "required with --group-by (privately chosen keys are not offered" in flat
    assert "most groups one item's events count in (m), required with --group-by" in flat
    code, out, _ = run_cli(capsys, "distinct-count", "--help")
    assert code == 0 and "--schema DDL" in out and "--schema PATH" not in out
