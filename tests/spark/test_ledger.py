"""The persisted ledger with real releases: nothing spent twice across runs,
charges recorded before data is read and kept by a crashed run, retries by
run key, and a continual stream charged once for its checkpoint + sink."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

import dp_spark
from dp_spark.accounting import ZCDP, ApproxDP, PureDP
from dp_spark.cli import main
from dp_spark.errors import BudgetExceededError, SparkJobError
from dp_spark.ledger import open_ledger


@pytest.fixture
def ledger_path(tmp_path):
    path = tmp_path / "budgets.db"
    with open_ledger(path, create=True) as led:
        led.create_budget("eps", PureDP(1.0))
        led.create_budget("rho", ZCDP(0.3, 1e-5))
    return str(path)


def _charges(path, budget):
    with open_ledger(path) as led:
        return led.history(budget)


def test_second_cli_run_over_the_ledger_budget_is_refused(capsys, spark, tmp_path, ledger_path):
    common = ["distinct-count", "--rows", "3000", "--max-bound", "5", "--epsilon", "1",
              "--ledger", ledger_path, "--ledger-budget", "eps", "--quiet"]
    assert main([*common, "--output", str(tmp_path / "a.json")]) == 0
    capsys.readouterr()
    assert main([*common, "--output", str(tmp_path / "b.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "ledger budget 'eps' has only ε = 0" in err and "\n" not in err
    assert not (tmp_path / "b.json").exists()
    history = _charges(ledger_path, "eps")
    assert len(history) == 1 and history[0]["release"] == "distinct-count"
    assert history[0]["parameters"]["epsilon"] == 1.0 and history[0]["parameters"]["max_bound"] == 5


def test_run_key_retry_reuses_the_charge(capsys, spark, ledger_path):
    argv = ["top-k", "--rows", "3000", "--k", "3", "--epsilon", "0.8", "--delta", "1e-6",
            "--ledger", ledger_path, "--ledger-budget", "rho", "--run-key", "dag-1", "--quiet"]
    # unknown-domain top-k is (ε, δ)-DP: a zCDP budget cannot hold it
    assert main(argv) == 2
    assert "cannot be counted in the zcdp budget" in capsys.readouterr().err
    argv = ["distinct-count", "--rows", "3000", "--max-bound", "5", "--epsilon", "0.6",
            "--ledger", ledger_path, "--ledger-budget", "rho", "--run-key", "dag-1", "--quiet"]
    assert main(argv) == 0
    assert main(argv) == 0  # the retry: ρ = 0.18 of 0.3 would not fit twice
    charges = _charges(ledger_path, "rho")
    assert len(charges) == 1 and charges[0]["run_key"] == "dag-1"
    assert charges[0]["counted"]["rho"] == pytest.approx(0.18)


def test_crashed_release_keeps_its_charge(spark, unreadable_events, ledger_path):
    with open_ledger(ledger_path) as led:
        budget = led.budget("eps", run_key="crash-1")
        with pytest.raises(SparkJobError):
            dp_spark.distinct_count(unreadable_events, epsilon=0.7, max_bound=3, budget=budget)
        assert led.state("eps").charges == 1  # charged before reading, not refunded
        with pytest.raises(BudgetExceededError):
            dp_spark.distinct_count(unreadable_events, epsilon=0.7, max_bound=3, budget=led.budget("eps"))
        assert led.state("eps").charges == 1


def test_python_api_with_a_pandas_frame_and_a_ledger_budget(spark, ledger_path):
    frame = pd.DataFrame({"person_id": [1, 1, 2, 3], "item": ["a", "b", "a", "c"],
                          "when": pd.to_datetime(["2024-01-01"] * 4)})
    with open_ledger(ledger_path) as led:
        release = dp_spark.count_release(frame, rho=0.1, delta=1e-6, seed=1, budget=led.budget("rho"))
        assert release.to_dict()["result"]["rho_spent"] <= 0.1
        assert led.state("rho").spent.rho == pytest.approx(0.1)
    with pytest.raises(dp_spark.errors.SchemaError, match="must be a Spark DataFrame"):
        dp_spark.distinct_count([(1, "a")], epsilon=1.0)


def _stream_argv(tmp_path, ledger_path):
    return ["continual-distinct", "--stream", "--input", str(tmp_path / "in"), "--horizon", "2",
            "--rho", "0.2", "--checkpoint", str(tmp_path / "ckpt"), "--sink", str(tmp_path / "out"),
            "--state-partitions", "1", "--ledger", ledger_path, "--ledger-budget", "rho", "--quiet"]


def test_recreated_stream_is_refused_by_the_ledger(capsys, spark, tmp_path, ledger_path):
    source = tmp_path / "in"
    source.mkdir()
    for step in (1, 2):
        (source / f"events-{step}.json").write_text(json.dumps({"time": step, "item": f"x{step}", "op": 1}) + "\n")
    assert main(_stream_argv(tmp_path, ledger_path)) == 0, capsys.readouterr().err
    assert main(_stream_argv(tmp_path, ledger_path)) == 0  # a resume spends nothing
    assert len(_charges(ledger_path, "rho")) == 1
    capsys.readouterr()
    shutil.rmtree(tmp_path / "ckpt")
    shutil.rmtree(tmp_path / "out")
    assert main(_stream_argv(tmp_path, ledger_path)) == 2
    err = capsys.readouterr().err.strip()
    assert "published again with new noise" in err and "\n" not in err
    assert len(_charges(ledger_path, "rho")) == 1
    assert not any((tmp_path / "out").glob("step-*"))


def test_every_release_takes_ledger_keyword(spark, ledger_path, unreadable_events):
    """ledger= (Python) is the same persisted budget as --ledger: each of the
    five releases charges it before reading data (the crashed read keeps the
    charge), and budget= together with ledger= is refused."""
    from dp_spark.errors import ParameterError

    events = spark.createDataFrame([], "time long, item string, op int")
    calls = {
        "distinct-count": lambda led: dp_spark.distinct_count(unreadable_events, epsilon=0.1, max_bound=3,
                                                              shards=1, ledger=led),
        "top-k": lambda led: dp_spark.top_k(unreadable_events, k=1, epsilon=0.1, delta=1e-9, ledger=led),
        "set-union": lambda led: dp_spark.set_union(unreadable_events, epsilon=0.1, delta=1e-9, ledger=led),
        "count-release": lambda led: dp_spark.count_release(unreadable_events, rho=0.01, delta=1e-7, ledger=led),
    }
    kinds = {"distinct-count": "approx", "top-k": "approx", "set-union": "approx", "count-release": "rho"}
    with open_ledger(ledger_path) as led:
        led.create_budget("approx", ApproxDP(1.0, 1e-5))
        for name, call in calls.items():
            before = len(led.history(kinds[name]))
            with pytest.raises(SparkJobError):
                call(led.budget(kinds[name]))
            assert len(led.history(kinds[name])) == before + 1, name
        before = len(led.history("rho"))
        dp_spark.continual_distinct(events, rho=0.01, horizon=4, ledger=led.budget("rho"))
        assert len(led.history("rho")) == before + 1
        with pytest.raises(ParameterError, match="not both"):
            dp_spark.distinct_count(unreadable_events, epsilon=0.1, ledger=led.budget("approx"),
                                    budget=led.budget("approx"))
        with pytest.raises(ParameterError, match="ledger= takes a ledger budget"):
            dp_spark.distinct_count(unreadable_events, epsilon=0.1, ledger=ledger_path)
