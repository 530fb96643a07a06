"""DataFrame outputs written to the session's catalog (``table:db.name``):
saved with saveAsTable, marked as dp_spark's with a table property,
refused when they exist unless --overwrite, never replacing a table
dp_spark did not write, names validated, seeded tables marked "not for
publication", and every refusal made before the ledger is charged."""

from __future__ import annotations

import uuid

import pytest

from dp_spark.cli import main
from dp_spark.errors import InputError
from dp_spark.io import check_table_output, table_name, write_table
from dp_spark.ledger import open_ledger
from dp_spark.accounting import ApproxDP
from dp_spark.marking import COLUMN, KEY, NOTICE, TABLE_PROPERTY

TOPK = ["top-k", "--rows", "20000", "--k", "3", "--epsilon", "2", "--delta", "1e-6", "--quiet"]
UNION = ["set-union", "--rows", "20000", "--max-items", "20", "--epsilon", "2", "--delta", "1e-5",
         "--method", "policy-laplace", "--quiet"]


@pytest.fixture
def db(spark, tmp_path):
    """A fresh database whose tables live under tmp_path (not the working directory)."""
    name = f"dpt_{uuid.uuid4().hex[:10]}"
    spark.sql(f"CREATE DATABASE {name} LOCATION '{tmp_path / name}'")
    yield name
    spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")


def properties(spark, name) -> dict:
    return {row[0]: row[1] for row in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}


def run(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


def test_items_written_to_a_table_are_marked_ours_and_unseeded_unmarked(capsys, spark, db):
    code, err = run(capsys, *TOPK, "--items-output", f"table:{db}.top")
    assert code == 0, err
    table = spark.table(f"{db}.top")
    assert set(table.columns) == {"rank", "item"} and table.count() == 3
    props = properties(spark, f"{db}.top")
    assert TABLE_PROPERTY in props and KEY not in props
    assert COLUMN not in table.columns


@pytest.mark.parametrize("argv", [TOPK, UNION], ids=["top-k", "set-union"])
def test_seeded_table_is_marked_not_for_publication(capsys, spark, db, argv):
    code, err = run(capsys, *argv, "--seed", "1", "--items-output", f"table:{db}.seeded")
    assert code == 0, err
    table = spark.table(f"{db}.seeded")
    assert table.columns[-1] == COLUMN
    assert table.where(f"{COLUMN} IS NOT TRUE").count() == 0  # True on every row
    props = properties(spark, f"{db}.seeded")
    assert props[KEY] == NOTICE and TABLE_PROPERTY in props
    assert spark.catalog.getTable(f"{db}.seeded").description == NOTICE  # the table comment


def test_existing_table_needs_overwrite_and_is_then_replaced(capsys, spark, db):
    target = f"table:{db}.top"
    assert run(capsys, *TOPK, "--items-output", target)[0] == 0
    first = spark.table(f"{db}.top").collect()
    code, err = run(capsys, *TOPK, "--items-output", target)
    assert code == 2 and "already exists; pass --overwrite" in err, err
    assert spark.table(f"{db}.top").collect() == first  # untouched
    code, err = run(capsys, *TOPK, "--seed", "3", "--items-output", target, "--overwrite")
    assert code == 0, err
    assert COLUMN in spark.table(f"{db}.top").columns  # the seeded run's table replaced it
    assert [t.name for t in spark.catalog.listTables(db) if t.name.startswith("dp_spark_")] == []


def test_a_table_dp_spark_did_not_write_is_never_replaced(capsys, spark, db):
    spark.createDataFrame([(1, "x")], "a int, b string").write.saveAsTable(f"{db}.theirs")
    for extra in ([], ["--overwrite"]):
        code, err = run(capsys, *TOPK, "--items-output", f"table:{db}.theirs", *extra)
        assert code == 2 and f"without the property {TABLE_PROPERTY!r}" in err, err
    assert spark.table(f"{db}.theirs").collect()[0]["b"] == "x"
    spark.sql(f"CREATE VIEW {db}.v AS SELECT 1 AS a")
    code, err = run(capsys, *TOPK, "--items-output", f"table:{db}.v", "--overwrite")
    assert code == 2 and "is a view" in err, err


@pytest.mark.parametrize("bad", ["table:", "table:a.b.c", "table:1db.t", "table:db.t-x", "table:db.`t`",
                                 "table:db.t;DROP", "table:" + "x" * 129, "table:db..t"])
def test_bad_table_names_are_refused_before_spark(capsys, bad):
    code, err = run(capsys, *TOPK, "--items-output", bad, "--dry-run")
    assert code == 2 and "is not a table name" in err, err
    with pytest.raises(InputError, match="is not a table name"):
        table_name(bad)


def test_table_for_a_file_output_and_shared_tables_are_refused(capsys, db):
    code, err = run(capsys, *TOPK, "--output", f"table:{db}.r", "--dry-run")
    assert code == 2 and "is a file; table:db.name is for DataFrame outputs" in err, err
    code, err = run(capsys, "continual-distinct", "--rows", "2000", "--rho", "1", "--horizon", "8",
                    "--input", f"table:{db}.events", "--series", f"table:{db.upper()}.EVENTS", "--dry-run")
    assert code == 2 and "is the --input table" in err, err


def test_missing_database_is_refused_and_nothing_is_charged(capsys, spark, db, tmp_path):
    ledger = tmp_path / "budgets.db"
    with open_ledger(ledger, create=True) as led:
        led.create_budget("eps", ApproxDP(5.0, 1e-4))
    base = [*TOPK, "--ledger", str(ledger), "--ledger-budget", "eps"]
    code, err = run(capsys, *base, "--items-output", f"table:nodb_{uuid.uuid4().hex[:8]}.t")
    assert code == 2 and "does not exist in the session's catalog" in err, err
    spark.createDataFrame([(1,)], "a int").write.saveAsTable(f"{db}.theirs")
    code, err = run(capsys, *base, "--items-output", f"table:{db}.theirs", "--overwrite")
    assert code == 2, err
    with open_ledger(ledger) as led:
        assert led.history("eps") == []  # refused before the charge: nothing spent
    code, err = run(capsys, *base, "--items-output", f"table:{db}.fine")
    assert code == 0, err
    with open_ledger(ledger) as led:
        assert len(led.history("eps")) == 1


def test_continual_series_to_a_table(capsys, spark, db):
    code, err = run(capsys, "continual-distinct", "--rows", "3000", "--rho", "1", "--horizon", "16", "--seed", "2",
                    "--series", f"table:{db}.series", "--quiet")
    assert code == 0, err
    series = spark.table(f"{db}.series")
    assert series.count() == 16 and series.columns.count(COLUMN) == 1
    assert properties(spark, f"{db}.series")[KEY] == NOTICE


def test_python_api_write_table_and_release_write(spark, db):
    df = spark.createDataFrame([(1, "a"), (2, "b")], "rank int, item string")
    write_table(df, f"table:{db}.api")
    with pytest.raises(InputError, match="already exists; pass overwrite=True"):
        write_table(df, f"table:{db}.api")
    write_table(df.limit(1), f"table:{db}.api", overwrite=True)
    assert spark.table(f"{db}.api").count() == 1
    with pytest.raises(InputError, match="already exists; pass --overwrite"):
        check_table_output(spark, f"table:{db}.api", "items-output", overwrite=False)
    check_table_output(spark, f"table:{db}.api", "items-output", overwrite=True)
    check_table_output(spark, f"table:{db}.new", "items-output", overwrite=False)
    assert not spark.catalog.tableExists(f"{db}.new")  # the check leaves nothing behind

    from dp_spark.report import Release

    release = Release(name="top-k", privacy_unit="person", neighbouring="add/remove", guarantee=None,
                      parameters={}, values={}, errors={}, statement="", seeded=True, budget_split=[],
                      artifacts={"items": df})
    with pytest.raises(InputError, match="already exists"):
        release.write("items", f"table:{db}.api")
    release.write("items", f"table:{db}.api", overwrite=True)
    assert COLUMN in spark.table(f"{db}.api").columns


def _failing_renames(spark, monkeypatch, fail):
    """Make ``spark.sql`` raise on the renames ``fail`` picks (by their SQL text)."""
    real = type(spark).sql

    def sql(self, text, *args, **kwargs):
        if "RENAME TO" in text and fail(text):
            raise RuntimeError("rename failed")
        return real(self, text, *args, **kwargs)

    monkeypatch.setattr(type(spark), "sql", sql)


def _tables(spark, db) -> set:
    return {row.tableName for row in spark.sql(f"SHOW TABLES IN {db}").collect() if not row.isTemporary}


def test_a_failed_rename_loses_neither_the_earlier_table_nor_the_release(spark, db, monkeypatch):
    """Replacing a table: the earlier one is renamed to a backup first; if the
    new release cannot be renamed to the target, the backup is put back and
    the release is kept (its name in the error), nothing dropped."""
    old = spark.createDataFrame([(1, "a"), (2, "b")], "rank int, item string")
    write_table(old, f"table:{db}.kept")
    new = spark.createDataFrame([(7, "z")], "rank int, item string")
    _failing_renames(spark, monkeypatch, lambda text: "dp_spark_tmp_" in text.split("RENAME TO")[0])
    with pytest.raises(Exception, match=r"kept as `[^`]+`\.`(dp_spark_tmp_\w+)`") as info:
        write_table(new, f"table:{db}.kept", overwrite=True)
    monkeypatch.undo()
    assert sorted(spark.table(f"{db}.kept").collect()) == sorted(old.collect())  # the earlier table is back
    kept = [t for t in _tables(spark, db) if t.startswith("dp_spark_tmp_")]
    assert len(kept) == 1 and kept[0] in str(info.value)
    assert spark.table(f"{db}.{kept[0]}").select("rank").collect()[0][0] == 7  # the release is kept
    assert not [t for t in _tables(spark, db) if t.startswith("dp_spark_old_")]


def test_when_the_earlier_table_cannot_be_put_back_both_are_kept(spark, db, monkeypatch):
    old = spark.createDataFrame([(1, "a")], "rank int, item string")
    write_table(old, f"table:{db}.both")
    new = spark.createDataFrame([(7, "z")], "rank int, item string")
    _failing_renames(spark, monkeypatch, lambda text: "dp_spark_old_" not in text.split("RENAME TO")[1])
    with pytest.raises(Exception, match="Neither was dropped"):
        write_table(new, f"table:{db}.both", overwrite=True)
    monkeypatch.undo()
    tables = _tables(spark, db)
    backup = [t for t in tables if t.startswith("dp_spark_old_")]
    tmp = [t for t in tables if t.startswith("dp_spark_tmp_")]
    assert "both" not in tables and len(backup) == 1 and len(tmp) == 1
    assert spark.table(f"{db}.{backup[0]}").collect()[0][0] == 1
    assert spark.table(f"{db}.{tmp[0]}").collect()[0][0] == 7


def test_a_successful_replacement_leaves_no_backup_or_temporary_table(spark, db):
    df = spark.createDataFrame([(1, "a")], "rank int, item string")
    write_table(df, f"table:{db}.clean")
    write_table(df.limit(0), f"table:{db}.clean", overwrite=True)
    assert _tables(spark, db) == {"clean"} and spark.table(f"{db}.clean").count() == 0


@pytest.mark.parametrize("argv, flag, table", [(TOPK, "--items-output", "top"),
                                               (["continual-distinct", "--rows", "3000", "--rho", "1", "--horizon",
                                                 "16", "--seed", "2", "--quiet"], "--series", "series")])
def test_the_writers_replace_a_table_only_with_overwrite(capsys, spark, db, monkeypatch, argv, flag, table):
    """The CLI's table writers pass --overwrite on: a table that appears after
    the early check (simulated by skipping it) is not replaced without
    --overwrite, and is with it."""
    import dp_spark.commands.outputs as outputs

    target = f"table:{db}.{table}"
    assert run(capsys, *argv, flag, target)[0] == 0, "first write"
    first = spark.table(f"{db}.{table}").count()
    spark.sql(f"INSERT INTO {db}.{table} SELECT * FROM {db}.{table} LIMIT 1")  # tell the old table apart
    monkeypatch.setattr(outputs, "check_table_outputs", lambda *a, **k: None, raising=False)
    code, err = run(capsys, *argv, flag, target)
    assert code != 0 and "already exists" in err, err
    assert spark.table(f"{db}.{table}").count() == first + 1  # untouched
    code, err = run(capsys, *argv, flag, target, "--overwrite")
    assert code == 0, err
    assert spark.table(f"{db}.{table}").count() == first  # replaced


def test_write_dataframe_atomic_does_not_replace_a_table_by_default(spark, db):
    from dp_spark.io import write_dataframe_atomic

    df = spark.createDataFrame([(1, "a")], "rank int, item string")
    write_dataframe_atomic(df, f"table:{db}.atomic")
    with pytest.raises(InputError, match="already exists"):
        write_dataframe_atomic(df.limit(0), f"table:{db}.atomic")
    assert spark.table(f"{db}.atomic").count() == 1
    write_dataframe_atomic(df.limit(0), f"table:{db}.atomic", overwrite=True)
    assert spark.table(f"{db}.atomic").count() == 0


def test_groups_output_replaces_a_table_only_with_overwrite(capsys, spark, db, tmp_path, monkeypatch):
    """--groups-output passes --overwrite on to the writer like the other
    table outputs (it used not to): a table that appears after the early
    check is kept without --overwrite and replaced with it."""
    data = tmp_path / "grouped.parquet"
    spark.createDataFrame([(p, f"i{p % 7}", f"g{p % 2}") for p in range(400)],
                          "person_id long, item string, country string").write.parquet(str(data))
    argv = ["top-k", "--input", str(data), "--k", "2", "--epsilon", "2", "--delta", "1e-6", "--group-by",
            "country", "--max-groups", "1", "--seed", "3", "--quiet"]
    keys = tmp_path / "keys.csv"
    keys.write_text("country\ng0\ng1\n")
    target = f"table:{db}.grouped"
    assert run(capsys, *argv, "--groups", str(keys), "--groups-output", target)[0] == 0, "first write"
    first = spark.table(f"{db}.grouped").count()
    spark.sql(f"INSERT INTO {db}.grouped SELECT * FROM {db}.grouped LIMIT 1")  # tell the old table apart
    monkeypatch.setattr("dp_spark.commands.outputs.check_table_outputs", lambda *a, **k: None)
    code, err = run(capsys, *argv, "--groups", str(keys), "--groups-output", target)
    assert code != 0 and "already exists" in err, err
    assert spark.table(f"{db}.grouped").count() == first + 1  # untouched
    code, err = run(capsys, *argv, "--groups", str(keys), "--groups-output", target, "--overwrite")
    assert code == 0, err
    assert spark.table(f"{db}.grouped").count() == first  # replaced
