"""A release whose ledger's disk is full (issue 42 §5), through the command
line on the shared session: one line saying the ledger cannot be written
and what was spent, never "unexpected OperationalError"; no output written,
the ledger as it was (or holding exactly the committed charge). The disk is
made full with the process's file-size limit (tests/unit/test_ledger_full_disk.py);
the running JVM keeps its own limit, so Spark is unaffected."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from dp_spark.cli import main
from dp_spark.ledger import open_ledger
from tests.spark.test_ledger import ledger_path  # noqa: F401 - the fixture: budgets "eps" (ε = 1), "rho" (zCDP)
from tests.unit.helpers import assert_one_line_error
from tests.unit.test_ledger_full_disk import CANNOT, file_size_limit, full_disk


@pytest.fixture
def ledger(ledger_path):  # noqa: F811 - the imported fixture
    return Path(ledger_path)


def _argv(ledger, tmp_path, *extra):
    return ["distinct-count", "--rows", "2000", "--max-bound", "3", "--epsilon", "0.5", "--ledger", str(ledger),
            "--ledger-budget", "eps", "--output", str(tmp_path / "r.json"), "--quiet", *extra]


def test_a_release_whose_charge_meets_a_full_disk_says_nothing_was_charged(capsys, spark, tmp_path, ledger):
    before = ledger.read_bytes()
    with full_disk():
        code = main(_argv(ledger, tmp_path))
    err = capsys.readouterr().err
    assert code == 2, err  # before: exit 1, "unexpected OperationalError ... Nothing was charged to ..."
    assert_one_line_error(err, f"the ledger {str(ledger)!r} {CANNOT}")
    assert err.strip().endswith("Nothing was charged."), err
    assert ledger.read_bytes() == before and not (tmp_path / "r.json").exists()
    with open_ledger(ledger, read_only=True) as led:
        assert led.state("eps").charges == 0


def test_a_keyed_release_that_cannot_record_says_its_charge_is_spent(capsys, spark, tmp_path, ledger):
    """The charge and the 'drawn' mark fit the ledger's pages; the recorded
    release (count-release's JSON report, its ~240 counts: about 10 KB)
    needs new ones, which the full disk refuses: the run drew, so the
    message says the charge is spent and a retry needs a new run key, and
    the ledger holds exactly that charge, 'drawn'."""
    argv = ["count-release", "--rows", "2000", "--rho", "0.1", "--ledger", str(ledger), "--ledger-budget", "rho",
            "--run-key", "dag-1", "--output", str(tmp_path / "r.json"), "--quiet"]
    with file_size_limit(ledger.stat().st_size):  # the file cannot grow; its journal can
        code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err  # before: "... Nothing was charged." after the committed charge
    assert_one_line_error(err, f"the ledger {str(ledger)!r} {CANNOT}")
    assert "Nothing was charged" not in err, err
    assert err.strip().endswith(
        "The ledger budget 'rho' was charged for run key 'dag-1': that privacy is spent. It drew noise and its "
        "release was not recorded, so it was not returned, printed or written; a retry needs a new run key (the "
        "earlier charge stays)."), err
    assert not (tmp_path / "r.json").exists()
    with open_ledger(ledger, read_only=True) as led:
        assert led.state("rho").charges == 1 and led.state("rho").exact_spent["rho"] == Fraction("0.1")
        assert [(r.run_key, r.state) for r in led.runs("rho")] == [("dag-1", "drawn")]
    assert main(argv) == 2  # as said: the key is refused now
    assert "a new run key is needed" in capsys.readouterr().err
