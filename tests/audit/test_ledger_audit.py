"""Audit of the ledger's run keys (issue 21 §1): the averaging attack.

Before the fix, a run key reused its charge whenever the key and cost
matched and every run drew fresh noise: N distinct-count runs under one key
on an ε = 1 budget left one charge, and the median (or mean) of their N
outputs told a table with 100 distinct items from one with 101 far better
than ε = 1 allows. Now a run key belongs to one release, parameter set and
input, and a retry of a released run returns the recorded release
unchanged, so N runs under one key show one ε-DP output N times.

Neighbours: D = 100 persons, each with its own item; D' = D plus one person
with a new item (101 distinct items). The release is
``distinct_count(ε = 1, max_bound = 1, shards = 1)``: one candidate bound,
so the count gets discrete Laplace noise of scale 2 (ε/2 = 0.5 on it).

A trial is one fresh run key and N runs under it on D (or D'); its
statistic is the median of the N estimates (the efficient location estimate
under Laplace noise); the event is S = {median >= 100.5}. The Spark stage is
a deterministic function of the data (DESIGN.md rule 2), so it is computed
once per table and memoized; the ledger, the identity check, GEM, the noise,
the record and the replay run for real, through the public API and through
the CLI's entry function. The power check runs the same event and trial
count with fresh noise for every run (the old behaviour: one charge, N
draws) and must prove ε > 1.
"""

from __future__ import annotations

import json

import numpy as np

import dp_spark
from dp_spark.cli import main
from dp_spark.ledger import open_ledger
from tests.audit.ledger_attacks import EPSILON, fresh_ledger as _ledger, fresh_noise_medians as _fresh_noise_medians
from tests.audit.ledger_attacks import hits as _hits, memoized_stage, tables  # noqa: F401 - fixtures
from tests.audit.stats import assert_detects, two_sided_lower_bound


def _trial(run, n: int) -> float:
    """N runs under one fresh key; all must be the same release (replays)."""
    estimates = [run() for _ in range(n)]
    assert len(set(estimates)) == 1, f"runs under one key drew new noise: {sorted(set(estimates))[:5]}"
    return float(np.median(estimates))


def test_averaging_attack_through_the_python_api(spark, tables, memoized_stage, tmp_path, audit_record):
    """Trials and runs sized so that fresh noise per run (the power check)
    proves ε > 1: the median of 61 draws separates D from D' in about 97%
    of trials. Under the ledger every run after a key's first is its replay
    (asserted), so the median of any number of them is the first release:
    the real path runs 11 per key (a redraw would repeat the value 10 times
    with probability about 0.25^10), the attack's statistic is the same as
    with 61, and the power check keeps 61 fresh draws."""
    trials, n, replays = 60, 61, 11
    medians = {}
    for count, path in tables.items():
        df = spark.read.parquet(path)
        with open_ledger(_ledger(tmp_path, f"api-{count}", trials)) as led:
            def run(key):
                release = dp_spark.distinct_count(df, epsilon=EPSILON, max_bound=1, shards=1,
                                                  ledger=led.budget("b", run_key=key, input=f"items-{count}"))
                return release.result["estimate"]

            medians[count] = [_trial(lambda: run(f"trial-{t}"), replays) for t in range(trials)]
            assert led.state("b").charges == trials
    lb = two_sided_lower_bound(_hits(medians[101]), trials, _hits(medians[100]), trials)
    audit_record(f"ledger: median of {replays} runs under one key (API)", EPSILON, lb, trials)
    broken = two_sided_lower_bound(_hits(_fresh_noise_medians(101, trials, n, 1)), trials,
                                   _hits(_fresh_noise_medians(100, trials, n, 2)), trials)
    assert_detects(f"ledger: median of {n} fresh runs per key", EPSILON, broken)


def test_averaging_attack_through_the_cli(spark, tables, memoized_stage, tmp_path, audit_record, capsys):
    """The same attack through ``dp-spark distinct-count`` (fewer trials: a
    CLI run reads the Parquet schema each time); every run under a key must
    print the same release."""
    trials, n = 8, 5
    medians = {}
    for count, path in tables.items():
        ledger = _ledger(tmp_path, f"cli-{count}", trials)

        def run(key):
            argv = ["distinct-count", "--input", path, "--epsilon", str(EPSILON), "--max-bound", "1",
                    "--shards", "1", "--ledger", ledger, "--ledger-budget", "b", "--run-key", key, "--quiet"]
            assert main(argv) == 0, capsys.readouterr().err
            return json.loads(capsys.readouterr().out)["result"]["estimate"]

        medians[count] = [_trial(lambda: run(f"trial-{t}"), n) for t in range(trials)]
        with open_ledger(ledger) as led:
            assert led.state("b").charges == trials
    lb = two_sided_lower_bound(_hits(medians[101]), trials, _hits(medians[100]), trials)
    audit_record(f"ledger: median of {n} runs under one key (CLI)", EPSILON, lb, trials)
