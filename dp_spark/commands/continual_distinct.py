"""``dp-spark continual-distinct``: item-level ρ-zCDP count of present items at every step.

Batch (default): reads an event table ``(time, item, op)`` — or, without
``--input``, the built-in synthetic stream — and writes the released series
(``--series``, Parquet or CSV by extension; default beside ``--output``) and
the JSON report. ``--stream``: a Structured Streaming query over a directory
of event files (``--input``; without it a generated demo source), one step per
micro-batch, resumable from ``--checkpoint``; per-step records go to
``--sink``, and the series and report of the steps released so far are
written at the end of the run. The streaming guarantee assumes the step grid
(which files form which step) does not depend on the data; a new stream is
refused where ``<checkpoint>/spark`` or step records in ``--sink`` exist.

``--horizon`` is required with ``--input`` (a public parameter, never taken
from the data); the built-in demo data has public defaults (1024 steps, 32
with ``--stream``). Bad values inside rows are dropped per event, in batch
and stream mode alike; schema problems are refused before anything is spent.
With ``--stream`` a line "step t/T released" goes to stderr per step unless
``--quiet``; Ctrl-C says how many steps are released and where.
"""

from __future__ import annotations

import os
from pathlib import Path

from dp_spark import checks
from dp_spark.commands.base import (MAX_SYNTHETIC_ROWS, Command, Option, READ_OPTIONS, RUN_OPTIONS, check_group_outputs,
                                    groups_writer, log, run_release, synthetic_rows)
from dp_spark.commands.base import load_table as base_load_table
from dp_spark.commands.params import release_options
from dp_spark.continual_data import DEFAULT_HORIZON, items_for_events, synthetic_stream
from dp_spark.errors import ParameterError
from dp_spark.io import (check_values_parse, is_local, local_path, parse_event_columns, parse_schema, short_name,
                         string_time_kind, write_dataframe_atomic)
from dp_spark.marking import COLUMN, mark_pandas
from dp_spark.plans.continual_distinct import Params, origin_value
from dp_spark.releases import RELEASES
from dp_spark.streaming.checkpoint import DEMO_DIR, StepSink, local_directory, refuse_foreign_checkpoint
from dp_spark.streaming.demo import write_demo_files
from dp_spark.streaming.options import (validate_files_per_step, validate_state_partitions, validate_timeout,
                                        validate_trigger)

NAME = "continual-distinct"

DEMO_STREAM_HORIZON = 32  # public default of the built-in demo stream (no --input) only
DEMO_COLUMNS = {"time_col": "time", "item_col": "item", "op_col": "op"}  # the built-in data's columns


_origin = origin_value  # --origin's converter (the plan's, with its error wording)

OPTIONS = (
    Option("input", str, None, "event table (Parquet/CSV/JSON path or table:db.name); with --stream a "
           "directory of event files; omit for the built-in synthetic stream"),
    Option("format", str, "auto", "input format", ("auto", "parquet", "csv", "json", "table")),
) + release_options(Params, only=("time_col", "item_col", "op_col")) + (
    Option("rows", synthetic_rows, 200_000, "events of the built-in synthetic stream (no --input; at most "
           f"{MAX_SYNTHETIC_ROWS:,})"),
    Option("demo_flippancy", int, 16, "largest flippancy of the built-in synthetic stream (no --input)"),
) + release_options(Params, only=("rho", "horizon", "method", "max_flippancy", "counter", "beta", "delta", "origin",
                                  "step_size", "shards")) + (
    *release_options(Params, only=("group_by", "groups", "max_groups")),
    Option("groups_output", str, None, "with --group-by: write every group's released series (the group column, "
           "step, count, std, error_bound, error) here: Parquet, CSV (a path ending in .csv) or table:db.name "
           "(atomically)"),
    Option("series", str, None, "write the series here (.parquet or .csv); default: beside --output"),
    Option("budget_rho", float, None, "total ρ budget; the run is refused before reading data if the "
           "release would exceed it"),
    *release_options(Params, only=("stream",)),
    Option("checkpoint", str, "continual_checkpoint", "--stream: directory for Spark's checkpoint and the "
           "mechanism state (CONFIDENTIAL: holds exact partial sums); reuse it to resume"),
    Option("sink", str, "continual_stream_steps", "--stream: directory getting one JSON record per released step"),
    Option("files_per_step", int, 1, "--stream: source files per micro-batch (= per step; at most 1,000; "
           "fixed per checkpoint)"),
    Option("trigger", str, "available-now", "--stream: 'available-now' (preferred: process the files present, "
           "--files-per-step per step, then stop) or an interval such as '10 seconds' (every interval is one "
           "step, with or without new files; run until the horizon or --timeout). Privacy assumes which "
           "files form which step does not depend on the data; fixed per checkpoint"),
    Option("timeout", float, None, "--stream: stop after this many seconds"),
    Option("state_partitions", int, None, "--stream: partitions of the per-item state (default two per "
           "task slot of the cluster, never spark.sql.shuffle.partitions; at most 1,000; fixed when the "
           "checkpoint is created)"),
) + RUN_OPTIONS


def plan_options(opts):
    """The options the plan (and the release) gets: without --input, the
    built-in data's public horizon default (1024 steps, 32 with --stream; no
    data is involved) and its column names. With --input a missing horizon
    stays None and the plan refuses it."""
    check_group_outputs(opts, "per-group series", "series")
    if opts["input"]:
        return opts
    if opts.get("group_by"):
        raise ParameterError("--group-by needs --input (the built-in synthetic stream has no group column).")

    horizon = opts["horizon"]
    if horizon is None:
        horizon = DEMO_STREAM_HORIZON if opts["stream"] else DEFAULT_HORIZON
    return {**opts, **DEMO_COLUMNS, "horizon": horizon}


def validate(opts) -> None:
    """Check the options of the command line only (the built-in data, the
    series path, --stream's options) before Spark starts; the release's
    parameters are the plan's (``dp_spark.plans.continual_distinct``)."""
    checks.whole(opts["rows"], "rows")
    checks.whole(opts["demo_flippancy"], "demo_flippancy")
    if opts["series"] and not opts["series"].lower().endswith((".parquet", ".csv")) \
            and not opts["series"].startswith("table:"):  # a catalog table: dp_spark.io.write_table
        raise ParameterError(f"--series must end in .parquet or .csv (or be table:db.name); got {opts['series']!r}.")
    if opts["stream"]:
        validate_trigger(opts["trigger"])
        validate_files_per_step(opts["files_per_step"])
        validate_timeout(opts["timeout"])
        validate_state_partitions(opts["state_partitions"])
        if opts["format"] == "table":
            raise ParameterError("--stream reads a directory of files; use --format parquet, csv or json.")
        _refuse_batch_read_options(opts)
        _refuse_stream_files(opts)


def _refuse_stream_files(opts) -> None:
    """--stream's folders given as local files, refused before Spark starts:
    an --input file (the query would wait on it as on a folder and fail),
    a --checkpoint or --sink file (the state's folder cannot be made), a
    --checkpoint folder holding another query's files
    (:func:`dp_spark.streaming.checkpoint.refuse_foreign_checkpoint`)."""
    source = opts["input"]
    if source and is_local(source) and local_path(source).is_file():
        raise ParameterError(f"--stream reads a folder of event files (--files-per-step per step); --input "
                             f"{source!r} is a file: put it in a folder of its own and give the folder, or drop "
                             "--stream for a batch run.")
    for name, what in (("checkpoint", "its checkpoint"), ("sink", "its step records")):
        path = opts.get(name)
        if path and is_local(path) and local_path(path).is_file():
            raise ParameterError(f"--{name} {path!r} is a file; --stream keeps {what} in a folder: give a folder "
                                 "path (a new one, or the one an earlier run of this query used).")
    checkpoint = opts.get("checkpoint")
    if checkpoint and is_local(checkpoint):  # another query's files: refused before Spark starts too
        refuse_foreign_checkpoint(local_path(checkpoint), sink=opts.get("sink"), source=source)


#: The read options a --stream source does not take, with the flag to name.
#: The streaming query reads CSV with a header row, ',' and '"' in UTF-8
#: (bad values are dropped per event in every case); --schema is passed on.
_BATCH_ONLY_READ_OPTIONS = {"delimiter": "--delimiter", "header": "--no-header", "quote": "--quote",
                            "encoding": "--encoding", "bad_rows": "--bad-rows"}


def _refuse_batch_read_options(opts) -> None:
    """Refuse, before Spark starts, a --stream run given a read option the
    streaming source would otherwise ignore (a file misread silently)."""
    defaults = {o.name: o.default for o in READ_OPTIONS}
    for name, flag in _BATCH_ONLY_READ_OPTIONS.items():
        value = opts.get(name)
        if value is not None and value != defaults[name]:
            raise ParameterError(
                f"{flag} is not supported with --stream: a streaming source is read as Parquet, JSON "
                "lines, or CSV with a header row, ',' separator, '\"' quote and UTF-8. Convert the "
                "files, or run without --stream."
            )


def load_table(spark, opts):
    """The event table named by --input; without one, None (run() builds the
    built-in synthetic stream, which the generic loader knows nothing of).
    With --stream, None too: the streaming query reads the directory itself
    (its schema is fixed when the checkpoint is created)."""
    if not opts["input"] or opts["stream"]:
        return None, opts

    raw, opts = base_load_table(spark, opts)
    # CSV/JSON columns are strings (never inferred): time and op are parsed
    # per row, the time's kind chosen from --origin (public), never the rows;
    # a value that does not parse drops its event (or, --bad-rows fail,
    # refuses the input before anything is spent).
    df, bad = parse_event_columns(raw, time_col=opts["time_col"], op_col=opts["op_col"],
                                  time_kind=string_time_kind(opts.get("origin")))
    if opts.get("bad_rows") == "fail":
        check_values_parse(raw, bad, opts["input"])  # evaluated on the strings as read
    return df, opts


def run(spark, plan, df, opts, budget_filter):
    """The built-in synthetic stream (no --input) or a --stream query; the
    plain API call otherwise."""
    opts = plan_options(opts)
    if opts["stream"]:
        return _run_stream(spark, opts, budget_filter)
    if df is None:
        items = items_for_events(int(opts["rows"]), int(opts["demo_flippancy"]))
        log.info("no --input: built-in synthetic stream, about %s events, %d steps", f"{opts['rows']:,}",
                 opts["horizon"])
        df = synthetic_stream(spark, items=items, horizon=opts["horizon"], max_flippancy=int(opts["demo_flippancy"]))
    return run_release(COMMAND, plan, df, opts, budget_filter)  # the release on the CLI's plan


def _run_stream(spark, opts, budget_filter):
    source, fmt = opts["input"], opts["format"]
    if not source:
        demo = local_directory(opts["checkpoint"], "checkpoint") / DEMO_DIR
        if not (demo.is_dir() and any(demo.glob("events-*.json"))):
            log.info("no --input: writing a demo source of %d files (one per step) to %s", opts["horizon"], demo)
            write_demo_files(spark, demo, opts["horizon"], max_flippancy=int(opts["demo_flippancy"]))
        source, fmt = str(demo), "json"
    try:
        return _stream(spark, source, fmt, opts, budget_filter)
    except KeyboardInterrupt as exc:
        if str(exc):
            raise  # the query's own account of what it released

        released = len(StepSink(local_directory(opts["sink"], "sink")).steps())
        if not released:
            raise
        raise type(exc)(  # KeyboardInterrupt, or the CLI's SIGTERM subclass
            f"{released} released step record(s) are in {opts['sink']!r}; run the same command again "
            "to resume"
        ) from None


def _stream(spark, source, fmt, opts, budget_filter):
    from dp_spark.streaming.query import continual_distinct_stream

    return continual_distinct_stream(
        spark,
        source,
        checkpoint=opts["checkpoint"],
        sink=opts["sink"],
        rho=opts["rho"],
        horizon=opts["horizon"],
        method=opts["method"],
        max_flippancy=opts["max_flippancy"],
        counter=opts["counter"],
        time_col=opts["time_col"],
        item_col=opts["item_col"],
        op_col=opts["op_col"],
        fmt=fmt,
        files_per_step=opts["files_per_step"],
        trigger=opts["trigger"],
        timeout=opts["timeout"],
        beta=opts["beta"],
        delta=opts["delta"],
        seed=opts["seed"],
        budget=budget_filter,
        state_partitions=opts["state_partitions"],
        schema=parse_schema(opts.get("schema")),
        progress=not opts["quiet"],
    )


def series_path(opts) -> str | None:
    """--series, or ``<report stem>_series.parquet`` beside --output, or None
    (always for a grouped run: its series go to --groups-output)."""
    if opts.get("group_by"):
        return None
    if opts.get("series"):
        return opts["series"]
    if opts.get("output"):
        out = Path(opts["output"])
        stem = out.name[: -len(".json")] if out.name.endswith(".json") else out.name
        return str(out.with_name(f"{stem}_series.parquet"))
    return None


def write_series(release, opts) -> None:
    """Write ``release.series`` (a Spark DataFrame, one row per released
    step) atomically as one Parquet or CSV file (by extension); a seeded
    run's file gets the column ``not_for_publication`` (:mod:`dp_spark.marking`)."""
    path = series_path(opts)
    if path is None or "series" not in release.artifacts:  # a grouped run: --groups-output instead
        return

    fmt = "csv" if path.lower().endswith(".csv") else "parquet"
    if not is_local(path):
        _write_remote(release, path, fmt, overwrite=bool(opts.get("overwrite")))
        return
    from dp_spark.releases.continual_distinct import series_pandas

    series = mark_pandas(series_pandas(release.series), release.seeded)  # horizon rows: a public size
    target = Path(path[len("file:"):] if path.startswith("file:") else path)
    target.parent.mkdir(parents=True, exist_ok=True)

    tmp = target.with_name(f".{short_name(target.name)}.{os.getpid()}.tmp")  # room beside a long name
    try:
        if fmt == "csv":
            series.to_csv(tmp, index=False)
        else:
            series.to_parquet(tmp, index=False)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    if not opts.get("quiet"):
        print(f"series written to {target}")


def _write_remote(release, path: str, fmt: str, overwrite: bool = False) -> None:
    """An object-store path: Spark writes the series (one part), marked when seeded."""
    from pyspark.sql import functions as F

    frame = release.series
    if release.seeded:
        frame = frame.withColumn(COLUMN, F.lit(True))
    write_dataframe_atomic(frame.coalesce(1), path, fmt, seeded=release.seeded, overwrite=overwrite)


WRITERS = {"series": write_series, "groups": groups_writer("per-group series")}

COMMAND = Command(NAME, RELEASES[NAME].help, OPTIONS, WRITERS, validate=validate, plan_options=plan_options,
                  load_table=load_table, run=run, series_path=series_path,
                  cli_only=("demo_flippancy", "checkpoint", "sink", "files_per_step", "trigger", "timeout",
                            "state_partitions"))
