"""Checks on the paths a run reads and writes, made before Spark starts, and
the write phase after a release.

Nothing is ever lost: an output that exists is replaced only with
``--overwrite``, and only when an earlier dp_spark run wrote it (a JSON or
HTML report, a series file, an output folder holding ``_DP_SPARK_OUTPUT``)
or it is an empty folder; no output may be, contain, or lie inside an input,
a stream's checkpoint or sink, or the budget ledger (whatever the flags);
two outputs may not share a path; and every output name must be one the
file system takes (each part at most NAME_MAX bytes, no NUL, not a folder
where a file is written) in a folder that accepts a new file (a temporary
file is created and removed there), so a bad output is found before any
data is read or any budget spent.

A DataFrame output (:data:`TABLE_OUTPUTS`) may be a catalog table,
``table:db.name``: its name is checked with the paths (no Spark needed, so a
dry run sees it), and :func:`check_table_outputs`, run once the session
exists and before the release charges its budget, refuses a missing
database, a view or a table dp_spark did not write (whatever the flags), a
table dp_spark wrote unless ``--overwrite``, the input table itself, a
non-empty folder where a new table would be stored, and a database where no
table can be created; the CLI then holds each table for the run (a claim,
:mod:`dp_spark.tables`), dropped on every path that does not write it.

:func:`write_outputs` writes a release's outputs and, when one cannot be
written, says which were written, which were not, and that the privacy was
spent.
"""

from __future__ import annotations

import html
import json
import os
import sys
import tempfile
from pathlib import Path

from dp_spark import io as dp_io
from dp_spark.commands.base import ARTIFACT_OPTION, INPUT_PATHS, OUTPUT_PATHS, OUTPUTS, REPORTS, STATE_PATHS
from dp_spark.errors import DPSparkError, InputError, SparkJobError
from dp_spark.html_report import write_html
from dp_spark.io import is_local, local_path
from dp_spark.marking import OUTPUT_MARKER, not_ours  # noqa: F401 - not_ours re-exported
from dp_spark.report import SCREEN_ROWS
from dp_spark.sparkjobs import describe_failure, spark_exception_types
from dp_spark.tables import check_table_output, claim_table, is_table, qualified_table, table_name


def _local_path(value) -> Path | None:
    """The resolved local path of an option value, or None (tables, object stores)."""
    if not value or not isinstance(value, str) or value.startswith("table:") or not is_local(value):
        return None
    path = Path(os.path.abspath(os.path.expanduser(str(local_path(value)))))
    try:
        return path.resolve()
    except (OSError, ValueError):  # a NUL byte, a name too long: refused by invalid_name
        return path


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def run_paths(command, opts) -> tuple[dict, dict, dict]:
    """(outputs, inputs, states): option name -> resolved local path."""
    outputs = {n: _local_path(command.output_path(n, opts)) for n in OUTPUT_PATHS}
    inputs = {n: _local_path(opts.get(n)) for n in INPUT_PATHS}
    if opts.get("input") and opts.get("format") == "table":
        inputs["input"] = None
    # A stream's checkpoint and sink are kept as they are (--stream), and
    # never replaced by an output in a batch run either, where they exist.
    states = {n: _local_path(opts.get(n)) for n in STATE_PATHS if opts.get(n)}
    states = {n: p for n, p in states.items() if p is not None and (opts.get("stream") or _exists(p))}
    ledger = opts.get("ledger")
    if isinstance(ledger, str) and ledger.startswith("sqlite:///"):
        ledger = ledger[len("sqlite://"):]
    if isinstance(ledger, str) and "://" not in ledger:
        states["ledger"] = _local_path(ledger)
    drop = lambda d: {k: v for k, v in d.items() if v is not None}  # noqa: E731
    return drop(outputs), drop(inputs), drop(states)


#: Outputs written as one file (a folder there cannot take it).
FILE_OUTPUTS = tuple(o.name for o in OUTPUTS if o.file)
#: DataFrame outputs: each may also be a catalog table, ``table:db.name``.
TABLE_OUTPUTS = tuple(o.name for o in OUTPUTS if o.table)


def table_outputs(command, opts) -> dict[str, str]:
    """Option name -> ``table:...`` value, for every output of this run naming a table."""
    values = {n: command.output_path(n, opts) for n in OUTPUT_PATHS}
    return {n: v for n, v in values.items() if is_table(v)}


def _input_table(opts) -> str | None:
    """The input's table name when the run reads a catalog table, else None."""
    source = opts.get("input")
    if not isinstance(source, str) or not (source.startswith("table:") or opts.get("format") == "table"):
        return None
    return source.removeprefix("table:")


def _check_table_names(command, opts, refuse) -> None:
    """The table outputs' names (no Spark): only DataFrame outputs, valid
    names, no two outputs and no output and the input naming one table."""
    seen: dict[str, str] = {}
    source = _input_table(opts)
    for name, value in table_outputs(command, opts).items():
        if name not in TABLE_OUTPUTS:
            refuse(f"{_flag(name)} {value!r}: the {_WHAT.get(name, 'output')} is a file; table:db.name is for "
                   f"DataFrame outputs ({', '.join(_flag(n) for n in TABLE_OUTPUTS)}). Give a file path.")
            continue
        try:
            table = table_name(value, _flag(name)[2:]).lower()  # Spark's identifiers ignore case
        except InputError as exc:
            refuse(str(exc))
            continue
        if table in seen:
            refuse(f"{_flag(seen[table])} and {_flag(name)} name the same table ({value!r}); give each output "
                   "its own table.")
        elif source is not None and source.lower() == table:
            refuse(f"{_flag(name)} {value!r} is the --input table; writing it would destroy that input. Choose "
                   "another table (--overwrite never allows this).")
        seen[table] = name


def check_table_outputs(spark, command, opts, problems: list | None = None, held: list | None = None) -> None:
    """The table outputs against the session's catalog (metadata only),
    before the release charges its budget (:func:`dp_spark.tables.check_table_output`):
    a run that could not write its tables spends nothing. ``problems``:
    collect the refusals instead of raising the first. ``held``: also claim
    each table output for this run (:func:`dp_spark.tables.claim_table`: a
    new table is created as an empty placeholder, so a second run racing
    for it is refused before it charges) and append the claim there; the
    caller releases what was not written (:func:`dp_spark.tables.claims`),
    also when a later output is refused here."""
    source = _input_table(opts)
    if source is not None:
        try:
            source = ".".join(qualified_table(spark, table_name(source, "input"))).lower()
        except InputError:
            source = None  # an input the catalog resolves otherwise (a path-like name): Spark's to read
    for name, value in table_outputs(command, opts).items():
        try:
            if name not in TABLE_OUTPUTS:
                continue  # refused by check_run_paths
            qualified = ".".join(qualified_table(spark, table_name(value, _flag(name)[2:]))).lower()
            if qualified == source:
                raise InputError(f"{_flag(name)} {value!r} is the --input table; writing it would destroy that "
                                 "input. Choose another table (--overwrite never allows this).")
            if held is None:
                check_table_output(spark, value, _flag(name)[2:], bool(opts.get("overwrite")))
            else:
                held.append(claim_table(spark, value, _flag(name)[2:], bool(opts.get("overwrite"))))
        except InputError as exc:
            if problems is None:
                raise
            problems.append(str(exc))


def _overlap(a: Path, b: Path) -> bool:
    return a == b or a in b.parents or b in a.parents


def check_run_paths(command, opts, problems: list | None = None, keyed: bool = False) -> None:
    """Refuse (InputError, exit 2) any output that would lose data or cannot
    be written. ``problems``: collect every refusal there instead of raising
    the first (a dry run reports them all). ``keyed``: the run has a run key,
    so whether an existing JSON or HTML report may be rewritten is decided
    once the ledger says whether this run replays a recorded release
    (:func:`check_keyed_reports`); folders and foreign files are refused
    here all the same."""
    def refuse(message: str) -> None:
        if problems is None:
            raise InputError(message)
        problems.append(message)

    _check_table_names(command, opts, refuse)
    for name in OUTPUT_PATHS:
        if opts.get(name) == "":
            refuse(f"{_flag(name)} is empty: give a path, or leave {_flag(name)} out.")
        elif opts.get(name) == "-":
            refuse(f"{_flag(name)} - would write a file named '-' (dp-spark writes its outputs to files; "
                   "--quiet prints the JSON report on stdout): give a file path.")
    outputs, inputs, states = run_paths(command, opts)
    valid = {}
    for name, out in outputs.items():
        reason = invalid_name(out)
        if reason:
            refuse(f"{_flag(name)} {str(out)!r} cannot be written: {reason}. Choose another name.")
        else:
            valid[name] = out
    outputs = valid
    refused: set[str] = set()  # one refusal per output (a dry run lists them all)
    for out_name, out in outputs.items():
        for in_name, src in {**inputs, **states}.items():
            if _overlap(out, src) and out_name not in refused:
                refused.add(out_name)
                what = "input" if in_name in inputs else (
                    "budget ledger (every budget and its history)" if in_name == "ledger" else "state")
                refuse(
                    f"{_flag(out_name)} {str(out)!r} is, contains or lies inside {_flag(in_name)} "
                    f"{str(src)!r}; writing it would destroy that {what}. "
                    "Choose another output path (--overwrite never allows this)."
                )
    names = list(outputs)
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            if _overlap(outputs[first], outputs[second]):
                refuse(
                    f"{_flag(first)} and {_flag(second)} point to the same place ({str(outputs[first])!r}); "
                    "give each output its own path."
                )
    for state_name, state in states.items():
        src = inputs.get("input")
        if state_name != "ledger" and opts.get("stream") and src is not None and _overlap(state, src):
            refuse(
                f"{_flag(state_name)} {str(state)!r} overlaps --input {str(src)!r}; keep the stream's "
                "state and records outside its source."
            )
    for name, out in outputs.items():
        if name in refused:
            continue
        try:
            later = keyed and name in REPORTS  # check_keyed_reports decides --overwrite
            check_existing(out, name, bool(opts.get("overwrite")) or later)
            check_writable(out, name)
        except InputError as exc:
            refuse(str(exc))


def invalid_name(target: Path) -> str | None:
    """Why the file system would refuse the path ``target`` (None: it would
    not): a NUL byte, a part longer than NAME_MAX bytes, a path longer than
    PATH_MAX."""
    if "\x00" in str(target):
        return "the name holds a NUL character"
    folder = target
    while not _exists(folder):
        folder = folder.parent
    try:
        name_max = os.pathconf(folder if folder.is_dir() else folder.parent, "PC_NAME_MAX")
        path_max = os.pathconf(folder if folder.is_dir() else folder.parent, "PC_PATH_MAX")
    except (OSError, ValueError):
        name_max, path_max = 255, 4096
    for part in target.parts:
        size = len(os.fsencode(part))
        if size > name_max:
            return (f"the name {part[:40]!r}... is {size} bytes long; this file system takes at most "
                    f"{name_max} bytes per file or folder name")
    if len(os.fsencode(str(target))) >= path_max:
        return f"the path is {len(os.fsencode(str(target)))} bytes long; at most {path_max - 1} here"
    return None


def _exists(path: Path) -> bool:
    try:
        os.lstat(path)
        return True
    except OSError:
        return False


def check_existing(out: Path, name: str, overwrite: bool) -> None:
    """An existing output: a folder where a file is written is refused; what
    an earlier dp_spark run wrote (or an empty folder) is replaced only with
    ``--overwrite``; anything else is refused, saying what is there."""
    if not _exists(out):
        return
    if name in FILE_OUTPUTS and out.is_dir():
        raise InputError(f"{_flag(name)} {str(out)!r} is a folder; give a file path "
                         f"for the {_WHAT.get(name, 'output')}.")
    foreign = not_ours(out)
    if foreign:
        raise InputError(
            f"{_flag(name)} {str(out)!r} already exists and is {foreign}, not an output of an earlier dp_spark "
            "run; --overwrite replaces only what dp_spark wrote (a report, a series file, a folder holding "
            f"{OUTPUT_MARKER}) or an empty folder. Choose another path, or move it away yourself."
        )
    if not overwrite:
        raise InputError(
            f"{_flag(name)} {str(out)!r} already exists; pass --overwrite to replace it, or choose "
            "another path."
        )


_WHAT = {o.name: o.what for o in OUTPUTS if o.file}


def check_keyed_reports(opts, replay_created: str | None) -> None:
    """A keyed run's existing JSON and HTML reports (after
    ``check_run_paths(keyed=True)``): replaced only with --overwrite, or when
    this run replays the recorded release that wrote them (``replay_created``
    its ``created``), so the retry of a run that died between its two
    writes (HTML written, JSON not) is not refused. The replay writes the
    same release."""
    for name in REPORTS:
        out = _local_path(opts.get(name))
        if out is not None:
            check_existing(out, name, bool(opts.get("overwrite")) or written_by(out, name, replay_created))


def written_by(out: Path, name: str, created: str | None) -> bool:
    """Whether ``out`` is the JSON or HTML report of the release created at
    ``created`` (a keyed replay rewrites its own reports: the same release,
    the same values). Anything unreadable or else: False."""
    if not created or name not in REPORTS or not out.is_file():
        return False
    try:
        if out.stat().st_size > 50_000_000:
            return False
        text = out.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    if name == "output":
        try:
            return json.loads(text).get("created") == created
        except (ValueError, AttributeError):
            return False
    return f"created {html.escape(created)}" in text


def check_writable(target: Path, name: str) -> None:
    """Create and remove a temporary file where ``target`` will be written."""
    folder = target.parent
    while not _exists(folder):
        folder = folder.parent
    if not folder.is_dir():
        raise InputError(f"{_flag(name)} {str(target)!r} cannot be written: {str(folder)!r} is a file.")
    try:
        fd, probe = tempfile.mkstemp(prefix=".dp_spark_write_check.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InputError(
            f"{_flag(name)} {str(target)!r} cannot be written ({exc.strerror or type(exc).__name__} in "
            f"{str(folder)!r}); choose a writable location."
        ) from None


# -- the write phase, after the release ---------------------------------------------


class OutputWriteError(SparkJobError):
    """An output could not be written after the release spent its budget
    (exit 1). The message says what was and was not written."""

    #: the message already says what was spent and where (the CLI adds nothing)
    states_spending = True


def planned_writes(command, release, opts) -> list[tuple[str, str, object]]:
    """(option name, path, write()) for every output this run writes, in
    order: the artifacts, then the HTML report, then the JSON report (a
    report means all other outputs exist)."""
    writes = []
    for artifact, writer in command.writers.items():
        option = ARTIFACT_OPTION[artifact]
        path = command.output_path(option, opts)
        if path:
            writes.append((option, path, lambda w=writer: w(release, opts)))
    if opts.get("report_html"):
        def html():
            write_html(opts["report_html"], release)  # shows release.artifacts["ledger"] when set
        writes.append(("report_html", opts["report_html"], html))
    if opts.get("output"):
        def report():
            dp_io.write_json_atomic(opts["output"], release.to_dict())  # looked up at call time
        writes.append(("output", opts["output"], report))
    return writes


#: What the CLI prints after the result for a report written (not with --quiet).
_WRITTEN_NOTE = {"report_html": "HTML report written to {path}", "output": "report written to {path}"}


def write_outputs(command, release, opts) -> list[str]:
    """Write every output of ``release``; on a failure raise
    :class:`OutputWriteError` (KeyboardInterrupt for Ctrl-C) naming what was
    written, what was not, and that the privacy was spent. Prints nothing:
    returns the lines the CLI prints after the result (the reports written,
    a hint about outputs not asked for; none with --quiet), so that every
    output exists before anything reaches stdout."""
    writes = planned_writes(command, release, opts)
    done: list[str] = []
    for i, (option, path, write) in enumerate(writes):
        try:
            write()
        except KeyboardInterrupt as exc:  # Ctrl-C, or the CLI's SIGTERM (a subclass: kept)
            raise type(exc)(f"while writing {_flag(option)} {path!r}. "
                            + _after_failure(release, opts, done, writes[i:])) from None
        except Exception as exc:  # noqa: BLE001 - every failure says what was written
            raise OutputWriteError(
                f"cannot write {_flag(option)} {path!r} ({_describe(exc)}). "
                + _after_failure(release, opts, done, writes[i:])
            ) from exc
        done.append(f"{_flag(option)} {path!r}")
    if opts.get("quiet"):
        return []
    notes = [_WRITTEN_NOTE[option].format(path=path) for option, path, _ in writes if option in _WRITTEN_NOTE]
    hint = missing_output_hint(command, opts, release)
    return notes + ([hint] if hint else [])


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    if isinstance(exc, DPSparkError):
        return str(exc).rstrip(".")

    return describe_failure(exc) if isinstance(exc, spark_exception_types()) else type(exc).__name__


def _after_failure(release, opts, done, left) -> str:
    """What the run did before a write failed: the privacy is spent (and
    charged to the ledger), which outputs exist and which do not."""
    guarantee = getattr(release, "guarantee", None)
    spent = guarantee.describe() if guarantee is not None else "the release's budget"
    if opts.get("ledger") and opts.get("ledger_budget"):
        spent += f", charged to ledger budget {opts['ledger_budget']!r} in {opts['ledger']!r}"
    not_written = ", ".join(f"{_flag(o)} {p!r}" for o, p, _ in left)
    return (f"The release was computed and its privacy spent: {spent}. "
            f"Written: {', '.join(done) or 'nothing'}. Not written: {not_written}.")


def missing_output_hint(command, opts, release=None) -> str | None:
    """A release whose main result is a table that this run writes nowhere:
    where it can go (a set-union's items, a continual series); and, with
    ``release``, a released list longer than the screen shows when no report
    is written (count-release's counts)."""
    writers = command.writers
    if opts.get("group_by"):  # a grouped run's values go to --groups-output only (no items output, no series)
        if "groups" in writers and not opts.get("groups_output"):
            return ("note: the per-group values were not written (the report holds the first groups only); pass "
                    "--groups-output PATH (.parquet, .csv or table:db.name) to write every group's.")
        return None
    if "items" in writers and command.name == "set-union" and not opts.get("items_output"):
        return ("note: the released items were not written (only their number is in the report); pass "
                "--items-output PATH to write them as Parquet.")
    if "series" in writers and not command.output_path("series", opts):
        return ("note: the released series was not written; pass --series PATH (.parquet or .csv) or "
                "--output PATH (the series then goes beside the report).")
    if release is not None and not opts.get("output") and not opts.get("items_output"):
        for key, value in release.values.items():
            if isinstance(value, list) and len(value) > SCREEN_ROWS:
                items = " or --items-output PATH (Parquet)" if "items" in writers else ""
                return (f"note: {len(value):,} {key} were released and only the first {SCREEN_ROWS} are shown; "
                        f"no report was written: pass --output PATH (the JSON report){items} to keep them all.")
    return None
