"""Streaming continual-distinct: one private estimate per micro-batch, resumable.

The online form of the continual-distinct release (Jain, Kalemaj,
Raskhodnikova, Sivakumar, Smith, NeurIPS 2023; Algorithms 1–3 as in
``dp_spark.continual``), on Spark Structured Streaming:

- Source: a directory of event files (JSON lines, CSV with header, Parquet)
  read with ``readStream``; ``files_per_step`` files per micro-batch.
- Each micro-batch is one step t. Per-item state (count, flippancy) lives in
  Spark (``applyInPandasWithState``, ``dp_spark.streaming.items``); only the
  step's O(log T) sums reach the driver.
- The driver feeds them to a ``dp_spark.continual.ContinualCounter`` (the
  tree mechanisms and the sparse vector, all noise drawn on the driver from
  an OS-seeded generator) inside ``foreachBatch``, saves the counter state
  atomically together with the step index and the micro-batch id
  (``MechanismCheckpoint``), and only then writes the step's record to the
  sink (``StepSink``).
- Restart: Spark's checkpoint (``<checkpoint>/spark``) restores the per-item
  state and the source offsets; the mechanism checkpoint restores the
  counter. A micro-batch that Spark re-executes (it had not committed it) and
  whose step was already saved is not counted again: its saved record is
  re-written, no noise is drawn. ρ is spent once, when the checkpoint is
  created; a resumed query spends nothing and its report says so.
- It stops cleanly after step ``horizon``: later micro-batches release nothing.

Guarantee: item-level ρ-zCDP for the whole series (neighbouring streams differ
by all events of one item), the same mechanisms and error statements as the
batch release. Micro-batch boundaries are public (they come from file arrival,
not from item contents). Bad input: an op other than ±1 or a null time
fails the step (no record is written, nothing is spent beyond the checkpoint's
ρ); null items are dropped; deletes of absent items are ignored.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import math
import os
import time
from typing import Any

import numpy as np
from pyspark.sql import functions as F

from dp_spark.accounting import ZCDP, PrivacyFilter
from dp_spark.continual import ContinualCounter
from dp_spark.errors import InputError, ParameterError, SparkJobError
from dp_spark.noise import make_rng
from dp_spark.releases.continual_distinct import (
    RULES,
    build_release,
    effective_flippancy,
    series_frame,
    validate,
)
from dp_spark.sparkjobs import _spark_exception_types, error_class, spark_job
from dp_spark.streaming.checkpoint import KIND, VERSION, MechanismCheckpoint, StepSink, local_directory
from dp_spark.streaming.items import BAD, CROSS, DELTA, LEVEL, OP, ORDER, OUTPUT_SCHEMA, STATE_SCHEMA, make_update

log = logging.getLogger(__name__)

AVAILABLE_NOW = "available-now"
ITEM = "item"
_CONFIG_KEYS = ("rho", "horizon", "mechanism", "max_flippancy", "beta", "delta", "seed", "item_col", "op_col", "time_col")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


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


def tree_horizon_of(horizon: int) -> int:
    return 1 << (int(horizon) - 1).bit_length()


def _generator_state(rng: np.random.Generator) -> dict:
    return rng.bit_generator.state


def _generator_from(state: dict) -> np.random.Generator:
    bit_generator = np.random.PCG64()
    bit_generator.state = state
    return np.random.Generator(bit_generator)


class StepWriter:
    """The ``foreachBatch`` function: one micro-batch -> one released step.

    Holds no mechanism state in memory: every call loads the checkpoint, so a
    re-executed batch and a restarted driver see exactly what was saved.
    """

    def __init__(self, store: MechanismCheckpoint, sink: StepSink, horizon: int) -> None:
        self.store = store
        self.sink = sink
        self.horizon = int(horizon)
        self._rng: np.random.Generator | None = None  # unseeded runs: one OS-seeded generator per run

    def _generator(self, state: dict) -> np.random.Generator:
        if state["config"]["seed"] is not None:
            return _generator_from(state["rng"])  # seeded (tests/demos): resumes the same stream
        if self._rng is None:
            self._rng = make_rng()
        return self._rng

    def __call__(self, batch_df, batch_id: int) -> None:
        # Always evaluate the whole batch first: Spark commits the per-item
        # state of every partition only when the batch is fully processed.
        sums = batch_df.groupBy(LEVEL).agg(
            F.sum(DELTA).alias(DELTA), F.sum(CROSS).alias(CROSS), F.max(BAD).alias(BAD)
        )
        with spark_job("summarising a micro-batch"):
            rows = sums.collect()
        state = self.store.load()
        if batch_id <= state["last_batch_id"]:
            # Re-execution of a batch whose step is already saved: re-write its
            # record (idempotent), draw nothing, count nothing.
            if batch_id == state["last_batch_id"] and state["last_record"] is not None:
                self.sink.write(state["last_record"])
            return
        if state["step"] >= self.horizon:
            return  # the horizon is reached: later events are not counted
        if any(row[BAD] for row in rows):
            message = (
                f"a micro-batch holds an op other than +1/-1 (or a null op or time) in column "
                f"{state['config']['op_col']!r}; step {state['step'] + 1} was not released. Fix or "
                "remove the bad rows in the source files, then restart."
            )
            self.store.record_error(message)
            raise InputError(message)

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
        self.sink.write(record)


def counter_max_level(state: dict) -> int:
    return int(state["counter"]["config"]["max_level"])


def _new_state(config: dict, tree_horizon: int, w: int | None) -> dict:
    counter = ContinualCounter(
        tree_horizon, config["rho"], config["mechanism"], w, beta=config["beta"]
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


def _check_same_config(saved: dict, config: dict) -> None:
    for key in _CONFIG_KEYS:
        if saved.get(key) != config.get(key):
            raise ParameterError(
                f"the checkpoint was created with {key} = {saved.get(key)!r}, not {config.get(key)!r}; "
                "resume with the same parameters, or use a new checkpoint directory (a new stream, "
                "which spends its own budget)."
            )


def _stream_events(spark, source: str, fmt: str, schema, files_per_step: int, time_col, item_col, op_col):
    from dp_spark.io import detect_format, read_input
    from dp_spark.stages.continual import item_column, op_column, raw_time, time_kind
    from dp_spark.stages.edges import require_columns

    if fmt == "auto":
        fmt = detect_format(source)
    if fmt not in ("parquet", "csv", "json"):
        raise ParameterError(f"the streaming source format must be parquet, csv or json; got {fmt!r}.")
    if schema is None:
        schema = read_input(spark, source, fmt).schema  # the files present fix the schema
    reader = spark.readStream.format(fmt).schema(schema).option("maxFilesPerTrigger", int(files_per_step))
    if fmt == "csv":
        reader = reader.option("header", "true")
    stream = reader.load(source)
    require_columns(stream, item_col, op_col)
    has_order = time_col is not None and time_col in stream.columns
    columns = [item_column(stream, item_col).alias(ITEM), op_column(stream, op_col).alias(OP)]
    if has_order:
        columns.append(raw_time(stream, time_col, time_kind(stream, time_col)).alias(ORDER))
    events = stream.select(*columns).where(F.col(ITEM).isNotNull())
    return events, has_order


def continual_distinct_stream(
    spark,
    source: str,
    *,
    checkpoint: str,
    sink: str,
    rho: float,
    horizon: int,
    mechanism: str = "adaptive",
    max_flippancy: int | None = None,
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
):
    """Run (or resume) the streaming release; return a Release of the steps released so far.

    Item-level ρ-zCDP for the whole series of ``horizon`` steps (module
    docstring). ``checkpoint``: a local directory holding Spark's checkpoint
    and the CONFIDENTIAL mechanism state; ``sink``: a local directory getting
    one JSON record per released step. ``trigger``: "available-now" (process
    the files present, ``files_per_step`` per step, then return; run again
    later to continue) or an interval such as "10 seconds" (run until the
    horizon or ``timeout`` seconds). ``time_col`` (optional in the files)
    orders events inside a micro-batch; each micro-batch is one step.
    ``budget``: ρ is spent from it only when a new checkpoint is created.
    ``state_partitions``: partitions of the per-item state (default
    ``spark.sql.shuffle.partitions``; fixed by the first run of a checkpoint).
    ``seed``: tests and demos only (the generator state is then checkpointed
    too, so a resumed seeded run continues the same noise stream).
    """
    from pyspark.sql.streaming.state import GroupStateTimeout

    rho, horizon, mechanism, max_flippancy, seed, beta, delta = validate(
        rho, horizon, mechanism, max_flippancy, seed, beta, delta
    )
    if horizon is None:
        raise ParameterError("the streaming mode needs horizon (the number of steps to release).")
    if isinstance(files_per_step, bool) or not isinstance(files_per_step, int) or files_per_step < 1:
        raise ParameterError(f"files_per_step must be a whole number >= 1; got {files_per_step!r}.")
    trigger = validate_trigger(trigger)
    if state_partitions is not None and (
        isinstance(state_partitions, bool) or not isinstance(state_partitions, int) or state_partitions < 1
    ):
        raise ParameterError(f"state_partitions must be a whole number >= 1; got {state_partitions!r}.")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0):
        raise ParameterError(f"timeout must be a number of seconds > 0; got {timeout!r}.")
    checkpoint_dir = local_directory(checkpoint, "checkpoint")
    sink_dir = local_directory(sink, "sink")
    tree_horizon = tree_horizon_of(horizon)
    w = effective_flippancy(max_flippancy, tree_horizon)
    config = {
        "rho": rho, "horizon": horizon, "mechanism": mechanism, "max_flippancy": max_flippancy,
        "beta": beta, "delta": delta, "seed": seed, "item_col": item_col, "op_col": op_col,
        "time_col": time_col,
    }
    store = MechanismCheckpoint(checkpoint_dir)
    step_sink = StepSink(sink_dir)
    resumed = store.exists()
    if resumed:
        state = store.load()
        _check_same_config(state["config"], config)
        log.info("continual-distinct: resuming at step %d of %d", state["step"], horizon)
    else:
        if budget is not None:
            budget.spend(ZCDP(rho), label="continual-distinct (stream)")  # before any data is read
        state = _new_state(config, tree_horizon, w)
        store.save(state)
    store.take_error()  # a stale error of an earlier run
    if state["last_record"] is not None and not step_sink.has(state["last_record"]["step"]):
        step_sink.write(state["last_record"])  # saved but not yet in the sink when the last run ended

    if state["step"] < horizon:
        events, has_order = _stream_events(
            spark, source, fmt, schema, files_per_step, time_col, item_col, op_col
        )
        J = counter_max_level(state)
        stateful = events.groupBy(ITEM).applyInPandasWithState(
            make_update(J, has_order), OUTPUT_SCHEMA, STATE_SCHEMA, "update", GroupStateTimeout.NoTimeout
        )
        writer = StepWriter(store, step_sink, horizon)
        stream_writer = (
            stateful.writeStream.outputMode("update")
            .foreachBatch(writer)
            .option("checkpointLocation", str(checkpoint_dir / "spark"))
        )
        if trigger == AVAILABLE_NOW:
            stream_writer = stream_writer.trigger(availableNow=True)
        else:
            stream_writer = stream_writer.trigger(processingTime=trigger)
        with _quiet_stream_logs(spark):
            _run_query(spark, stream_writer, store, horizon, trigger, timeout, state_partitions)
        state = store.load()

    records = step_sink.read()
    records = [r for r in records if r["step"] <= state["step"]]
    if [r["step"] for r in records] != list(range(1, state["step"] + 1)):
        raise InputError(
            f"the sink {str(sink_dir)!r} is missing records of released steps; it must be the sink this "
            "checkpoint wrote to (do not edit it)."
        )
    return _release(state, records, config, tree_horizon, w, resumed, checkpoint_dir, sink_dir,
                    files_per_step, trigger)


def _stop_between_batches(query, patience: float = 60.0) -> None:
    """Stop the query, waiting (up to ``patience`` s) until no micro-batch is
    running, so that no batch is interrupted half-way (it would be redone on
    restart anyway: nothing of it is released before its state is saved)."""
    end = time.monotonic() + patience
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < end:
        time.sleep(0.05)
    query.stop()


@contextlib.contextmanager
def _shuffle_partitions(spark, partitions: int | None):
    """Set the number of state partitions for a query start (restored after).

    Spark fixes a stateful query's partition count at its first start and
    keeps it in the checkpoint; later starts ignore this setting."""
    if partitions is None:
        yield
        return
    key = "spark.sql.shuffle.partitions"
    previous = spark.conf.get(key)
    spark.conf.set(key, str(int(partitions)))
    try:
        yield
    finally:
        spark.conf.set(key, previous)


@contextlib.contextmanager
def _quiet_stream_logs(spark):
    """Keep Spark's own report of a failed query (a Java stack trace that can
    quote data) off the console while our query runs; dp_spark reports the
    failure in one line instead. Classic sessions only: on Spark Connect the
    server's logs do not reach this console, and the guarded lookup is a
    no-op there. ``DP_SPARK_DEBUG=1`` keeps the logs."""
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
               timeout: float | None, state_partitions: int | None) -> None:
    """Start the query; stop it at the horizon or the timeout; one-line errors.

    With "available-now" the query ends by itself after the files present at
    its start (batches past the horizon release nothing); with an interval
    trigger it is stopped between batches once the horizon is reached.
    """
    failure = None
    stopped = False
    try:
        with _shuffle_partitions(spark, state_partitions):
            query = stream_writer.start()
    except _spark_exception_types() as exc:
        raise SparkJobError(
            f"Spark could not start the streaming query (error class {error_class(exc)})."
        ) from None
    deadline = None if timeout is None else time.monotonic() + float(timeout)
    try:
        while query.isActive:
            if trigger != AVAILABLE_NOW and store.load()["step"] >= horizon:
                log.info("continual-distinct: horizon reached, stopping the stream")
                stopped = True
                _stop_between_batches(query)
                break
            if deadline is not None and time.monotonic() > deadline:
                log.info("continual-distinct: timeout reached, stopping the stream")
                stopped = True
                _stop_between_batches(query)
                break
            query.awaitTermination(0.5)
        failure = query.exception()
    except _spark_exception_types() as exc:
        failure = exc
    finally:
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


def _release(state, records, config, tree_horizon, w, resumed, checkpoint_dir, sink_dir,
             files_per_step, trigger):
    horizon = config["horizon"]
    series = series_frame(
        [r["step"] for r in records],
        [r["estimate"] for r in records],
        [r["std"] for r in records],
        [math.inf if r["error_bound"] is None else r["error_bound"] for r in records],
        [r["flippancy_bound"] for r in records],
    )
    notes = [
        "Streaming: each micro-batch of the source is one step (with available-now, "
        f"{files_per_step} file(s) per step; with an interval trigger, the files that arrived in "
        "the interval — an interval without new files makes no step). Micro-batch boundaries are "
        "public, not derived from item contents.",
        f"rho was spent once, when the checkpoint was created ({state['created']}); resumed runs "
        "re-draw no released noise and spend nothing more.",
    ]
    if state["step"] >= horizon:
        notes.append(f"The stream reached its horizon ({horizon} steps); later events are not counted.")
    else:
        notes.append(f"The stream is not finished: {state['step']} of {horizon} steps released so far.")
    if config["mechanism"] == "baseline":
        notes.append(
            "error_bound includes staleness, assuming the count changes by at most 1 per step; with "
            "several events per step the staleness term can be larger."
        )
    if config["mechanism"] == "bounded":
        notes.append(
            f"error_bound assumes every item flips at most w = {w} times; otherwise add the number of "
            "items with flippancy above w (not released)."
        )
    if tree_horizon != horizon:
        notes.append(f"The trees run over {tree_horizon} steps (the next power of two); steps 1..{horizon} are released.")
    parameters = {
        **{k: config[k] for k in ("rho", "delta", "beta", "mechanism", "horizon", "max_flippancy")},
        "tree_horizon": tree_horizon,
        "flippancy_bound": w,
        "item_col": config["item_col"],
        "op_col": config["op_col"],
        "time_col": config["time_col"],
        "mode": "stream",
        "trigger": trigger,
        "files_per_step": files_per_step,
        "checkpoint": str(checkpoint_dir),
        "sink": str(sink_dir),
        "checkpoint_created": state["created"],
        "resumed": resumed,
        "steps_released": state["step"],
        "noise": "gaussian",
        "rules": list(RULES),
    }
    return build_release(
        series=series,
        rho=config["rho"],
        beta=config["beta"],
        delta=config["delta"],
        mechanism=config["mechanism"],
        horizon=horizon,
        tree_horizon=tree_horizon,
        w=w,
        seeded=config["seed"] is not None,
        parameters=parameters,
        notes=notes,
        item_col=config["item_col"],
    )
