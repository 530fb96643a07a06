"""Issue 42 §3 (L04b): a keyed run that died between its two writes (the HTML
report written, the JSON not) is retried with the same command — as the
example DAG's retry does, without --overwrite — and replays its recorded
release, rewriting the report it wrote itself. It was refused forever
("--report-html already exists; pass --overwrite"). A report of another
release at that path is still refused."""

from __future__ import annotations

import json

import pytest

from dp_spark.accounting import ApproxDP
from dp_spark.cli import main
from dp_spark.ledger import open_ledger


@pytest.fixture
def argv(spark, tmp_path):
    ledger = tmp_path / "budgets.db"
    with open_ledger(ledger, create=True) as led:
        led.create_budget("b", ApproxDP(100.0, 0.5))
    table = tmp_path / "events.parquet"
    rows = [(p, f"item{(p * 7 + j) % 13}") for p in range(120) for j in range(1 + p % 3)]
    spark.createDataFrame(rows, "person_id long, item string").coalesce(1).write.parquet(str(table))
    return ["distinct-count", "--input", str(table), "--epsilon", "1", "--max-bound", "4", "--shards", "1",
            "--ledger", str(ledger), "--ledger-budget", "b", "--run-key", "dag/2026-11-29", "--quiet",
            "--output", str(tmp_path / "r.json"), "--report-html", str(tmp_path / "r.html")]


def _charges(argv) -> int:
    with open_ledger(argv[argv.index("--ledger") + 1]) as led:
        return led.state("b").charges


def test_a_keyed_retry_rewrites_the_reports_it_wrote(capsys, tmp_path, argv):
    assert main(argv) == 0
    first = json.loads((tmp_path / "r.json").read_text())
    (tmp_path / "r.json").unlink()  # the run died between its two writes: HTML written, JSON not
    capsys.readouterr()
    assert main([*argv, "--dry-run"]) == 0, capsys.readouterr().err  # the dry run says what the retry does
    assert main(argv) == 0, capsys.readouterr().err
    again = json.loads((tmp_path / "r.json").read_text())
    assert again["result"] == first["result"] and again["created"] == first["created"]
    assert again["replay"]["run_key"] == "dag/2026-11-29" and _charges(argv) == 1
    assert main(argv) == 0  # and once more, both reports there: still the same release
    assert json.loads((tmp_path / "r.json").read_text())["result"] == first["result"]


def test_a_report_of_another_release_at_that_path_is_still_refused(capsys, tmp_path, argv):
    other = list(argv)
    other[other.index("--run-key") + 1] = "dag/other"
    assert main(other) == 0  # another keyed release writes r.json and r.html
    capsys.readouterr()
    assert main(argv) == 2  # a new key: its outputs exist and are not its own
    err = capsys.readouterr().err
    assert "already exists; pass --overwrite" in err and _charges(argv) == 1
    assert main([*argv, "--dry-run"]) == 2  # the dry run refuses it too
    assert "already exists; pass --overwrite" in capsys.readouterr().err and _charges(argv) == 1
