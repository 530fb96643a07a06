"""What every ``dp-spark <release>`` command shares: option specs, config
merging, reading the input (or the built-in data), and writing outputs."""

from __future__ import annotations

import argparse
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from dp_spark.config import load_config
from dp_spark.datasets import synthetic_events
from dp_spark.errors import DPSparkError, InputError, ParameterError, SchemaError
from dp_spark.io import (SPARK_GLOB, check_column_names, check_input_path, check_rows_parse, detect_format, is_local,
                         local_path, pattern_matches, read_input, refuse_csv_literal_glob, write_dataframe_atomic)
from dp_spark.plan import budget_filter
from dp_spark.public_inputs import refuse_private_paths
from dp_spark.releases import RELEASES
from dp_spark.sparkjobs import spark_job
from dp_spark.stages.python_worker import worker_pass

log = logging.getLogger("dp_spark")


@dataclass(frozen=True)
class Option:
    name: str  # python name, e.g. "max_bound"; flag is --max-bound
    type: Callable[[str], Any]
    default: Any
    help: str
    choices: tuple | None = None
    flag: bool = False  # a boolean switch (store_true)
    negatable: bool = False  # a --name / --no-name pair (BooleanOptionalAction)

    @property
    def flag_name(self) -> str:
        return "--" + self.name.replace("_", "-")


#: Largest --rows of built-in synthetic data: it sizes the work (a demo
#: table of 10^9 rows already takes hours on a small machine).
MAX_SYNTHETIC_ROWS = 1_000_000_000


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def synthetic_rows(text: str) -> int:
    value = _positive_int(text)
    if value > MAX_SYNTHETIC_ROWS:
        raise ValueError(text)
    return value


synthetic_rows.__name__ = f"whole number from 1 to {MAX_SYNTHETIC_ROWS:,} (the built-in data's size limit)"


_positive_int.__name__ = "whole number >= 1"

@dataclass(frozen=True)
class Output:
    """One option naming what a run writes: refused over existing paths
    without --overwrite and over any input, recorded with a keyed run (not
    part of its identity)."""

    name: str  # the option, e.g. "items_output"
    what: str  # in messages: "the {what} is a file"
    artifact: str | None = None  # the Release.artifacts entry it writes (None: a report)
    table: bool = False  # a DataFrame output: may be a catalog table, table:db.name
    file: bool = False  # written as one file (a folder there cannot take it)


#: The one list of output options; every other list of them is read from it.
OUTPUTS = (
    Output("output", "JSON report", file=True),
    Output("report_html", "HTML report", file=True),
    Output("items_output", "items", artifact="items", table=True),
    Output("series", "series", artifact="series", table=True, file=True),
    Output("groups_output", "per-group values", artifact="groups", table=True),
)
#: Options naming files or directories the run writes, reads, or keeps state in.
OUTPUT_PATHS = tuple(o.name for o in OUTPUTS)
#: The reports (what a keyed replay may rewrite when it wrote them).
REPORTS = tuple(o.name for o in OUTPUTS if o.artifact is None)
#: Outputs of a DataFrame artifact (a replayed release has its report, not these).
ARTIFACT_OUTPUTS = tuple(o.name for o in OUTPUTS if o.artifact is not None)
#: Artifact name -> the option naming where it goes.
ARTIFACT_OPTION = {o.artifact: o.name for o in OUTPUTS if o.artifact is not None}
INPUT_PATHS = ("input", "domain", "config", "groups")
STATE_PATHS = ("checkpoint", "sink")  # --stream: resumable, may exist


INPUT_OPTIONS = (
    Option("input", str, None, "input table: a Parquet/CSV/JSON path or table:db.name; "
           "omit to use the built-in synthetic data"),
    Option("format", str, "auto", "input format", ("auto", "parquet", "csv", "json", "table")),
    Option("person_col", str, "person_id", "column identifying the person (the privacy unit)"),
    Option("item_col", str, "item", "column holding the item"),
    Option("tokenize", str, "none", "'words': split the item column into words (Unicode letters "
           "and digits, NFKC-normalized and case-folded), one item per word", ("none", "words")),
    Option("rows", synthetic_rows, 1_000_000, f"rows of built-in synthetic data (no --input; at most "
           f"{MAX_SYNTHETIC_ROWS:,})"),
)
RUN_OPTIONS = (
    Option("output", str, None, "write the JSON report here (atomically)"),
    Option("report_html", str, None, "also write a self-contained HTML page of the release "
           "here, for a person to read (atomically)"),
    Option("seed", int, None, "fixed seed for tests and demos ONLY: the output is then not private"),
    Option("master", str, None, "Spark master when no session is running (default from "
           "conf/spark-defaults.yaml)"),
    Option("verbose", bool, False, "show Spark's warnings, full error details, and the progress "
           "lines also off a terminal", flag=True),
    Option("quiet", bool, False, "print only the result (the JSON report) and errors", flag=True),
    Option("overwrite", bool, False, "replace outputs an earlier dp_spark run wrote, or an empty folder "
           "(never anything else: not an input, the ledger or a stream's state)", flag=True),
    Option("ledger", str, None, "persisted budget ledger (a file, or a postgresql:// URL) to charge "
           "this run to; with --ledger-budget"),
    Option("ledger_budget", str, None, "name of the ledger budget to charge (dp-spark ledger create)"),
    Option("run_key", str, None, "with --ledger: this run's id (e.g. an Airflow run id), for one "
           "release, parameter set and input; a retry with the same key reuses its charge if the run drew "
           "no noise, prints and writes the release it recorded (no new noise), and is refused if the "
           "run drew noise and did not record (a new key is needed); any other run under the key is refused"),
    Option("dry_run", bool, False, "print the plan (parameters checked, privacy spent and its split, "
           "what will be released) and every refusal the real run would make before Spark starts "
           "(outputs, ledger budget), then stop: no Spark, no data read, nothing spent", flag=True),
)
#: How text input files are parsed (added to every command that has --input).
READ_OPTIONS = (
    Option("delimiter", str, None, "CSV field separator, e.g. ';' or '\\t' for tab (default: ',', "
           "or a tab for .tsv files)"),
    Option("header", bool, True, "CSV: the first line holds column names", negatable=True),
    Option("quote", str, '"', "CSV quote character"),
    Option("encoding", str, "UTF-8", "CSV/JSON text encoding (e.g. UTF-8, ISO-8859-1, UTF-16)"),
    Option("schema", str, None, "column names and types as a Spark DDL string, e.g. "
           "'user STRING, item STRING' (CSV/JSON; default: every column a string, never inferred "
           "from the rows)"),
    Option("bad_rows", str, "drop", "rows that do not parse (CSV/JSON): 'drop' them (the default; "
           "how many is never reported) or 'fail' (check every row parses before anything is "
           "spent; the refusal reveals that a bad row exists)", ("drop", "fail")),
)


def _same(opts):
    return opts


def _nothing(opts) -> None:
    return None


@dataclass(frozen=True)
class Command:
    """One ``dp-spark <release>`` subcommand: its options and its hooks, as
    typed fields (each command module defines ``COMMAND``; the CLI reads
    nothing else from it). ``options``: named as the Python API's
    parameters (the release's come from its ``Params``). ``writers``:
    artifact name -> ``writer(release, opts)``, the outputs beside the JSON
    report (written before it, atomically; the option of each is
    :data:`ARTIFACT_OPTION`'s). ``validate(opts)``: options of the command
    line only; ``complete(opts)``: defaults that depend on other options
    (before anything else); ``plan_options(opts)``: refusals and demo
    defaults before the plan; ``load_table(spark, opts) -> (df, opts)``;
    ``run(spark, plan, df, opts, budget)`` where the call is not the plain
    :func:`run_release`; ``series_path(opts)``: where the series goes when
    ``--series`` is not given (continual-distinct). ``cli_only``: its
    options that are neither a ``Params`` field nor an input, output,
    budget or run option (continual-distinct's demo and ``--stream`` ones)."""

    name: str
    help: str
    options: tuple
    writers: Mapping[str, Callable] = field(default_factory=dict)
    validate: Callable[[dict], None] = _nothing
    complete: Callable[[dict], dict] = _same
    plan_options: Callable[[dict], dict] = _same
    load_table: Callable | None = None
    run: Callable | None = None
    series_path: Callable[[dict], str | None] | None = None
    cli_only: tuple[str, ...] = ()

    def output_path(self, option: str, opts) -> str | None:
        """Where the output ``option`` goes this run: the option, or for the
        series the command's ``series_path`` (its derived default)."""
        if option == "series" and self.series_path is not None:
            return self.series_path(opts)
        return opts.get(option)


def options_of(command: Command) -> tuple:
    """A command's options plus the shared ones it does not define itself."""
    names = {o.name for o in command.options}
    extra = tuple(o for o in READ_OPTIONS if "input" in names) + RUN_OPTIONS
    return tuple(command.options) + tuple(o for o in extra if o.name not in names)


def _typed(opt: Option):
    """The option's converter, failing with a message naming what is expected."""
    expected = {int: "a whole number", float: "a number", str: "text"}.get(
        opt.type, getattr(opt.type, "__name__", "a valid value")
    )

    def convert(text: str):
        try:
            return opt.type(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"expected {expected}; got {text!r}") from None

    convert.__name__ = opt.name
    return convert


def _help(opt: Option) -> str:
    if opt.default is None or "default" in opt.help or opt.flag:
        return opt.help
    return f"{opt.help} (default: {opt.default})"


def add_options(parser: argparse.ArgumentParser, options) -> None:
    """Flags grouped as input / release / output and run in --help, with a
    short metavar and the default only where there is one."""
    named = {"input": {o.name for o in INPUT_OPTIONS + READ_OPTIONS}, "output and run": {o.name for o in RUN_OPTIONS}}
    groups = {title: parser.add_argument_group(title) for title in ("input", "release", "output and run")}
    for opt in options:
        title = next((t for t, names in named.items() if opt.name in names), "release")
        group = groups[title]
        if opt.flag:
            group.add_argument(opt.flag_name, dest=opt.name, action="store_true", default=None,
                               help=opt.help)
        elif opt.negatable:
            group.add_argument(opt.flag_name, dest=opt.name, action=argparse.BooleanOptionalAction,
                               default=None, help=_help(opt))
        else:
            group.add_argument(opt.flag_name, dest=opt.name, type=_typed(opt), default=None, action=GivenOnce,
                               choices=opt.choices, metavar=None if opt.choices else _metavar(opt),
                               help=_help(opt))


class GivenOnce(argparse.Action):
    """A single-valued flag given twice (``--epsilon 1 --epsilon 10``, two
    ``--output``) is refused, as a key given twice in the YAML file is:
    argparse would keep the last one silently."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{option_string} is given more than once; give it once")
        setattr(namespace, self.dest, values)


def _metavar(opt: Option) -> str:
    if opt.name == "master":
        return "URL"
    if opt.name == "schema":
        return "DDL"  # a Spark DDL string, not a file
    if opt.type is str:
        return "PATH" if opt.name in _PATH_OPTIONS or opt.name.endswith(("output", "_html")) else "NAME"
    return "N" if opt.type in (int, _positive_int) else "X"


_PATH_OPTIONS = {"input", "domain", "config", "series", "checkpoint", "sink", "ledger", "groups"}


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
    """A ``Command.writers`` entry: write ``release.<attribute>`` (a Spark
    DataFrame) to ``--items-output`` as Parquet, atomically. ``single_file``
    for small tables (one Parquet part)."""

    def write(release, opts) -> None:
        if not opts.get("items_output"):
            return

        frame = getattr(release, attribute)
        with spark_job(f"writing the released {what}"):
            write_dataframe_atomic(frame.coalesce(1) if single_file else frame, opts["items_output"], "parquet",
                                   seeded=release.seeded, overwrite=bool(opts.get("overwrite")))
        if not opts.get("quiet"):
            print(f"released {what} written to {opts['items_output']}")

    return write


def groups_writer(what: str = "per-group values"):
    """A ``Command.writers`` entry: write ``release.groups`` (a Spark DataFrame,
    one row per released group value) to ``--groups-output``: one CSV file's
    folder when the path ends in ``.csv``, else Parquet, or ``table:db.name``;
    atomically, with the output marking of every DataFrame output."""

    def write(release, opts) -> None:
        path = opts.get("groups_output")
        if not path:
            return

        fmt = "csv" if str(path).lower().endswith(".csv") else "parquet"
        with spark_job(f"writing the released {what}"):
            write_dataframe_atomic(release.groups.coalesce(1), path, fmt, seeded=release.seeded,
                                   overwrite=bool(opts.get("overwrite")))
        if not opts.get("quiet"):
            print(f"released {what} written to {path}")

    return write


def check_group_outputs(opts, what: str, ungrouped: str | None = None) -> dict:
    """The grouped-run output options, refused before Spark starts (public
    options only): ``--groups-output`` needs ``--group-by`` (an ungrouped run
    has no ``what``, e.g. "per-group values"), and a grouped run writes its
    rows to ``--groups-output`` only, never to the ungrouped table's option
    ``ungrouped`` (``"items_output"``, ``"series"``). Returns ``opts``."""
    if opts.get("groups_output") and not opts.get("group_by"):
        raise ParameterError(f"--groups-output writes the {what} of a grouped run; give --group-by, or drop "
                             "--groups-output.")
    if ungrouped and opts.get(ungrouped) and opts.get("group_by"):
        flag = "--" + ungrouped.replace("_", "-")
        raise ParameterError(f"{flag} writes the ungrouped release; a grouped run (--group-by) writes its {what} "
                             f"to --groups-output; drop {flag}.")
    return opts


def _config_value(opt: Option, value: Any) -> Any:
    """A config-file value converted as the command line would convert it."""
    if value is None:
        return None
    if opt.flag or opt.negatable:
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


def read_options(opts: dict[str, Any]) -> dict[str, Any]:
    """The --delimiter/--header/--quote/--encoding/--schema/--bad-rows options
    as keyword arguments of :func:`dp_spark.io.read_input`."""
    keys = ("delimiter", "header", "quote", "encoding", "schema", "bad_rows")
    defaults = {o.name: o.default for o in READ_OPTIONS}
    return {k: opts[k] if opts.get(k) is not None else defaults[k] for k in keys}


def load_table(spark, opts: dict[str, Any]):
    """The input DataFrame named by the options, or the built-in synthetic data."""
    if opts["input"]:
        dropping = opts.get("bad_rows", "drop") == "drop" and _text_format(opts)
        if dropping:  # said on every run (also off a terminal); the same words whatever the data
            log.warning("reading %s (rows that do not parse are dropped, --bad-rows drop; "
                        "how many is not reported)", opts["input"])
        else:
            log.info("reading %s", opts["input"])
        df = read_input(spark, opts["input"], opts["format"], columns=input_columns(opts), **read_options(opts))
        _require_option_columns(df, opts)
    else:
        log.info("no --input: using %s rows of built-in synthetic data", f"{opts['rows']:,}")
        df = synthetic_events(spark, rows=int(opts["rows"]))
        opts = {**opts, "person_col": "person_id", "item_col": "item"}
    if opts.get("tokenize") == "words":
        df = tokenize_words(df, opts["person_col"], opts["item_col"])
    return df, opts


def _require_option_columns(df, opts: dict[str, Any]) -> None:
    """Each column an option names is in the input (its schema only, no row
    read), else a one-line refusal naming that option's flag."""
    present = list(df.columns)
    for key in COLUMN_OPTIONS:
        name = opts.get(key)
        if name and name not in present:
            flag = "--" + key.replace("_", "-")
            raise SchemaError(f"column {name!r} is not in the input (named by {flag}); available columns: "
                              f"{', '.join(present) or '(none)'}. Give {flag} one of them.")


#: The options naming the columns a release reads (a JSON input without
#: --schema is read with exactly these, as strings: never names from the rows).
COLUMN_OPTIONS = ("person_col", "item_col", "time_col", "op_col", "group_by")


def input_columns(opts: dict[str, Any]) -> list[str]:
    """The columns the command reads, from its options (public)."""
    return [opts[k] for k in COLUMN_OPTIONS if opts.get(k)]


def check_input_options(opts: dict[str, Any]) -> None:
    """What can be checked of the local files a run reads or charges without
    Spark (the CLI calls this before the JVM starts, and in a dry run): the
    --input path exists (a glob pattern matches files; a Parquet or JSON
    file named like a pattern is read as that file, a CSV one is refused:
    :func:`dp_spark.io.refuse_csv_literal_glob`), the column names are plain
    top-level names, the --groups file exists, neither --groups nor --domain
    is the --input path, holds it or lies inside it (the release checks
    the files Spark reads again), and a ledger to charge can
    be written."""
    if opts.get("input"):
        check_input_path(str(opts["input"]))
        refuse_csv_literal_glob(str(opts["input"]), opts.get("format") or "auto")
        check_column_names(input_columns(opts))
    if opts.get("groups"):
        _check_keys_file(str(opts["groups"]))
    refuse_private_paths(opts.get("input"), groups=opts.get("groups"), domain=opts.get("domain"))
    _check_ledger_writable(opts)


def _check_keys_file(path: str) -> None:
    """--groups, the public keys file: a local path exists, or a pattern
    (Hadoop's glob) matches a file; a Parquet or JSON file named like a
    pattern is read as that file (:func:`dp_spark.io.spark_source`), a CSV
    one refused (:func:`dp_spark.io.refuse_csv_literal_glob`).
    A URI or a table: name is left to the reader."""
    if path.startswith("table:") or not is_local(path):
        return
    if local_path(path).exists():
        refuse_csv_literal_glob(path, "auto", "public keys file (--groups)")
        return
    if SPARK_GLOB.search(path) and pattern_matches(local_path(path)):
        return
    raise InputError(f"public keys file (--groups) {path!r} does not exist; give the path of the file listing "
                     "the public keys (a column named as --group-by).")


def _check_ledger_writable(opts: dict[str, Any]) -> None:
    """A local ledger file to charge (--ledger with --ledger-budget) that the
    run could not write (the file or, for SQLite's journal, its folder):
    refused before Spark starts rather than at the charge. A missing file or
    a database URL is left to the ledger."""
    where = str(opts.get("ledger") or "")
    if not where or not opts.get("ledger_budget"):
        return
    text = where[len("sqlite://"):] if where.startswith("sqlite:///") else where
    if "://" in text:
        return
    path = Path(text)
    if path.is_file() and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        raise InputError(f"the ledger {where!r} is read-only: a run with --ledger records its charge in it; give "
                         "the user running dp-spark write access to the file and its folder.")


def _text_format(opts) -> bool:
    if opts["format"] in ("csv", "json"):
        return True
    if opts["format"] != "auto" or str(opts["input"]).startswith("table:"):
        return False
    try:
        return detect_format(opts["input"]) in ("csv", "json")
    except DPSparkError:
        return False


#: A word: a run of Unicode letters, combining marks and digits.
WORD_SEPARATORS = r"[^\p{L}\p{M}\p{N}]+"


def tokenize_words(df, person_col: str, item_col: str):
    """One row per word of ``item_col``: the text is NFKC-normalized and
    case-folded, then split on everything that is not a letter, mark or digit
    (Unicode classes, so "Café", "naïve" and "東京" survive). Scripts written
    without spaces (Chinese, Japanese, Thai) are not segmented: a run of
    their letters between punctuation or spaces is one item."""
    from pyspark.sql import functions as F

    from dp_spark.stages.edges import require_columns

    require_columns(df, person_col, item_col)
    normalized = _nfkc_casefold(F.col(item_col).cast("string"))
    words = F.explode(F.split(normalized, WORD_SEPARATORS))
    return df.select(F.col(person_col), words.alias(item_col)).where(F.length(item_col) > 0)


def _nfkc_casefold(column):
    """NFKC normalization and Unicode case folding (Spark has no built-in
    for either; a vectorized pandas UDF, which also runs on Spark Connect)."""
    from pyspark.sql import functions as F

    return F.pandas_udf(_normalize_series, "string")(column)


@worker_pass  # runs on the Python workers (dp_spark/stages/python_worker.py)
def _normalize_series(texts):
    return texts.str.normalize("NFKC").str.casefold()


# -- one path from options to a release: the plan, the budget, the call ------------


def spec_of(command: Command):
    """The release a command runs: its entry in
    :data:`dp_spark.releases.RELEASES` (by ``command.name``)."""
    return RELEASES[command.name]


def _given(names, opts: dict[str, Any], skip=()) -> dict[str, Any]:
    """The options named in ``names`` (the CLI flags, YAML keys and Python
    parameters are the same names)."""
    return {k: opts[k] for k in names if k in opts and k not in skip}


def plan_of(command: Command, opts: dict[str, Any]):
    """The release's frozen :class:`~dp_spark.plan.Plan` from the options:
    the same plan builder the Python API calls (``spec.plan``, i.e.
    ``dp_spark.plans.<release>.plan``), so every check, cost and budget
    split has one home. No Spark."""
    opts = command.plan_options(opts)
    spec = spec_of(command)
    return spec.plan(**_given(spec.plan_parameters(), opts))


def budget_of(opts: dict[str, Any]):
    """The run's own budget from ``--budget-epsilon/--budget-delta/--budget-rho``."""
    return budget_filter(opts.get("budget_epsilon"), opts.get("budget_delta"), opts.get("budget_rho"))


def rows_check(df, opts: dict[str, Any]):
    """``--bad-rows fail`` on a file input: the check that every row parses
    (it reads the data), run by the release after its schema checks and
    before its charge (``before_spend``); None otherwise."""
    if df is None or opts.get("bad_rows") != "fail" or not opts.get("input"):
        return None

    return lambda: check_rows_parse(df, opts["input"])


def run_release(command: Command, plan, df, opts: dict[str, Any], budget, **public):
    """Run the release on the plan the CLI built once (its parameter checks,
    dry run and budget check): ``spec.run(plan, df, budget=...)``, i.e.
    ``dp_spark.releases.<release>.run``, the flow every
    ``dp_spark.<release>(df, ...)`` call runs too. ``public``: public
    inputs the plan only names (top-k's domain items)."""
    return spec_of(command).run(plan, df, budget=budget, before_spend=rows_check(df, opts), **public)
