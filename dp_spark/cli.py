"""``dp-spark``: run a differentially private release from the command line.

    dp-spark distinct-count --input events.parquet --epsilon 1 --output report.json

Every subcommand reads a table (or the built-in synthetic data), checks the
privacy budget before reading it, runs the release, prints a short summary
and writes a JSON report atomically. Bad input gives a one-line error and exit
code 2; a Spark failure exit code 1; never a Java stack trace.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import signal
import socket
import sys
import threading
import traceback
from pathlib import Path
from urllib.parse import urlsplit

from dp_spark import __version__, sample_data, session, sparkjobs, tables
from dp_spark.commands import COMMANDS, outputs
from dp_spark.commands.base import (ARTIFACT_OUTPUTS, OUTPUT_PATHS, GivenOnce, add_options, budget_of,
                                    check_input_options, load_table, options_of, plan_of, resolve, run_release)
from dp_spark.commands.outputs import check_keyed_reports, check_run_paths, write_outputs
from dp_spark.errors import DPSparkError, InputError, InputReadError, ParameterError, SparkJobError
from dp_spark.ledger import command as ledger_command
from dp_spark.ledger import open_ledger
from dp_spark.ledger.budget import file_digest, replay_note
from dp_spark.ledger.ledger import RELEASED
from dp_spark.progress import StepHandler, show_progress
from dp_spark.sparkjobs import describe_failure, spark_exception_types

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1
_NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(inf|nan)$", re.IGNORECASE)


class _Parser(argparse.ArgumentParser):
    """One-line errors (exit 2), and no abbreviated flags: ``--eps 5`` is not
    taken for ``--epsilon`` (a flag added later could change what an
    abbreviation means in a scheduled command)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):  # one line, exit 2, like every other bad input
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dp-spark", description="Run a differentially private release from the command line.",
        epilog="dp-spark RELEASE --help lists a release's options. Example: dp-spark distinct-count "
               "--input events.parquet --epsilon 1 --output report.json --report-html report.html")
    parser.add_argument("--version", action="version", version=f"dp_spark {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="RELEASE", parser_class=_Parser)
    for name, command in COMMANDS.items():
        p = sub.add_parser(name, help=command.help, description=command.help)
        p.add_argument("--config", metavar="PATH", action=GivenOnce,
                       help="YAML file of options (command-line flags override it)")
        add_options(p, options_of(command))
    ledger_command.add_parser(sub)
    sample_data.add_parser(sub)
    return parser


def _join_negative_values(argv: list[str]) -> list[str]:
    """``--delta -1e-6`` -> ``--delta=-1e-6``: argparse would take a negative
    number in exponent form for an option and report a missing value."""
    out: list[str] = []
    for token in argv:
        if (out and _NEGATIVE_NUMBER.match(token) and out[-1].startswith("--") and "=" not in out[-1]
                and out[-1] != "--"):
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


def _configure_logging(opts) -> None:
    # Steps always name the Spark jobs; their progress lines show on a terminal only.
    handler = StepHandler(show_progress(opts.get("quiet"), opts.get("verbose")))
    root = logging.getLogger("dp_spark")
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    root.propagate = False
    # pyspark logs failed queries (with the JVM stack trace) to this logger;
    # dp-spark reports its own one-line error instead.
    logging.getLogger("DataFrameQueryContextLogger").setLevel(logging.CRITICAL)


def _budget(command: str, opts):
    """The run's budget: a ledger budget (--ledger), a per-run filter
    (--budget-*), or None. Checked against the release's plan before Spark
    starts; a ledger records the charge when the release spends it, after
    its schema checks and before it reads any data."""
    filter_budget = budget_of(opts)
    if not (opts.get("ledger") or opts.get("ledger_budget")):
        if opts.get("run_key"):
            raise ParameterError("--run-key needs --ledger and --ledger-budget.")
        return filter_budget
    if not (opts.get("ledger") and opts.get("ledger_budget")):
        raise ParameterError("give both --ledger and --ledger-budget (the ledger and the budget to charge).")
    if filter_budget is not None:
        raise ParameterError("give either --ledger or a --budget-* flag, not both.")
    if opts.get("seed") is not None:
        raise ParameterError(
            "--seed makes the output reproducible and so not private, but --ledger would charge the "
            "real budget for it; drop --seed for a release to publish, or --ledger for a test run."
        )

    run_key, once = opts.get("run_key"), False
    if opts.get("stream") and opts.get("checkpoint"):
        # A stream is charged once for its whole series: a re-created stream
        # (checkpoint deleted) would publish its steps again with new noise.
        run_key = f"stream:{Path(opts['checkpoint']).resolve()}|{Path(opts.get('sink') or '').resolve()}"
        once = True
    parameters = {k: v for k, v in opts.items() if k not in ("ledger", "quiet", "verbose") and v is not None}
    budget = open_ledger(opts["ledger"]).budget(
        opts["ledger_budget"], run_key=run_key, once=once, parameters={"release": command, **parameters},
        outputs={k: _absolute(opts[k]) for k in OUTPUT_PATHS if opts.get(k)})
    if budget.keyed:
        budget.fix_identity(_run_identity(command, opts))  # checked by plan.check and by the release's charge
    return budget


#: Options that change how a run is run, not what it releases or from what (and what it writes).
_NOT_IDENTITY = OUTPUT_PATHS + ("master", "verbose", "quiet", "overwrite", "ledger", "ledger_budget", "run_key",
                            "dry_run", "checkpoint", "sink")
#: Options that say which data is read and how (the identity's input).
_INPUT = ("input", "format", "tokenize", "rows", "delimiter", "header", "quote", "encoding", "schema", "bad_rows")


def _absolute(path) -> str:
    text = str(path)
    if text.startswith("table:") or "://" in text:
        return text

    return str(Path(text).resolve())


def _run_identity(command: str, opts) -> dict:
    """What a keyed run is: the release, its parameters as given (not where
    it writes or how it runs) and its input as the user named it (the
    --input path made absolute, or table:db.name, or the built-in data and
    its --rows), with the options that change what is read. Known before
    Spark starts (``Plan.check`` compares it then); when the release has
    read its public inputs, :func:`dp_spark.ledger.budget.bind_release` adds
    the digests of the keys (--groups) and the domain (--domain) it read,
    whatever names them (a path, a URI, a table:, a glob), so other keys or
    another domain under the same name are another run, never a replay."""
    parameters = {k: (_absolute(v) if k == "domain" else v) for k, v in sorted(opts.items())
                  if k not in _NOT_IDENTITY + _INPUT and v is not None}
    if opts.get("groups"):  # the public key file's contents, not only its path: a changed file is another run

        parameters["groups"] = {"path": _absolute(opts["groups"]), "contents": file_digest(opts["groups"])}
    if opts.get("input"):
        read = {k: opts[k] for k in _INPUT if k not in ("input", "rows") and opts.get(k) is not None}
        source = {"input": _absolute(opts["input"]), **read}
    else:
        source = {"input": "built-in synthetic data", "rows": opts.get("rows"), "tokenize": opts.get("tokenize")}
    return {"release": command, "parameters": parameters, "input": source}


def _dry_run_refusals(command, plan, opts) -> int:
    """Every refusal the real run would make before Spark starts (outputs,
    the budget), each as an error line; exit 2 if there is one. Reads no
    data, starts no Spark, spends nothing."""
    problems: list[str] = []
    keyed = bool(opts.get("run_key"))
    check_run_paths(command, opts, problems, keyed=keyed)

    def budget_and_reports() -> None:  # the ledger is read, never charged
        budget = _budget(command.name, opts)
        plan.check(budget)
        if keyed:  # a retry may rewrite the reports its recorded release wrote, as the real run does
            check_keyed_reports(opts, (_recorded_run(budget, plan) or {}).get("report_created"))

    for check in (lambda: check_input_options(opts), budget_and_reports):
        try:
            check()
        except DPSparkError as exc:
            problems.append(str(exc))
    for problem in problems:
        print(f"dp-spark: error: {problem}", file=sys.stderr)
    return EXIT_BAD_INPUT if problems else 0


def _check_master(master: str | None) -> None:
    """Fail fast (not after Spark's retries) on an unreachable standalone or
    Connect master, when dp-spark is the one starting the session."""
    if not master or not master.startswith(("spark://", "sc://")) or session.launched_externally():
        return
    if session.active_session() is not None:
        return

    for part in master.split("://", 1)[1].split(","):
        parts = urlsplit("//" + part.split("/")[0])
        try:
            port = parts.port or (7077 if master.startswith("spark://") else 15002)
        except ValueError:
            raise ParameterError(f"--master {master!r} has an invalid port.") from None
        try:
            socket.create_connection((parts.hostname or "", port), timeout=5).close()
            return
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
    raise InputError(f"cannot reach the Spark master {master!r} ({reason}); check --master and that it is running.")


def _run(args, command: str) -> int:
    cmd = COMMANDS[command]
    opts = resolve(args, options_of(cmd))
    opts = cmd.complete(opts)  # defaults that depend on other options
    if opts.get("quiet") and opts.get("verbose"):
        raise ParameterError("--quiet and --verbose ask for opposite things: give one of them.")
    _configure_logging(opts)
    cmd.validate(opts)  # options of the command line only (never a release parameter)
    plan = plan_of(cmd, opts)  # every release parameter checked, the cost and its split

    session.check_master(opts.get("master"))  # before a JVM prints its own stack trace about it
    if opts.get("dry_run"):
        print(plan.to_json() if opts["quiet"] else plan.describe())
        return _dry_run_refusals(cmd, plan, {**opts, "config": getattr(args, "config", None)})
    keyed = bool(opts.get("run_key"))
    check_run_paths(cmd, {**opts, "config": getattr(args, "config", None)}, keyed=keyed)
    check_input_options(opts)  # the input path and column names, before the JVM starts
    budget = _budget(command, opts)
    _RUN["budget"] = budget  # main's failure messages say whether it was charged
    plan.check(budget)
    replaying = _recorded_run(budget, plan)  # a retry of a released run under its key: replayed
    if keyed:  # its own earlier reports may be rewritten by its replay
        check_keyed_reports(opts, None if replaying is None else replaying.get("report_created"))
    if replaying is not None:
        _refuse_lost_outputs(opts, replaying)  # before Spark starts
    _check_master(opts["master"])

    spark = session.get_session(master=opts["master"], log_level=None if opts["verbose"] else "OFF")
    _quiet_interrupts()
    held: list = []
    # table:db.name outputs: checked in the catalog and claimed (a new one
    # created as an empty placeholder) before anything is charged, so a run
    # racing for the name is refused before it spends;
    # a claim not written into is dropped however the run ends (an error,
    # Ctrl-C, SIGTERM). A claim left by a killed run: dp_spark.tables.
    with tables.claims(held):
        outputs.check_table_outputs(spark, cmd, opts, held=held)
        df, opts = (cmd.load_table or load_table)(spark, opts)
        # The release on the plan built above (not a second one): its schema and
        # null checks (a missing column refused before any data is read), then
        # --bad-rows fail's parse check, then the charge, then the data.
        if cmd.run is not None:
            release = cmd.run(spark, plan, df, opts, budget)  # e.g. top-k's --domain file, the demo stream
        else:
            release = run_release(cmd, plan, df, opts, budget)  # spec.run(plan, df, budget=...)
        _refuse_lost_outputs(opts, release.replay)
        # Artifacts, then the HTML and JSON reports (a report means all outputs
        # exist); a failed write says what was written and that the budget is
        # spent. The outputs come before the printed result (recorded in the
        # ledger before all this), so a closed stdout loses nothing;
        # a failed write still prints the result.
        try:
            notes = write_outputs(cmd, release, opts)
        except BaseException:
            with contextlib.suppress(OSError, StdoutClosed):
                _print_result(release, opts)
            raise
    _print_result(release, opts, notes)
    return 0


def _detach_stdout() -> None:
    """After the reader of stdout ended: stdout to /dev/null, so the
    interpreter's flush at exit raises no second error."""
    with contextlib.suppress(OSError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


class StdoutClosed(DPSparkError):
    """stdout was closed before the result was printed (``| head``, a log
    collector that died): the outputs had been written."""


def _print_result(release, opts, notes=()) -> None:
    """The result (the JSON report with --quiet), then ``notes`` (what was
    written); a closed stdout is :class:`StdoutClosed`."""
    try:
        print(release.to_json() if opts["quiet"] else release.summary())
        for line in notes:
            print(line)
        sys.stdout.flush()
    except BrokenPipeError:
        _detach_stdout()
        written = [f"--{n.replace('_', '-')}" for n in OUTPUT_PATHS if opts.get(n)]
        raise StdoutClosed(
            "stdout was closed before the result was printed (the reader of a pipe ended); "
            + (f"the outputs were written ({', '.join(written)})." if written else
               "no output file was asked for: give --output to keep the report.")) from None


def _recorded_run(budget, plan) -> dict | None:
    """The replay note of the keyed run this run would replay (its release
    was recorded under the key, with this identity), else None. Refuses an
    identity mismatch as the charge would."""
    if not getattr(budget, "keyed", False):
        return None

    run = budget.ledger.check_run(budget.name, budget.run_key, 0, budget.identity, plan.guarantee, plan.release)
    if run is None or run.state != RELEASED:
        return None
    return {**replay_note(run), "report_created": (run.record or {}).get("created")}


def _refuse_lost_outputs(opts, replay: dict | None) -> None:
    """A release replayed from the ledger's record has its report but not its
    DataFrame outputs (--items-output, --series): refuse (one line, naming
    the earlier run and its outputs) rather than release them again."""
    if replay is None:
        return
    wanted = [f"--{o.replace('_', '-')}" for o in ARTIFACT_OUTPUTS if opts.get(o)]
    if wanted:
        shown = ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in sorted(replay["outputs"].items())) or "none"
        raise ParameterError(
            f"run key {replay['run_key']!r} of budget {replay['budget']!r} was released {replay['released']} "
            f"(outputs: {shown}); the ledger holds its report, not its {' or '.join(wanted)} table, which "
            "cannot be written again without new noise. Use the earlier run's outputs, or a new run key.")


class Terminated(KeyboardInterrupt):
    """SIGTERM (what a scheduler sends on a timeout), handled as Ctrl-C is:
    one line saying what was written and spent, exit 143 (128 + 15)."""


EXIT_TERMINATED = 143


def _quiet_interrupts() -> None:
    """Ctrl-C: one line and exit 130; SIGTERM the same, exit 143 (never a
    silent −15, also after the charge). pyspark's own
    SIGINT handler cancels the jobs through the gateway while the main
    thread is inside a gateway call, which logs py4j tracebacks; this one
    just interrupts, with py4j's logging silenced (the JVM ends with the
    process). ``main`` restores the handlers."""
    if threading.current_thread() is not threading.main_thread():
        return

    def interrupt(signum, frame):
        sparkjobs.INTERRUPTED.set()  # a Spark error raised from here on is this interrupt
        _RUN["signal"] = signum  # which one, should a gateway call turn it into a plain KeyboardInterrupt
        for name in ("", "py4j", "py4j.java_gateway", "py4j.clientserver"):
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)
        raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)


#: The run's budget, for main's failure messages (set by ``_run``).
_RUN: dict = {}


#: What a retry under the run key gets, by the state the failed run left it in (LedgerBudget.run_state).
_RETRY = {
    "charged": " It drew no noise, so a retry with --run-key {key!r} reuses that charge.",
    "drawn": (" It drew noise before it stopped, so --run-key {key!r} is refused from now on: a retry needs a "
              "new run key; the earlier charge stays."),
    "released": (" Its release was recorded, so a retry with --run-key {key!r} prints and writes that release "
                 "(no new noise)."),
}


def _spent_clause(before: str = "") -> str:
    """What a failed run spent, for its error line: whether the ledger budget
    was charged (and so is spent, whatever happened next) or not, and, under
    a run key, what a retry gets: the state the run was left in, as the
    budget object knows it ('charged': nothing drawn, the charge is reused;
    'drawn': a new run key is needed; 'released': the record is replayed).
    Empty when the run had no ledger (nothing persists: a --budget-* filter
    is the run's own)."""
    budget = _RUN.get("budget")
    if budget is None or not hasattr(budget, "ledger"):
        return ""
    if getattr(budget, "_next_seq", 0) == 0:
        return f"{before} Nothing was charged to the ledger budget {budget.name!r}."
    state = getattr(budget, "run_state", None)
    retry = _RETRY[state].format(key=budget.run_key) if state in _RETRY else ""
    return f"{before} The ledger budget {budget.name!r} was charged for this run: that privacy is spent.{retry}"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(_join_negative_values(list(sys.argv[1:] if argv is None else argv)))
    if not args.command:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    verbose = bool(getattr(args, "verbose", False))


    on_main_thread = threading.current_thread() is threading.main_thread()
    sigint = signal.getsignal(signal.SIGINT) if on_main_thread else None
    sigterm = signal.getsignal(signal.SIGTERM) if on_main_thread else None

    sparkjobs.VERBOSE = verbose
    sparkjobs.INTERRUPTED.clear()
    _RUN.clear()
    tables.LEFT.clear()
    logging_state = _logging_state()
    try:
        if args.command == "ledger":
            return ledger_command.run(args)
        if args.command == sample_data.NAME:
            return sample_data.run(args)
        return _run(args, args.command)
    except InputReadError as exc:
        _print_error(exc, verbose)
        return EXIT_BAD_INPUT
    except SparkJobError as exc:
        _print_error(exc, verbose, "" if getattr(exc, "states_spending", False) else _spent_clause())
        return EXIT_FAILED
    except StdoutClosed as exc:  # after the release and its outputs: not a bad input
        _print_error(exc, verbose)
        return EXIT_FAILED
    except DPSparkError as exc:
        _print_error(exc, verbose)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as exc:  # a stream says what it had released (str(exc))
        terminated = isinstance(exc, Terminated) or _RUN.get("signal") == signal.SIGTERM
        what = "terminated (SIGTERM)" if terminated else "interrupted"
        print(f"dp-spark: {what}; {str(exc) or 'no output was written' + _spent_clause('.')}{_claims_left()}",
              file=sys.stderr)
        return EXIT_TERMINATED if terminated else 130
    except BrokenPipeError:  # a dry run's plan, sample-data's or the ledger's lines (a release: StdoutClosed)
        _detach_stdout()
        print("dp-spark: stdout was closed before everything was printed (the reader of a pipe ended)."
              + _spent_clause(), file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:  # noqa: BLE001 - last resort: one line, no stack
        if sparkjobs.INTERRUPTED.is_set():  # Ctrl-C (or SIGTERM) broke a gateway call outside a Spark job
            terminated = _RUN.get("signal") == signal.SIGTERM
            print(f"dp-spark: {'terminated (SIGTERM)' if terminated else 'interrupted'}; no output was written"
                  + _spent_clause(".") + _claims_left(), file=sys.stderr)
            return EXIT_TERMINATED if terminated else 130
        if os.environ.get("DP_SPARK_DEBUG"):
            raise

        what = (describe_failure(exc) if isinstance(exc, spark_exception_types())
                else f"unexpected {type(exc).__name__}")
        print(
            f"dp-spark: error: {what}; no output was written.{_spent_clause()}{_claims_left()} Run with --verbose "
            "(or DP_SPARK_DEBUG=1) for details (they may quote data values).",
            file=sys.stderr,
        )
        if verbose:
            traceback.print_exc()
        return EXIT_FAILED
    finally:
        _restore_logging(logging_state)
        sparkjobs.VERBOSE = False
        if on_main_thread and sigint is not None:
            signal.signal(signal.SIGINT, sigint)
        if on_main_thread and sigterm is not None:
            signal.signal(signal.SIGTERM, sigterm)


#: Loggers the CLI configures for its run (``_configure_logging``); ``main``
#: puts them back as it found them, so a caller's process (a test run, a
#: notebook calling ``main``) keeps its own logging.
_CONFIGURED_LOGGERS = ("dp_spark", "DataFrameQueryContextLogger")


def _logging_state() -> list:
    return [(log, list(log.handlers), log.level, log.propagate)
            for log in map(logging.getLogger, _CONFIGURED_LOGGERS)]


def _restore_logging(state: list) -> None:
    for log, handlers, level, propagate in state:
        log.handlers[:] = handlers
        log.setLevel(level)
        log.propagate = propagate


def _claims_left() -> str:
    """The table outputs whose claim the run could not drop as it ended
    (:func:`dp_spark.tables.claims`: the catalog failed, or a second signal
    came), for the error line: what a later run meets and what to do."""
    if not tables.LEFT:
        return ""
    return (f" The claim on {', '.join(tables.LEFT)} could not be dropped: a later run is refused naming this "
            "one while it runs; once it is gone, a later run on this host takes the claim over (from another "
            "host: with --overwrite).")


def _print_error(exc: BaseException, verbose: bool, spent: str = "") -> None:
    print(f"dp-spark: error: {exc}{spent}{_claims_left()}", file=sys.stderr)
    if verbose and (exc.__cause__ is not None):
        traceback.print_exception(exc.__cause__, file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
