"""Running Spark actions without leaking data or Java stack traces.

Spark's error messages can quote data values (a failed cast shows the value), so an error raised while a
summary is computed is re-raised as :class:`~dp_spark.errors.SparkJobError` naming only the Spark error
class. ``DP_SPARK_DEBUG=1`` chains the original exception (for debugging on non-sensitive data only).
"""

from __future__ import annotations

import contextlib
import os
import re
import threading

from dp_spark.errors import InputReadError, SparkJobError
from dp_spark.progress import set_job_description

#: Set by the CLI's --verbose: keep Spark's original exception chained.
VERBOSE = False


def spark_exception_types() -> tuple[type, ...]:
    types: list[type] = []
    try:
        from pyspark.errors import PySparkException

        types.append(PySparkException)
    except ImportError:  # pragma: no cover
        pass
    try:
        from py4j.protocol import Py4JError

        types.append(Py4JError)
    except ImportError:  # pragma: no cover
        pass
    return tuple(types)


_CONDITION = re.compile(r"(?:Exception|Error|Throwable): \[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]")
_CAUSE = re.compile(r"^Caused by: ([A-Za-z_$][\w$.]*)", re.M)
_READ_FILE = re.compile(r"while reading file (\S+?)\.?(?:\s|$)")


def error_conditions(exc: BaseException) -> list[str]:
    """Spark error conditions found in ``exc`` and its (Java) causes, outermost first."""
    found = []
    for getter in ("getCondition", "getErrorClass"):
        fn = getattr(exc, getter, None)
        if fn is not None:
            try:
                value = fn()
            except Exception:  # noqa: BLE001 - best effort only
                value = None
            if value:
                found.append(str(value))
                break
    found += [c for c in _CONDITION.findall(_text(exc)) if c not in found]
    return found


def root_cause(exc: BaseException) -> str:
    """The class name of the innermost Java cause, or of ``exc`` itself."""
    causes = _CAUSE.findall(_text(exc))
    return causes[-1].rsplit(".", 1)[-1] if causes else type(exc).__name__


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # noqa: BLE001
        return ""


def error_class(exc: BaseException) -> str:
    """The most specific Spark error condition of ``exc`` (the innermost
    cause's), or the innermost Java cause's class name."""
    conditions = error_conditions(exc)
    if conditions:
        return conditions[-1]
    return root_cause(exc)


def _failed_file(exc: BaseException) -> str | None:
    """The file a FAILED_READ_FILE error names (a path, never a data value)."""
    match = _READ_FILE.search(_text(exc))
    if not match:
        return None
    path = re.sub(r"^file:(//)?", "", match.group(1))
    return path if len(path) < 300 and path.isprintable() else None


#: Conditions meaning the input files themselves are unusable (exit 2, not 1).
INPUT_CONDITIONS = ("FAILED_READ_FILE", "MALFORMED_RECORD_IN_PARSING", "MALFORMED_CSV_RECORD",
                    "PARQUET_TYPE_ILLEGAL", "PARQUET_COLUMN_DATA_TYPE_MISMATCH", "CANNOT_MERGE_SCHEMAS")


def is_input_failure(exc: BaseException) -> bool:
    return any(c.split(".")[0] in INPUT_CONDITIONS for c in error_conditions(exc))


#: condition (prefix) -> sentence; {file} is the failing file when Spark names it.
_KNOWN = (
    ("MALFORMED_RECORD_IN_PARSING", "some rows do not parse as the input's format (--bad-rows fail); fix "
     "them, check --delimiter/--quote/--schema, or pass --bad-rows drop"),
    ("MALFORMED_CSV_RECORD", "some rows do not parse as CSV (--bad-rows fail); fix them, check "
     "--delimiter/--quote/--schema, or pass --bad-rows drop"),
    ("PARQUET_TYPE_ILLEGAL", "a column has a Parquet type Spark cannot read (pandas writes nanosecond "
     "timestamps by default): rewrite it with df.to_parquet(path, coerce_timestamps='us') or "
     "convert the column to microseconds"),
    ("PARQUET_COLUMN_DATA_TYPE_MISMATCH", "the Parquet files disagree on a column's type; rewrite them "
     "with one schema"),
    ("FAILED_READ_FILE.CANNOT_READ_FILE_FOOTER", "{file} is not a readable Parquet file (truncated or corrupt); restore "
     "it or remove it from the input"),
    ("CANNOT_MERGE_SCHEMAS", "the files of the input have incompatible schemas; give one format and schema"),
    ("UNABLE_TO_INFER_SCHEMA", "no schema could be read from it (an empty folder, or files of another "
     "format); check --format and the files in it"),
    ("PATH_NOT_FOUND", "the path does not exist"),
    ("TABLE_OR_VIEW_NOT_FOUND", "TABLE_OR_VIEW_NOT_FOUND: no such table or view"),
    ("FAILED_READ_FILE", "{file} cannot be read (corrupt, truncated, or not in the input's format); "
     "check --format, --encoding and the files in the input"),
)
_CAUSES = {
    "RuntimeException": None,
    "CharacterCodingException": "the text is not in the given --encoding",
    "ParquetDecodingException": "{file} holds corrupt Parquet data",
    "EOFException": "{file} is truncated",
    "FileNotFoundException": "a file of the input disappeared while it was read",
    "ConnectException": "a connection was refused",
}


def describe_failure(exc: BaseException) -> str:
    """One sentence for a Spark failure, chosen from its conditions and cause
    class, never quoting Spark's message (which can contain data values)."""
    conditions = error_conditions(exc)
    file = _failed_file(exc)
    for prefix, sentence in _KNOWN:
        if any(c == prefix or c.startswith(prefix + ".") for c in conditions):
            if "{file}" in sentence and file is None and prefix != "FAILED_READ_FILE":
                continue
            return sentence.format(file=repr(file) if file else "a file of the input")
    cause = root_cause(exc)
    if _CAUSES.get(cause):
        return _CAUSES[cause].format(file=repr(file) if file else "a file of the input")
    return f"Spark error {error_class(exc)}"


#: Set by the command line's SIGINT handler (``dp_spark.cli``): a Spark
#: error raised after it is the interrupt's doing, reported as Ctrl-C.
INTERRUPTED = threading.Event()


@contextlib.contextmanager
def spark_job(what: str):
    """Context for a Spark action computing a non-private summary."""
    previous = set_job_description(f"dp_spark: {what}")  # names the jobs in the Spark UI
    try:
        yield
    except spark_exception_types() as exc:
        if INTERRUPTED.is_set():
            # Ctrl-C broke a gateway call: the user's interrupt, not a Spark failure
            raise KeyboardInterrupt from None
        if is_input_failure(exc):
            # unusable input files: a bad input (exit 2)
            error, message = InputReadError, f"cannot read the input while {what}: {describe_failure(exc)}."
        else:
            error, message = SparkJobError, (
                f"Spark failed while {what}: {describe_failure(exc)}. "
                "Details are withheld because Spark messages can quote data values; "
                "run with --verbose (or DP_SPARK_DEBUG=1) to see them on non-sensitive data."
            )
        if os.environ.get("DP_SPARK_DEBUG") or VERBOSE:
            raise error(message) from exc
        raise error(message) from None
    finally:
        set_job_description(previous)
