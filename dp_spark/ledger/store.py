"""Where a ledger lives: an SQLite file (standard library) or a PostgreSQL database (``postgresql://…``,
through the optional ``psycopg`` driver).

Both give the ledger one primitive, :meth:`Store.transaction`: a transaction holding an exclusive lock on
one budget until it commits, so that checking what is left and recording a charge are one step even when
several processes charge the same budget at once. SQLite takes the database's write lock (``BEGIN
IMMEDIATE``); PostgreSQL locks the budget's row (``SELECT … FOR UPDATE``).
"""

from __future__ import annotations

import contextlib
import re
import shlex
import shutil
import sqlite3
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

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
    # One row per keyed charge (run key and step): the run's identity (``identity`` is the SHA-256 of
    # ``described``; prefixed 'drawn:' while 'drawn'), its state (:mod:`dp_spark.ledger.rules`), the Release's
    # JSON report once 'released', and the outputs it named. An older ledger gets this table when opened.
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
    # Facts about the ledger itself: which one-time migrations it has had (:func:`migrate`).
    """CREATE TABLE IF NOT EXISTS dp_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
)

#: dp_meta's key of the 'drawn' state's migration (:func:`migrate`).
DRAWN_MIGRATION = "runs_drawn_state"
#: The prefix of a 'drawn' run's identity column (an older dp_spark version then refuses a retry).
DRAWN_IDENTITY = "drawn:"


def migrate(execute) -> None:
    """The one-time migrations of a ledger opened for writing, in the transaction that created the tables.
    ``execute(sql)`` returns the rows.

    The 'drawn' state: a ledger without it may hold 'charged' runs that drew and showed their noise before
    they were interrupted, so every such run is marked 'drawn' (identity prefixed as
    :mod:`dp_spark.ledger.ledger` does): a retry under its key is refused, never a second draw. A ledger
    created by this version records the migration at once, so its own 'charged' runs keep their charge."""
    if execute(f"SELECT value FROM dp_meta WHERE key = '{DRAWN_MIGRATION}'"):
        return
    execute(f"UPDATE dp_runs SET state = 'drawn', identity = '{DRAWN_IDENTITY}' || identity "
            "WHERE state = 'charged'")
    execute(f"INSERT INTO dp_meta (key, value) VALUES ('{DRAWN_MIGRATION}', "
            "'charged runs of an earlier version marked drawn')")

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_database_url(location: str) -> bool:
    return str(location).startswith(POSTGRES_SCHEMES)


#: The tables every dp_spark ledger has (an older one gets dp_runs when opened for writing).
LEDGER_TABLES = ("dp_budgets", "dp_charges")


def open_store(location, create: bool = False, read_only: bool = False) -> "Store":
    """The store at ``location``: a PostgreSQL URL, ``sqlite:///path`` or a path.

    A missing SQLite file is created only with ``create=True`` (``dp-spark ledger create``). An existing
    database that is not a dp_spark ledger is refused without a byte changed. ``read_only`` (``ledger
    show``, ``ledger history``): nothing is ever written, not even the tables of a newer version."""
    text = str(location)
    if is_database_url(text):
        return PostgresStore(text, read_only)
    if text.startswith("sqlite:///"):
        text = text[len("sqlite://"):]
    elif "://" in text:
        raise InputError(f"unsupported ledger location {_redacted(text)!r}; give a file path or a postgresql:// URL.")
    return SQLiteStore(Path(text), create, read_only)


#: What a failed ledger transaction left, by default (its changes are rolled back).
NOTHING_CHARGED = "Nothing was charged."


class Store:
    """A SQL database holding dp_budgets, dp_charges and dp_runs."""

    placeholder = "?"

    def _sql(self, statement: str) -> str:
        return statement if self.placeholder == "?" else statement.replace("?", self.placeholder)

    def transaction(self, lock_budget: str | None = None, outcome: str = NOTHING_CHARGED):  # pragma: no cover
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class _Cursor:
    """execute(sql, params) -> list of rows, with '?' placeholders. ``outcome``: the sentence a failure of
    the transaction ends with (what was and was not spent), set by the caller once it knows."""

    def __init__(self, store: Store, raw, outcome: str = NOTHING_CHARGED) -> None:
        self._store, self._raw = store, raw
        self.outcome = outcome

    def execute(self, statement: str, params=()) -> list[tuple]:
        try:
            self._raw.execute(self._store._sql(statement), tuple(params))
        except sqlite3.Error as exc:
            raise InputError(_sqlite_problem(self._store.description, exc, self.outcome)) from None
        try:
            return list(self._raw.fetchall())
        except Exception:  # noqa: BLE001 - statements without a result set
            return []


def _sqlite_problem(where: str, exc: BaseException, outcome: str = NOTHING_CHARGED) -> str:
    """One line saying what is wrong with an SQLite ledger file, ending with ``outcome``: what the failed
    (rolled back) transaction left spent."""
    text = _first_line(exc).lower()
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name == "SQLITE_READONLY_ROLLBACK":
        what = _unfinished_write(where)
    elif "readonly" in text or "read-only" in text:
        what = ("is read-only: dp_spark records every charge in it; give the user running dp_spark write "
                "access to the file and its folder")
    elif "malformed" in text or "not a database" in text or "corrupt" in text:
        what = ("is damaged (SQLite reports a malformed or foreign file); restore it from a backup, or "
                "use 'sqlite3 LEDGER .recover' on a copy")
    elif "locked" in text or "busy" in text:
        what = "is locked by another process for more than 60 s; retry when it has finished"
    elif name.startswith(("SQLITE_FULL", "SQLITE_IOERR")) or "disk" in text or "full" in text or "i/o" in text:
        what = _disk_problem(where, exc, name)
    else:
        what = f"cannot be used ({_first_line(exc)})"
    return f"the ledger {where!r} {what}.{' ' + outcome if outcome else ''}"


#: Below this many free bytes a disk counts as full (a charge's journal holds a few 4 KiB pages).
FULL_DISK_BYTES = 1 << 20


def _disk_problem(where: str, exc: BaseException, name: str) -> str:
    """Why SQLite could not write (or read) the ledger file, as far as can be told from the error and the
    free space of the ledger's folder (a public fact): a full disk, a file-size limit or quota, or a failing
    disk."""
    said = f"SQLite: {_first_line(exc)}" + (f", {name}" if name else "")
    free = _free_bytes(where)
    if name.startswith(("SQLITE_IOERR_READ", "SQLITE_IOERR_SHORT_READ")):
        return f"cannot be read ({said}): its disk failed to read it; check the disk, or restore it from a backup"
    if name == "SQLITE_FULL" or (free is not None and free < FULL_DISK_BYTES):
        left = "" if free is None else f", {_bytes(free)} free"
        return f"cannot be written: its disk is full ({said}{left}); free space on that disk, then retry"
    room = "" if free is None else f" although its disk has {_bytes(free)} free"
    return (f"cannot be written ({said}){room}: a file-size limit (ulimit -f) or disk quota, or a failing "
            "disk, refused the write; lift the limit, or move the ledger to a disk that takes it, then retry")


def _unfinished_write(where: str) -> str:
    """A read-only open that found a hot rollback journal: a writer stopped mid-transaction (so it charged
    nothing), and only a writer may roll it back."""
    return (f"holds an unfinished write ({where + '-journal'!r}, left by a run stopped while writing it, e.g. "
            "on a full disk; it charged nothing) that only a writer can roll back, and 'ledger show' and 'ledger "
            f"history' never write: open it once for writing, e.g. sqlite3 {shlex.quote(where)} "
            "'PRAGMA quick_check' as a user who may write it (the next release using the ledger also rolls it back)")


def _free_bytes(where: str) -> int | None:
    try:
        return shutil.disk_usage(Path(where).resolve().parent).free
    except (OSError, ValueError):
        return None


def _bytes(n: int) -> str:
    """``n`` bytes, rounded for a message: "3 bytes", "812.0 KB", "74.2 GB"."""
    if n < 1000:
        return f"{n} bytes"
    power = min(4, (len(str(int(n))) - 1) // 3)
    return f"{n / 1000 ** power:.1f} {'KMGT'[power - 1]}B"


def _rollback(conn) -> None:
    """Roll back ``conn``'s open transaction unless SQLite already did (a second ROLLBACK must not hide the
    error). A failed ROLLBACK leaves the journal, which the next connection rolls back."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


class SQLiteStore(Store):
    """A local SQLite file; transactions take the write lock at once
    (``BEGIN IMMEDIATE``) and wait up to 60 s for another process's."""

    def __init__(self, path: Path, create: bool, read_only: bool = False) -> None:
        self.path = path
        self.description = str(path)
        self.read_only = read_only
        if not path.exists() and (read_only or not create):
            raise InputError(
                f"ledger {str(path)!r} does not exist; create it and a budget with "
                "'dp-spark ledger create LEDGER BUDGET --epsilon E'."
            )
        if path.is_dir():
            raise InputError(f"ledger {str(path)!r} is a directory; give the path of a ledger file.")
        created = not path.exists()
        try:
            if read_only:
                # mode=ro: SQLite refuses every write, so a file not ours is never given our tables
                self._conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=60.0,
                                             isolation_level=None)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._conn = sqlite3.connect(str(path), timeout=60.0, isolation_level=None)
            tables = self._tables()
            if not set(LEDGER_TABLES) <= tables and (read_only or not create or tables or path.stat().st_size):
                raise InputError(self._not_a_ledger(tables))
            if read_only:
                if "dp_runs" not in tables:  # an older ledger: an empty view of the newer table, in memory
                    self._conn.execute(SCHEMA[2].replace("CREATE TABLE IF NOT EXISTS", "CREATE TEMP TABLE", 1))
            else:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    for statement in SCHEMA:
                        self._conn.execute(statement)
                    migrate(lambda sql: self._conn.execute(sql).fetchall())
                except BaseException:
                    _rollback(self._conn)
                    raise
                self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._abandon(created)
            outcome = "The ledger was not created." if created else "Nothing in it was changed."
            raise InputError(_sqlite_problem(str(path), exc, outcome)) from None
        except OSError as exc:
            self._abandon(created)
            raise InputError(f"cannot open the ledger {str(path)!r}: {_first_line(exc)}") from None

    def _abandon(self, created: bool) -> None:
        """After a failed open: close the connection and remove the file if this open made it and wrote
        nothing (so no empty 'not a dp_spark ledger' file is left)."""
        conn = getattr(self, "_conn", None)
        if conn is not None:
            _rollback(conn)
            conn.close()
        if not created:
            return
        journal = self.path.with_name(self.path.name + "-journal")
        with contextlib.suppress(OSError):
            if self.path.stat().st_size == 0 and not journal.exists():
                self.path.unlink()

    def _tables(self) -> set:
        try:
            return {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            if "not a database" in str(exc).lower() or "malformed" in str(exc).lower():
                raise InputError(self._not_a_ledger(None)) from None
            raise

    def _not_a_ledger(self, tables) -> str:
        self._conn.close()
        what = ("not an SQLite database" if tables is None else
                "an empty file" if not tables and self.path.stat().st_size == 0 else
                "an SQLite database without dp_spark's tables (" + ", ".join(LEDGER_TABLES) + ")")
        return (f"{str(self.path)!r} is not a dp_spark ledger ({what}); nothing in it was changed. "
                "Give the ledger's path, or create one with 'dp-spark ledger create NEW_PATH BUDGET ...'.")

    @contextlib.contextmanager
    def transaction(self, lock_budget: str | None = None, outcome: str = NOTHING_CHARGED):
        """One transaction holding the write lock. Any failure (a statement, the COMMIT) rolls it back and
        raises one line ending with the cursor's ``outcome``: SQLite commits all of a transaction or none of
        it."""
        try:
            self._conn.execute("BEGIN" if self.read_only else "BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            _rollback(self._conn)
            raise InputError(_sqlite_problem(self.description, exc, outcome)) from None
        cursor = _Cursor(self, self._conn.cursor(), outcome)
        try:
            yield cursor
        except BaseException:
            _rollback(self._conn)
            raise
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            _rollback(self._conn)
            raise InputError(_sqlite_problem(self.description, exc, cursor.outcome)) from None

    def close(self) -> None:
        self._conn.close()


class PostgresStore(Store):
    """A PostgreSQL database shared by many workers; the budget's row is
    locked (``SELECT … FOR UPDATE``) while a charge is checked and recorded."""

    placeholder = "%s"

    def __init__(self, url: str, read_only: bool = False) -> None:
        try:
            import psycopg  # lazy: an optional extra (dp_spark[postgres]), for postgresql:// ledgers only
        except ImportError:
            raise InputError(
                "a postgresql:// ledger needs the psycopg driver: pip install 'dp_spark[postgres]'."
            ) from None
        self._psycopg = psycopg
        self.description = _redacted(url)
        self.read_only = read_only
        try:
            self._conn = psycopg.connect(url, connect_timeout=10, autocommit=True)
            with self._conn.transaction():
                if read_only:
                    found = {t for t in ("dp_budgets", "dp_charges", "dp_runs")
                             if self._conn.execute("SELECT to_regclass(%s)", (t,)).fetchone()[0] is not None}
                    if not set(LEDGER_TABLES) <= found:
                        raise InputError(f"{self.description} is not a dp_spark ledger (no "
                                         f"{', '.join(LEDGER_TABLES)} tables); nothing in it was changed.")
                    if "dp_runs" not in found:
                        self._conn.execute(SCHEMA[2].replace("CREATE TABLE IF NOT EXISTS", "CREATE TEMP TABLE", 1))
                else:
                    # concurrent CREATE TABLE IF NOT EXISTS can collide in PostgreSQL
                    self._conn.execute("SELECT pg_advisory_xact_lock(727171)")
                    for statement in SCHEMA:
                        self._conn.execute(statement)
                    migrate(lambda sql: self._postgres_rows(sql))
        except psycopg.Error as exc:
            raise InputError(f"cannot open the ledger {self.description}: {_scrubbed(_first_line(exc), url)}") from None

    def _postgres_rows(self, sql: str) -> list:
        cursor = self._conn.execute(sql)
        return cursor.fetchall() if cursor.description is not None else []

    @contextlib.contextmanager
    def transaction(self, lock_budget: str | None = None, outcome: str = NOTHING_CHARGED):
        with self._conn.transaction():
            cursor = _Cursor(self, self._conn.cursor(), outcome)
            if lock_budget is not None:
                cursor.execute("SELECT name FROM dp_budgets WHERE name = ? FOR UPDATE", (lock_budget,))
            yield cursor

    def close(self) -> None:
        self._conn.close()


#: Query parameters of a connection URL whose values are secrets (password, sslpassword, tokens, keys).
_SECRET_KEY = re.compile(r"pass|secret|token|key|credential", re.IGNORECASE)


def _redacted(url: str) -> str:
    """The URL with every credential masked, for messages: the password of ``user:password@host`` and the
    value of any secret query parameter."""
    try:
        parts = urlsplit(url)
        if parts.password is not None:
            host = parts.netloc.rsplit("@", 1)[1]
            parts = parts._replace(netloc=f"{parts.username}:***@{host}")
        if parts.query:
            fields = [f.split("=", 1) for f in parts.query.split("&")]
            parts = parts._replace(query="&".join(
                f"{f[0]}=***" if len(f) == 2 and _SECRET_KEY.search(f[0]) else "=".join(f) for f in fields))
        return urlunsplit(parts)
    except ValueError:  # not even a URL: show none of it
        return "(the ledger URL)"


def _secrets(url: str) -> list[str]:
    try:
        parts = urlsplit(url)
        found = [parts.password] if parts.password else []
        found += [v for k, v in parse_qsl(parts.query, keep_blank_values=True) if _SECRET_KEY.search(k) and v]
    except ValueError:
        return []
    return [s for secret in found for s in {secret, unquote(secret)} if s]


def _scrubbed(text: str, url: str) -> str:
    """``text`` (a driver's error) with every credential of ``url`` masked."""
    for secret in sorted(_secrets(url), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
