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

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import dp_spark.cli as cli
from dp_spark.accounting import ApproxDP
from dp_spark.cli import main
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
    code, err = run(capsys, *UNION, *charged(ledger), "--items-output", f"table:{db}.empty")
    assert code == 0, err
    assert spark.table(f"{db}.empty").count() >= 0 and ours(spark, db) == set()
    assert CLAIM_PROPERTY not in properties(spark, f"{db}.empty") and charges(ledger) == 1


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
    assert code == 143 and "--overwrite takes the claim over" in one_line(err), err
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

    monkeypatch.setattr("dp_spark.commands.top_k.run", failing)
    code, err = run(capsys, *TOPK, "--items-output", target, "--overwrite")
    assert code == 1, err
    assert seen["claim"] and str(os.getpid()) in seen["claim"]  # claimed before the charge
    assert sorted(spark.table(f"{db}.kept").collect()) == rows  # the earlier release, unclaimed
    assert CLAIM_PROPERTY not in properties(spark, f"{db}.kept") and ours(spark, db) == set()


# -- a claim left by a killed run -------------------------------------------------------


def test_a_killed_runs_claim_is_named_and_overwrite_takes_it_over(capsys, spark, db, ledger):
    """A placeholder left by a SIGKILLed run: refused naming the run and the
    fix (nothing charged); --overwrite takes it over and writes the release."""
    pid = gone_pid()
    leave_claim(spark, db, "orphan", pid)
    target = f"table:{db}.orphan"
    code, err = run(capsys, *UNION, *charged(ledger), "--items-output", target)
    line = one_line(err)
    assert code == 2 and f"is claimed by the dp_spark run of pid {pid} on host {socket.gethostname()!r}" in line
    assert "holds no release" in line and "pass --overwrite to take the claim over" in line
    assert f"DROP TABLE {db}.orphan" in line and charges(ledger) == 0
    code, err = run(capsys, *UNION, *charged(ledger), "--items-output", target, "--overwrite")
    assert code == 0, err
    props = properties(spark, f"{db}.orphan")
    assert TABLE_PROPERTY in props and CLAIM_PROPERTY not in props and PLACEHOLDER_PROPERTY not in props
    assert "item" in spark.table(f"{db}.orphan").columns and ours(spark, db) == set() and charges(ledger) == 1


def test_overwrite_does_not_take_a_claim_whose_process_still_runs_here(capsys, spark, db, ledger):
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        leave_claim(spark, db, "busy", alive.pid)
        code, err = run(capsys, *UNION, *charged(ledger), "--items-output", f"table:{db}.busy", "--overwrite")
        line = one_line(err)
        assert code == 2 and f"pid {alive.pid}" in line and "which is still running" in line, err
        assert charges(ledger) == 0 and PLACEHOLDER_PROPERTY in properties(spark, f"{db}.busy")
    finally:
        alive.kill()
        alive.wait()
    code, err = run(capsys, *UNION, *charged(ledger), "--items-output", f"table:{db}.busy", "--overwrite")
    assert code == 0, err


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


# -- real signals, real processes ----------------------------------------------------------


def _cli(cwd: Path, *argv: str) -> subprocess.Popen:
    exe = Path(sys.executable).parent / "dp-spark"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    return subprocess.Popen([str(exe), *argv], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 180) -> None:
    started = time.monotonic()
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - started < timeout, "the claim never appeared"
        time.sleep(0.1)


BIG = ["top-k", "--rows", "50000000", "--master", "local[1]", "--k", "3", "--epsilon", "1", "--delta", "1e-6"]


def test_sigterm_drops_the_claim_and_a_sigkilled_runs_claim_is_taken_over(capsys, spark, tmp_path, ledger):
    """Real processes, each with its own (in-memory) catalog on the
    warehouse folder of its working directory: SIGTERM during the release
    drops the claim; a SIGKILLed run leaves its claim folder, which a later
    run names (nothing charged) and --overwrite takes over."""
    import signal

    warehouse = tmp_path / "spark-warehouse"
    claim_file = warehouse / "t" / CLAIM_FILE
    proc = _cli(tmp_path, *BIG, "--items-output", "table:default.t")
    _wait_for(claim_file, proc)
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert not (warehouse / "t").exists()  # the claim was dropped
    assert not [p for p in warehouse.iterdir() if p.name.startswith("dp_spark_")]

    proc = _cli(tmp_path, *BIG, "--items-output", "table:default.t")
    _wait_for(claim_file, proc)
    proc.kill()  # SIGKILL: no cleanup
    proc.communicate(timeout=60)
    assert os.listdir(warehouse / "t") == [CLAIM_FILE]

    # the same folder seen from this process's catalog: a database located at that warehouse
    name = f"wh_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE {name} LOCATION '{warehouse}'")
    try:
        code, err = run(capsys, *UNION, *charged(ledger), "--items-output", f"table:{name}.t")
        line = one_line(err)
        assert code == 2 and f"holds the claim of the dp_spark run of pid {proc.pid}" in line, err
        assert "pass --overwrite to take the claim over" in line and charges(ledger) == 0
        code, err = run(capsys, *UNION, *charged(ledger), "--items-output", f"table:{name}.t", "--overwrite")
        assert code == 0, err
        assert "item" in spark.table(f"{name}.t").columns and charges(ledger) == 1
        assert not (warehouse / "t" / CLAIM_FILE).exists()
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")
