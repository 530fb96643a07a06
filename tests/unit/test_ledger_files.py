"""The ledger file is handled like the budgets it holds (issue 22): read-only
commands never write, a file that is not a dp_spark ledger is refused without
a byte changed, a read-only or damaged ledger is one line saying what is
wrong, credentials never reach a message, budget names are whole-string
matches."""

from __future__ import annotations

import sqlite3

import pytest

from dp_spark.accounting import PureDP
from dp_spark.errors import InputError, ParameterError
from dp_spark.ledger import open_ledger
from dp_spark.ledger.store import SQLiteStore, _redacted, _scrubbed
from tests.unit.helpers import assert_one_line_error


def _ledger_cli(capsys, *argv):
    from dp_spark.cli import main

    code = main(["ledger", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def foreign_db(tmp_path):
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER, name TEXT)")
        conn.execute("INSERT INTO users VALUES (1, 'ada')")
    return path


@pytest.mark.parametrize("action", ["show", "history"])
def test_read_only_commands_refuse_someone_elses_sqlite_file_unchanged(capsys, foreign_db, action):
    before = foreign_db.read_bytes()
    code, out, err = _ledger_cli(capsys, action, str(foreign_db))
    assert code == 2
    assert_one_line_error(err, "is not a dp_spark ledger (an SQLite database without dp_spark's tables")
    assert foreign_db.read_bytes() == before  # before: our three tables were added to it


@pytest.mark.parametrize("content", [b"", b'{"not": "a ledger"}\n'])
@pytest.mark.parametrize("action", ["show", "history"])
def test_read_only_commands_never_turn_a_file_into_a_database(capsys, tmp_path, content, action):
    path = tmp_path / "empty.json"
    path.write_bytes(content)
    code, out, err = _ledger_cli(capsys, action, str(path))
    assert code == 2 and "is not a dp_spark ledger" in err, err
    assert path.read_bytes() == content  # before: the file became an SQLite database


def test_a_release_or_create_never_adds_our_tables_to_a_foreign_database(foreign_db):
    before = foreign_db.read_bytes()
    for create in (False, True):
        with pytest.raises(InputError, match="is not a dp_spark ledger"):
            open_ledger(foreign_db, create=create)
    assert foreign_db.read_bytes() == before


def test_show_reads_an_older_ledger_without_migrating_it(capsys, tmp_path):
    path = tmp_path / "old.db"
    with open_ledger(path, create=True) as ledger:
        ledger.create_budget("team", PureDP(1.0))
        ledger.charge("team", PureDP(0.25), "distinct-count")
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE dp_runs")  # as a ledger written before run records existed
    before = path.read_bytes()
    code, out, err = _ledger_cli(capsys, "show", str(path))
    assert code == 0 and "team" in out and "1 charge(s)" in out, err
    code, out, err = _ledger_cli(capsys, "history", str(path))
    assert code == 0 and "distinct-count" in out, err
    assert path.read_bytes() == before


def test_a_read_only_ledger_is_one_line_saying_so_and_nothing_is_charged(tmp_path):
    path = tmp_path / "l.db"
    with open_ledger(path, create=True) as ledger:
        ledger.create_budget("team", PureDP(1.0))
    store = SQLiteStore(path, create=False, read_only=True)  # as a file the process may not write
    with pytest.raises(InputError) as info:
        with store.transaction() as cur:
            cur.execute("INSERT INTO dp_charges (budget, seq, release, cost, counted, rule, parameters, created) "
                        "VALUES ('team', 1, 'x', '{}', '{}', 'r', '{}', 't')")
    message = str(info.value)
    assert "is read-only" in message and "write access" in message and "Nothing was charged" in message
    store.close()
    with open_ledger(path) as ledger:
        assert ledger.history() == []


def test_a_damaged_ledger_says_it_is_damaged(tmp_path):
    path = tmp_path / "l.db"
    with open_ledger(path, create=True) as ledger:
        ledger.create_budget("team", PureDP(1.0))
        for i in range(200):
            ledger.charge("team", PureDP(0.001), f"release-{i}")
    data = bytearray(path.read_bytes())
    page = 4096
    for at in range(page, len(data), page):  # every page after the first: headers overwritten
        data[at:at + 16] = b"\xff" * 16
    path.write_bytes(bytes(data))
    with pytest.raises(InputError) as info:
        with open_ledger(path) as ledger:
            ledger.state("team")
    message = str(info.value)
    assert "is damaged" in message or "is not a dp_spark ledger" in message, message
    assert "unexpected" not in message


def test_every_credential_form_of_a_postgres_url_is_masked():
    url = ("postgresql://ana:pw%40s3cret@db.example:5432/ledger?sslmode=require&password=hunter2"
           "&sslpassword=keypass&application_name=dp")
    shown = _redacted(url)
    for secret in ("pw%40s3cret", "hunter2", "keypass"):
        assert secret not in shown
    assert "ana:***@db.example:5432" in shown and "sslmode=require" in shown and "application_name=dp" in shown
    assert _scrubbed("connection to server failed: password hunter2 / pw@s3cret rejected", url) == (
        "connection to server failed: password *** / *** rejected")


def test_an_unreachable_postgres_ledger_never_echoes_its_password():
    pytest.importorskip("psycopg")
    url = "postgresql://ana@127.0.0.1:1/ledger?password=hunter2&connect_timeout=2"
    with pytest.raises(InputError) as info:
        open_ledger(url)
    assert "hunter2" not in str(info.value) and "password=***" in str(info.value)


@pytest.mark.parametrize("name", ["team\n", "team\r\n", " team", "team "])
def test_a_budget_name_is_matched_whole(tmp_path, name):
    with open_ledger(tmp_path / "l.db", create=True) as ledger:
        with pytest.raises(ParameterError, match="budget name"):
            ledger.create_budget(name, PureDP(1.0))
