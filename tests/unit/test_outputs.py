"""What ``--overwrite`` may replace, which output names are refused before
anything is spent, and what ``--dry-run`` reports (issue 22). No Spark: every
refusal here is made before a session exists."""

from __future__ import annotations

import json

import pytest

from dp_spark import session
from dp_spark.accounting import PureDP
from dp_spark.ledger import open_ledger
from tests.unit.helpers import assert_one_line_error, run_cli


@pytest.fixture
def no_spark(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a Spark session was requested")

    monkeypatch.setattr(session, "get_session", refuse)


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if ": error: " in line]


def test_overwrite_never_empties_a_folder_dp_spark_did_not_write(capsys, tmp_path, no_spark, monkeypatch):
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "set-union", "--rows", "100", "--items-output", ".", "--overwrite")
    assert code == 2
    assert_one_line_error(err, "already exists and is a folder holding 2 entries ('notes.txt', 'sub')")
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_overwrite_never_replaces_a_file_dp_spark_did_not_write(capsys, tmp_path, no_spark):
    mine = tmp_path / "thesis.html"
    mine.write_text("<html>my thesis</html>")
    code, out, err = run_cli(capsys, "distinct-count", "--rows", "100", "--report-html", str(mine), "--overwrite")
    assert code == 2
    assert_one_line_error(err, f"--report-html {str(mine)!r} already exists and is a file of 22 bytes, not an "
                               "output of an earlier dp_spark run")
    assert mine.read_text() == "<html>my thesis</html>"


@pytest.mark.parametrize("flag", ["--output", "--report-html"])
def test_the_ledger_is_never_an_output(capsys, tmp_path, no_spark, flag):
    ledger = tmp_path / "l.db"
    with open_ledger(ledger, create=True) as book:
        book.create_budget("b", PureDP(5.0))
    before = ledger.read_bytes()
    code, out, err = run_cli(capsys, "distinct-count", "--rows", "100", "--ledger", str(ledger),
                             "--ledger-budget", "b", flag, str(ledger), "--overwrite")
    assert code == 2
    assert_one_line_error(err, "would destroy that budget ledger")
    assert ledger.read_bytes() == before


def test_the_ledger_folder_is_never_an_output(capsys, tmp_path, no_spark):
    ledger = tmp_path / "l.db"
    with open_ledger(ledger, create=True) as book:
        book.create_budget("b", PureDP(5.0))
    code, out, err = run_cli(capsys, "set-union", "--rows", "100", "--ledger", str(ledger), "--ledger-budget", "b",
                             "--epsilon", "1", "--items-output", str(tmp_path), "--overwrite")
    assert code == 2
    assert_one_line_error(err, f"--items-output {str(tmp_path)!r} is, contains or lies inside --ledger")


def test_what_dp_spark_wrote_is_recognised(tmp_path):
    from dp_spark.commands.outputs import not_ours
    from dp_spark.marking import HTML_MARKER, OUTPUT_MARKER

    report = tmp_path / "r.json"
    report.write_text(json.dumps({"release": "distinct-count", "version": "2.0", "result": {}}))
    page = tmp_path / "r.html"
    page.write_text(f"<!DOCTYPE html><html><head>{HTML_MARKER}</head></html>")
    series = tmp_path / "s.csv"
    series.write_text("step,estimate,std,error_bound,flippancy_bound\n1,2.0,1.0,3.0,\n")
    folder = tmp_path / "items"
    folder.mkdir()
    (folder / OUTPUT_MARKER).write_text("x")
    (folder / "part-0.parquet").write_bytes(b"x")
    (tmp_path / "empty").mkdir()
    for path in (report, page, series, folder, tmp_path / "empty"):
        assert not_ours(path) is None, path
    (tmp_path / "other.json").write_text('{"earlier": true}')
    (tmp_path / "other.csv").write_text("a,b\n")
    for name in ("other.json", "other.csv"):
        assert not_ours(tmp_path / name).startswith("a file of"), name


@pytest.mark.parametrize("argv, fragment", [
    (["--output", "r" * 251 + ".json"], "is 256 bytes long; this file system takes at most 255 bytes"),
    (["--report-html", "d" * 300 + "/r.html"], "is 300 bytes long"),
    (["--output", "a\x00b.json"], "the name holds a NUL character"),
    (["--report-html", "{t}"], "is a folder; give a file path for the HTML report"),
])
def test_an_output_name_the_file_system_refuses_is_refused_before_anything_is_spent(
        capsys, tmp_path, no_spark, monkeypatch, argv, fragment):
    monkeypatch.chdir(tmp_path)
    argv = [a.replace("{t}", str(tmp_path)) for a in argv]
    code, out, err = run_cli(capsys, "distinct-count", "--rows", "100", *argv)
    assert code == 2
    assert_one_line_error(err, fragment)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_dry_run_reports_every_refusal_of_the_real_run(capsys, tmp_path, no_spark):
    ledger = tmp_path / "l.db"
    with open_ledger(ledger, create=True) as book:
        book.create_budget("tiny", PureDP(0.1))
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"release": "distinct-count", "version": "2.0"}))
    before = ledger.read_bytes()
    code, out, err = run_cli(capsys, "distinct-count", "--rows", "100", "--epsilon", "1", "--dry-run",
                             "--ledger", str(ledger), "--ledger-budget", "tiny", "--output", str(report))
    assert code == 2
    assert "dry run" in out
    errors = _errors(err)
    assert len(errors) == 2, err
    assert f"--output {str(report)!r} already exists; pass --overwrite" in errors[0]
    assert "the ledger budget 'tiny' has only ε = 0.1" in errors[1]
    assert ledger.read_bytes() == before
    with open_ledger(ledger) as book:
        assert book.history() == []


def test_a_dry_run_reports_the_input_checks_too(capsys, tmp_path, no_spark):
    """A missing --input is refused by the real run before Spark starts, so
    the dry run names it (beside the other refusals)."""
    code, out, err = run_cli(capsys, "distinct-count", "--input", str(tmp_path / "nope.parquet"), "--dry-run")
    assert code == 2 and "dry run" in out
    errors = _errors(err)
    assert len(errors) == 1 and "nope.parquet" in errors[0], err


def test_a_dry_run_without_refusals_exits_0(capsys, tmp_path, no_spark):
    code, out, err = run_cli(capsys, "distinct-count", "--rows", "100", "--dry-run",
                             "--output", str(tmp_path / "new.json"))
    assert code == 0 and err == "" and "dry run" in out


def test_a_dry_run_names_each_refused_output_once(capsys, tmp_path, no_spark):
    config = tmp_path / "c.yaml"
    config.write_text("epsilon: 1\n")
    code, out, err = run_cli(capsys, "distinct-count", "--dry-run", "--config", str(config),
                             "--output", str(config), "--overwrite", "--report-html", "x" * 300 + ".html")
    assert code == 2
    errors = _errors(err)
    assert len(errors) == 2, err
    assert "is 305 bytes long" in errors[0] and "would destroy that input" in errors[1]
    assert config.read_text() == "epsilon: 1\n"


def test_temporary_names_beside_a_long_output_fit_the_file_system(tmp_path):
    from dp_spark.io import write_json_atomic

    for name in ("r" * 250 + ".json", "é" * 125 + ".json", "東" * 83 + ".json"):  # <= 255 bytes each
        write_json_atomic(tmp_path / name, {"ok": True})
        assert (tmp_path / name).is_file()
