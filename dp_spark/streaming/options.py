"""The streaming-only options of continual-distinct and their checks (no pyspark):
how the query forms its steps and runs, not release parameters. The command
line and the streaming entry point check them before Spark starts."""

from __future__ import annotations

from dp_spark import checks
from dp_spark.errors import ParameterError
from dp_spark.plans.continual_distinct import GRID_CONDITION

AVAILABLE_NOW = "available-now"
INTERVAL = "interval"
MAX_FILES_PER_STEP = 1_000  # each file of a step is listed, schema-checked and planned on the driver
MAX_STATE_PARTITIONS = 1_000  # each state partition is a state store writing its own files every step


def validate_files_per_step(files_per_step) -> int:
    return checks.at_most(files_per_step, "files_per_step", MAX_FILES_PER_STEP, "every file of a step is "
                          "listed, schema-checked and planned on the driver; merge the files upstream")


def validate_state_partitions(state_partitions) -> int | None:
    return checks.at_most(state_partitions, "state_partitions", MAX_STATE_PARTITIONS, "each partition is a "
                          "state store that writes its own files at every step", none_ok=True)


def validate_timeout(timeout) -> float | None:
    """Seconds after which the query is stopped (None: no limit)."""
    return None if timeout is None else checks.positive(timeout, "timeout")


def validate_trigger(trigger: str) -> str:
    """'available-now' or a processing-time interval such as '10 seconds'."""
    if not isinstance(trigger, str) or not trigger.strip():
        raise ParameterError("trigger must be 'available-now' or an interval such as '10 seconds'.")
    text = trigger.strip().lower()
    if text in (AVAILABLE_NOW, "availablenow", "available_now"):
        return AVAILABLE_NOW
    parts = text.split()
    units = ("second", "seconds", "minute", "minutes", "hour", "hours", "millisecond", "milliseconds")
    try:
        ok = len(parts) == 2 and float(parts[0]) > 0 and parts[1] in units
    except ValueError:
        ok = False
    if not ok:
        raise ParameterError(
            f"trigger must be 'available-now' or an interval such as '10 seconds'; got {trigger!r}."
        )
    return text


def step_grid(trigger: str) -> str:
    """The step grid a validated trigger makes: available-now or interval."""
    return AVAILABLE_NOW if trigger == AVAILABLE_NOW else INTERVAL


def grid_note(grid: str, files_per_step: int) -> str:
    """The report's note on how steps are formed and when the guarantee holds."""
    if grid == AVAILABLE_NOW:
        how = (
            f"each step is the next {files_per_step} source file(s) in Spark's order (modification "
            "time). The guarantee assumes the files are cut on a schedule fixed in advance (one file "
            "set per period, an empty file for a period without events), never by content"
        )
    else:
        how = (
            "each trigger interval is one step, with or without new files (a no-data micro-batch "
            "makes a step without change). The grid is processing time: in each run it starts with "
            "the first micro-batch with new files, makes no steps while the query is stopped, and "
            "drops the ticks a micro-batch overran; the guarantee assumes file arrival and batch "
            "timing do not depend on the data"
        )
    return f"Streaming step grid: {how}. Privacy holds provided {GRID_CONDITION}."
