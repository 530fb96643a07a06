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


def test_cli_runs_of_point_nine_then_point_one_fill_a_ledger_budget_of_one(capsys, spark, tmp_path, ledger_path):
    """Issue 22 through the CLI (in-process entry): two real runs spending
    ε = 0.9 then ε = 0.1 from the ledger budget ε = 1 are both accepted (the
    ledger counts the decimals written; each mechanism runs at most at its
    decimal), their reports state ε as given, and a third run is refused."""
    common = ["distinct-count", "--rows", "3000", "--max-bound", "5", "--ledger", ledger_path,
              "--ledger-budget", "eps", "--quiet"]
    for eps, name in (("0.9", "a.json"), ("0.1", "b.json")):
        assert main([*common, "--epsilon", eps, "--output", str(tmp_path / name)]) == 0
        report = json.loads((tmp_path / name).read_text())
        assert report["privacy"]["epsilon"] == float(eps) and report["parameters"]["epsilon"] == float(eps)
    capsys.readouterr()
    assert main([*common, "--epsilon", "1e-6", "--output", str(tmp_path / "c.json")]) == 2
    assert "has only ε = 0 (pure differential privacy) left" in capsys.readouterr().err
    assert [c["counted"]["exact"] for c in _charges(ledger_path, "eps")] == [{"epsilon": "0.9"}, {"epsilon": "0.1"}]


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
        release = dp_spark.count_release(frame, rho=0.1, delta=1e-6, budget=led.budget("rho"))  # no seed: a ledger
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


# -- a run key is one release, one parameter set, one input (issue 21 §1) --------------------


@pytest.fixture
def approx_ledger(tmp_path):
    path = tmp_path / "approx.db"
    with open_ledger(path, create=True) as led:
        led.create_budget("trial", ApproxDP(1.0, 1e-5))
    return str(path)


def test_new_user_trial_is_refused_after_the_first_release(capsys, spark, approx_ledger):
    """The issue's trial: one key for a distinct-count, then a top-k, then a
    distinct-count on other data (an ε = 1 budget). The second and third are
    refused in one line naming the first run; one charge, one release."""
    key = ["--ledger", approx_ledger, "--ledger-budget", "trial", "--run-key", "trial-1", "--quiet"]
    assert main(["distinct-count", "--rows", "3000", "--max-bound", "5", "--epsilon", "1", *key]) == 0
    capsys.readouterr()
    for argv, what in ((["top-k", "--rows", "3000", "--k", "3", "--epsilon", "1", "--delta", "1e-6"],
                        "another release"),
                       (["distinct-count", "--rows", "4000", "--max-bound", "5", "--epsilon", "1"], "another input")):
        assert main([*argv, *key]) == 2
        captured = capsys.readouterr()
        err = captured.err.strip()
        assert "run key 'trial-1' of budget 'trial': distinct-count, released" in err and what in err, err
        assert "\n" not in err and captured.out == ""
    with open_ledger(approx_ledger) as led:
        assert led.state("trial").charges == 1
        [run] = led.runs("trial")
        assert run.state == "released" and run.record["release"] == "distinct-count"


def test_cli_killed_between_recording_and_writing_retry_writes_the_recorded_release(
        capsys, spark, tmp_path, ledger_path, monkeypatch, report_schema):
    """The first run records its release and dies before writing anything
    (the outputs come before the printed result: the interrupted run still
    prints it); the retry (same key, same command) writes exactly the
    recorded release: no new noise, no new charge."""
    from dp_spark.commands import outputs

    report = tmp_path / "report.json"
    argv = ["distinct-count", "--rows", "3000", "--max-bound", "5", "--epsilon", "0.5", "--ledger", ledger_path,
            "--ledger-budget", "eps", "--run-key", "dag/2024-01-01", "--output", str(report), "--quiet"]

    def killed(*_args, **_kwargs):
        raise KeyboardInterrupt  # the process dies as it writes: after the release returned, before any output

    with monkeypatch.context() as patch:
        patch.setattr(outputs, "planned_writes", killed)
        assert main(argv) == 130
    assert json.loads(capsys.readouterr().out)["release"] == "distinct-count" and not report.exists()
    with open_ledger(ledger_path) as led:
        [run] = led.runs("eps")
        assert run.state == "released" and run.outputs == {"output": str(report.resolve())}
        recorded = run.record
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    written = json.loads(report.read_text())
    assert written == printed
    import jsonschema

    jsonschema.validate(written, report_schema)  # the "replay" entry is part of the report's schema
    replay = written.pop("replay")
    assert replay["run_key"] == "dag/2024-01-01" and replay["released"] == run.released
    assert written == recorded  # bit for bit: the same values, time and split
    assert len(_charges(ledger_path, "eps")) == 1
    assert main([*argv, "--overwrite"]) == 0  # a later retry too
    assert json.loads(capsys.readouterr().out)["result"] == recorded["result"]


def test_replay_that_would_rewrite_a_dataframe_output_is_refused(capsys, spark, tmp_path, approx_ledger):
    argv = ["top-k", "--rows", "3000", "--k", "3", "--epsilon", "0.5", "--delta", "1e-6", "--ledger", approx_ledger,
            "--ledger-budget", "trial", "--run-key", "topk-1", "--quiet"]
    first = tmp_path / "items.parquet"
    assert main([*argv, "--items-output", str(first)]) == 0
    capsys.readouterr()
    assert main([*argv, "--items-output", str(tmp_path / "again.parquet")]) == 2
    err = capsys.readouterr().err.strip()
    assert "run key 'topk-1'" in err and f"--items-output {first.resolve()}" in err and "\n" not in err
    assert not (tmp_path / "again.parquet").exists()
    assert main(argv) == 0  # the report alone can be replayed
    assert "replay" in json.loads(capsys.readouterr().out)


def test_python_api_replays_a_released_key_and_refuses_other_data(spark, tmp_path, ledger_path):
    paths = []
    for n in (40, 41):
        path = tmp_path / f"t{n}.parquet"
        spark.createDataFrame([(i, f"x{i}") for i in range(n)], "person_id long, item string").write.parquet(str(path))
        paths.append(str(path))
    with open_ledger(ledger_path) as led:
        first = dp_spark.distinct_count(spark.read.parquet(paths[0]), epsilon=0.5, max_bound=2, shards=1,
                                        ledger=led.budget("eps", run_key="api-1"))
        again = dp_spark.distinct_count(spark.read.parquet(paths[0]), epsilon=0.5, max_bound=2, shards=1,
                                        ledger=led.budget("eps", run_key="api-1"))
        assert first.replay is None and again.replay["run_key"] == "api-1"
        assert again.result == first.result and again.created == first.created
        with pytest.raises(dp_spark.errors.ParameterError, match="another input"):
            dp_spark.distinct_count(spark.read.parquet(paths[1]), epsilon=0.5, max_bound=2, shards=1,
                                    ledger=led.budget("eps", run_key="api-1"))
        with pytest.raises(dp_spark.errors.ParameterError, match="other parameters"):
            dp_spark.distinct_count(spark.read.parquet(paths[0]), epsilon=0.5, max_bound=3, shards=1,
                                    ledger=led.budget("eps", run_key="api-1"))
        with pytest.raises(dp_spark.errors.ParameterError, match="reads no files.*input="):
            dp_spark.distinct_count(spark.createDataFrame([(1, "a")], "person_id long, item string"),
                                    epsilon=0.5, ledger=led.budget("eps", run_key="api-2"))
        assert led.state("eps").charges == 1


def test_stream_api_with_a_run_key_is_charged_once(spark, tmp_path, ledger_path):
    """A keyed ledger budget given to the streaming API is the stream's once
    key: a re-created stream (checkpoint and sink deleted) under the key
    would publish its steps again with new noise, so it is refused; before,
    the charge was reused."""
    from dp_spark.streaming.query import continual_distinct_stream

    source = tmp_path / "in"
    source.mkdir()
    (source / "events-1.json").write_text(json.dumps({"time": 1, "item": "x1", "op": 1}) + "\n")
    run = dict(checkpoint=str(tmp_path / "ckpt"), sink=str(tmp_path / "out"), rho=0.1, horizon=2,
               state_partitions=1)
    with open_ledger(ledger_path) as led:
        continual_distinct_stream(spark, str(source), budget=led.budget("rho", run_key="stream-1"), **run)
        shutil.rmtree(tmp_path / "ckpt")
        shutil.rmtree(tmp_path / "out")
        with pytest.raises(BudgetExceededError, match="published again with new noise"):
            continual_distinct_stream(spark, str(source), budget=led.budget("rho", run_key="stream-1"), **run)
        assert led.state("rho").charges == 1


@pytest.mark.parametrize("failure, code, said", [
    (SparkJobError("Spark failed while computing bounded counts: Spark error X."), 1, "Spark failed while"),
    (RuntimeError("boom"), 1, "unexpected RuntimeError; no output was written."),
])
def test_a_run_failing_after_the_charge_says_the_budget_was_charged(
        capsys, spark, tmp_path, ledger_path, monkeypatch, failure, code, said):
    """Issue 22: every failure message says whether budget was spent. A
    failure in the release after the ledger charge names the charged budget
    (and that a retry under the key reuses it); before: 'no output was
    written' only."""
    from dp_spark.releases import distinct_count as release

    def fail(*args, **kwargs):
        raise failure

    monkeypatch.setattr(release, "_bounded_counts", fail)
    argv = ["distinct-count", "--rows", "2000", "--max-bound", "3", "--epsilon", "0.5", "--ledger", ledger_path,
            "--ledger-budget", "eps", "--run-key", "fail-1", "--output", str(tmp_path / "r.json")]
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert said in err and "\n" not in err, err
    assert "The ledger budget 'eps' was charged for this run: that privacy is spent." in err, err
    assert "It drew no noise, so a retry with --run-key 'fail-1' reuses that charge." in err, err  # issue 35
    assert len(_charges(ledger_path, "eps")) == 1 and not (tmp_path / "r.json").exists()


def test_a_run_refused_before_the_charge_says_nothing_was_charged(capsys, spark, ledger_path, monkeypatch):
    from dp_spark.stages import edges as stage

    def fail(*args, **kwargs):
        raise RuntimeError("before the charge")

    monkeypatch.setattr(stage, "edges", fail, raising=True)  # the release's edge table, built before its charge
    argv = ["distinct-count", "--rows", "2000", "--ledger", ledger_path, "--ledger-budget", "eps"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "Nothing was charged to the ledger budget 'eps'." in err, err
    assert _charges(ledger_path, "eps") == []
