"""The ledger on a real PostgreSQL server, started by the test in a temporary
directory on a free loopback port (Debian's postgresql package; skipped,
with the reason, only when the server is not installed)."""

from __future__ import annotations

import glob
import multiprocessing
import os
import shutil
import socket
import subprocess
import tempfile

import pytest

from dp_spark.accounting import ZCDP, PureDP
from dp_spark.cli import main
from dp_spark.errors import BudgetExceededError, ParameterError
from dp_spark.ledger import open_ledger
from tests.unit.helpers import race_for_budget  # one racing worker for SQLite and PostgreSQL

pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'dp_spark[postgres]')")


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user(argv: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: run it as the 'postgres' user then."""
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", "postgres", "--", *argv]


@pytest.fixture(scope="module")
def postgres_url():
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("PostgreSQL server not installed (apt-get install -y postgresql); ledger not tested on it")
    base = tempfile.mkdtemp(prefix="dp_spark_pg_")
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
    data, port = os.path.join(base, "data"), _free_port()
    subprocess.run(_as_server_user([initdb, "-D", data, "-A", "trust", "-U", "postgres"]),
                   check=True, capture_output=True)
    subprocess.run(_as_server_user([pg_ctl, "-D", data, "-l", os.path.join(base, "log"), "-w", "-t", "60", "-o",
                                    f"-p {port} -k {base} -c listen_addresses=127.0.0.1", "start"]),
                   check=True, capture_output=True)
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(_as_server_user([pg_ctl, "-D", data, "-m", "fast", "-w", "stop"]), capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def test_budget_charges_and_run_keys_on_postgres(postgres_url):
    with open_ledger(postgres_url) as ledger:
        ledger.create_budget("pg-team", ZCDP(0.5))
        ledger.budget("pg-team", run_key="airflow-7").spend(PureDP(0.6), "distinct-count")  # ρ = 0.18
        ledger.budget("pg-team", run_key="airflow-7").spend(PureDP(0.6), "distinct-count")  # retry: reused
        ledger.budget("pg-team").spend(ZCDP(0.3), "count-release")
        with pytest.raises(BudgetExceededError):
            ledger.budget("pg-team").spend(ZCDP(0.1), "continual-distinct")
        state = ledger.state("pg-team")
        assert state.charges == 2 and state.spent.rho == pytest.approx(0.48)
        assert [e["release"] for e in ledger.history("pg-team")] == ["distinct-count", "count-release"]


def test_two_workers_racing_for_the_last_budget_on_postgres(postgres_url):
    with open_ledger(postgres_url) as ledger:
        ledger.create_budget("pg-last", PureDP(1.0))
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=race_for_budget, args=(postgres_url, "pg-last", "race", barrier, results))
             for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert sorted(results.get(timeout=5) for _ in procs) == ["refused", "won"]
    with open_ledger(postgres_url) as ledger:
        assert ledger.state("pg-last").charges == 1


def test_ledger_commands_on_postgres(postgres_url, capsys):
    assert main(["ledger", "create", postgres_url, "pg-cli", "--epsilon", "1", "--delta", "1e-6"]) == 0
    assert main(["ledger", "show", postgres_url, "--budget", "pg-cli"]) == 0
    assert "pg-cli: total ε = 1, δ = 1e-06" in capsys.readouterr().out


def test_unreachable_database_is_one_line(capsys):
    url = f"postgresql://postgres@127.0.0.1:{_free_port()}/postgres"
    assert main(["ledger", "show", url]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dp-spark: error: cannot open the ledger") and "\n" not in err


def test_old_postgres_ledger_is_migrated_and_a_released_key_is_replayed(postgres_url):
    """A PostgreSQL ledger written before dp_runs: opened, it gains the table
    and keeps its charges; an old key is refused; a new key's release is
    recorded and a retry gets it back unchanged (issue 21 §1)."""
    import json

    import psycopg

    from dp_spark.ledger.budget import bind_release, record_release, replayed
    from dp_spark.plans.distinct_count import plan as distinct_plan
    from dp_spark.report import Release

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE DATABASE old_ledger")
    url = postgres_url.rsplit("/", 1)[0] + "/old_ledger"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE dp_budgets (name TEXT PRIMARY KEY, kind TEXT NOT NULL, epsilon DOUBLE PRECISION, "
                     "delta DOUBLE PRECISION, rho DOUBLE PRECISION, created TEXT NOT NULL)")
        conn.execute("CREATE TABLE dp_charges (budget TEXT NOT NULL, seq INTEGER NOT NULL, release TEXT NOT NULL, "
                     "cost TEXT NOT NULL, counted TEXT NOT NULL, rule TEXT NOT NULL, run_key TEXT, key_seq INTEGER, "
                     "parameters TEXT NOT NULL, created TEXT NOT NULL, PRIMARY KEY (budget, seq))")
        conn.execute("INSERT INTO dp_budgets VALUES ('b', 'pure-dp', 2.0, NULL, NULL, '2024-01-01T00:00:00+00:00')")
        cost = json.dumps(PureDP(0.5).to_dict())
        conn.execute("INSERT INTO dp_charges VALUES ('b', 1, 'distinct-count', %s, %s, 'basic', 'old-key', 0, '{}', "
                     "'2024-01-02T00:00:00+00:00')", (cost, cost))
    plan = distinct_plan(epsilon=0.5, max_bound=5, shards=1)
    with open_ledger(url) as ledger:
        assert [e["run_key"] for e in ledger.history("b")] == ["old-key"] and ledger.runs() == []
        old = ledger.budget("b", run_key="old-key", input="t")
        bind_release(old, plan)
        with pytest.raises(ParameterError, match="did not record what it released"):
            plan.spend(old)
        first = ledger.budget("b", run_key="new-key", input="t")
        bind_release(first, plan)
        plan.spend(first)
        release = Release.from_plan(plan, values={"estimate": 12.000000000000002, "method": "greedy"}, errors={},
                                    statement="s", seeded=False, budget_split=[])
        assert record_release(first, release) is release
        retry = ledger.budget("b", run_key="new-key", input="t")
        bind_release(retry, plan)
        plan.spend(retry)
        replay = replayed(retry)
        assert replay.values == release.values and replay.created == release.created
        assert ledger.state("b").charges == 2 and [r.state for r in ledger.runs("b")] == ["released"]


def test_issue_22_decimals_on_postgres(postgres_url):
    """Issue 22 on PostgreSQL, as in SQLite and the in-memory filter
    (tests/unit/test_exact_ledger.py): 0.9 then 0.1 fill a budget of 1 and
    nothing more fits; random decimal parts summing to the budget all fit,
    one ulp more of the last does not; the exact decimals survive the
    DOUBLE PRECISION and TEXT columns."""
    import math
    import random

    from dp_spark.accounting import PrivacyFilter

    with open_ledger(postgres_url) as ledger:
        ledger.create_budget("pg-exact", PureDP(1.0))
        ledger.budget("pg-exact").spend(PureDP(0.9), "first")
        ledger.budget("pg-exact").spend(PureDP(0.1), "second")
        assert ledger.state("pg-exact").left == PureDP(0.0) and ledger.state("pg-exact").spent == PureDP(1.0)
        with pytest.raises(BudgetExceededError):
            ledger.budget("pg-exact").spend(PureDP(5e-324), "third")
        assert ledger.history("pg-exact")[1]["counted"]["exact"] == {"epsilon": "0.1"}

        rng = random.Random(22)
        for trial in range(5):
            units = [rng.randint(1, 999) for _ in range(rng.randint(2, 6))]
            parts = [float(f"{u / 1000:.3f}") for u in units]
            total = float(f"{sum(units) / 1000:.3f}")
            name = f"pg-split-{trial}"
            ledger.create_budget(name, ZCDP(total, 1e-6))
            pf = PrivacyFilter(ZCDP(total, 1e-6))
            for p in parts[:-1]:
                ledger.budget(name).spend(ZCDP(p), "part")
                pf.spend(ZCDP(p))
            over = ZCDP(math.nextafter(parts[-1], math.inf))
            assert not ledger.budget(name).can_spend(over) and not pf.can_spend(over)
            ledger.budget(name).spend(ZCDP(parts[-1], 1e-6), "last")
            assert ledger.state(name).left == ZCDP(0.0, 0.0)


def test_drawn_state_and_a_race_to_draw_on_postgres(postgres_url):
    """Issue 35 on PostgreSQL, as on SQLite (tests/unit/test_ledger_drawn.py):
    charged → drawn → released; a retry of a drawn run is refused with one
    line and charges nothing; two workers that both reused one charged run
    race to draw: exactly one draws (the budget's row is locked)."""
    from dp_spark.ledger.budget import record_release
    from tests.unit.test_ledger_drawn import _released, _plan, _start, race

    with open_ledger(postgres_url) as ledger:
        ledger.create_budget("pg-drawn", PureDP(5.0))
        run, _ = _start(ledger, budget="pg-drawn")
        run.mark_drawn()
        assert [r.state for r in ledger.runs("pg-drawn")] == ["drawn"]
        with pytest.raises(ParameterError, match="drew noise for budget 'pg-drawn' .* a new run key is needed; "
                                                 "the earlier charge stays.$"):
            _start(ledger, budget="pg-drawn")
        record_release(run, _released(_plan(), 3.0))
        assert _start(ledger, budget="pg-drawn")[1].values["estimate"] == 3.0
        assert ledger.state("pg-drawn").charges == 1
        ledger.create_budget("pg-race", PureDP(5.0))
        _start(ledger, budget="pg-race")
    assert race(postgres_url, "pg-race") == ["drew", "refused"]
    with open_ledger(postgres_url) as ledger:
        assert [r.state for r in ledger.runs("pg-race")] == ["drawn"] and ledger.state("pg-race").charges == 1
