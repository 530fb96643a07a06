"""Audit of the retry attack (issue 35 §1): draw, be seen, be interrupted,
retry under the same run key.

Before the fix, a keyed run interrupted after it drew (and after a value
drawn was seen: the issue's runs printed the number of privately chosen
keys before the record) stayed 'charged', and a retry under the key reused
the charge and drew anew: each retry was another release for one charge.
The issue measured 5 interrupted CLI retries printing 30, 36, 30, 30, 29
with one charge. Now the run is marked 'drawn' before its first draw and
every retry of it is refused, so an attacker sees at most one draw per
charge.

Neighbours: D = 100 persons, each with its own item; D' = D plus one person
with a new item. The release is ``distinct_count(ε = 1, max_bound = 1,
shards = 1)`` (one candidate bound: discrete Laplace noise of scale 2 on the
count). The attacker's observation is the worst case: every value the
mechanism draws is seen before the record (the estimate, taken from the
mechanism's return), and the run is then interrupted (a KeyboardInterrupt
through the API; through the CLI, SIGINT to the process, taken by the CLI's
own handler). A trial is one fresh run key and ATTEMPTS runs under it (made
for real: REAL_ATTEMPTS of them; the rest would be refused alike); its
statistic is the median of the values seen (the efficient location estimate
under Laplace noise: the majority vote of the likelihood-ratio signs); the
event is S = {median >= 100.5}. The Spark stage (no noise) is computed once
per table and memoized; the ledger, the mark, the refusal, the mechanism
and its noise run for real.

The power check is the same attack and event with every attempt drawing
fresh noise, which is what the real path does with the 'drawn' state
switched off (shown on a few trials through the real API, then sized at the
mechanism, whose fresh draws are the old behaviour): it must prove ε > 1.
"""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

import dp_spark
from dp_spark.cli import main
from dp_spark.errors import ParameterError
from dp_spark.ledger import open_ledger
from dp_spark.ledger.budget import LedgerBudget
from tests.audit.ledger_attacks import EPSILON, fresh_ledger, fresh_noise_medians, hits
from tests.audit.ledger_attacks import memoized_stage, tables  # noqa: F401 - fixtures
from tests.audit.stats import assert_detects, two_sided_lower_bound

#: Runs an attacker makes under one key (enough for fresh draws to prove ε > 1 in TRIALS trials).
ATTEMPTS = 61
TRIALS = 60
#: Runs made for real under each key: the first draws and is interrupted, the next are refused before
#: anything is read, with the ledger as it was (tests/spark/test_ledger_drawn.py), so every later attempt
#: of the attacker's ATTEMPTS is refused alike and sees nothing (a refused run costs ~30 ms of Spark
#: schema calls: 60 more per key would take minutes).
REAL_ATTEMPTS = 3


class _Seen(list):
    """The values the attacker saw, and how the run is interrupted after each."""

    @staticmethod
    def interrupt():
        raise KeyboardInterrupt


@pytest.fixture
def seen(monkeypatch, memoized_stage):
    """The attacker's view (the stage memoized per input): the mechanism
    wrapped so that each value it draws is seen (appended to the list this
    fixture returns) and the run is interrupted right after, before its
    record. ``seen.interrupt`` is how: raise KeyboardInterrupt (default) or
    send SIGINT to the process (the CLI's own path)."""
    from dp_spark.mechanisms.distinct_count import release_from_counts
    from dp_spark.releases import distinct_count as release

    values = _Seen()

    def drawn_seen_interrupted(*args, **kwargs):
        released = release_from_counts(*args, **kwargs)
        values.append(released["estimate"])  # seen before the record
        values.interrupt()
        return released

    monkeypatch.setattr(release, "release_from_counts", drawn_seen_interrupted)
    return values


def _api_trials(spark, tables, seen, tmp_path, name: str, trials: int, attempts: int) -> dict:
    """Per input: each trial's values seen under its key (one list per trial)."""
    out = {}
    for count, path in tables.items():
        df = spark.read.parquet(path)
        with open_ledger(fresh_ledger(tmp_path, f"{name}-{count}", trials)) as led:
            out[count] = []
            for t in range(trials):
                seen.clear()
                for _ in range(attempts):
                    try:
                        dp_spark.distinct_count(df, epsilon=EPSILON, max_bound=1, shards=1,
                                                ledger=led.budget("b", run_key=f"trial-{t}", input=f"items-{count}"))
                    except KeyboardInterrupt:
                        pass
                    except ParameterError as refused:
                        assert "a new run key is needed; the earlier charge stays." in str(refused)
                out[count].append(list(seen))
            assert led.state("b").charges == trials  # one charge per key, whatever the attempts
    return out


def test_retry_attack_through_the_python_api(spark, tables, seen, tmp_path, audit_record):
    views = _api_trials(spark, tables, seen, tmp_path, "api", TRIALS, REAL_ATTEMPTS)
    for count in views:
        assert all(len(view) == 1 for view in views[count]), "a retry under a key that drew drew again"
    medians = {count: [float(np.median(v)) for v in views[count]] for count in views}
    lb = two_sided_lower_bound(hits(medians[101]), TRIALS, hits(medians[100]), TRIALS)
    audit_record(f"ledger: {ATTEMPTS} interrupted retries per key (API)", EPSILON, lb, TRIALS)  # see REAL_ATTEMPTS
    broken = two_sided_lower_bound(hits(fresh_noise_medians(101, TRIALS, ATTEMPTS, 1)), TRIALS,
                                   hits(fresh_noise_medians(100, TRIALS, ATTEMPTS, 2)), TRIALS)
    assert_detects(f"ledger: {ATTEMPTS} fresh draws per key", EPSILON, broken)


def test_without_the_drawn_state_the_real_path_redraws_on_every_retry(spark, tables, seen, tmp_path, monkeypatch):
    """The power check's premise on the real path: with the mark switched
    off (the ledger before the fix) each interrupted retry under one key
    reuses the charge and is a fresh draw."""
    monkeypatch.setattr(LedgerBudget, "mark_drawn", lambda self, seq=None: None)
    views = _api_trials(spark, {101: tables[101]}, seen, tmp_path, "off", 3, 8)
    assert all(len(view) == 8 for view in views[101])
    assert all(len(set(view)) > 1 for view in views[101]), views


def test_retry_attack_through_the_cli(spark, tables, seen, tmp_path, audit_record, capsys):
    """The same attack through ``dp-spark distinct-count`` (in process), the
    interrupt by SIGINT to the process as a user's Ctrl-C after the value
    was seen; fewer trials and attempts (a CLI run reads the Parquet schema
    each time). Every retry after the first is refused in one line."""
    trials, attempts = 8, 4
    seen.interrupt = lambda: os.kill(os.getpid(), signal.SIGINT)
    medians = {}
    for count, path in tables.items():
        ledger = fresh_ledger(tmp_path, f"cli-{count}", trials)
        medians[count] = []
        for t in range(trials):
            seen.clear()
            argv = ["distinct-count", "--input", path, "--epsilon", str(EPSILON), "--max-bound", "1",
                    "--shards", "1", "--ledger", ledger, "--ledger-budget", "b", "--run-key", f"trial-{t}",
                    "--quiet"]
            codes = [main(argv) for _ in range(attempts)]
            err = capsys.readouterr().err.strip().splitlines()
            assert codes == [130] + [2] * (attempts - 1), (codes, err)
            assert "a retry needs a new run key; the earlier charge stays." in err[0], err
            assert all(line.endswith("a new run key is needed; the earlier charge stays.") for line in err[1:]), err
            assert len(seen) == 1
            medians[count].append(float(np.median(seen)))
        with open_ledger(ledger) as led:
            assert led.state("b").charges == trials and {r.state for r in led.runs("b")} == {"drawn"}
    lb = two_sided_lower_bound(hits(medians[101]), trials, hits(medians[100]), trials)
    audit_record(f"ledger: {attempts} interrupted CLI retries per key", EPSILON, lb, trials)
