"""``dp-spark top-k``: the k items with the most distinct persons, in order.

Every release parameter is checked by the plan (:mod:`dp_spark.plans.top_k`);
this module only names the options and reads ``--domain`` (a file) into the
list of items the Python API takes.
"""

from __future__ import annotations

import sys

from dp_spark.commands.base import INPUT_OPTIONS, RUN_OPTIONS, Option, items_writer, run_release
from dp_spark.plans.top_k import METHODS

NAME = "top-k"
HELP = "differentially private top-k items by number of distinct persons"

#: δ when none is given and the mechanism needs one (as conf/top_k.yaml has):
#: without it the command with no flags would refuse on the built-in data.
DEMO_DELTA = 1e-6

OPTIONS = INPUT_OPTIONS + (
    Option("k", int, 10, "number of items to release, in rank order"),
    Option("epsilon", float, 1.0, "privacy parameter ε spent by the release; from 1e-6 to 50 (below, the noise swamps every count; above, e^ε bounds nothing)"),
    Option("delta", float, None, "δ for unknown-domain and for cdp-peel's (ε, δ) accounting; "
           f"the other mechanisms are pure ε-DP (default: {DEMO_DELTA:g} where the mechanism "
           "needs δ — unknown-domain, and auto without --domain — else 0)"),
    Option("method", str, "auto", "selection mechanism: auto = unknown-domain without "
           "--domain; with one, the mechanism auto predicts to be the most accurate (a pure one "
           "when delta = 0; any share of epsilon spent on that choice is shown in the budget "
           "split)", METHODS),
    Option("domain", str, None, "public list of possible items: a text file with one item per "
           "line, or a CSV/Parquet file with the item column (needed by joint, pnf-joint, "
           "pnf-peel, cdp-peel)"),
    Option("kbar", int, None, "unknown-domain: how many of the largest counts are collected "
           "(default max(1000, 2k))"),
    Option("persons", int, None, "public number (or upper bound) of persons, only used to warn "
           "when the error bound is large next to it"),
    Option("items_output", str, None, "also write the released items here as Parquet (atomically)"),
    Option("budget_epsilon", float, None, "total ε budget; the run is refused before reading "
           "data if the release would exceed it"),
    Option("budget_delta", float, None, "total δ budget (with --budget-epsilon; default 0)"),
) + RUN_OPTIONS


def complete(opts):
    """``--delta`` not given: DEMO_DELTA when the mechanism needs δ
    (unknown-domain, or auto without a domain, which runs unknown-domain),
    else 0 (a pure mechanism stays pure). Public options only."""
    if opts.get("delta") is not None:
        return opts
    needs = opts.get("method") == "unknown-domain" or (opts.get("method") == "auto" and not opts.get("domain"))
    return {**opts, "delta": DEMO_DELTA if needs else 0.0}


def run(spark, df, opts, budget):
    """The API call, with ``--domain PATH`` read into the public list of
    items (public data; read before the release spends anything)."""
    from dp_spark.stages.item_counts import read_domain

    domain = read_domain(spark, opts["domain"], opts["item_col"]) if opts["domain"] else None
    return run_release(sys.modules[__name__], spark, df, {**opts, "domain": domain}, budget)


ARTIFACT_WRITERS = {"items": items_writer("items", "items", single_file=True)}
