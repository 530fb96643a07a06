"""A ledger file that cannot be written (issue 42 §5): a full disk, a quota
or a file-size limit under an SQLite ledger is one line saying the file
cannot be written and what was spent (nothing, or the truth when a keyed
run's charge was committed before), never "unexpected OperationalError";
the ledger is left as it was (SQLite rolls the transaction back).

The disk is made full for real: the test process's file-size limit
(RLIMIT_FSIZE, SIGXFSZ ignored) makes every write past it fail with EFBIG,
which SQLite reports as it reports a write on a full disk (SQLITE_IOERR_WRITE;
ENOSPC itself gives SQLITE_FULL, checked on a mounted 40 KB tmpfs by hand).
"""

from __future__ import annotations

import contextlib
import resource
import shutil
import signal
import sqlite3

import pytest

from dp_spark.accounting import PureDP
from dp_spark.errors import InputError
from dp_spark.ledger import open_ledger
from tests.unit.helpers import assert_one_line_error

#: What every refusal says (the file cannot be written, and why as far as known).
CANNOT = "cannot be written (SQLite: disk I/O error, SQLITE_IOERR_WRITE)"


@contextlib.contextmanager
def file_size_limit(limit: int):
    """Writes of this process past ``limit`` bytes of any file fail (EFBIG),
    as on a full disk, until the block ends. Only this process: a running
    JVM keeps its own limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the first such write kills the process
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


def full_disk():
    """No journal page can be written: every change of the ledger fails
    before its first byte (the ledger's pages are journaled first)."""
    return file_size_limit(0)


@pytest.fixture
def ledger(tmp_path):
    path = tmp_path / "budgets.db"
    with open_ledger(path, create=True) as led:
        led.create_budget("team", PureDP(1.0))
        led.charge("team", PureDP(0.25), "distinct-count")
    return path


def _cli(capsys, *argv):
    from dp_spark.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _spent(path, budget="team"):
    with open_ledger(path, read_only=True) as led:
        state = led.state(budget)
        return state.exact_spent["epsilon"], state.charges


def test_ledger_create_on_a_full_disk_is_one_line_and_the_ledger_is_unchanged(capsys, ledger):
    before = ledger.read_bytes()
    with full_disk():
        code, out, err = _cli(capsys, "ledger", "create", str(ledger), "other", "--epsilon", "1")
        # show and history only read: they work on the full disk and say the budget was not made
        shown = _cli(capsys, "ledger", "show", str(ledger))
        history = _cli(capsys, "ledger", "history", str(ledger))
    assert code == 2, err  # before: exit 1, "unexpected OperationalError"
    assert_one_line_error(err, f"the ledger {str(ledger)!r} {CANNOT}")
    assert "file-size limit (ulimit -f)" in err and err.strip().endswith("The budget 'other' was not created."), err
    assert "OperationalError" not in err
    assert ledger.read_bytes() == before
    assert not ledger.with_name(ledger.name + "-journal").exists()
    assert shown[0] == 0 and shown[1].startswith("team: total ε = 1") and "other" not in shown[1], shown
    assert history[0] == 0 and "distinct-count" in history[1], history
    with open_ledger(ledger, read_only=True) as led:
        assert led.names() == ["team"]


def test_ledger_create_of_a_new_file_on_a_full_disk_leaves_no_file(capsys, tmp_path):
    path = tmp_path / "new.db"
    with full_disk():
        code, out, err = _cli(capsys, "ledger", "create", str(path), "team", "--epsilon", "1")
    assert code == 2
    assert_one_line_error(err, f"the ledger {str(path)!r} {CANNOT}")
    assert err.strip().endswith("The ledger was not created."), err
    # before: an empty file was left, which a release then called "not a dp_spark ledger (an empty file)"
    assert list(tmp_path.iterdir()) == []
    code, out, err = _cli(capsys, "ledger", "create", str(path), "team", "--epsilon", "1")  # space again: it works
    assert code == 0 and "created" in out, err


@pytest.mark.parametrize("run_key", [None, "dag-run-1"])
def test_a_charge_on_a_full_disk_says_nothing_was_charged_and_charges_nothing(ledger, run_key):
    before = ledger.read_bytes()
    with open_ledger(ledger) as led, full_disk():
        with pytest.raises(InputError) as refused:
            led.charge("team", PureDP(0.5), "distinct-count", run_key=run_key)
    message = str(refused.value)  # before: sqlite3.OperationalError "cannot rollback - no transaction is active"
    assert CANNOT in message and message.endswith("Nothing was charged.") and "\n" not in message, message
    assert ledger.read_bytes() == before
    assert _spent(ledger) == (0.25, 1)
    with open_ledger(ledger) as led:  # and the ledger takes the charge once the disk has room
        led.charge("team", PureDP(0.5), "distinct-count", run_key=run_key)
    assert _spent(ledger) == (0.75, 2)


def test_a_keyed_run_that_cannot_mark_its_draw_says_the_charge_stays_and_a_retry_reuses_it(ledger):
    with open_ledger(ledger) as led:
        led.charge("team", PureDP(0.5), "distinct-count", run_key="k")
        with full_disk(), pytest.raises(InputError) as refused:
            led.mark_drawn("team", "k", 0)
        assert [r.state for r in led.runs("team")] == ["charged"]  # rolled back: nothing was drawn
    message = str(refused.value)
    assert CANNOT in message and "\n" not in message
    assert message.endswith("The ledger budget 'team' was charged for run key 'k': that privacy is spent. The run "
                            "stopped before drawing any noise, so a retry under the key reuses that charge."), message
    assert _spent(ledger) == (0.75, 2)


@pytest.mark.parametrize("drawn", [True, False])
def test_a_keyed_run_that_cannot_record_its_release_says_what_a_retry_gets(ledger, drawn):
    with open_ledger(ledger) as led:
        led.charge("team", PureDP(0.5), "distinct-count", run_key="k")
        if drawn:
            led.mark_drawn("team", "k", 0)
        before = ledger.read_bytes()
        with full_disk(), pytest.raises(InputError) as refused:
            led.record_release("team", "k", 0, {"result": {"estimate": 7}, "notes": ["x" * 5000]})
        assert [r.state for r in led.runs("team")] == ["drawn" if drawn else "charged"]
    assert ledger.read_bytes() == before
    message = str(refused.value)  # before: "... Nothing was charged." after the charge was committed
    assert CANNOT in message and "Nothing was charged" not in message and "\n" not in message, message
    assert "The ledger budget 'team' was charged for run key 'k': that privacy is spent." in message
    assert "its release was not recorded, so it was not returned, printed or written" in message.lower()
    if drawn:
        assert message.endswith("a retry needs a new run key (the earlier charge stays)."), message
    else:
        assert message.endswith("it drew no noise, so a retry under the key reuses that charge."), message


def _hot_journal(source, target):
    """``target``: a copy of the ledger ``source`` taken while a writer was
    in the middle of a transaction whose pages had reached the file (the
    journal left by a run killed there, e.g. on a full disk)."""
    writer = sqlite3.connect(source, isolation_level=None)
    writer.execute("PRAGMA cache_size = 1")  # the transaction's pages spill to the file before the commit
    writer.execute("BEGIN IMMEDIATE")
    for seq in range(2, 60):
        writer.execute("INSERT INTO dp_charges VALUES ('team', ?, 'x', '{}', '{}', 'r', NULL, NULL, ?, 't')",
                       (seq, "p" * 3000))
    journal = source.with_name(source.name + "-journal")
    assert journal.exists()
    shutil.copyfile(source, target)
    shutil.copyfile(journal, target.with_name(target.name + "-journal"))
    writer.execute("ROLLBACK")
    writer.close()


@pytest.mark.parametrize("action", ["show", "history"])
def test_show_and_history_of_a_ledger_left_mid_write_say_so_not_read_only(capsys, tmp_path, ledger, action):
    copy = tmp_path / "copy.db"
    _hot_journal(ledger, copy)
    before = copy.read_bytes()
    code, out, err = _cli(capsys, "ledger", action, str(copy))
    assert code == 2
    # before: "is read-only: ... give the user running dp_spark write access", though the file is writable
    assert_one_line_error(err, f"the ledger {str(copy)!r} holds an unfinished write ({str(copy) + '-journal'!r}")
    assert "read-only" not in err and "it charged nothing" in err and "PRAGMA quick_check" in err, err
    assert copy.read_bytes() == before  # show and history never write
    with open_ledger(copy) as led:  # a writer rolls it back: the ledger as it was committed
        assert led.state("team").charges == 1
    code, out, err = _cli(capsys, "ledger", action, str(copy))
    assert code == 0 and "team" in out, err
