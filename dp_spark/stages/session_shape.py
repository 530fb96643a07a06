"""Whether the session hands the stages' packed columns to Python in a layout they read: checked
before a release spends anything.

The stages that ship many numbers as a few rows pack them as binary values read back by
:func:`dp_spark.summaries.packed_arrays.binary_values`, which reads ``binary`` and ``large_binary``
(``spark.sql.execution.arrow.useLargeVarTypes=true``) and refuses any other type. The type is the
session's choice, and a Spark version could add another; the failure would then come from inside a
Spark job, after the release spent its budget. :func:`check_session` asks the session instead: one
job over a literal row (no data read), once per session and Arrow settings."""

from __future__ import annotations

import threading

import pyarrow as pa

from dp_spark.errors import ParameterError
from dp_spark.stages.python_worker import worker_pass
from dp_spark.summaries.packed_arrays import OFFSET_TYPES

#: The session settings that decide how Spark hands Arrow columns to Python (named in the refusal).
ARROW_SETTINGS = ("spark.sql.execution.arrow.useLargeVarTypes", "spark.sql.execution.arrow.maxRecordsPerBatch")
#: The types the packed readers accept, by name.
READABLE = tuple(sorted(str(t) for t in OFFSET_TYPES))

_checked: dict = {}
_lock = threading.Lock()


@worker_pass
def _types_seen(batches):
    """mapInArrow body: the Arrow type of the binary column, as the Python worker receives it."""
    for batch in batches:
        if batch.num_rows:
            yield pa.RecordBatch.from_arrays([pa.array([str(batch.schema.field(0).type)], pa.string())],
                                             names=["type"])


def packed_column_type(spark) -> str:
    """The Arrow type (its name) in which this session hands a binary column
    to a Python pass: one Spark job over one literal row."""
    from pyspark.sql import functions as F

    probe = spark.range(1).select(F.lit(b"\x00").alias("packed"))
    # no job description: it would make a release's transcript depend on whether it was the session's
    # first (tests/audit/test_transcript.py compares transcripts exactly)
    rows = probe.mapInArrow(_types_seen, "type string").collect()
    return rows[0]["type"]


def _settings(spark) -> tuple:
    out = []
    for key in ARROW_SETTINGS:
        try:
            out.append(spark.conf.get(key, None))
        except Exception:  # noqa: BLE001 - a setting this Spark does not know
            out.append(None)
    return tuple(out)


def check_session(spark) -> None:
    """Refuse (ParameterError) a session whose Python passes would receive
    the packed columns in a type :mod:`dp_spark.summaries.packed_arrays`
    does not read; the answer is kept per session and Arrow settings, so a
    session is probed once. Call before spending: the probe reads no data."""
    key = (id(spark), _settings(spark))
    with _lock:
        seen = _checked.get(key)
    if seen is None:
        seen = packed_column_type(spark)
        with _lock:
            _checked[key] = seen
    if seen not in READABLE:
        raise ParameterError(
            f"this Spark session hands binary columns to Python as {seen}; dp_spark's stages read "
            f"{' and '.join(READABLE)} only. Check the session's Arrow settings ({', '.join(ARROW_SETTINGS)}, "
            "and any other spark.sql.execution.arrow.* setting) or use a session with Spark's defaults; "
            "nothing was spent.")

