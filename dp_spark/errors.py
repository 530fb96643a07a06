"""Exception types raised by dp_spark: one class per category of problem, so callers (and the CLI) can tell
a bad parameter from a bad table from an overspent budget. Messages say what to change and never contain a
value computed from the private data: a refusal may reveal *that* a configured limit was crossed, never by
how much.
"""


class DPSparkError(Exception):
    """Base class of every error dp_spark raises on purpose."""


class ParameterError(DPSparkError, ValueError):
    """A privacy or job parameter is invalid (ε ≤ 0, β outside (0, 1), …)."""


class SchemaError(DPSparkError):
    """The input table lacks a named column or a column has an unusable type."""


class InputError(DPSparkError):
    """The input cannot be read: missing or unreadable path, unknown format."""


class BudgetExceededError(DPSparkError):
    """A release would spend more privacy budget than is left. Raised before any data is read."""


class LimitError(DPSparkError):
    """A method would move more data to the driver than its configured limit."""


class SparkJobError(DPSparkError):
    """Spark failed while computing a summary. The message names only the
    Spark error class, because Spark's own messages can quote data values."""


class InputReadError(SparkJobError, InputError):
    """Spark could not read the input files (corrupt, truncated, another
    format, rows that do not parse under ``--bad-rows fail``). A bad input:
    the CLI exits with 2. The message names the file, never a data value."""


class AccountingError(RuntimeError):
    """The noise a release drew would cost more than the budget step it was charged to
    (:func:`dp_spark.noise.records.overspent_steps`), or names no step of its budget split
    (:func:`dp_spark.noise.records.uncharged_records`): a defect in dp_spark, never a bad input. The
    release is withheld (not recorded, not returned); the message names steps by position and counts
    records, never a label or a value."""
