"""Running Spark actions without leaking data or Java stack traces.

Spark's own error messages can quote data values (a failed cast shows the
offending value), so an error raised while a summary is being computed is
re-raised as :class:`~dp_spark.errors.SparkJobError` naming only the Spark
error class. Set ``DP_SPARK_DEBUG=1`` to get the original exception chained
(for debugging on non-sensitive data only).
"""

from __future__ import annotations

import contextlib
import os

from dp_spark.errors import SparkJobError


def _spark_exception_types() -> tuple[type, ...]:
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


def error_class(exc: BaseException) -> str:
    """The Spark error class (condition) of ``exc``, or its Python type name."""
    for getter in ("getCondition", "getErrorClass"):
        fn = getattr(exc, getter, None)
        if fn is not None:
            try:
                value = fn()
            except Exception:  # noqa: BLE001 - best effort only
                value = None
            if value:
                return str(value)
    return type(exc).__name__


@contextlib.contextmanager
def spark_job(what: str):
    """Context for a Spark action computing a non-private summary."""
    from dp_spark.progress import set_job_description

    previous = set_job_description(f"dp_spark: {what}")  # names the jobs in the Spark UI
    try:
        yield
    except _spark_exception_types() as exc:
        message = (
            f"Spark failed while {what} (error class {error_class(exc)}). "
            "Details are withheld because Spark messages can quote data values; "
            "set DP_SPARK_DEBUG=1 to see them on non-sensitive data."
        )
        if os.environ.get("DP_SPARK_DEBUG"):
            raise SparkJobError(message) from exc
        raise SparkJobError(message) from None
    finally:
        set_job_description(previous)
