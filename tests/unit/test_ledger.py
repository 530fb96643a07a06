"""The persisted budget ledger without Spark: composition, run keys, the
stream key, races between processes, and the ``dp-spark ledger`` commands."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3

import pytest

from dp_spark.accounting import ZCDP, ApproxDP, PureDP
from dp_spark.cli import main
from dp_spark.errors import BudgetExceededError, InputError, ParameterError
from dp_spark.ledger import open_ledger
from tests.unit.helpers import race_for_budget


@pytest.fixture
def ledger(tmp_path):
    with open_ledger(tmp_path / "budgets.db", create=True) as led:
        yield led


def test_pure_budget_refuses_overspend_and_records_nothing(ledger):
    ledger.create_budget("b", PureDP(1.0))
    budget = ledger.budget("b")
    assert budget.can_spend(PureDP(0.6))
    budget.spend(PureDP(0.6), "distinct-count")
    assert not budget.can_spend(PureDP(0.6))
    with pytest.raises(BudgetExceededError, match="only ε = 0.4"):
        budget.spend(PureDP(0.6), "distinct-count")
    state = ledger.state("b")
    assert state.spent == PureDP(0.6) and state.charges == 1
    assert budget.remaining.epsilon == pytest.approx(0.4)


def test_ledger_compares_exactly_as_the_filter_does(ledger):
    """The project's rule (dp_spark.accounting.filter): amounts are the
    decimals written, summed exactly, with no slack. 3 × 0.1 is exactly 0.3,
    so three charges fill a budget of 0.3 and nothing more fits; a budget
    written as the float sum 0.1 + 0.1 + 0.1 (0.30000000000000004) takes
    three and then 4e-17, not 5e-17."""
    ledger.create_budget("b", PureDP(0.3))
    for _ in range(3):
        ledger.budget("b").spend(PureDP(0.1), "x")
    with pytest.raises(BudgetExceededError):
        ledger.budget("b").spend(PureDP(5e-324), "x")
    assert ledger.state("b").charges == 3 and ledger.state("b").left == PureDP(0.0)
    ledger.create_budget("c", PureDP(0.1 + 0.1 + 0.1))
    for _ in range(3):
        ledger.budget("c").spend(PureDP(0.1), "x")
    assert ledger.state("c").charges == 3
    with pytest.raises(BudgetExceededError):
        ledger.budget("c").spend(PureDP(5e-17), "one more")
    ledger.budget("c").spend(PureDP(4e-17), "the rest")
    assert ledger.state("c").left == PureDP(0.0)


def test_zcdp_budget_counts_pure_epsilon_as_half_epsilon_squared(ledger):
    ledger.create_budget("z", ZCDP(0.5, 1e-6))
    counted = ledger.budget("z").spend(PureDP(0.6), "distinct-count")
    assert isinstance(counted, ZCDP) and counted.rho == pytest.approx(0.18) and counted.delta == 0.0
    ledger.budget("z").spend(ZCDP(0.3, 1e-7), "count-release")
    history = ledger.history("z")
    assert "ε²/2" in history[0]["rule"] and "counted as" in history[0]["rule"]
    assert ledger.state("z").spent.rho == pytest.approx(0.48)
    with pytest.raises(BudgetExceededError):
        ledger.budget("z").spend(ZCDP(0.05), "continual-distinct")


def test_approx_charge_refused_by_zcdp_budget_and_zcdp_by_approx(ledger):
    ledger.create_budget("z", ZCDP(1.0))
    ledger.create_budget("a", ApproxDP(1.0, 1e-6))
    with pytest.raises(ParameterError, match="cannot be counted"):
        ledger.budget("z").spend(ApproxDP(0.1, 1e-7), "set-union")
    with pytest.raises(ParameterError, match="cannot be counted"):
        ledger.budget("a").spend(ZCDP(0.1), "count-release")
    ledger.budget("a").spend(PureDP(0.5), "top-k")
    assert ledger.state("a").spent == ApproxDP(0.5, 0.0)


def test_run_key_retry_reuses_its_charge(ledger):
    ledger.create_budget("b", PureDP(1.0))
    ledger.budget("b", run_key="dag/2024-01-01").spend(PureDP(0.7), "distinct-count")
    retry = ledger.budget("b", run_key="dag/2024-01-01")
    assert retry.can_spend(PureDP(0.7))
    retry.spend(PureDP(0.7), "distinct-count")  # the crashed run's charge, not a new one
    assert retry.reused and ledger.state("b").charges == 1
    with pytest.raises(ParameterError, match="another privacy cost.*one release with one parameter set"):
        ledger.budget("b", run_key="dag/2024-01-01").spend(PureDP(0.2), "distinct-count")
    with pytest.raises(BudgetExceededError):
        ledger.budget("b", run_key="dag/2024-01-02").spend(PureDP(0.7), "distinct-count")


def test_two_spends_of_one_run_are_two_charges(ledger):
    ledger.create_budget("b", PureDP(1.0))
    run = ledger.budget("b", run_key="r1")
    run.spend(PureDP(0.2), "top-k")
    run.spend(PureDP(0.2), "top-k")
    assert ledger.state("b").charges == 2
    again = ledger.budget("b", run_key="r1")  # a retry of the whole run
    again.spend(PureDP(0.2), "top-k")
    again.spend(PureDP(0.2), "top-k")
    assert ledger.state("b").charges == 2


def test_once_key_refuses_a_second_charge(ledger):
    ledger.create_budget("z", ZCDP(1.0))
    key = "stream:/ckpt|/sink"
    ledger.budget("z", run_key=key, once=True).spend(ZCDP(0.1), "continual-distinct (stream)")
    again = ledger.budget("z", run_key=key, once=True)
    assert again.can_spend(ZCDP(0.1))  # a resume spends nothing and is allowed to start
    with pytest.raises(BudgetExceededError, match="published again"):
        again.spend(ZCDP(0.1), "continual-distinct (stream)")
    assert ledger.state("z").charges == 1


def test_budget_names_and_unknown_budgets(ledger):
    ledger.create_budget("b", PureDP(1.0))
    with pytest.raises(ParameterError, match="already exists"):
        ledger.create_budget("b", PureDP(2.0))
    with pytest.raises(ParameterError, match="no budget 'nope'.*budgets: b"):
        ledger.budget("nope")
    with pytest.raises(ParameterError, match="budget name"):
        ledger.create_budget("bad name;", PureDP(1.0))


def test_missing_ledger_file_is_refused_not_created(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        open_ledger(tmp_path / "nope.db")
    assert not (tmp_path / "nope.db").exists()


def test_two_processes_racing_for_the_last_budget_exactly_one_wins(tmp_path):
    path = tmp_path / "race.db"
    with open_ledger(path, create=True) as led:
        led.create_budget("last", PureDP(1.0))
    ctx = multiprocessing.get_context("spawn")
    for _round in range(3):
        barrier, results = ctx.Barrier(2), ctx.Queue()
        procs = [ctx.Process(target=race_for_budget, args=(path, "last", f"worker-{i}", barrier, results))
                 for i in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        outcomes = sorted(results.get(timeout=5) for _ in procs)
        assert outcomes == (["refused", "won"] if _round == 0 else ["refused", "refused"])
    with open_ledger(path) as led:
        assert led.state("last").charges == 1


def test_ledger_commands(tmp_path, capsys):
    path = str(tmp_path / "l.db")
    assert main(["ledger", "create", path, "team", "--epsilon", "2"]) == 0
    assert main(["ledger", "create", path, "z", "--rho", "0.5", "--delta", "1e-6"]) == 0
    assert main(["ledger", "create", path, "team", "--epsilon", "1"]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["ledger", "create", path, "x", "--epsilon", "1", "--rho", "1"]) == 2
    assert main(["ledger", "create", path, "x", "--epsilon", "-1"]) == 2
    capsys.readouterr()
    with open_ledger(path) as led:
        led.budget("team", run_key="airflow-1").spend(PureDP(0.5), "distinct-count")
    assert main(["ledger", "show", path]) == 0
    out = capsys.readouterr().out
    assert "team: total ε = 2" in out and "spent ε = 0.5" in out and "left ε = 1.5" in out
    assert "z: total ρ = 0.5" in out
    assert main(["ledger", "history", path, "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert entries[0]["release"] == "distinct-count" and entries[0]["run_key"] == "airflow-1"
    assert entries[0]["state"] == "charged" and entries[0]["outputs"] == {}
    assert main(["ledger", "history", path]) == 0
    assert "run key airflow-1 (charged)" in capsys.readouterr().out
    assert main(["ledger", "show", str(tmp_path / "none.db")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_ledger_file_is_plain_sqlite(tmp_path):
    path = tmp_path / "l.db"
    with open_ledger(path, create=True) as led:
        led.create_budget("b", ZCDP(1.0))
        led.budget("b").spend(ZCDP(0.25), "count-release")
    rows = sqlite3.connect(path).execute("SELECT release, counted FROM dp_charges").fetchall()
    assert rows[0][0] == "count-release" and json.loads(rows[0][1])["rho"] == 0.25


# -- a run key belongs to one release, one parameter set, one input (issue 21 §1) -------------


def _plan(**kw):
    from dp_spark.plans.distinct_count import plan

    return plan(**{"epsilon": 1.0, "max_bound": 5, "shards": 1, **kw})


def _topk_plan():
    from dp_spark.plans.top_k import plan

    return plan(epsilon=1.0, k=3, delta=1e-6)


def _released(plan, estimate: float):
    """A Release of ``plan`` as a release function builds it (no Spark)."""
    from dp_spark.report import Release

    values = {"estimate": estimate, "lower_bound": 0.1 + 0.2, "bound": 3, "method": "greedy",
              "confidence": 0.95, "noise_scale": 1 / 3, "noise_std": 2 ** 0.5, "items": ["é", "東京"]}
    return Release.from_plan(plan, values=values, errors={"estimate": "σ ≈ 1.41"}, statement="words",
                             seeded=False, budget_split=[{"step": "all", **plan.guarantee.to_dict()}])


def _start(ledger, plan, key="dag-1", input="events-2024-01-01", budget="b"):
    """What a release does before reading data: bind, spend, maybe replay."""
    from dp_spark.ledger.budget import bind_release, replayed

    run = ledger.budget(budget, run_key=key, input=input)
    bind_release(run, plan)
    plan.spend(run)
    return run, replayed(run)


def test_run_key_refuses_another_release_parameters_or_input(ledger):
    ledger.create_budget("b", ApproxDP(10.0, 1e-5))
    first, replay = _start(ledger, _plan())
    assert replay is None
    for plan, key_input, what in ((_topk_plan(), "events-2024-01-01", "another release"),
                                  (_plan(max_bound=6), "events-2024-01-01", "other parameters"),
                                  (_plan(), "events-2024-01-02", "another input")):
        budget = ledger.budget("b", run_key="dag-1", input=key_input)
        from dp_spark.ledger.budget import bind_release

        bind_release(budget, plan)
        with pytest.raises(ParameterError, match=f"run key 'dag-1' of budget 'b': distinct-count, charged .*"
                                                 f"this run has {what}") as refused:
            plan.check(budget)  # can_spend agrees with spend: refused before anything is read
        assert "\n" not in str(refused.value)
        with pytest.raises(ParameterError, match=what):
            plan.spend(budget)
    assert ledger.state("b").charges == 1


def test_new_user_trial_three_releases_under_one_key_is_refused_after_the_first(ledger):
    """The issue's trial: distinct-count, then top-k, then distinct-count on
    other data, all under one key of an ε = 1 budget: only the first runs."""
    from dp_spark.ledger.budget import record_release

    ledger.create_budget("b", ApproxDP(1.0, 1e-5))
    run, _ = _start(ledger, _plan())
    record_release(run, _released(_plan(), 17.0))
    with pytest.raises(ParameterError, match="released .*another release"):
        _start(ledger, _topk_plan())
    with pytest.raises(ParameterError, match="released .*another input"):
        _start(ledger, _plan(), input="other-table")
    assert ledger.state("b").charges == 1


def test_released_run_is_replayed_bit_for_bit_and_charged_run_is_reused(ledger):
    from dp_spark.ledger.budget import record_release

    ledger.create_budget("b", PureDP(1.0))
    plan = _plan()
    run, replay = _start(ledger, plan)
    assert replay is None and not run.reused
    assert [r.state for r in ledger.runs("b")] == ["charged"]
    run, replay = _start(ledger, plan)  # crashed before returning: nothing left the process
    assert replay is None and run.reused and ledger.state("b").charges == 1
    original = _released(plan, 101.30000000000001)
    assert record_release(run, original) is original
    [recorded] = ledger.runs("b")
    assert recorded.state == "released" and recorded.record == json.loads(original.to_json())
    for _ in range(3):
        again, replay = _start(ledger, plan)
        assert replay is not None and again.reused
        doc = replay.to_dict()
        assert doc.pop("replay")["run_key"] == "dag-1"
        assert doc == original.to_dict()
        assert replay.values["estimate"].hex() == original.values["estimate"].hex()
        assert replay.guarantee == original.guarantee and replay.created == original.created
        assert "Replayed unchanged from the ledger" in replay.summary()
    assert ledger.state("b").charges == 1


def test_two_processes_under_one_key_release_one_result(ledger):
    """Two concurrent runs of one key both reuse the 'charged' run and draw
    noise; the second to record gets the first's release, never its own."""
    from dp_spark.ledger.budget import record_release

    ledger.create_budget("b", PureDP(1.0))
    one, _ = _start(ledger, _plan())
    two, _ = _start(ledger, _plan())
    first = record_release(one, _released(_plan(), 5.0))
    second = record_release(two, _released(_plan(), 9.0))
    assert first.values["estimate"] == 5.0 and second.values["estimate"] == 5.0 and second.replay is not None


def test_steps_of_one_keyed_run_replay_in_order(ledger):
    from dp_spark.ledger.budget import bind_release, record_release, replayed

    ledger.create_budget("b", ApproxDP(2.0, 1e-5))
    run = ledger.budget("b", run_key="r", input="t")
    for plan, value in ((_plan(epsilon=0.25), 1.0), (_topk_plan(), 2.0)):  # one budget object, two releases
        bind_release(run, plan)
        plan.spend(run)
        record_release(run, _released(plan, value))
    retry = ledger.budget("b", run_key="r", input="t")
    got = []
    for plan in (_plan(epsilon=0.25), _topk_plan()):
        bind_release(retry, plan)
        plan.spend(retry)
        got.append(replayed(retry).values["estimate"])
    assert got == [1.0, 2.0] and ledger.state("b").charges == 2
    assert [r.release for r in ledger.runs("b")] == ["distinct-count", "top-k"]


def test_old_format_ledger_keeps_its_history_and_refuses_its_old_keys(tmp_path):
    """A ledger written before dp_runs existed: opened, it gains the table;
    its charges stay; a retry under one of its keys (nothing recorded of
    what was released) is refused; new keys work."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE dp_budgets (name TEXT PRIMARY KEY, kind TEXT NOT NULL, epsilon DOUBLE PRECISION, "
                 "delta DOUBLE PRECISION, rho DOUBLE PRECISION, created TEXT NOT NULL)")
    conn.execute("CREATE TABLE dp_charges (budget TEXT NOT NULL, seq INTEGER NOT NULL, release TEXT NOT NULL, "
                 "cost TEXT NOT NULL, counted TEXT NOT NULL, rule TEXT NOT NULL, run_key TEXT, key_seq INTEGER, "
                 "parameters TEXT NOT NULL, created TEXT NOT NULL, PRIMARY KEY (budget, seq))")
    conn.execute("INSERT INTO dp_budgets VALUES ('b', 'pure-dp', 1.0, NULL, NULL, '2024-01-01T00:00:00+00:00')")
    conn.execute("INSERT INTO dp_charges VALUES ('b', 1, 'distinct-count', ?, ?, 'basic', 'old-key', 0, '{}', "
                 "'2024-01-02T00:00:00+00:00')", (json.dumps(PureDP(0.5).to_dict()),) * 2)
    conn.commit()
    conn.close()
    with open_ledger(path) as led:
        [entry] = led.history("b")
        assert entry["run_key"] == "old-key" and entry["cost"] == PureDP(0.5).to_dict()
        assert led.runs() == []
        with pytest.raises(ParameterError, match="'old-key' was charged ε = 0.5 .* for distinct-count on "
                                                 "2024-01-02.*did not record what it released"):
            _start(led, _plan(epsilon=0.5), key="old-key")
        with pytest.raises(ParameterError, match="did not record"):
            _plan(epsilon=0.5).check(led.budget("b", run_key="old-key"))
        _start(led, _plan(epsilon=0.5), key="new-key")
        assert led.state("b").charges == 2 and [r.run_key for r in led.runs()] == ["new-key"]
    tables = {r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"dp_budgets", "dp_charges", "dp_runs"} <= tables


def test_once_key_has_no_run_record_and_refuses_a_second_charge(ledger):
    ledger.create_budget("z", ZCDP(1.0))
    key = "stream:/ckpt|/sink"
    ledger.budget("z", run_key=key, once=True).spend(ZCDP(0.1), "continual-distinct (stream)")
    assert ledger.runs() == []
    assert ledger.budget("z", run_key=key, once=True).can_spend(ZCDP(0.1))
    with pytest.raises(BudgetExceededError, match="published again"):
        ledger.budget("z", run_key=key, once=True).spend(ZCDP(0.1), "continual-distinct (stream)")


def test_cli_run_identity_is_release_parameters_and_input_not_outputs(tmp_path, monkeypatch):
    """The CLI's identity of a keyed run: output paths, --quiet, --master and
    --overwrite are not part of it; the input is the path made absolute (or
    the built-in data with its --rows), with the options that change what
    is read."""
    from dp_spark.cli import _run_identity

    monkeypatch.chdir(tmp_path)
    base = {"input": "events.parquet", "format": "auto", "epsilon": 1.0, "max_bound": 5, "seed": None,
            "output": "a.json", "quiet": False, "master": None, "overwrite": False, "ledger": "l.db",
            "ledger_budget": "b", "run_key": "k", "rows": 1000, "tokenize": "none"}
    same = {**base, "input": str(tmp_path / "events.parquet"), "output": "b.json", "quiet": True,
            "master": "local[1]", "overwrite": True, "report_html": "r.html"}
    assert _run_identity("distinct-count", base) == _run_identity("distinct-count", same)
    assert _run_identity("distinct-count", base)["input"]["input"] == str(tmp_path / "events.parquet")
    for changed in ({"epsilon": 0.5}, {"seed": 3}, {"input": "other.parquet"}, {"tokenize": "words"},
                    {"delimiter": ";"}):
        assert _run_identity("distinct-count", {**base, **changed}) != _run_identity("distinct-count", base), changed
    assert _run_identity("top-k", base) != _run_identity("distinct-count", base)
    builtin = {**base, "input": None}
    assert _run_identity("distinct-count", builtin)["input"] == {"input": "built-in synthetic data", "rows": 1000,
                                                                 "tokenize": "none"}
    assert _run_identity("distinct-count", {**builtin, "rows": 2000}) != _run_identity("distinct-count", builtin)


def test_a_changed_group_key_file_is_another_cli_run(tmp_path):
    """Issue 24: a keyed CLI run's identity holds the --groups file's
    contents (sha256 of its bytes, or of a Spark-written directory's
    files), not only its path: the same path with other keys is a
    different run; the same keys at the same path are the same run."""
    from dp_spark.cli import _run_identity

    keys = tmp_path / "keys.csv"
    keys.write_text("country\nde\nfr\n")
    base = {"input": "events.parquet", "epsilon": 1.0, "group_by": "country", "groups": str(keys), "max_groups": 1}
    first = _run_identity("distinct-count", base)
    assert first == _run_identity("distinct-count", dict(base))
    assert first["parameters"]["groups"]["contents"].startswith("sha256:")
    keys.write_text("country\nde\nit\n")
    assert _run_identity("distinct-count", base) != first
    folder = tmp_path / "keys.parquet"
    folder.mkdir()
    (folder / "part-0.csv").write_text("de\n")
    in_dir = _run_identity("distinct-count", {**base, "groups": str(folder)})
    (folder / "part-0.csv").write_text("fr\n")
    assert _run_identity("distinct-count", {**base, "groups": str(folder)}) != in_dir
    assert _run_identity("distinct-count", {**base, "max_groups": 2}) != _run_identity("distinct-count", base)


def test_a_keyed_api_run_with_other_public_keys_is_refused(ledger):
    """The API's identity of a grouped keyed run holds the resolved keys'
    digest (the template binds it after reading a file's or a frame's keys)
    and the group parameters: other keys under the same run key are
    refused before anything is charged."""
    import dataclasses

    from dp_spark.ledger.budget import bind_release, groups_identity
    from dp_spark.plans.distinct_count import plan

    def grouped(keys, m=1):
        built = plan(epsilon=1.0, group_by="country", groups="keys.csv", max_groups=m)
        return dataclasses.replace(built, params=dataclasses.replace(built.params, groups=tuple(keys)))

    ledger.create_budget("b", PureDP(10.0))
    first = grouped(["de", "fr"])
    assert groups_identity(first)["keys"] == groups_identity(grouped(["de", "fr"]))["keys"]
    run, _ = _start(ledger, first)
    for other in (grouped(["de", "it"]), grouped(["fr", "de"]), grouped(["de", "fr"], m=2)):
        budget = ledger.budget("b", run_key="dag-1", input="events-2024-01-01")
        bind_release(budget, other)
        with pytest.raises(ParameterError, match="run key 'dag-1'"):
            other.check(budget)
    again = ledger.budget("b", run_key="dag-1", input="events-2024-01-01")
    bind_release(again, grouped(["de", "fr"]))
    grouped(["de", "fr"]).check(again)  # the same keys: the same run (its charge is reused)
    assert ledger.state("b").charges == 1


def test_a_refused_retry_names_the_parameters_that_differ(ledger):
    """Issue 36's review: a run keyed before an upgrade that changed a
    default (distinct-count's max_bound 100 → 65,536) was refused with
    "other parameters" only; the refusal names each public parameter that
    differs and both values, so the retry can give the recorded one."""
    ledger.create_budget("b", ApproxDP(10.0, 1e-5))
    _start(ledger, _plan(max_bound=100))
    from dp_spark.ledger.budget import bind_release

    budget = ledger.budget("b", run_key="dag-1", input="events-2024-01-01")
    upgraded = _plan(max_bound=None)  # the default now
    bind_release(budget, upgraded)
    with pytest.raises(ParameterError, match=r"other parameters \(max_bound: 100 → 65536\)"):
        upgraded.check(budget)
