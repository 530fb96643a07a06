"""Progress: Spark job descriptions named after the step, progress lines on a
terminal only, quiet with --quiet or off a terminal."""

from __future__ import annotations

import io
import logging

from dp_spark.progress import StepHandler, set_job_description, show_progress
from dp_spark.sparkjobs import spark_job

PROPERTY = "spark.job.description"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _logger(handler) -> logging.Logger:
    log = logging.getLogger("dp_spark.test_progress")
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    log.propagate = False
    return log


def test_progress_shows_only_on_a_terminal_and_never_with_quiet():
    assert show_progress(quiet=False, stream=_Terminal())
    assert not show_progress(quiet=False, stream=io.StringIO())
    assert not show_progress(quiet=True, stream=_Terminal())
    assert show_progress(quiet=False, verbose=True, stream=io.StringIO())


def test_step_lines_name_the_spark_jobs(spark):
    shown, hidden = _Terminal(), io.StringIO()
    _logger(StepHandler(True, shown)).info("distinct-count: computing bounded counts (method %s)", "greedy")
    assert spark.sparkContext.getLocalProperty(PROPERTY) == "dp_spark: distinct-count: computing bounded counts (method greedy)"
    assert shown.getvalue().startswith("dp-spark [") and shown.getvalue().rstrip().endswith("(method greedy)")
    log = _logger(StepHandler(False, hidden))
    log.info("top-k: selecting")
    log.warning("something to know")
    assert hidden.getvalue() == "dp-spark: something to know\n"
    assert spark.sparkContext.getLocalProperty(PROPERTY) == "dp_spark: top-k: selecting"
    set_job_description(None)


def test_spark_job_describes_its_jobs_and_restores_the_step(spark):
    previous = set_job_description("dp_spark: a step")
    with spark_job("counting persons"):
        assert spark.sparkContext.getLocalProperty(PROPERTY) == "dp_spark: counting persons"
        assert spark.range(10).count() == 10
    assert spark.sparkContext.getLocalProperty(PROPERTY) == "dp_spark: a step"
    set_job_description(previous)
