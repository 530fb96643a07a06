"""What every ``dp-spark <release>`` command shares: option specs, config
merging, reading the input (or the built-in data), and writing outputs."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from typing import Any, Callable

from dp_spark.config import load_config
from dp_spark.errors import ParameterError

log = logging.getLogger("dp_spark")


@dataclass(frozen=True)
class Option:
    name: str  # python name, e.g. "max_bound"; flag is --max-bound
    type: Callable[[str], Any]
    default: Any
    help: str
    choices: tuple | None = None
    flag: bool = False  # a boolean switch (store_true)

    @property
    def flag_name(self) -> str:
        return "--" + self.name.replace("_", "-")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


INPUT_OPTIONS = (
    Option("input", str, None, "input table: a Parquet/CSV/JSON path or table:db.name; "
           "omit to use the built-in synthetic data"),
    Option("format", str, "auto", "input format", ("auto", "parquet", "csv", "json", "table")),
    Option("person_col", str, "person_id", "column identifying the person (the privacy unit)"),
    Option("item_col", str, "item", "column holding the item"),
    Option("tokenize", str, "none", "'words': split the item column into lower-case words "
           "(runs of a-z), one item per word", ("none", "words")),
    Option("rows", _positive_int, 1_000_000, "rows of built-in synthetic data (no --input)"),
)
RUN_OPTIONS = (
    Option("output", str, None, "write the JSON report here (atomically)"),
    Option("report_html", str, None, "also write a self-contained HTML page of the release "
           "here, for a person to read (atomically)"),
    Option("seed", int, None, "fixed seed for tests and demos ONLY: the output is then not private"),
    Option("master", str, None, "Spark master when no session is running (default from "
           "conf/spark-defaults.yaml)"),
    Option("verbose", bool, False, "show Spark's warnings and the progress lines also off a terminal",
           flag=True),
    Option("quiet", bool, False, "print only the result (the JSON report) and errors", flag=True),
)


def add_options(parser: argparse.ArgumentParser, options) -> None:
    """Flags grouped as input / release / output and run in --help, with a
    short metavar and the default only where there is one."""
    named = {"input": {o.name for o in INPUT_OPTIONS}, "output and run": {o.name for o in RUN_OPTIONS}}
    groups = {title: parser.add_argument_group(title) for title in ("input", "release", "output and run")}
    for opt in options:
        title = next((t for t, names in named.items() if opt.name in names), "release")
        group = groups[title]
        if opt.flag:
            group.add_argument(opt.flag_name, dest=opt.name, action="store_true", default=None,
                               help=opt.help)
            continue
        shown = "" if opt.default is None else f" (default: {opt.default})"
        group.add_argument(opt.flag_name, dest=opt.name, type=opt.type, default=None, choices=opt.choices,
                           metavar=None if opt.choices else _metavar(opt), help=opt.help + shown)


def _metavar(opt: Option) -> str:
    if opt.name == "master":
        return "URL"
    if opt.type is str:
        return "PATH" if opt.name in _PATH_OPTIONS or opt.name.endswith(("output", "_html")) else "NAME"
    return "N" if opt.type in (int, _positive_int) else "X"


_PATH_OPTIONS = {"input", "domain", "config", "series", "checkpoint", "sink"}


def resolve(args: argparse.Namespace, options) -> dict[str, Any]:
    """Command line over config file over defaults."""
    allowed = {o.name for o in options}
    from_file = load_config(getattr(args, "config", None), allowed)
    resolved = {}
    for opt in options:
        given = getattr(args, opt.name, None)
        if given is not None:
            resolved[opt.name] = given
        elif opt.name in from_file:
            resolved[opt.name] = _config_value(opt, from_file[opt.name])
        else:
            resolved[opt.name] = opt.default
    return resolved


def items_writer(attribute: str, what: str, single_file: bool = False):
    """An ARTIFACT_WRITERS entry: write ``release.<attribute>`` (a Spark
    DataFrame) to ``--items-output`` as Parquet, atomically. ``single_file``
    for small tables (one Parquet part)."""

    def write(release, opts) -> None:
        if not opts.get("items_output"):
            return
        from dp_spark.io import write_dataframe_atomic
        from dp_spark.sparkjobs import spark_job

        frame = getattr(release, attribute)
        with spark_job(f"writing the released {what}"):
            write_dataframe_atomic(frame.coalesce(1) if single_file else frame, opts["items_output"], "parquet",
                                   seeded=release.seeded)
        if not opts.get("quiet"):
            print(f"released {what} written to {opts['items_output']}")

    return write


def _config_value(opt: Option, value: Any) -> Any:
    """A config-file value converted as the command line would convert it."""
    if value is None:
        return None
    if opt.flag:
        if not isinstance(value, bool):
            raise ParameterError(f"{opt.name} in the config file must be true or false; got {value!r}.")
        return value
    try:
        converted = opt.type(value) if not isinstance(value, bool) else None
        if isinstance(value, float) and isinstance(converted, int) and converted != value:
            converted = None  # 7.5 is not a whole number
    except (TypeError, ValueError):
        converted = None
    if converted is None:
        raise ParameterError(f"{opt.name} in the config file has an unusable value {value!r}.")
    if opt.choices and converted not in opt.choices:
        raise ParameterError(f"{opt.name} must be one of {', '.join(map(str, opt.choices))}; got {value!r}.")
    return converted


def load_table(spark, opts: dict[str, Any]):
    """The input DataFrame named by the options, or the built-in synthetic data."""
    from pyspark.sql import functions as F

    from dp_spark.io import read_input
    from dp_spark.stages.edges import require_columns

    if opts["input"]:
        log.info("reading %s", opts["input"])
        df = read_input(spark, opts["input"], opts["format"])
    else:
        from dp_spark.datasets import synthetic_events

        log.info("no --input: using %s rows of built-in synthetic data", f"{opts['rows']:,}")
        df = synthetic_events(spark, rows=int(opts["rows"]))
        opts = {**opts, "person_col": "person_id", "item_col": "item"}
    if opts.get("tokenize") == "words":
        require_columns(df, opts["person_col"], opts["item_col"])
        words = F.explode(F.split(F.lower(F.col(opts["item_col"]).cast("string")), "[^a-z]+"))
        df = df.select(F.col(opts["person_col"]), words.alias(opts["item_col"])).where(
            F.length(opts["item_col"]) > 0
        )
    return df, opts
