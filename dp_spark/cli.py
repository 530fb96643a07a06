"""``dp-spark``: run a differentially private release from the command line.

    dp-spark distinct-count --input events.parquet --epsilon 1 --output report.json

Every subcommand reads a table (or the built-in synthetic data), checks the
privacy budget before reading it, runs the release, prints a short summary
and writes a JSON report atomically. Bad input gives a one-line error and exit
code 2; a Spark failure exit code 1; never a Java stack trace.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from dp_spark import __version__
from dp_spark.commands import COMMANDS
from dp_spark.commands.base import add_options, load_table, resolve
from dp_spark.errors import BudgetExceededError, DPSparkError, SparkJobError

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, like every other bad input
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dp-spark", description="Run a differentially private release from the command line.",
        epilog="dp-spark RELEASE --help lists a release's options. Example: dp-spark distinct-count "
               "--input events.parquet --epsilon 1 --output report.json --report-html report.html")
    parser.add_argument("--version", action="version", version=f"dp_spark {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="RELEASE", parser_class=_Parser)
    for name, module in COMMANDS.items():
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        p.add_argument("--config", metavar="PATH", help="YAML file of options (command-line flags override it)")
        add_options(p, module.OPTIONS)
    return parser


def _configure_logging(opts) -> None:
    from dp_spark.progress import StepHandler, show_progress

    # Steps always name the Spark jobs; their progress lines show on a terminal only.
    handler = StepHandler(show_progress(opts.get("quiet"), opts.get("verbose")))
    root = logging.getLogger("dp_spark")
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    root.propagate = False
    # pyspark logs failed queries (with the JVM stack trace) to this logger;
    # dp-spark reports its own one-line error instead.
    logging.getLogger("DataFrameQueryContextLogger").setLevel(logging.CRITICAL)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    module = COMMANDS[args.command]
    try:
        opts = resolve(args, module.OPTIONS)
        _configure_logging(opts)
        module.validate(opts)
        budget = module.budget(opts)
        if budget is not None and not budget.can_spend(module.cost(opts)):
            raise BudgetExceededError(
                f"{args.command} would spend {module.cost(opts).describe()} but the budget "
                f"has only {budget.remaining.describe()} left; lower the release's privacy "
                "parameter or raise the budget. No data was read."
            )
        from dp_spark.session import get_session

        spark = get_session(master=opts["master"], log_level=None if opts["verbose"] else "ERROR")
        df, opts = getattr(module, "load_table", load_table)(spark, opts)
        release = module.run(spark, df, opts, budget)
        print(release.to_json() if opts["quiet"] else release.summary())
        for writer in getattr(module, "ARTIFACT_WRITERS", {}).values():
            writer(release, opts)  # before the report: a report means all outputs exist
        if opts.get("report_html"):
            from dp_spark.html_report import write_html

            write_html(opts["report_html"], release)  # shows release.artifacts["ledger"] when set
            if not opts["quiet"]:
                print(f"HTML report written to {opts['report_html']}")
        if opts["output"]:
            from dp_spark.io import write_json_atomic

            write_json_atomic(opts["output"], release.to_dict())
            if not opts["quiet"]:
                print(f"report written to {opts['output']}")
        return 0
    except SparkJobError as exc:
        print(f"dp-spark: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except DPSparkError as exc:
        print(f"dp-spark: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as exc:  # a stream says what it had released (str(exc))
        print(f"dp-spark: interrupted; {exc or 'no output was written'}", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - last resort: one line, no stack
        if os.environ.get("DP_SPARK_DEBUG"):
            raise
        print(
            f"dp-spark: unexpected {type(exc).__name__}; no output was written. "
            "Set DP_SPARK_DEBUG=1 for details (they may quote data values).",
            file=sys.stderr,
        )
        return EXIT_FAILED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
