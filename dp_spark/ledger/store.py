"""Where a ledger lives: an SQLite file (standard library) or a PostgreSQL
database (``postgresql://…``, through the optional ``psycopg`` driver).

Both backends give the ledger one primitive, :meth:`Store.transaction`: a
transaction that holds an exclusive lock on one budget until it commits, so
that checking what is left and recording a charge happen as one step even
when several processes (a scheduler's workers) charge the same budget at once.
SQLite takes the database's write lock (``BEGIN IMMEDIATE``); PostgreSQL
locks the budget's row (``SELECT … FOR UPDATE``).
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from dp_spark.errors import InputError

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS dp_budgets (
        name TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        epsilon DOUBLE PRECISION,
        delta DOUBLE PRECISION,
        rho DOUBLE PRECISION,
        created TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS dp_charges (
        budget TEXT NOT NULL,
        seq INTEGER NOT NULL,
        release TEXT NOT NULL,
        cost TEXT NOT NULL,
        counted TEXT NOT NULL,
        rule TEXT NOT NULL,
        run_key TEXT,
        key_seq INTEGER,
        parameters TEXT NOT NULL,
        created TEXT NOT NULL,
        PRIMARY KEY (budget, seq)
    )""",
    # One row per keyed charge (run key and step): what the run is (release,
    # parameters, input: ``identity`` is the SHA-256 of ``described``), its
    # state ('charged': nothing drawn under it has left the process;
    # 'released': ``record`` holds the Release's JSON report, recorded before
    # the release was returned, printed or written) and the outputs it named.
    # Added after 0.1.0: a ledger made before gets this table when opened; its
    # charges are kept as they were.
    """CREATE TABLE IF NOT EXISTS dp_runs (
        budget TEXT NOT NULL,
        run_key TEXT NOT NULL,
        key_seq INTEGER NOT NULL,
        release TEXT NOT NULL,
        identity TEXT NOT NULL,
        described TEXT NOT NULL,
        state TEXT NOT NULL,
        outputs TEXT NOT NULL,
        record TEXT,
        created TEXT NOT NULL,
        released TEXT,
        PRIMARY KEY (budget, run_key, key_seq)
    )""",
)

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_database_url(location: str) -> bool:
    return str(location).startswith(POSTGRES_SCHEMES)


def open_store(location, create: bool = False) -> "Store":
    """The store at ``location``: a PostgreSQL URL, ``sqlite:///path`` or a path.

    A missing SQLite file is created only with ``create=True`` (``dp-spark
    ledger create``); a release naming a ledger that does not exist is refused."""
    text = str(location)
    if is_database_url(text):
        return PostgresStore(text)
    if text.startswith("sqlite:///"):
        text = text[len("sqlite://"):]
    elif "://" in text:
        raise InputError(f"unsupported ledger location {text!r}; give a file path or a postgresql:// URL.")
    return SQLiteStore(Path(text), create)


class Store:
    """A SQL database holding dp_budgets, dp_charges and dp_runs."""

    placeholder = "?"

    def _sql(self, statement: str) -> str:
        return statement if self.placeholder == "?" else statement.replace("?", self.placeholder)

    def transaction(self, lock_budget: str | None = None):  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class _Cursor:
    """execute(sql, params) -> list of rows, with '?' placeholders."""

    def __init__(self, store: Store, raw) -> None:
        self._store, self._raw = store, raw

    def execute(self, statement: str, params=()) -> list[tuple]:
        self._raw.execute(self._store._sql(statement), tuple(params))
        try:
            return list(self._raw.fetchall())
        except Exception:  # noqa: BLE001 - statements without a result set
            return []


class SQLiteStore(Store):
    """A local SQLite file; transactions take the write lock at once
    (``BEGIN IMMEDIATE``) and wait up to 60 s for another process's."""

    def __init__(self, path: Path, create: bool) -> None:
        self.path = path
        self.description = str(path)
        if not path.exists() and not create:
            raise InputError(
                f"ledger {str(path)!r} does not exist; create it and a budget with "
                "'dp-spark ledger create LEDGER BUDGET --epsilon E'."
            )
        if path.is_dir():
            raise InputError(f"ledger {str(path)!r} is a directory; give the path of a ledger file.")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(path), timeout=60.0, isolation_level=None)
            for statement in SCHEMA:
                self._conn.execute(statement)
        except (sqlite3.Error, OSError) as exc:
            raise InputError(f"cannot open the ledger {str(path)!r}: {_first_line(exc)}") from None

    @contextlib.contextmanager
    def transaction(self, lock_budget: str | None = None):
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise InputError(f"cannot lock the ledger {self.description!r}: {_first_line(exc)}") from None
        try:
            yield _Cursor(self, self._conn.cursor())
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def close(self) -> None:
        self._conn.close()


class PostgresStore(Store):
    """A PostgreSQL database shared by many workers; the budget's row is
    locked (``SELECT … FOR UPDATE``) while a charge is checked and recorded."""

    placeholder = "%s"

    def __init__(self, url: str) -> None:
        try:
            import psycopg
        except ImportError:
            raise InputError(
                "a postgresql:// ledger needs the psycopg driver: pip install 'dp_spark[postgres]'."
            ) from None
        self._psycopg = psycopg
        self.description = _redacted(url)
        try:
            self._conn = psycopg.connect(url, connect_timeout=10, autocommit=True)
            with self._conn.transaction():
                # concurrent CREATE TABLE IF NOT EXISTS can collide in PostgreSQL
                self._conn.execute("SELECT pg_advisory_xact_lock(727171)")
                for statement in SCHEMA:
                    self._conn.execute(statement)
        except psycopg.Error as exc:
            raise InputError(f"cannot open the ledger {self.description}: {_first_line(exc)}") from None

    @contextlib.contextmanager
    def transaction(self, lock_budget: str | None = None):
        with self._conn.transaction():
            cursor = _Cursor(self, self._conn.cursor())
            if lock_budget is not None:
                cursor.execute("SELECT name FROM dp_budgets WHERE name = ? FOR UPDATE", (lock_budget,))
            yield cursor

    def close(self) -> None:
        self._conn.close()


def _redacted(url: str) -> str:
    """The URL without its password, for messages."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password:
        host = parts.hostname or ""
        netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
        parts = parts._replace(netloc=netloc)
    return urlunsplit(parts)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
