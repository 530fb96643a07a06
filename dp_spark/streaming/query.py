"""Streaming continual-distinct: one private estimate per micro-batch, resumable.

The online form of the continual-distinct release (Jain, Kalemaj,
Raskhodnikova, Sivakumar, Smith, NeurIPS 2023; Algorithms 1–3 as in
``dp_spark.mechanisms.continual_distinct``) on Spark Structured Streaming.
Each micro-batch of ``files_per_step`` event files is one step t. Per-item
state lives in Spark (``dp_spark.streaming.items``); only the step's
O(log T) sums reach the driver, which feeds them to a ``ContinualCounter``
inside ``foreachBatch`` (all noise drawn there), saves the counter state
atomically with the step and micro-batch id (``MechanismCheckpoint``), and
only then writes the step's record to the sink (``StepSink``). A restart
resumes from both checkpoints; a re-executed micro-batch whose step was
saved re-writes its record and draws nothing. ρ is spent once, when the
checkpoint is created; a new mechanism state is refused where
``<checkpoint>/spark`` or sink step files exist (it would spend ρ again).

The step grid. The neighbouring argument compares two streams step by step,
so WHICH EVENTS FORM WHICH STEP must not depend on the data: removing one
item's events must leave every other event in the same step. That holds when
the file schedule is fixed in advance:

- ``trigger="available-now"`` (preferred): step t is the t-th group of
  ``files_per_step`` files in Spark's listing order (modification time).
  Write one file (set) per fixed period, an EMPTY file for a period without
  events (as ``write_demo_files`` does), never a file cut by content: a
  missing item could then remove a file and shift every later step.
- an interval trigger: every trigger interval is one step, with or without
  new files. The grid is wall-clock time: in each run it starts with the
  first micro-batch with new files, it holds only while every batch
  finishes within the interval (Spark skips overrun ticks), and there are
  no steps while the query is stopped.

What fixes a step's meaning (source, format, schema, files_per_step,
trigger, horizon, method and parameters) is recorded at checkpoint creation;
a resumed run with another value is refused (ParameterError naming the
option). Each micro-batch's files are checked for the stream's columns
(``dp_spark.streaming.files``).

Guarantee: item-level ρ-zCDP for the whole series (neighbouring streams
differ by any subset of one item's events, Definition 1.2), with the batch
release's mechanisms and error statements, PROVIDED the step grid does not
depend on the data (the report says so). Schema problems are refused before
ρ is spent; bad VALUES are dropped per event (a per-row filter: item-level
sensitivity unchanged). Parameters are checked and ρ split by the batch plan
(``dp_spark.plans.continual_distinct``, ``stream=True``).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.state import GroupStateTimeout

from dp_spark.accounting import PrivacyFilter
from dp_spark.io import detect_format, parsed_op, read_input, spark_source
from dp_spark.mechanisms.continual_distinct import DEFAULT_STREAM_METHOD, ContinualCounter
from dp_spark.mechanisms.continual_distinct.mechanisms import DEFAULT_COUNTER
from dp_spark.errors import InputError, ParameterError, SparkJobError
from dp_spark.noise import make_rng
from dp_spark.plan import Plan
from dp_spark.plans.continual_distinct import GRID_CONDITION  # noqa: F401 - re-exported
from dp_spark.plans.continual_distinct import plan as make_plan
from dp_spark.releases.continual_distinct import build_release, series_frame
from dp_spark.releases.template import refuse_seeded_ledger
from dp_spark.sparkjobs import spark_exception_types, error_class, spark_job
from dp_spark.stages.continual import item_column, op_column, raw_time, time_kind
from dp_spark.stages.edges import require_columns
from dp_spark.stages.partitioning import python_partitions
from dp_spark.streaming.checkpoint import (
    KIND,
    SHUFFLE_PARTITIONS,
    SPARK_DIR,
    VERSION,
    MechanismCheckpoint,
    StepSink,
    local_directory,
    refuse_foreign_checkpoint,
)
from dp_spark.streaming.files import batch_files, missing_column
from dp_spark.streaming.items import CROSS, DELTA, LEVEL, OP, ORDER, OUTPUT_SCHEMA, STATE_SCHEMA, make_update
from dp_spark.streaming.options import (  # noqa: F401 - MAX_*: re-exported
    AVAILABLE_NOW,
    MAX_FILES_PER_STEP,
    MAX_STATE_PARTITIONS,
    grid_note,
    step_grid,
    validate_files_per_step,
    validate_state_partitions,
    validate_timeout,
    validate_trigger,
)

log = logging.getLogger(__name__)

ITEM = "item"
# Resuming with another value of these is refused (they fix what a step means); value: the option's name.
_CONFIG_KEYS = {
    "rho": "--rho", "horizon": "--horizon", "method": "--method", "max_flippancy": "--max-flippancy",
    "beta": "--beta", "delta": "--delta", "seed": "--seed", "item_col": "--item-col", "op_col": "--op-col",
    "time_col": "--time-col", "step_grid": "--trigger", "trigger": "--trigger", "source": "--input",
    "format": "--format", "files_per_step": "--files-per-step", "schema": "the input files' schema",
    "counter": "--counter",
    "level_counter": "the version that made the checkpoint (its auto/adaptive levels ran binary trees only)",
}
# A key older checkpoints lack, and the value they ran with.
_CONFIG_DEFAULTS = {"counter": DEFAULT_COUNTER, "level_counter": None}
#: The online counter's levels ("auto", "adaptive"): the BLT counter or the tree, the smaller bound.
_LEVEL_COUNTER = "best"


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def _generator_state(rng: np.random.Generator) -> dict:
    return rng.bit_generator.state


def _generator_from(state: dict) -> np.random.Generator:
    bit_generator = np.random.PCG64()
    bit_generator.state = state
    return np.random.Generator(bit_generator)


class StepWriter:
    """The ``foreachBatch`` function: one micro-batch -> one released step.

    Every call loads the checkpoint, so a re-executed batch and a restarted
    driver see exactly what was saved. ``files``: (format, required columns)
    for the per-file check, or None. ``progress``: "step t/T released" on stderr.
    """

    def __init__(self, store: MechanismCheckpoint, sink: StepSink, horizon: int, *,
                 files: tuple[str, list[str]] | None = None, progress: bool = False) -> None:
        self.store = store
        self.sink = sink
        self.horizon = int(horizon)
        self.files = files
        self.progress = progress
        self._rng: np.random.Generator | None = None  # unseeded runs: one OS-seeded generator per run

    def _generator(self, state: dict) -> np.random.Generator:
        if state["config"]["seed"] is not None:
            return _generator_from(state["rng"])  # seeded (tests/demos): resumes the same stream
        if self._rng is None:
            self._rng = make_rng()
        return self._rng

    def __call__(self, batch_df, batch_id: int) -> None:
        # evaluate the whole batch first: Spark commits per-item state only for a fully processed batch
        sums = batch_df.groupBy(LEVEL).agg(F.sum(DELTA).alias(DELTA), F.sum(CROSS).alias(CROSS))
        with spark_job("summarising a micro-batch"):
            rows = sums.collect()
        state = self.store.load()
        if batch_id <= state["last_batch_id"]:
            # a re-executed batch whose step is saved: re-write its record, draw and count nothing
            if batch_id == state["last_batch_id"] and state["last_record"] is not None:
                self._write(state["last_record"])
            return
        if state["step"] >= self.horizon:
            return  # the horizon is reached: later events are not counted
        self._check_files(batch_df.sparkSession, batch_id, state["step"] + 1)

        counter = ContinualCounter.from_dict(state["counter"])
        J = counter_max_level(state)
        per_level = np.zeros(J + 2, dtype=np.int64)
        crossings = np.zeros(J + 2, dtype=np.int64)
        for row in rows:
            per_level[int(row[LEVEL])] += int(row[DELTA])
            crossings[int(row[LEVEL])] += int(row[CROSS])
        over = np.asarray(state["over"], dtype=np.int64) + crossings[1:]
        rng = self._generator(state)
        estimate = counter.step(
            rng,
            z=float(per_level.sum()),
            z_truncated=np.cumsum(per_level[: J + 1]).astype(np.float64),
            over_counts=over.astype(np.float64),
        )
        record = {
            "step": int(estimate.step),
            "estimate": float(estimate.estimate),
            "std": float(estimate.std),
            "error_bound": float(estimate.error_bound) if math.isfinite(estimate.error_bound) else None,
            "flippancy_bound": None if estimate.flippancy_bound is None else int(estimate.flippancy_bound),
        }
        state.update(
            step=int(estimate.step),
            last_batch_id=int(batch_id),
            counter=counter.to_dict(),
            over=[int(v) for v in over],
            last_record=record,
            updated=_now(),
        )
        if state["config"]["seed"] is not None:
            state["rng"] = _generator_state(rng)
        self.store.save(state)  # from here on the step is released, whatever happens next
        self._write(record)
        if self.progress:
            print(f"continual-distinct: step {record['step']}/{self.horizon} released", file=sys.stderr, flush=True)

    def _check_files(self, spark, batch_id: int, step: int) -> None:
        """Fail the step (not committed, nothing drawn) if one of its files lacks
        a column of the stream."""
        if self.files is None:
            return
        fmt, required = self.files
        files = batch_files(self.store.spark_path, batch_id)
        found = missing_column(spark, files, fmt, required)
        if found is None:
            return
        path, column = found
        message = (
            f"source file {Path(path).name!r} has no column {column!r} (its columns differ from the "
            f"stream's); step {step} was not released. Fix or move that file, then run again."
        )
        self.store.record_error(message)
        raise InputError(message)

    def _write(self, record: dict) -> None:
        try:
            self.sink.write(record)
        except InputError as exc:  # a different record is already published for this step
            self.store.record_error(str(exc))
            raise


def counter_max_level(state: dict) -> int:
    return int(state["counter"]["config"]["max_level"])


def _new_state(config: dict, tree_horizon: int, w: int | None, rho: float) -> dict:
    """A fresh mechanism state; ``rho`` is the plan's calibrated ρ."""
    counter = ContinualCounter(
        tree_horizon, rho, config["method"], w, beta=config["beta"], counter=config.get("counter", DEFAULT_COUNTER),
        level_counter=config.get("level_counter") or _LEVEL_COUNTER,
    )
    J = tree_horizon.bit_length() - 1
    state: dict[str, Any] = {
        "kind": KIND,
        "version": VERSION,
        "note": "CONFIDENTIAL: exact partial sums and secret noise; never publish this file.",
        "config": config,
        "created": _now(),
        "updated": _now(),
        "step": 0,
        "last_batch_id": -1,
        "counter": counter.to_dict(),
        "over": [0] * (J + 1),
        "last_record": None,
    }
    if config["seed"] is not None:
        state["rng"] = _generator_state(make_rng(config["seed"]))
    return state


def _refuse_new_state_over_old_output(checkpoint_dir, store: MechanismCheckpoint, sink: StepSink) -> None:
    """A new mechanism state (ρ spent again) only where no query ran and nothing was published."""
    if store.spark_started():
        raise InputError(
            f"the checkpoint directory {str(checkpoint_dir)!r} holds a Spark checkpoint ({SPARK_DIR}/) but "
            "no mechanism state (mechanism.json): the state was lost or the directory belongs to another "
            "run. Restore mechanism.json from a backup to resume; starting over here would spend the "
            "budget again and re-publish released steps with new noise. A new stream needs an empty "
            "checkpoint directory and an empty sink. Nothing was read or spent."
        )
    if sink.steps():
        raise InputError(
            f"the sink {str(sink.directory)!r} already holds step records, but the checkpoint "
            f"{str(checkpoint_dir)!r} has no mechanism state: it is another stream's sink (or this "
            "checkpoint's state was lost). A new stream needs an empty sink; to resume, use the "
            "checkpoint that wrote these records. Nothing was read or spent."
        )


def _refuse_resume_without_spark_state(checkpoint_dir, store: MechanismCheckpoint, state: dict) -> None:
    if state["last_batch_id"] >= 0 and not store.spark_started():
        raise InputError(
            f"the checkpoint directory {str(checkpoint_dir)!r} has a mechanism state with released steps "
            f"but no Spark checkpoint ({SPARK_DIR}/): Spark would re-read the source from the start under "
            "a different step grid. Restore the whole checkpoint directory from a backup."
        )


def _saved_state(spark, source: str, config: dict, store: MechanismCheckpoint, sink: StepSink,
                 checkpoint_dir: Path) -> dict | None:
    """The checkpoint's state when resuming (checksum and options checked), or
    None for a new stream (refused over old output). Sets ``config["schema"]``
    (the saved one, or the files' schema read now). Spends nothing."""
    if store.exists():
        state = store.load()  # checksum verified
        _check_same_config(state["config"], config)
        config["schema"] = state["config"]["schema"]
        if state["step"] < config["horizon"]:
            _refuse_resume_without_spark_state(checkpoint_dir, store, state)
        log.info("continual-distinct: resuming at step %d of %d", state["step"], config["horizon"])
        return state
    _refuse_new_state_over_old_output(checkpoint_dir, store, sink)  # before spending
    if config["schema"] is None:
        # Parquet footers, CSV header names (strings), JSON the stream's columns (strings): never from rows
        columns = [config["time_col"], config["item_col"], config["op_col"]]
        config["schema"] = read_input(spark, source, config["format"], columns=columns).schema.json()
    return None


def _check_same_config(saved: dict, config: dict) -> None:
    """Refuse a resumed run whose options differ from the checkpoint's
    (``schema`` None: the saved one is used)."""
    for key, option in _CONFIG_KEYS.items():
        if key == "schema" and config.get(key) is None:
            continue
        if saved.get(key, _CONFIG_DEFAULTS.get(key)) != config.get(key):
            if key == "schema":
                was = "another schema of the input files"
            else:
                was = f"{key} = {saved.get(key)!r} ({option}), not {config.get(key)!r}"
            raise ParameterError(
                f"the checkpoint was created with {was}; it fixes what a step means, so resume with the "
                "same options, or use a new checkpoint directory and sink (a new stream, which spends "
                "its own budget)."
            )


def _source_text(source: str) -> str:
    """The source folder as recorded in the checkpoint: an absolute local path, or the URI."""
    text = str(source)
    if "://" in text or text.startswith("file:"):
        return text
    return str(Path(text).resolve())


def _stream_format(source: str, fmt: str) -> str:
    if fmt == "auto":
        fmt = detect_format(source)
    if fmt not in ("parquet", "csv", "json"):
        raise ParameterError(f"the streaming source format must be parquet, csv or json; got {fmt!r}.")
    return fmt


def _stream_events(spark, source: str, fmt: str, schema, files_per_step: int, time_col, item_col, op_col):
    """The event stream (item, op[, order_key]) with bad VALUES dropped per
    event. Schema problems raise here, before anything is spent."""
    reader = spark.readStream.format(fmt).schema(schema).option("maxFilesPerTrigger", int(files_per_step))
    if fmt == "csv":
        reader = reader.option("header", "true")
    stream = reader.load(spark_source(source))  # a relative folder: the one Python checked
    require_columns(stream, item_col, op_col)
    has_order = time_col is not None and time_col in stream.columns
    stream = _parsed_strings(stream, time_col if has_order else None, op_col)
    columns = [item_column(stream, item_col).alias(ITEM), op_column(stream, op_col).alias(OP)]
    keep = F.col(ITEM).isNotNull() & F.col(OP).isin(1, -1)
    if has_order:
        columns.append(raw_time(stream, time_col, time_kind(stream, time_col)).alias(ORDER))
        keep &= F.col(ORDER).isNotNull()
        if isinstance(stream.schema[time_col].dataType, (T.FloatType, T.DoubleType, T.DecimalType)):
            keep &= ~F.isnan(F.col(ORDER)) & ~F.col(ORDER).isin(float("inf"), float("-inf"))
    events = stream.select(*columns).where(keep)
    return events, has_order


def _parsed_strings(stream, time_col: str | None, op_col: str):
    """String op and time columns (CSV/JSON) parsed per row: the op as in the
    batch release, the time as a number or ISO date/time; unparsable: dropped."""
    if isinstance(stream.schema[op_col].dataType, T.StringType):
        stream = stream.withColumn(op_col, parsed_op(F.col(op_col)))
    if time_col is not None and isinstance(stream.schema[time_col].dataType, T.StringType):
        text = F.trim(F.col(time_col))
        seconds = F.unix_micros(F.try_to_timestamp(text)).cast("double") / F.lit(1e6)
        stream = stream.withColumn(time_col, F.coalesce(text.try_cast("double"), seconds))
    return stream


def continual_distinct_stream(
    spark,
    source: str,
    *,
    checkpoint: str,
    sink: str,
    rho: float,
    horizon: int,
    method: str = DEFAULT_STREAM_METHOD,
    max_flippancy: int | None = None,
    counter: str = DEFAULT_COUNTER,
    time_col: str | None = "time",
    item_col: str = "item",
    op_col: str = "op",
    fmt: str = "auto",
    schema=None,
    files_per_step: int = 1,
    trigger: str = AVAILABLE_NOW,
    timeout: float | None = None,
    beta: float = 0.05,
    delta: float = 1e-6,
    seed: int | None = None,
    budget: PrivacyFilter | None = None,
    state_partitions: int | None = None,
    progress: bool = False,
):
    """Run (or resume) the streaming release; return a Release of the steps released so far.

    Item-level ρ-zCDP for the whole series of ``horizon`` steps, provided the
    step grid does not depend on the data (module docstring). The release
    parameters are checked, and ρ split, by the batch plan
    (``dp_spark.plans.continual_distinct.plan(..., stream=True)``).

    ``checkpoint``: a local directory for Spark's checkpoint and the
    CONFIDENTIAL mechanism state; ``sink``: a local directory getting one JSON
    record per released step. ``trigger``: "available-now" (process the files
    present, ``files_per_step`` per step, then return) or an interval such as
    "10 seconds" (run until the horizon or ``timeout`` seconds). ``horizon``
    (required) <= MAX_HORIZON, ``files_per_step`` <= MAX_FILES_PER_STEP,
    ``state_partitions`` <= MAX_STATE_PARTITIONS (:func:`state_partitions_for`;
    a value differing from the checkpoint's is ignored with a warning).
    ``time_col`` (optional in the files) orders events inside a micro-batch.
    ``budget``: ρ is spent only when a new checkpoint is created. A checkpoint
    folder holding another query's files is refused before anything is read or
    spent (:func:`~dp_spark.streaming.checkpoint.refuse_foreign_checkpoint`).
    ``seed``: tests and demos only (the generator state is checkpointed too).
    ``schema``: the files' schema (default: fixed at creation from Parquet
    footers, the CSV header with string columns, or JSON's stream columns as
    strings; never inferred from rows). ``progress``: "step t/T released" on
    stderr per step. Ctrl-C stops the query between steps and raises
    KeyboardInterrupt saying how many steps are released and where.

    Returns a :class:`~dp_spark.Release` like the batch release's (``series``
    of the released steps, ``result["released_count"]``), its parameters adding
    the stream's (trigger, step grid, checkpoint, sink, resumed).
    """
    plan = make_plan(rho=rho, horizon=horizon, method=method, time_col=time_col, item_col=item_col,
                     op_col=op_col, max_flippancy=max_flippancy, counter=counter, beta=beta, delta=delta, seed=seed,
                     stream=True)
    refuse_seeded_ledger(seed, budget)  # a seeded run is not private: never charges a ledger (nothing read yet)
    files_per_step = validate_files_per_step(files_per_step)
    trigger = validate_trigger(trigger)
    state_partitions = validate_state_partitions(state_partitions)
    timeout = validate_timeout(timeout)
    checkpoint_dir = local_directory(checkpoint, "checkpoint")
    sink_dir = local_directory(sink, "sink")
    refuse_foreign_checkpoint(checkpoint_dir, sink=sink_dir, source=source)  # another query's files: refused
    config = _stream_config(plan, source, _stream_format(source, fmt), files_per_step, trigger, schema,
                            None if seed is None else int(seed))
    store = MechanismCheckpoint(checkpoint_dir)
    step_sink = StepSink(sink_dir, seeded=seed is not None)
    resumed = store.exists()
    state = _saved_state(spark, source, config, store, step_sink, checkpoint_dir)  # None: a new stream

    stream_schema = T.StructType.fromJson(json.loads(config["schema"]))
    events, has_order = _stream_events(  # schema checks: before anything is spent
        spark, source, config["format"], stream_schema, files_per_step, time_col, item_col, op_col
    )
    state = _begin(plan, budget, store, step_sink, config, state)
    local = plan.spend(None)  # this run's split of ρ (spent once, when the checkpoint was created)
    partitions = state_partitions_for(spark, store, state_partitions)
    if state["step"] < plan["horizon"]:
        required = [item_col, op_col] + ([time_col] if has_order else [])
        writer = StepWriter(store, step_sink, plan["horizon"], files=(config["format"], required), progress=progress)
        stream_writer = _stream_writer(events, has_order, counter_max_level(state), config["step_grid"], writer,
                                       checkpoint_dir, trigger)
        with _quiet_stream_logs(spark):
            _run_query(spark, stream_writer, store, plan["horizon"], trigger, timeout, partitions, step_sink)
        state = store.load()
    records = _released_records(step_sink, state, sink_dir)
    partitions = store.spark_state_partitions() or partitions  # what Spark holds once it has started
    return _release(plan, spark, local, state, records, config, resumed, checkpoint_dir, sink_dir, partitions)


def state_partitions_for(spark, store: MechanismCheckpoint, requested: int | None) -> int:
    """The per-item state's partitions: what Spark fixed at the query's first
    start, else ``requested``, else two per task slot (at most
    MAX_STATE_PARTITIONS). Public; changes nothing computed or released."""
    fixed = store.spark_state_partitions()
    if fixed is not None:
        if requested is not None and requested != fixed:
            log.warning("continual-distinct: the checkpoint fixes %d state partitions (at its first start); "
                        "state_partitions=%d is ignored", fixed, requested)
        return fixed
    if requested is not None:
        return requested
    return python_partitions(spark, MAX_STATE_PARTITIONS)


def _begin(plan: Plan, budget, store: MechanismCheckpoint, step_sink: StepSink, config: dict,
           state: dict | None) -> dict:
    """The state to run from: a new stream spends ρ (before any data is read)
    and saves a fresh state; a resumed one spends nothing and re-writes its
    last SAVED record."""
    if state is None:
        if budget is not None:
            if getattr(budget, "run_key", None) is not None:
                budget.once = True  # a stream's key is charged once: a re-created stream is refused
            budget.spend(plan.guarantee, label="continual-distinct (stream)")
        state = _new_state(config, plan["tree_horizon"], plan["flippancy_bound"], plan.params.rho)
        store.save(state)
    store.take_error()  # a stale error of an earlier run
    if state["last_record"] is not None:
        step_sink.write(state["last_record"])
    return state


def _stream_config(plan: Plan, source: str, fmt: str, files_per_step: int, trigger: str, schema, seed) -> dict:
    """What the checkpoint records at creation and a resumed run must repeat
    (``_check_same_config``)."""
    return {
        "rho": plan["rho"], "horizon": plan["horizon"], "method": plan["method"],
        "max_flippancy": plan["max_flippancy"], "beta": plan["beta"], "delta": plan["delta"],
        "seed": seed, "item_col": plan["item_col"], "op_col": plan["op_col"],
        "time_col": plan["time_col"], "step_grid": step_grid(trigger), "trigger": trigger,
        "source": _source_text(source), "format": fmt, "files_per_step": files_per_step,
        "schema": None if schema is None else schema.json(),
        "counter": plan.parameters.get("counter", DEFAULT_COUNTER),
        "level_counter": _LEVEL_COUNTER if plan["method"] in ("auto", "adaptive") else None,
    }


def _released_records(step_sink: StepSink, state: dict, sink_dir: Path) -> list[dict]:
    """The sink's records of the released steps 1..state["step"] (all of them, or refused)."""
    records = [r for r in step_sink.read() if r["step"] <= state["step"]]
    if [r["step"] for r in records] != list(range(1, state["step"] + 1)):
        raise InputError(
            f"the sink {str(sink_dir)!r} is missing records of released steps; it must be the sink this "
            "checkpoint wrote to (do not edit it)."
        )
    return records


def _stream_writer(events, has_order: bool, J: int, grid: str, writer: StepWriter, checkpoint_dir: Path,
                   trigger: str):
    """The per-item stateful query feeding ``writer`` (not started)."""
    # interval grid: a processing-time timeout (never set on an item) makes Spark run no-data batches;
    # available-now must not use it (the query would never end)
    timeout_conf = GroupStateTimeout.NoTimeout if grid == AVAILABLE_NOW else GroupStateTimeout.ProcessingTimeTimeout
    stateful = events.groupBy(ITEM).applyInPandasWithState(
        make_update(J, has_order), OUTPUT_SCHEMA, STATE_SCHEMA, "update", timeout_conf
    )
    stream_writer = (
        stateful.writeStream.outputMode("update")
        .foreachBatch(writer)
        .option("checkpointLocation", os.path.abspath(checkpoint_dir / SPARK_DIR))  # relative: Python's folder
    )
    if trigger == AVAILABLE_NOW:
        return stream_writer.trigger(availableNow=True)
    return stream_writer.trigger(processingTime=trigger)


def _stop_between_batches(query, patience: float = 60.0) -> None:
    """Stop the query once no micro-batch runs (waiting up to ``patience`` s)."""
    end = time.monotonic() + patience
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < end:
        time.sleep(0.05)
    query.stop()


@contextlib.contextmanager
def _shuffle_partitions(spark, partitions: int):
    """Set the state partitions for a query start (restored after); Spark
    keeps the first start's value in the checkpoint."""
    key = SHUFFLE_PARTITIONS
    previous = spark.conf.get(key)
    spark.conf.set(key, str(int(partitions)))
    try:
        yield
    finally:
        spark.conf.set(key, previous)


@contextlib.contextmanager
def _quiet_stream_logs(spark):
    """Keep Spark's report of a failed query (a Java stack trace that can quote
    data) off the console while the query runs; dp_spark reports it in one line.
    Side effect: the log4j logger ``org.apache.spark.sql.execution.streaming``
    is OFF for the WHOLE driver JVM meanwhile, then restored (two overlapping
    runs may leave it OFF). A no-op on Spark Connect; ``DP_SPARK_DEBUG=1``
    keeps the logs."""
    name = "org.apache.spark.sql.execution.streaming"
    try:
        if os.environ.get("DP_SPARK_DEBUG"):
            raise LookupError
        jvm = spark.sparkContext._jvm
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        previous = jvm.org.apache.logging.log4j.LogManager.getLogger(name).getLevel()
        configurator.setLevel(name, jvm.org.apache.logging.log4j.Level.OFF)
    except Exception:  # noqa: BLE001 - Spark Connect, another logging backend, or debugging
        yield
        return
    try:
        yield
    finally:
        configurator.setLevel(name, previous)


def _run_query(spark, stream_writer, store: MechanismCheckpoint, horizon: int, trigger: str,
               timeout: float | None, state_partitions: int, sink: StepSink) -> None:
    """Start the query; stop it at the horizon (interval trigger) or the
    timeout; one-line errors. Ctrl-C stops the query and re-raises
    KeyboardInterrupt saying what is released."""
    try:
        with _shuffle_partitions(spark, state_partitions):
            query = stream_writer.start()
    except spark_exception_types() as exc:
        raise SparkJobError(
            f"Spark could not start the streaming query (error class {error_class(exc)})."
        ) from None
    deadline = None if timeout is None else time.monotonic() + float(timeout)
    try:
        failure, stopped = _await(query, store, horizon, trigger, deadline)
    except KeyboardInterrupt as exc:  # Ctrl-C, or the CLI's SIGTERM (a subclass: kept)
        with contextlib.suppress(BaseException):
            _stop_between_batches(query, patience=10.0)
        raise type(exc)(_interrupted_message(store, sink, horizon)) from None
    finally:
        with contextlib.suppress(Exception):
            if query.isActive:
                query.stop()
    message = store.take_error()
    if message is not None:
        raise InputError(message)
    if failure is not None and not stopped:
        raise SparkJobError(
            f"the streaming query failed (error class {error_class(failure)}). Details are withheld "
            "because Spark messages can quote data values; set DP_SPARK_DEBUG=1 to see them on "
            "non-sensitive data. Restarting resumes from the checkpoint."
        ) from (failure if os.environ.get("DP_SPARK_DEBUG") else None)


def _await(query, store: MechanismCheckpoint, horizon: int, trigger: str, deadline: float | None):
    """Wait for the query's end, the horizon (interval trigger) or the
    deadline: (the query's exception or None, whether we stopped it)."""
    try:
        while query.isActive:
            if trigger != AVAILABLE_NOW and store.load()["step"] >= horizon:
                log.info("continual-distinct: horizon reached, stopping the stream")
                _stop_between_batches(query)
                return None, True
            if deadline is not None and time.monotonic() > deadline:
                log.info("continual-distinct: timeout reached, stopping the stream")
                _stop_between_batches(query)
                return None, True
            query.awaitTermination(0.5)
        return query.exception(), False
    except spark_exception_types() as exc:
        return exc, False


def _interrupted_message(store: MechanismCheckpoint, sink: StepSink, horizon: int) -> str:
    """What an interrupted stream leaves behind, for the one-line message."""
    try:
        steps = int(store.load()["step"])
    except Exception:  # noqa: BLE001 - best effort: the message must not fail
        steps = len(sink.steps())
    if steps == 0:
        return "no step was released; run the same command again to start the stream"
    return (
        f"{steps} of {horizon} steps are released in {str(sink.directory)!r} (checkpoint "
        f"{str(store.directory)!r}); run the same command again to resume"
    )


def _stream_notes(plan: Plan, state: dict, config: dict) -> list[str]:
    horizon, method, w = plan["horizon"], plan["method"], plan["flippancy_bound"]
    notes = [
        grid_note(config["step_grid"], config["files_per_step"]),
        f"rho was spent once, when the checkpoint was created ({state['created']}); resumed runs "
        "re-draw no released noise and spend nothing more.",
    ]
    if state["step"] >= horizon:
        notes.append(f"The stream reached its horizon ({horizon} steps); later events are not counted.")
    else:
        notes.append(f"The stream is not finished: {state['step']} of {horizon} steps released so far.")
    if method in ("baseline", "auto"):
        notes.append(
            "error_bound includes staleness, assuming the count changes by at most 1 per step; with "
            "several events per step the staleness term can be larger."
        )
    if method == "bounded":
        notes.append(
            f"error_bound assumes every item flips at most w = {w} times; otherwise add the number of "
            "items with flippancy above w (not released)."
        )
    if plan["tree_horizon"] != horizon:
        notes.append(f"The trees run over {plan['tree_horizon']} steps (the next power of two); "
                     f"steps 1..{horizon} are released.")
    return notes


def _release(plan: Plan, spark, local: PrivacyFilter, state, records, config, resumed, checkpoint_dir, sink_dir,
             partitions: int):
    """The Release of the steps released so far (saved records; ``noise``
    rebuilt from the saved counter state)."""
    series = series_frame(
        [r["step"] for r in records],
        [r["estimate"] for r in records],
        [r["std"] for r in records],
        [math.inf if r["error_bound"] is None else r["error_bound"] for r in records],
        [r["flippancy_bound"] for r in records],
    )
    parameters = {
        "trigger": config["trigger"],
        "step_grid": config["step_grid"],
        "files_per_step": config["files_per_step"],
        "checkpoint": str(checkpoint_dir),
        "sink": str(sink_dir),
        "checkpoint_created": state["created"],
        "resumed": resumed,
        "state_partitions": int(partitions),
    }
    noise = ContinualCounter.from_dict(state["counter"]).noise_records()
    return build_release(plan, series=series, session=spark, local=local, method=config["method"],
                         seeded=config["seed"] is not None, parameters=parameters,
                         notes=_stream_notes(plan, state, config), noise=noise)
