"""Catalog tables as outputs (``table:db.name`` or ``table:name``).

A DataFrame output may be a table of the session's catalog (Hive, Databricks; locally the spark-warehouse),
saved with ``saveAsTable`` and marked with :data:`dp_spark.marking.TABLE_PROPERTY`, so that ``--overwrite``
replaces only what dp_spark wrote. The budget is spent before outputs are written, so a table that cannot be
written must be found, and its name held, before the charge:

1. :func:`check_table_output` refuses what would lose data or cannot be written.
2. :func:`claim_table` holds the name: a new table is created at once as an empty **placeholder** (one
   column ``dp_spark_claim``, no rows) carrying :data:`CLAIM_PROPERTY` (run token, process id, host, time:
   never data) and :data:`PLACEHOLDER_PROPERTY`; the catalog lets one CREATE of a name succeed, so a racing
   run is refused before it charges. A local placeholder's folder also gets :data:`CLAIM_FILE`, created
   exclusively, against sessions with another catalog on the same warehouse folder. An existing dp_spark
   table replaced with ``--overwrite`` is claimed by setting :data:`CLAIM_PROPERTY` on it (it keeps its rows
   until then).
3. :func:`write_table` saves the release as a temporary ``dp_spark_tmp_*`` table and, if the claim is still
   this run's, swaps it in: the target is never seen unmarked, and a failed write loses no earlier table.
4. :func:`release_claim` (the CLI: :func:`claims` around the run) gives up the claim on every path that did
   not write it: an exception, Ctrl-C, SIGTERM (``dp_spark.cli.Terminated``).

A claim left by a killed run is taken over without a flag when its process was on this host and is gone (so
a scheduled retry goes through), never while that process runs, and for another host's placeholder only with
``--overwrite``, which takes it **even if that run is alive** (dp_spark cannot see another host's processes;
that run keeps its release in its temporary table, named in its error). An existing dp_spark table is
replaced only with ``--overwrite``. A process of this host in another process namespace (a container given
the host's name) looks gone: such runs must not share a warehouse.

Release window (stated, not closed): :func:`release_claim` checks that the claim is still this run's, then
drops the placeholder or unsets the property; the catalog has no conditional DROP. A takeover in that
instant (another host's ``--overwrite``, or another process namespace) makes that run lose its claim: it
keeps its release in its temporary table and fails after its charge, naming the table.

Everything here reads and writes the catalog's metadata (names, properties, folders), never a table's rows;
nothing depends on private data.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import re
import socket
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from dp_spark.errors import InputError, SparkJobError
from dp_spark.marking import TABLE_PROPERTY, mark_table_frame, table_not_ours, table_properties
from dp_spark.sparkjobs import describe_failure, error_class

TABLE_PREFIX = "table:"
#: One identifier of a table name (at most 128 characters: Hive's limit).
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
#: The table property naming who holds a claim: ``run <token>; pid <pid> on <host>; since <UTC time>``.
CLAIM_PROPERTY = "dp_spark.claim"
#: The table property of a placeholder (a claimed new table): it holds no release.
PLACEHOLDER_PROPERTY = "dp_spark.placeholder"
#: The file in a local placeholder's folder (readers skip ``_`` files): the claim, for other catalogs.
CLAIM_FILE = "_DP_SPARK_CLAIM"
_PLACEHOLDER_NOTE = ("holds no release: a dp_spark run claimed this name before spending its budget; "
                     "its release replaces this table")


def is_table(path) -> bool:
    """Whether an output value names a catalog table (``table:...``)."""
    return isinstance(path, str) and path.startswith(TABLE_PREFIX)


def table_name(path: str, flag: str = "output") -> str:
    """The validated name of ``table:db.name`` or ``table:name``: one or two identifiers of letters, digits
    and underscores, not starting with a digit. Raises InputError saying what to write."""
    name = path[len(TABLE_PREFIX):] if is_table(path) else path
    parts = name.split(".")
    if len(parts) > 2 or not all(_IDENTIFIER.fullmatch(p) for p in parts):
        raise InputError(
            f"--{flag} {path[:140]!r} is not a table name: write table:db.name or table:name, each part "
            "letters, digits and underscores (not starting with a digit, at most 128 characters)."
        )
    return name


def qualified_table(spark, name: str) -> tuple[str, str]:
    """(database, table) of a validated name; a bare name is in the current database."""
    if "." in name:
        db, table = name.split(".")
        return db, table
    return spark.catalog.currentDatabase(), name


def _sql_text(text: str) -> str:
    """``text`` inside a single-quoted SQL string literal."""
    return text.replace("\\", "\\\\").replace("'", "\\'")


def _properties(spark, name: str) -> dict[str, str]:
    """The table properties of the existing table ``name`` (metadata only)."""
    return {row[0]: row[1] for row in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}


def _local_folder(uri: str | None) -> Path | None:
    """The local folder of a location URI (``file:``, percent-decoded, or a plain path as it is), else None."""
    parsed = urlparse(uri or "")
    if not uri or parsed.scheme not in ("", "file"):
        return None
    return Path(unquote(parsed.path) if parsed.scheme else parsed.path)


def table_location(spark, db: str, table: str) -> str | None:
    """Where the catalog stores a new managed table ``db.table`` (the database's location and the lower-case
    table name, Spark's default); None when the catalog does not say."""
    try:
        base = spark.catalog.getDatabase(db).locationUri
    except Exception:  # noqa: BLE001 - a catalog that cannot say: Spark's CREATE checks it
        return None
    return f"{base.rstrip('/')}/{table.lower()}" if base else None


# -- who holds a claim -------------------------------------------------------------------


def _claim_text(token: str) -> str:
    since = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"run {token}; pid {os.getpid()} on {socket.gethostname()}; since {since}"


_CLAIM_TEXT = re.compile(r"^run (?P<token>\S+); pid (?P<pid>\d+) on (?P<host>\S*); since (?P<since>\S+)$")


def _holder(text: str | None) -> str:
    """The run holding a claim, in words (process id, host, time)."""
    match = _CLAIM_TEXT.match(text or "")
    if not match:
        return "a dp_spark run"
    return f"the dp_spark run of pid {match['pid']} on host {match['host']!r}, since {match['since']}"


#: What :func:`_claim_state` says of a claim's run.
RUNNING, GONE, UNSEEN = "running", "gone", "unseen"


def _claim_state(text: str | None) -> tuple[str, int | None]:
    """(state, process id) of the run holding the claim ``text``: :data:`RUNNING` (its process runs on this
    host; for this process: the claim is in :data:`_CLAIMS`), :data:`GONE` (on this host, no longer running)
    or :data:`UNSEEN` (another host's, or naming no process)."""
    match = _CLAIM_TEXT.match(text or "")
    if not match or match["host"] != socket.gethostname():
        return UNSEEN, None
    pid = int(match["pid"])
    if pid == os.getpid():
        return (RUNNING if any(claim.text == text for claim in _CLAIMS.values()) else GONE), pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return GONE, pid
    except OSError:  # it exists (another user's process)
        return RUNNING, pid
    return RUNNING, pid


def _still_running(shown: str, claim: str, pid: int, what: str) -> InputError:
    """The refusal of a claim whose process still runs here (whatever the flags)."""
    return InputError(f"{shown} is claimed by {_holder(claim)}, which is still running; a claim is taken over only "
                      f"when its run is gone. Wait for it or stop it (if pid {pid} is no dp_spark run, {what}).")


# -- the check --------------------------------------------------------------------------


def _check(spark, path: str, flag: str | None, overwrite: bool) -> tuple[str, str, dict | None]:
    """The checks of :func:`check_table_output` but the probe: (database, table, the existing table's
    properties or None for a new table)."""
    shown = f"--{flag} {path!r}" if flag else repr(path)
    how = "--overwrite" if flag else "overwrite=True (--overwrite)"
    name = table_name(path, flag or "output")
    db, table = qualified_table(spark, name)
    if not spark.catalog.databaseExists(db):
        raise InputError(f"{shown}: database {db!r} does not exist in the session's catalog; create it "
                         "first (dp_spark creates no database) or name another.")
    foreign = table_not_ours(spark, name)
    if foreign:
        raise InputError(
            f"{shown} already exists and is {foreign}, not an output of an earlier dp_spark run; "
            f"{how} replaces only tables dp_spark wrote. Choose another name, or drop it yourself."
        )
    if not spark.catalog.tableExists(name):
        _check_location(spark, shown, db, table, overwrite)
        return db, table, None
    props = _properties(spark, name)
    claim = props.get(CLAIM_PROPERTY)
    placeholder = PLACEHOLDER_PROPERTY in props
    state, pid = _claim_state(claim) if claim else (None, None)
    if state == RUNNING:
        raise _still_running(shown, claim, pid, f"DROP TABLE {db}.{table}"
                             + ("" if placeholder else " once you have kept its rows"))
    if placeholder:
        _refuse_foreign_folder(spark, shown, db, table, claim)
    if placeholder and state == GONE:
        return db, table, props  # a killed run's placeholder (on this host): it holds nothing, a retry takes it
    if claim and placeholder and not overwrite:
        raise InputError(
            f"{shown} is claimed by {_holder(claim)} and holds no release: dp_spark cannot see whether that run "
            "(on another host) is writing it or was killed before it could drop its claim. Wait for it; if no run "
            f"is writing it, pass {how} to take the claim over (nothing is lost; {how} takes it even from a run "
            f"that is alive, which then keeps its release in a temporary table), or DROP TABLE {db}.{table}.")
    if not overwrite:
        raise InputError(f"{shown} already exists; pass {how} to replace it, or choose another name.")
    return db, table, props


def _refuse_foreign_folder(spark, shown: str, db: str, table: str, claim: str | None) -> None:
    """Refuse a placeholder whose local folder holds another session's :data:`CLAIM_FILE` (left by
    :func:`_forget_entry`): taking it over would delete that session's folder."""
    folder = _local_folder(table_location(spark, db, table))
    other = None
    if folder is not None:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            other = (folder / CLAIM_FILE).read_text(encoding="utf-8").strip()
    if other and other != claim:
        raise InputError(
            f"{shown}: the catalog's placeholder for it points at the folder {str(folder)!r}, which holds the claim "
            f"of {_holder(other)} in a session with another catalog; taking it over would delete that folder. "
            f"ALTER TABLE {db}.{table} SET LOCATION to an empty folder, then DROP TABLE it, or choose another name.")


def _check_location(spark, shown: str, db: str, table: str, overwrite: bool) -> None:
    """Refuse a non-empty local folder where the catalog would store the new table (Spark cannot create a
    managed table there). A folder holding only another catalog's :data:`CLAIM_FILE` is taken over by the
    module docstring's rules."""
    location = table_location(spark, db, table)
    folder = _local_folder(location)
    if folder is None or not folder.is_dir():
        return
    try:
        entries = os.listdir(folder)
    except OSError:
        entries = ["?"]
    if entries == [CLAIM_FILE]:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            claim = (folder / CLAIM_FILE).read_text(encoding="utf-8").strip()
            state, pid = _claim_state(claim)
            if state == RUNNING:
                raise _still_running(f"{shown}: the folder {str(folder)!r}", claim, pid,
                                     "delete that folder: it holds no release")
            if state == GONE or overwrite:  # another host's claim: only --overwrite takes it (it may be alive)
                (folder / CLAIM_FILE).unlink()
                folder.rmdir()
                return
    if entries:
        raise InputError(_location_refusal(shown, db, table, str(folder), folder))


def _location_refusal(shown: str, db: str, table: str, where: str, folder: Path | None = None) -> str:
    claim = None
    if folder is not None:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            if os.listdir(folder) == [CLAIM_FILE]:  # a placeholder's folder: nothing else in it
                claim = (folder / CLAIM_FILE).read_text(encoding="utf-8").strip()
    if claim:
        held = (f"{shown}: the folder {where!r}, where the catalog would store table {db}.{table}, holds the "
                f"claim of {_holder(claim)} in a session with another catalog")
        state, _ = _claim_state(claim)
        if state == RUNNING:
            return f"{held}, which is still running; wait for it, or choose another name."
        if state == GONE:
            return f"{held}, which is gone (killed); run again to take the claim over (it holds no release)."
        return (f"{held}; wait for that run; dp_spark cannot see a run on another host: if it is gone (killed), "
                "pass --overwrite to take the claim over (it holds no release; --overwrite takes it even from a run "
                "that is alive), or choose another name.")
    return (f"{shown}: the folder {where!r}, where the catalog would store table {db}.{table}, already exists "
            "and is not empty, but the catalog has no such table (a dropped external table's files, a crashed "
            "writer's, or another session's); move or delete that folder, or choose another name.")


def _probe_database(spark, shown: str, db: str) -> None:
    """Create and drop an empty table in ``db``: a database that takes no new table is refused."""
    probe = f"`{db}`.`dp_spark_write_check_{uuid.uuid4().hex}`"
    try:
        spark.sql(f"CREATE TABLE {probe} (x INT) USING parquet")
    except Exception as exc:  # noqa: BLE001 - any refusal of the catalog
        raise InputError(_refused_create(shown, db, exc)) from None
    spark.sql(f"DROP TABLE IF EXISTS {probe}")


def _refused_create(shown: str, db: str, exc: BaseException) -> str:
    return (f"{shown} cannot be written: the catalog refused a new table in database {db!r} "
            f"({describe_failure(exc)}); choose a database you may write.")


def check_table_output(spark, path: str, flag: str, overwrite: bool) -> None:
    """Refuse, before anything is charged, a table output that would lose data or cannot be written: a bad
    name; a database that does not exist (none is created); a view, or a table without
    :data:`dp_spark.marking.TABLE_PROPERTY`, whatever the flags; a dp_spark table, or another host's claim,
    unless ``overwrite`` (which takes another host's claim even from a live run); a claim whose process
    still runs on this host, whatever the flags (a placeholder whose process here is gone is taken without a
    flag); for a new table, a non-empty local folder where the catalog would store it; a database where no
    table can be created (an empty table is created and dropped there). Reads the catalog's metadata only;
    holds nothing (:func:`claim_table` does)."""
    db, _, _ = _check(spark, path, flag, overwrite)
    _probe_database(spark, f"--{flag} {path!r}", db)


# -- the claim ---------------------------------------------------------------------------


@dataclass
class Claim:
    """A table output held by this process: a ``placeholder`` (created by the claim, no release in it) or an
    earlier dp_spark table claimed for ``--overwrite``. ``text`` is the value of :data:`CLAIM_PROPERTY`."""

    spark: object
    path: str
    db: str
    table: str
    text: str
    placeholder: bool
    folder: Path | None = None
    written: bool = False

    @property
    def target(self) -> str:
        return f"`{self.db}`.`{self.table}`"

    @property
    def key(self) -> str:
        return f"{self.db}.{self.table}".lower()

    def held(self) -> bool:
        """Whether the target still carries this claim (no other run took it over)."""
        name = f"{self.db}.{self.table}"
        return self.spark.catalog.tableExists(name) and _properties(self.spark, name).get(CLAIM_PROPERTY) == self.text


#: The claims this process holds, by lower-case ``db.table``.
_CLAIMS: dict[str, Claim] = {}


def claim_table(spark, path: str, flag: str | None, overwrite: bool) -> Claim:
    """Check the table output ``path`` (:func:`check_table_output`) and hold it for this run before anything
    is charged (module docstring, step 2): a new table becomes a placeholder; an existing dp_spark table
    (only with ``overwrite``) or a placeholder taken over gets :data:`CLAIM_PROPERTY`. The claim is
    registered for :func:`write_table`; :func:`release_claim` gives it up if nothing is written. ``flag``:
    the CLI flag the messages name (None: the Python API)."""
    shown = f"--{flag} {path!r}" if flag else repr(path)
    db, table, props = _check(spark, path, flag, overwrite)
    text = _claim_text(uuid.uuid4().hex)
    if props is None:
        claim = _claim_new(spark, path, shown, db, table, text)
    else:
        _probe_database(spark, shown, db)  # the release is written as a new table there first
        claim = Claim(spark, path, db, table, text, placeholder=PLACEHOLDER_PROPERTY in props)
        spark.sql(f"ALTER TABLE {claim.target} SET TBLPROPERTIES ('{CLAIM_PROPERTY}' = '{_sql_text(text)}')")
        if not claim.held():
            raise InputError(f"{shown}: another run claimed it at the same moment; run again once it is done.")
        folder = _local_folder(table_location(spark, db, table)) if claim.placeholder else None
        if folder is not None and (folder / CLAIM_FILE).is_file():  # a placeholder taken over: its file says who
            with contextlib.suppress(OSError):
                (folder / CLAIM_FILE).write_text(text + "\n", encoding="utf-8")
    _CLAIMS[claim.key] = claim
    return claim


def _claim_new(spark, path: str, shown: str, db: str, table: str, text: str) -> Claim:
    claim = Claim(spark, path, db, table, text, placeholder=True)
    props = {TABLE_PROPERTY: "a placeholder of dp_spark; dp-spark --overwrite may replace this table",
             PLACEHOLDER_PROPERTY: _PLACEHOLDER_NOTE, CLAIM_PROPERTY: text}
    listed = ", ".join(f"'{k}' = '{_sql_text(v)}'" for k, v in props.items())
    try:
        spark.sql(f"CREATE TABLE {claim.target} (dp_spark_claim STRING) USING parquet "
                  f"COMMENT '{_sql_text(_PLACEHOLDER_NOTE)}' TBLPROPERTIES ({listed})")
    except Exception as exc:  # noqa: BLE001 - the catalog's refusal, in one line
        kind = error_class(exc)
        if kind.startswith("LOCATION_ALREADY_EXISTS"):
            where = table_location(spark, db, table) or f"the location of {db}.{table}"
            raise InputError(_location_refusal(shown, db, table, where, _local_folder(where))) from None
        if kind.startswith(("TABLE_OR_VIEW_ALREADY_EXISTS", "TableAlreadyExistsException")):
            raise InputError(f"{shown} was created by another run while this one checked it (that run holds "
                             "it now); run again once it is done, or choose another name.") from None
        raise InputError(_refused_create(shown, db, exc)) from None
    folder = _local_folder(table_location(spark, db, table))
    if folder is not None and folder.is_dir():
        try:
            fd = os.open(folder / CLAIM_FILE, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            # a session with another catalog claimed this folder between our check and our CREATE:
            # forget our entry without deleting its folder (DROP of a managed table deletes it)
            stuck = _forget_entry(spark, claim)
            raise InputError(_location_refusal(shown, db, table, str(folder), folder) + stuck) from None
        except OSError:
            fd = None  # a folder we cannot write: the catalog's entry is the claim
        if fd is not None:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
            claim.folder = folder
    return claim


def _forget_entry(spark, claim: Claim) -> str:
    """Drop the catalog entry of a placeholder whose folder another session won, after moving it to an empty
    folder (a DROP of a managed table deletes its folder). Returns "" when the entry is gone, else a
    sentence for the refusal (and the entry is listed in :data:`LEFT`)."""
    aside = tempfile.mkdtemp(prefix="dp_spark_forgotten_claim_")
    os.rmdir(aside)
    entry = f"{claim.db}.{claim.table}"
    try:
        spark.sql(f"ALTER TABLE {claim.target} SET LOCATION '{_sql_text(aside)}'")
    except Exception:  # noqa: BLE001 - the catalog's refusal: the entry stays, named
        LEFT.append(claim.path)
        return (f" This run's catalog entry {entry} could not be moved off that folder and still points at it: "
                f"do not DROP it (that deletes the folder); ALTER TABLE {entry} SET LOCATION to an empty folder "
                "first.")
    try:
        spark.sql(f"DROP TABLE IF EXISTS {claim.target}")
    except Exception:  # noqa: BLE001 - the entry now points at an empty folder of its own
        LEFT.append(claim.path)
        return (f" This run's catalog entry {entry} (moved to the empty folder {aside!r}) could not be dropped: "
                f"DROP TABLE {entry}.")
    return ""


def release_claim(claim: Claim) -> None:
    """Give up ``claim`` unless its release was written: a placeholder still held is dropped (with its
    folder and :data:`CLAIM_FILE`); an earlier table keeps its rows and loses :data:`CLAIM_PROPERTY`. A
    claim another run took over is left to it (checked before the DROP or ALTER: the window the module
    docstring states). Raises what the catalog raises (the claim then stays, and a later run's refusal names
    it)."""
    try:
        if claim.written or not claim.held():
            return
        if claim.placeholder:
            claim.spark.sql(f"DROP TABLE IF EXISTS {claim.target}")
        else:
            claim.spark.sql(f"ALTER TABLE {claim.target} UNSET TBLPROPERTIES IF EXISTS ('{CLAIM_PROPERTY}')")
    finally:
        if _CLAIMS.get(claim.key) is claim:
            del _CLAIMS[claim.key]


@contextlib.contextmanager
def claims(held: list[Claim]):
    """Release every claim of ``held`` that was not written when the block ends, however it ends (an
    exception, Ctrl-C, SIGTERM). A claim that cannot be released is listed in :data:`LEFT` for the caller's
    message; the block's own error is raised, not the cleanup's."""
    try:
        yield held
    finally:
        for claim in held:
            try:
                release_claim(claim)
            except BaseException:  # noqa: BLE001 - the run's own outcome is what is reported
                LEFT.append(claim.path)


#: Table outputs whose claim could not be released (:func:`claims`), for the CLI's error line.
LEFT: list[str] = []


# -- the write --------------------------------------------------------------------------


def write_table(df, path: str, *, seeded: bool = False, overwrite: bool = False, fmt: str = "parquet") -> None:
    """Save ``df`` as the catalog table ``table:db.name`` into this process's claim on it (a caller that did
    not :func:`claim_table` is claimed here, by the same rules: InputError with nothing written). The
    release is saved as a temporary table in the same database, marked
    (:func:`dp_spark.marking.mark_table_frame`; ``seeded``: the notice), then swapped in for the placeholder
    or earlier table (:func:`_replace_table`). The claim is released whatever happens. A claim another run
    took over is not written: SparkJobError naming the table that keeps the release."""
    spark = df.sparkSession
    db, table = qualified_table(spark, table_name(path))
    claim = _CLAIMS.get(f"{db}.{table}".lower())
    if claim is None:
        claim = claim_table(spark, path, None, overwrite)
    try:
        tmp = f"`{db}`.`dp_spark_tmp_{uuid.uuid4().hex}`"
        try:
            mark_table_frame(df, seeded).write.format(fmt).mode("errorifexists").saveAsTable(tmp)
            props = ", ".join(f"'{k}' = '{_sql_text(v)}'" for k, v in table_properties(seeded).items())
            spark.sql(f"ALTER TABLE {tmp} SET TBLPROPERTIES ({props})")
        except BaseException:
            with contextlib.suppress(Exception):
                spark.sql(f"DROP TABLE IF EXISTS {tmp}")  # the target is untouched: nothing is lost
            raise
        if not claim.held():
            raise SparkJobError(
                f"{path!r}: another run took over this run's claim on {claim.target} (its --overwrite) while "
                f"this run computed its release; the release was written to the table {tmp} and is kept there "
                "(rename or drop it).")
        _replace_table(spark, tmp, claim, path)
        claim.written = True
    finally:
        with contextlib.suppress(Exception):  # the write's own outcome is what is reported
            release_claim(claim)


def _replace_table(spark, tmp: str, claim: Claim, path: str) -> None:
    """Rename the written ``tmp`` to the claimed target, losing nothing on a failure: the current target is
    renamed to a backup and dropped only after ``tmp`` took its name; if that rename fails the backup is
    renamed back, and if that fails too neither is dropped and the error says where both are."""
    target, db = claim.target, claim.db
    earlier = "the placeholder (it holds no release)" if claim.placeholder else "the earlier table"
    back = "nothing was there before" if claim.placeholder else "the earlier table is back in place"
    backup = f"`{db}`.`dp_spark_old_{uuid.uuid4().hex}`"
    try:
        spark.sql(f"ALTER TABLE {target} RENAME TO {backup}")
    except BaseException:
        with contextlib.suppress(Exception):
            spark.sql(f"DROP TABLE IF EXISTS {tmp}")  # the target is still in place
        raise
    try:
        spark.sql(f"ALTER TABLE {tmp} RENAME TO {target}")
    except BaseException as exc:
        try:
            spark.sql(f"ALTER TABLE {backup} RENAME TO {target}")
        except BaseException:
            raise SparkJobError(f"{path!r}: the release was written to the table {tmp} but could not be renamed "
                                f"to {target}, and {earlier} could not be put back: it is kept as {backup}. "
                                "Neither was dropped.") from exc
        raise SparkJobError(f"{path!r}: the release was written to the table {tmp} but could not be renamed to "
                            f"{target}; {back} and the release is kept as {tmp} "
                            f"({exc.__class__.__name__}).") from exc
    spark.sql(f"DROP TABLE IF EXISTS {backup}")
