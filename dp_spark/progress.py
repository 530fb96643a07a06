"""Where a run is: Spark job descriptions and the CLI's progress lines.

:func:`set_job_description` names the Spark jobs that follow in the Spark UI and history server (a no-op on
Spark Connect and without a session). :class:`StepHandler`, the CLI's logging handler, makes each step the
releases log (INFO on the ``dp_spark`` logger) the description of that step's Spark jobs and, on a terminal,
a progress line; off a terminal or with ``--quiet`` only warnings are printed. Step messages name phases and
public parameters only, never data values.
"""

from __future__ import annotations

import logging
import sys
import time

_PROPERTY = "spark.job.description"


def _spark_context():
    """The running classic SparkContext, or None (never imports pyspark)."""
    if "pyspark.sql" not in sys.modules:
        return None
    try:
        from pyspark.sql import SparkSession

        session = SparkSession.getActiveSession()
        return None if session is None else session.sparkContext
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        return None


def set_job_description(text: str | None) -> str | None:
    """Describe the Spark jobs started from now on in this thread; returns
    the previous description (pass it back to restore it)."""
    sc = _spark_context()
    if sc is None:
        return None
    try:
        previous = sc.getLocalProperty(_PROPERTY)
        sc.setLocalProperty(_PROPERTY, text)
        return previous
    except Exception:  # noqa: BLE001 - a description is never worth a failure
        return None


class StepHandler(logging.Handler):
    """Progress lines on stderr (``show_steps``) and Spark job descriptions."""

    def __init__(self, show_steps: bool, stream=None):
        super().__init__(logging.INFO)
        self.show_steps = show_steps
        self.stream = stream
        self.start = time.monotonic()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            stream = self.stream or sys.stderr
            if record.levelno >= logging.WARNING:
                stream.write(f"dp-spark: {message}\n")
            else:
                set_job_description(f"dp_spark: {message}")
                if self.show_steps:
                    stream.write(f"dp-spark [{time.monotonic() - self.start:6.1f}s] {message}\n")
            stream.flush()
        except Exception:  # noqa: BLE001 - logging must never break a run
            self.handleError(record)


def show_progress(quiet: bool, verbose: bool = False, stream=None) -> bool:
    """Progress lines are shown on a terminal (or with --verbose), never with --quiet."""
    if quiet:
        return False
    stream = stream or sys.stderr
    return bool(verbose) or bool(getattr(stream, "isatty", lambda: False)())
