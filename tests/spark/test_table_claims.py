"""Table outputs claimed before the spend and cleaned up on every path
(issue 42 §3, T07/T08; dp_spark.tables).

T07: a folder at the warehouse path of a new table, unknown to the catalog,
passed the check, the run charged, then the rename failed and left a
``dp_spark_tmp_*`` table. T08: two runs racing for one new table both passed
the check and both charged. Now the location is checked and the name is
claimed (an empty placeholder) before the charge, a second run is refused
before it charges, and the claim is dropped on every path that does not
write it. Every refusal is checked against a ledger: nothing charged."""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import dp_spark.cli as cli
import dp_spark.tables as tables
from dp_spark.accounting import ApproxDP
from dp_spark.cli import main
from dp_spark.commands import COMMANDS
from dp_spark.errors import InputError
from dp_spark.ledger import open_ledger
from dp_spark.marking import TABLE_PROPERTY
from dp_spark.tables import (CLAIM_FILE, CLAIM_PROPERTY, PLACEHOLDER_PROPERTY, claim_table, release_claim,
                             write_table)
from tests.spark.test_table_outputs import TOPK, UNION, db, properties  # noqa: F401 - db: a database under tmp_path


@pytest.fixture
def ledger(tmp_path):
    path = tmp_path / "budgets.db"
    with open_ledger(path, create=True) as led:
        led.create_budget("eps", ApproxDP(20.0, 1e-3))
    return path


def charges(ledger) -> int:
    with open_ledger(ledger) as led:
        return len(led.history("eps"))


def charged(ledger) -> list[str]:
    return ["--ledger", str(ledger), "--ledger-budget", "eps"]


def run(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


def ours(spark, db) -> set:
    """Every dp_spark_* table left in ``db`` (temporary, backup, probe)."""
    return {r.tableName for r in spark.sql(f"SHOW TABLES IN {db}").collect() if r.tableName.startswith("dp_spark_")}


def one_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith("dp-spark:")]
    assert len(lines) == 1, err
    return lines[0]


def gone_pid() -> int:
    """The id of a process that has ended (a run killed with SIGKILL)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def leave_claim(spark, db, table, pid: int, host: str | None = None) -> str:
    """The placeholder a run of ``pid`` left (killed before it could drop it)."""
    claim = claim_table(spark, f"table:{db}.{table}", "items-output", False)
    text = f"run {uuid.uuid4().hex}; pid {pid} on {host or socket.gethostname()}; since 2026-11-29T03:00:00Z"
    spark.sql(f"ALTER TABLE {db}.{table} SET TBLPROPERTIES ('{CLAIM_PROPERTY}' = '{text}')")
    (claim.folder / CLAIM_FILE).write_text(text + "\n")  # the run's claim, in its folder too
    release_claim(claim)  # no longer this process's: left as it is
    return text


# -- T07: the location ------------------------------------------------------------------


def test_a_folder_where_the_new_table_would_be_stored_is_refused_before_the_charge(capsys, spark, db, tmp_path,
                                                                                  ledger):
    """T07 (it charged, failed the rename with LOCATION_ALREADY_EXISTS and left dp_spark_tmp_*)."""
    folder = tmp_path / db / "left"
    folder.mkdir(parents=True)
    (folder / "part-00000.parquet").write_bytes(b"a crashed writer's file")
    code, err = run(capsys, *UNION, *charged(ledger), "--items-output", f"table:{db}.left")
    line = one_line(err)
    assert code == 2, err
    assert f"the folder '{folder}'" in line and f"table {db}.left" in line and "move or delete that folder" in line
    assert charges(ledger) == 0  # refused before the charge
    assert ours(spark, db) == set() and not spark.catalog.tableExists(f"{db}.left")
    assert os.listdir(folder) == ["part-00000.parquet"]  # untouched
    code, err = run(capsys, *UNION, *charged(ledger), "--items-output", f"table:{db}.left", "--overwrite")
    assert code == 2 and "move or delete that folder" in err, err  # --overwrite replaces no unknown folder
    assert charges(ledger) == 0


def test_an_empty_folder_there_is_taken(capsys, spark, db, tmp_path, ledger):
    """Spark creates a managed table in an empty folder: nothing is lost."""
    (tmp_path / db / "empty").mkdir(parents=True)
    code, err = run(capsys, *TOPK, *charged(ledger), "--items-output", f"table:{db}.empty")
    assert code == 0, err
    assert spark.table(f"{db}.empty").count() == 3 and ours(spark, db) == set()  # the k = 3 items released
    assert CLAIM_PROPERTY not in properties(spark, f"{db}.empty") and charges(ledger) == 1


@pytest.fixture
def spaced_db(spark, tmp_path):
    """A database under a folder whose name holds a space (its location URI says ``wh%20dir``)."""
    name = f"dps_{uuid.uuid4().hex[:10]}"
    where = tmp_path / "wh dir" / f"{name}.db"
    spark.sql(f"CREATE DATABASE {name} LOCATION '{where}'")
    yield name, where
    spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")


def test_a_warehouse_folder_with_a_space_is_claimed_and_checked(capsys, spark, spaced_db, ledger):
    """Issue 42 §3 review 3: the location URI is percent-encoded; read
    without unquoting, the folder never existed, so no claim file was
    written and the T07 check was skipped."""
    name, where = spaced_db
    assert "%20" in spark.catalog.getDatabase(name).locationUri
    claim = claim_table(spark, f"table:{name}.t", "items-output", False)
    assert (where / "t" / CLAIM_FILE).read_text().strip() == claim.text  # the claim, for other catalogs
    release_claim(claim)
    assert not (where / "t").exists()
    folder = where / "left"
    folder.mkdir()
    (folder / "part-00000.parquet").write_bytes(b"a crashed writer's file")
    code, err = run(capsys, *UNION, *charged(ledger), "--items-output", f"table:{name}.left")
    line = one_line(err)
    assert code == 2 and f"the folder '{folder}'" in line and "move or delete that folder" in line, err
    assert charges(ledger) == 0 and os.listdir(folder) == ["part-00000.parquet"]


# -- T08: the claim ---------------------------------------------------------------------


def test_a_second_run_racing_for_a_new_table_is_refused_before_it_charges(capsys, spark, db, ledger, monkeypatch):
    """T08: run B starts while run A computes its release for the same new
    table (B runs inside A's release). A holds the name (a placeholder) from
    before its charge: B is refused and not charged; A writes its release."""
    target = f"table:{db}.race"
    seen = {}
    real = cli.run_release

    def release_of_a(*args, **kwargs):
        if "claimed" not in seen:  # A's release (B, should it get this far, releases as usual)
            seen["claimed"] = spark.catalog.tableExists(f"{db}.race") and properties(spark, f"{db}.race")
            seen["b"] = main([*UNION, *charged(ledger), "--items-output", target])
            seen["b_charges"] = charges(ledger)
        return real(*args, **kwargs)  # the charge, then the release

    monkeypatch.setattr(cli, "run_release", release_of_a)
    code, err = run(capsys, *UNION, *charged(ledger), "--items-output", target)
    assert (seen["b"], seen["b_charges"]) == (2, 0), err  # B refused, nothing charged
    assert code == 0, err
    assert PLACEHOLDER_PROPERTY in seen["claimed"] and CLAIM_PROPERTY in seen["claimed"]  # A's, before A's charge
    assert f"{target!r} is claimed by the dp_spark run of pid {os.getpid()}" in err
    assert charges(ledger) == 1  # A's charge only
    props = properties(spark, f"{db}.race")
    assert TABLE_PROPERTY in props and CLAIM_PROPERTY not in props and PLACEHOLDER_PROPERTY not in props
    assert "item" in spark.table(f"{db}.race").columns  # A's release
    assert ours(spark, db) == set()


def test_when_both_runs_pass_the_check_the_catalogs_create_decides(capsys, spark, db, ledger, monkeypatch):
    """Review 7, the real T08 race: run B's check passes (no table yet),
    then run A claims the name, then B's CREATE of the placeholder meets
    TABLE_OR_VIEW_ALREADY_EXISTS: B is refused before its charge and A's
    placeholder is untouched."""
    target = f"table:{db}.both"
    real_check = tables._check
    held = {}

    def check_then_a_claims(*args, **kwargs):
        result = real_check(*args, **kwargs)
        if "a" not in held:  # B's check has passed: A claims now (A's own check runs through here too)
            held["a"] = None
            held["a"] = claim_table(spark, target, "items-output", False)
        return result

    monkeypatch.setattr(tables, "_check", check_then_a_claims)
    code, err = run(capsys, *UNION, *charged(ledger), "--items-output", target)
    monkeypatch.undo()
    assert code == 2 and "was created by another run while this one checked it" in one_line(err), err
    assert charges(ledger) == 0
    a = held["a"]
    assert a.held() and PLACEHOLDER_PROPERTY in properties(spark, f"{db}.both")  # A's claim stands
    release_claim(a)
    assert not spark.catalog.tableExists(f"{db}.both") and ours(spark, db) == set()


def test_a_takeover_claimed_at_the_same_moment_by_another_run_is_refused(spark, db, monkeypatch):
    """Two runs take over one killed run's placeholder at once: the one
    whose claim property is overwritten before it checks is refused and
    holds nothing; the other's claim stands."""
    leave_claim(spark, db, "twice", gone_pid())
    other = "run other; pid 4242 on elsewhere; since 2026-11-29T03:00:00Z"
    real = type(spark).sql

    def sql(self, text, *args, **kwargs):
        result = real(self, text, *args, **kwargs)
        if text.startswith("ALTER TABLE") and CLAIM_PROPERTY in text and "other" not in text:
            real(self, f"ALTER TABLE {db}.twice SET TBLPROPERTIES ('{CLAIM_PROPERTY}' = '{other}')")
        return result

    monkeypatch.setattr(type(spark), "sql", sql)
    with pytest.raises(InputError, match="another run claimed it at the same moment"):
        claim_table(spark, f"table:{db}.twice", "items-output", False)
    monkeypatch.undo()
    assert properties(spark, f"{db}.twice")[CLAIM_PROPERTY] == other
    assert f"{db}.twice" not in tables._CLAIMS


@pytest.mark.parametrize("raised, code, said", [(RuntimeError("boom"), 1, "unexpected RuntimeError"),
                                                (KeyboardInterrupt(), 130, "interrupted"),
                                                (cli.Terminated(), 143, "terminated (SIGTERM)")],
                         ids=["error", "ctrl-c", "sigterm"])
def test_the_claim_is_dropped_on_every_failure_path(capsys, spark, db, tmp_path, monkeypatch, raised, code, said):
    """An exception, Ctrl-C or SIGTERM during the release: the placeholder
    held then is dropped (its folder too), nothing dp_spark_* is left."""
    seen = {}

    def failing(*args, **kwargs):
        seen["held"] = spark.catalog.tableExists(f"{db}.gone")
        raise raised

    monkeypatch.setattr(cli, "run_release", failing)
    got, err = run(capsys, *UNION, "--items-output", f"table:{db}.gone")
    assert got == code and said in one_line(err), err
    assert seen["held"]  # the claim was there during the release
    assert not spark.catalog.tableExists(f"{db}.gone") and ours(spark, db) == set()
    assert not (tmp_path / db / "gone").exists()
    assert "could not be dropped" not in err


def test_a_claim_that_cannot_be_dropped_is_named_in_the_error(capsys, spark, db, monkeypatch):
    def failing(*args, **kwargs):
        real_sql = type(spark).sql

        def sql(self, text, *a, **k):
            if text.startswith("DROP TABLE"):
                raise RuntimeError("catalog gone")
            return real_sql(self, text, *a, **k)

        monkeypatch.setattr(type(spark), "sql", sql)
        raise cli.Terminated

    monkeypatch.setattr(cli, "run_release", failing)
    code, err = run(capsys, *UNION, "--items-output", f"table:{db}.stuck")
    monkeypatch.undo()
    assert code == 143 and "a later run on this host takes the claim over" in one_line(err), err
    assert f"The claim on table:{db}.stuck could not be dropped" in err
    assert PLACEHOLDER_PROPERTY in properties(spark, f"{db}.stuck")


def test_a_write_failing_after_the_charge_leaves_no_placeholder_or_temporary_table(capsys, spark, db, ledger,
                                                                               monkeypatch):
    from pyspark.sql import DataFrameWriter

    def broken(self, *args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(DataFrameWriter, "saveAsTable", broken)
    code, err = run(capsys, *UNION, *charged(ledger), "--items-output", f"table:{db}.late")
    monkeypatch.undo()
    assert code == 1 and "its privacy spent" in one_line(err), err
    assert charges(ledger) == 1
    assert not spark.catalog.tableExists(f"{db}.late") and ours(spark, db) == set()


def test_overwrite_keeps_the_earlier_table_and_unclaims_it_when_the_run_fails(capsys, spark, db, monkeypatch):
    target = f"table:{db}.kept"
    assert run(capsys, *TOPK, "--items-output", target)[0] == 0
    rows = sorted(spark.table(f"{db}.kept").collect())
    seen = {}

    def failing(*args, **kwargs):
        seen["claim"] = properties(spark, f"{db}.kept").get(CLAIM_PROPERTY)
        raise RuntimeError("boom")

    monkeypatch.setitem(COMMANDS, "top-k", dataclasses.replace(COMMANDS["top-k"], run=failing))
    code, err = run(capsys, *TOPK, "--items-output", target, "--overwrite")
    assert code == 1, err
    assert seen["claim"] and str(os.getpid()) in seen["claim"]  # claimed before the charge
    assert sorted(spark.table(f"{db}.kept").collect()) == rows  # the earlier release, unclaimed
    assert CLAIM_PROPERTY not in properties(spark, f"{db}.kept") and ours(spark, db) == set()


# -- a claim left by a killed run -------------------------------------------------------


def test_a_retry_takes_over_the_placeholder_of_a_run_killed_on_this_host(capsys, spark, db, ledger):
    """Review 4: a placeholder whose process ran here and is gone (SIGKILL)
    holds no release: a scheduled retry (no --overwrite, as the example DAG
    runs it) takes it over and writes its release."""
    leave_claim(spark, db, "orphan", gone_pid())
    code, err = run(capsys, *UNION, *charged(ledger), "--items-output", f"table:{db}.orphan")
    assert code == 0, err
    props = properties(spark, f"{db}.orphan")
    assert TABLE_PROPERTY in props and CLAIM_PROPERTY not in props and PLACEHOLDER_PROPERTY not in props
    assert "item" in spark.table(f"{db}.orphan").columns and ours(spark, db) == set() and charges(ledger) == 1


def test_another_hosts_claim_is_named_and_only_overwrite_takes_it_over(capsys, spark, db, ledger):
    """dp_spark cannot see another host's process: refused naming the run
    and the fix, nothing charged; --overwrite takes it (even from a live run,
    the message says so)."""
    leave_claim(spark, db, "remote", 4242, host="elsewhere")
    target = f"table:{db}.remote"
    code, err = run(capsys, *UNION, *charged(ledger), "--items-output", target)
    line = one_line(err)
    assert code == 2 and "is claimed by the dp_spark run of pid 4242 on host 'elsewhere'" in line, err
    assert "holds no release" in line and "pass --overwrite to take the claim over" in line
    assert "takes it even from a run that is alive" in line
    assert f"DROP TABLE {db}.remote" in line and charges(ledger) == 0
    code, err = run(capsys, *UNION, *charged(ledger), "--items-output", target, "--overwrite")
    assert code == 0, err
    props = properties(spark, f"{db}.remote")
    assert TABLE_PROPERTY in props and CLAIM_PROPERTY not in props and PLACEHOLDER_PROPERTY not in props
    assert ours(spark, db) == set() and charges(ledger) == 1


def test_a_dp_spark_table_with_a_killed_runs_claim_still_needs_overwrite(capsys, spark, db, ledger):
    """Only a placeholder is taken without the flag: an earlier release
    claimed by a killed --overwrite run is replaced only with --overwrite."""
    target = f"table:{db}.earlier"
    assert run(capsys, *TOPK, "--items-output", target)[0] == 0
    rows = sorted(spark.table(f"{db}.earlier").collect())
    text = f"run {uuid.uuid4().hex}; pid {gone_pid()} on {socket.gethostname()}; since 2026-11-29T03:00:00Z"
    spark.sql(f"ALTER TABLE {db}.earlier SET TBLPROPERTIES ('{CLAIM_PROPERTY}' = '{text}')")
    code, err = run(capsys, *TOPK, *charged(ledger), "--items-output", target)
    assert code == 2 and "already exists; pass --overwrite" in one_line(err), err
    assert sorted(spark.table(f"{db}.earlier").collect()) == rows and charges(ledger) == 0
    code, err = run(capsys, *TOPK, *charged(ledger), "--items-output", target, "--overwrite")
    assert code == 0 and CLAIM_PROPERTY not in properties(spark, f"{db}.earlier"), err


@pytest.mark.parametrize("flags", [[], ["--overwrite"]], ids=["plain", "overwrite"])
def test_a_claim_whose_process_still_runs_here_is_refused_whatever_the_flags(capsys, spark, db, ledger, flags):
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        leave_claim(spark, db, "busy", alive.pid)
        code, err = run(capsys, *UNION, *charged(ledger), "--items-output", f"table:{db}.busy", *flags)
        line = one_line(err)
        assert code == 2 and f"pid {alive.pid}" in line and "which is still running" in line, err
        assert f"DROP TABLE {db}.busy)" in line  # a placeholder: no rows to keep
        assert charges(ledger) == 0 and PLACEHOLDER_PROPERTY in properties(spark, f"{db}.busy")
    finally:
        alive.kill()
        alive.wait()
    code, err = run(capsys, *UNION, *charged(ledger), "--items-output", f"table:{db}.busy", *flags)
    assert code == 0, err  # gone now: taken over, with or without the flag


def test_a_run_whose_claim_was_taken_over_keeps_its_release_and_names_it(spark, db):
    df = spark.createDataFrame([(1, "a")], "rank int, item string")
    claim = claim_table(spark, f"table:{db}.taken", "items-output", False)
    spark.sql(f"ALTER TABLE {db}.taken SET TBLPROPERTIES ('{CLAIM_PROPERTY}' = 'run other; pid 1 on h; since x')")
    with pytest.raises(Exception, match=r"took over .* kept there") as info:
        write_table(df, claim.path)
    kept = [t for t in ours(spark, db) if t.startswith("dp_spark_tmp_")]
    assert len(kept) == 1 and kept[0] in str(info.value)
    assert PLACEHOLDER_PROPERTY in properties(spark, f"{db}.taken")  # the other run's claim, untouched


def test_another_catalogs_claim_on_the_folder_backs_out_without_deleting_it(spark, db, tmp_path, monkeypatch):
    """Two local sessions (each its own catalog) on one warehouse folder:
    the one whose claim file is second forgets its catalog entry and keeps
    the other's folder."""
    folder = tmp_path / db / "shared"
    real = type(spark).sql

    def sql(self, text, *args, **kwargs):
        result = real(self, text, *args, **kwargs)
        if text.startswith("CREATE TABLE") and "dp_spark_claim" in text:  # the other session, just then
            (folder / CLAIM_FILE).write_text("run x; pid 1 on elsewhere; since 2026-11-29T03:00:00Z\n")
        return result

    monkeypatch.setattr(type(spark), "sql", sql)
    with pytest.raises(InputError, match="holds the claim of the dp_spark run of pid 1 on host 'elsewhere'"):
        claim_table(spark, f"table:{db}.shared", "items-output", False)
    monkeypatch.undo()
    assert not spark.catalog.tableExists(f"{db}.shared")
    assert os.listdir(folder) == [CLAIM_FILE]  # the other session's claim is kept


def test_an_entry_that_cannot_be_moved_off_the_other_sessions_folder_is_named_and_not_taken_over(
        spark, db, tmp_path, monkeypatch):
    """Review 11: when the entry of a placeholder that lost the folder to
    another session cannot be pointed elsewhere, it is not dropped (that
    deletes the folder), it is named (LEFT, and the refusal says what to
    do), and a later run does not take it over (the swap would delete the
    other session's folder)."""
    folder = tmp_path / db / "stuck"
    other = "run x; pid 1 on elsewhere; since 2026-11-29T03:00:00Z"
    real = type(spark).sql

    def sql(self, text, *args, **kwargs):
        if "SET LOCATION" in text:
            raise RuntimeError("catalog refuses")
        result = real(self, text, *args, **kwargs)
        if text.startswith("CREATE TABLE") and "dp_spark_claim" in text:  # the other session, just then
            (folder / CLAIM_FILE).write_text(other + "\n")
        return result

    monkeypatch.setattr(tables, "LEFT", [])
    monkeypatch.setattr(type(spark), "sql", sql)
    with pytest.raises(InputError, match="could not be moved off that folder and still points at it: do not DROP it"):
        claim_table(spark, f"table:{db}.stuck", "items-output", False)
    monkeypatch.setattr(type(spark), "sql", real)
    assert tables.LEFT == [f"table:{db}.stuck"]
    assert spark.catalog.tableExists(f"{db}.stuck") and os.listdir(folder) == [CLAIM_FILE]
    with pytest.raises(InputError, match="taking it over would delete that folder"):
        claim_table(spark, f"table:{db}.stuck", "items-output", True)
    assert (folder / CLAIM_FILE).read_text().strip() == other  # the other session's claim, kept


# -- real signals, real processes ----------------------------------------------------------


def _cli(cwd: Path, *argv: str, pause_after_charge: bool = False) -> subprocess.Popen:
    """The CLI in a process of its own. ``pause_after_charge``: the process sleeps right after its
    ledger charge (Ledger.charge patched in that process only), so a signal sent once the charge is
    seen arrives while the release runs, however loaded the machine (not a race against its end)."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    if not pause_after_charge:
        return subprocess.Popen([str(Path(sys.executable).parent / "dp-spark"), *argv], cwd=cwd,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return subprocess.Popen([sys.executable, "-c", _PAUSED, *argv], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


_PAUSED = """
import sys, time
from dp_spark.ledger.ledger import Ledger
from dp_spark.cli import main
charge = Ledger.charge
def paused(self, *args, **kwargs):
    out = charge(self, *args, **kwargs)
    time.sleep(600)  # ended by the test's signal
    return out
Ledger.charge = paused
sys.exit(main(sys.argv[1:]))
"""


def _wait_until(ready, proc: subprocess.Popen, what: str, timeout: float = 180) -> None:
    started = time.monotonic()
    while not ready():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - started < timeout, f"{what} never happened"
        time.sleep(0.05)


RUN = ["top-k", "--master", "local[1]", "--k", "3", "--epsilon", "1", "--delta", "1e-6", "--quiet"]


def test_sigterm_drops_the_claim_and_a_sigkilled_runs_claim_is_taken_over_by_a_retry(capsys, spark, tmp_path,
                                                                                      ledger):
    """Real processes, each with its own (in-memory) catalog on the
    warehouse folder of its working directory: SIGTERM during the release
    (once the run's charge is in its ledger; the process then waits, so the
    signal never races the release's end) drops the claim; a SIGKILLed run leaves its claim folder, which a later run of
    this host takes over without --overwrite (a scheduled retry)."""
    import signal

    warehouse = tmp_path / "spark-warehouse"
    claim_file = warehouse / "t" / CLAIM_FILE
    own = tmp_path / "own.db"  # the first run's ledger: its charge marks the start of its release
    with open_ledger(own, create=True) as led:
        led.create_budget("eps", ApproxDP(20.0, 1e-3))
    proc = _cli(tmp_path, *RUN, "--rows", "20000", *charged(own), "--items-output", "table:default.t",
                pause_after_charge=True)
    try:
        _wait_until(lambda: charges(own) == 1, proc, "the charge")
        assert claim_file.is_file()  # claimed before the charge
        proc.send_signal(signal.SIGTERM)
    finally:
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143 and "terminated (SIGTERM)" in err, err
    assert not (warehouse / "t").exists()  # the claim was dropped
    assert not [p for p in warehouse.iterdir() if p.name.startswith("dp_spark_")]

    proc = _cli(tmp_path, *RUN, "--rows", "2000000", "--items-output", "table:default.t")  # killed long before its end
    try:
        _wait_until(claim_file.exists, proc, "the claim")
    finally:
        proc.kill()  # SIGKILL: no cleanup
        proc.communicate(timeout=60)
    assert os.listdir(warehouse / "t") == [CLAIM_FILE] and f"pid {proc.pid} " in claim_file.read_text()

    # the same folder seen from this process's catalog: a database located at that warehouse
    name = f"wh_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE {name} LOCATION '{warehouse}'")
    try:
        code, err = run(capsys, *UNION, *charged(ledger), "--items-output", f"table:{name}.t")
        assert code == 0, err  # the killed run (this host, gone) held nothing: taken over, no flag
        assert "item" in spark.table(f"{name}.t").columns and charges(ledger) == 1
        assert not (warehouse / "t" / CLAIM_FILE).exists()
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")
