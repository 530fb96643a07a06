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
    """The project's rule (dp_spark.accounting.filter): amounts are the exact
    binary values of the floats, with no slack. 3 × 0.1 exceeds 0.3 exactly,
    so the third charge is refused; a budget stated as the float sum
    0.1 + 0.1 + 0.1 takes all three."""
    ledger.create_budget("b", PureDP(0.3))
    for _ in range(2):
        ledger.budget("b").spend(PureDP(0.1), "x")
    with pytest.raises(BudgetExceededError):
        ledger.budget("b").spend(PureDP(0.1), "x")
    assert ledger.state("b").charges == 2
    ledger.create_budget("c", PureDP(0.1 + 0.1 + 0.1))
    for _ in range(3):
        ledger.budget("c").spend(PureDP(0.1), "x")
    assert ledger.state("c").charges == 3
    with pytest.raises(BudgetExceededError):
        ledger.budget("c").spend(PureDP(5e-17), "one ulp more")


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
    with pytest.raises(ParameterError, match="same privacy parameters"):
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
    assert main(["ledger", "show", str(tmp_path / "none.db")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_ledger_file_is_plain_sqlite(tmp_path):
    path = tmp_path / "l.db"
    with open_ledger(path, create=True) as led:
        led.create_budget("b", ZCDP(1.0))
        led.budget("b").spend(ZCDP(0.25), "count-release")
    rows = sqlite3.connect(path).execute("SELECT release, counted FROM dp_charges").fetchall()
    assert rows[0][0] == "count-release" and json.loads(rows[0][1])["rho"] == 0.25
