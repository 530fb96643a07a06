"""A keyed run's 'drawn' state (issue 35 §1) without Spark: charged → drawn
→ released; a retry of a run that drew and did not record is refused (a new
run key is needed, the charge stays); a run that drew nothing reuses its
charge; ledgers of the previous version; two processes racing to draw under
one charge; the generator that marks the run on its first use; the CLI's
failure texts and ``ledger history``; the run identity's read digests (§3)."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3

import pytest

from dp_spark.accounting import ApproxDP, PureDP
from dp_spark.errors import ParameterError
from dp_spark.ledger import open_ledger
from dp_spark.ledger.budget import bind_release, draw_mark, record_release, replayed
from dp_spark.ledger.ledger import RecordedMeanwhile
from dp_spark.noise import make_rng
from dp_spark.noise.rng import first_use_generator, spawn_rngs

DRAWN_REFUSAL = ("run key 'dag-1' drew noise for budget 'b' (distinct-count, charged {when}) and was "
                 "interrupted before it recorded its release: a new run key is needed; the earlier charge stays.")


@pytest.fixture
def ledger(tmp_path):
    with open_ledger(tmp_path / "budgets.db", create=True) as led:
        led.create_budget("b", PureDP(10.0))
        yield led


def _plan(**kw):
    from dp_spark.plans.distinct_count import plan

    return plan(**{"epsilon": 1.0, "max_bound": 5, "shards": 1, **kw})


def _released(plan, estimate: float):
    from dp_spark.report import Release

    return Release.from_plan(plan, values={"estimate": estimate, "method": "greedy"}, errors={}, statement="s",
                             seeded=False, budget_split=[])


def _start(ledger, plan=None, key="dag-1", budget="b"):
    """What the release template does up to the charge: bind, spend, maybe replay."""
    plan = plan or _plan()
    run = ledger.budget(budget, run_key=key, input="events-2024-01-01")
    bind_release(run, plan)
    plan.spend(run)
    return run, replayed(run)


def _snapshot(raw) -> str:
    """Everything a draw from ``raw`` (or a child spawned from it) changes."""
    state = raw.bit_generator.state
    return json.dumps([state, raw.bit_generator.seed_seq.n_children_spawned], default=lambda a: a.tolist())


def _states(ledger):
    return [r.state for r in ledger.runs("b")]


def test_a_keyed_run_goes_charged_then_drawn_then_released(ledger):
    run, _ = _start(ledger)
    assert _states(ledger) == ["charged"] and run.run_state == "charged" and not run.drawn
    fingerprint = ledger.runs("b")[0].identity
    run.mark_drawn()
    assert _states(ledger) == ["drawn"] and run.run_state == "drawn" and run.drawn
    [drawn] = ledger.runs("b")
    assert drawn.identity == fingerprint
    assert "drew noise, not released" in drawn.describe()
    release = _released(_plan(), 7.0)
    assert record_release(run, release) is release
    [recorded] = ledger.runs("b")
    assert recorded.state == "released" and recorded.identity == drawn.identity and run.run_state == "released"
    again, replay = _start(ledger)  # a released run is replayed as before
    assert replay.values["estimate"] == 7.0 and again.reused
    assert ledger.state("b").charges == 1


def test_a_retry_of_a_run_that_drew_is_refused_and_the_charge_stays(ledger):
    run, _ = _start(ledger)
    run.mark_drawn()  # the run drew, then was interrupted before its record
    when = ledger.runs("b")[0].created
    expected = DRAWN_REFUSAL.format(when=when)
    retry = ledger.budget("b", run_key="dag-1", input="events-2024-01-01")
    bind_release(retry, _plan())
    with pytest.raises(ParameterError) as refused:
        _plan().check(retry)  # the CLI's check before Spark starts (can_spend) refuses it too
    assert str(refused.value) == expected
    with pytest.raises(ParameterError) as refused:
        _plan().spend(retry)
    assert str(refused.value) == expected and "\n" not in expected
    assert retry._last_seq is None and retry.run_state is None  # nothing charged by the retry
    assert ledger.state("b").charges == 1 and _states(ledger) == ["drawn"]
    _start(ledger, key="dag-2")  # a new run key is a new charge
    assert ledger.state("b").charges == 2


def test_a_retry_of_a_run_that_drew_nothing_reuses_its_charge(ledger):
    _start(ledger)  # failed in its Spark stage: never marked
    retry, replay = _start(ledger)
    assert replay is None and retry.reused and retry.run_state == "charged"
    retry.mark_drawn()
    record_release(retry, _released(_plan(), 3.0))
    assert ledger.state("b").charges == 1 and _states(ledger) == ["released"]


def test_a_run_that_drew_nothing_records_from_charged(ledger):
    run, _ = _start(ledger)
    record_release(run, _released(_plan(), 3.0))
    assert _states(ledger) == ["released"]


def test_a_second_run_may_not_draw_under_a_drawn_charge_and_replays_a_recorded_one(ledger):
    """Two runs reused one 'charged' run: the first to mark draws; the other
    is refused at its mark (before drawing) while the first has not
    recorded, and gets the first's release once it has."""
    one, _ = _start(ledger)
    two, _ = _start(ledger)
    three, _ = _start(ledger)
    one.mark_drawn()
    with pytest.raises(ParameterError, match="another run under the key drew noise and has not recorded") as info:
        two.mark_drawn()
    assert not isinstance(info.value, RecordedMeanwhile) and not two.drawn and "\n" not in str(info.value)
    record_release(one, _released(_plan(), 5.0))
    with pytest.raises(RecordedMeanwhile) as meanwhile:
        three.mark_drawn()
    assert meanwhile.value.run.record["result"]["estimate"] == 5.0
    assert ledger.state("b").charges == 1 and _states(ledger) == ["released"]


def test_the_generator_marks_the_run_before_its_first_draw(ledger):
    run, _ = _start(ledger)
    raw = make_rng()
    pristine = _snapshot(raw)
    seen = []

    def mark():
        seen.append(_snapshot(raw))
        run.mark_drawn()

    rng = first_use_generator(raw, mark)
    assert _states(ledger) == ["charged"]  # made, not used: nothing marked
    rng.integers(0, 10)
    rng.random(3)
    assert seen == [pristine] and _states(ledger) == ["drawn"]


@pytest.mark.parametrize("use", [
    lambda g: g.random(), lambda g: g.integers(0, 2 ** 62), lambda g: g.normal(), lambda g: g.spawn(1),
    lambda g: spawn_rngs(g, 2), lambda g: g.bit_generator, lambda g: __import__("pickle").dumps(g),
    lambda g: __import__("scipy.stats", fromlist=["norm"]).norm.rvs(random_state=g),
    lambda g: __import__("dp_spark.noise", fromlist=["x"]).discrete_laplace(2, g),
    lambda g: __import__("dp_spark.mechanisms.set_union", fromlist=["x"]).derive_randomness(g),
    lambda g: __import__("dp_spark.mechanisms.count_release", fromlist=["x"]).noise_key(g),
])
def test_every_use_of_the_generator_marks_first(use):
    raw = make_rng()
    pristine = _snapshot(raw)
    seen = []
    rng = first_use_generator(raw, lambda: seen.append(_snapshot(raw)))
    use(rng)
    use(rng)
    assert seen == [pristine]


def test_a_failed_mark_draws_nothing_and_is_tried_again():
    raw = make_rng()
    pristine = _snapshot(raw)
    calls = []

    def mark():
        calls.append(1)
        if len(calls) == 1:
            raise ParameterError("the ledger is locked")

    rng = first_use_generator(raw, mark)
    with pytest.raises(ParameterError):
        rng.random()
    assert _snapshot(raw) == pristine
    rng.random()
    assert len(calls) == 2 and _snapshot(raw) != pristine


def test_only_a_charged_keyed_ledger_budget_gets_a_mark(ledger):
    from dp_spark.accounting import PrivacyFilter

    assert draw_mark(None) is None and draw_mark(PrivacyFilter(PureDP(1.0))) is None
    assert draw_mark(ledger.budget("b")) is None  # unkeyed: nothing to retry
    assert draw_mark(ledger.budget("b", run_key="s", once=True)) is None  # a stream's once key: its own rules
    keyed = ledger.budget("b", run_key="k", input="t")
    assert draw_mark(keyed) is None  # not charged yet
    rng = make_rng()
    assert first_use_generator(rng, None) is rng
    bind_release(keyed, _plan())
    _plan().spend(keyed)
    mark = draw_mark(keyed)
    _plan().spend(keyed)  # a second charge of the same object before the first draw
    mark()
    assert [r.state for r in ledger.runs("b") if r.run_key == "k"] == ["drawn", "charged"]  # its own charge


# -- ledgers of the previous version -------------------------------------------------------


def _previous_version_ledger(path, state="charged"):
    """A ledger as dp_spark 2f98c96 wrote it (the same three tables, no
    dp_meta), with a keyed run in ``state``, made by that version's code
    path: today's ledger without ever marking 'drawn', its dp_meta table
    dropped."""
    with open_ledger(path, create=True) as led:
        led.create_budget("b", PureDP(10.0))
        run, _ = _start(led)
        if state == "released":
            record_release(run, _released(_plan(), 4.0))
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE dp_meta")
    schema = {r[0]: r[1] for r in sqlite3.connect(path).execute("SELECT name, sql FROM sqlite_master")}
    assert set(schema) == {"dp_budgets", "dp_charges", "dp_runs"} | {n for n in schema if n.startswith("sqlite_")}
    assert "drawn" not in json.dumps(schema)  # no new column: the same schema
    return path


def test_a_previous_version_ledgers_charged_runs_are_migrated_to_drawn_and_refused(tmp_path):
    """Such a run may have drawn and shown it before it was interrupted (the
    issue's leak), so the ledger's first opening for writing marks every
    'charged' run 'drawn', once: a retry under its key is refused, the
    charge stays. A ledger made by this version keeps its own 'charged'
    runs reusable (the migration is recorded when it is made)."""
    path = _previous_version_ledger(tmp_path / "old.db")
    with open_ledger(path) as led:
        assert _states(led) == ["drawn"]
        with pytest.raises(ParameterError, match="a new run key is needed; the earlier charge stays"):
            _start(led)
        assert led.state("b").charges == 1
    with open_ledger(path) as led:  # migrated once: still drawn, nothing else changed
        assert _states(led) == ["drawn"] and led.state("b").charges == 1
    fresh = tmp_path / "new.db"
    with open_ledger(fresh, create=True) as led:
        led.create_budget("b", PureDP(10.0))
        _start(led)
    with open_ledger(fresh) as led:  # reopened: this version's 'charged' run is not migrated
        assert _states(led) == ["charged"]
        retry, replay = _start(led)
        assert retry.reused and replay is None
    path = _previous_version_ledger(tmp_path / "old-released.db", "released")
    with open_ledger(path) as led:
        assert _start(led)[1].values["estimate"] == 4.0


def test_a_version_without_the_drawn_state_would_refuse_a_drawn_run(ledger, tmp_path):
    """The previous version compares the identity column with the retry's
    fingerprint and reuses any run that is not 'released': while a run is
    'drawn' its column is not the fingerprint, so that version refuses the
    retry as another identity instead of drawing again; once released the
    column is the fingerprint again (that version replays it)."""
    run, _ = _start(ledger)
    fingerprint = ledger.runs("b")[0].identity
    run.mark_drawn()
    column = lambda: sqlite3.connect(tmp_path / "budgets.db").execute("SELECT identity FROM dp_runs").fetchone()[0]
    assert column() == "drawn:" + fingerprint
    record_release(run, _released(_plan(), 1.0))
    assert column() == fingerprint


# -- two processes racing to draw under one charge -------------------------------------------


def race_to_draw(where, budget, barrier, results):
    """One racing worker (a spawned process): reuse the charged run of
    'dag-1' in ``budget``, wait for the other worker, then mark it 'drawn'; puts "drew",
    "refused" or "error <type>" on ``results``. Each read of the run is
    slowed so that two unlocked check-then-update steps would overlap."""
    import time

    from dp_spark.ledger.ledger import Ledger

    original = Ledger._run

    def slow(self, cur, *args):
        run = original(self, cur, *args)
        time.sleep(0.3)
        return run

    Ledger._run = slow
    led = open_ledger(where)
    run = led.budget(budget, run_key="dag-1", input="events-2024-01-01")
    bind_release(run, _plan())
    _plan().spend(run)
    barrier.wait()
    try:
        run.mark_drawn()
        results.put("drew")
    except ParameterError:
        results.put("refused")
    except Exception as exc:  # noqa: BLE001 - reported, fails the test
        results.put(f"error {type(exc).__name__}")


def race(where, budget="b") -> list[str]:
    """Two spawned workers racing to draw under the charged run 'dag-1' of ``budget``."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=race_to_draw, args=(where, budget, barrier, results)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    return sorted(results.get(timeout=5) for _ in procs)


def test_two_processes_racing_to_draw_under_one_charge_one_draws(tmp_path):
    path = tmp_path / "race.db"
    with open_ledger(path, create=True) as led:
        led.create_budget("b", PureDP(10.0))
        _start(led)
    assert race(path) == ["drew", "refused"]
    with open_ledger(path) as led:
        assert _states(led) == ["drawn"] and led.state("b").charges == 1


# -- what the CLI says -----------------------------------------------------------------------


def test_ledger_history_shows_a_drawn_run(ledger, tmp_path, capsys):
    from dp_spark.cli import main

    run, _ = _start(ledger)
    run.mark_drawn()
    assert main(["ledger", "history", str(tmp_path / "budgets.db")]) == 0
    assert "run key dag-1 (drawn, not released: a retry needs a new run key)" in capsys.readouterr().out
    assert main(["ledger", "history", str(tmp_path / "budgets.db"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["state"] == "drawn"


def test_the_cli_failure_text_says_what_a_retry_gets(ledger, monkeypatch):
    """Before: every failure after a keyed charge said a retry "reuses that
    charge (nothing was released)", also after the run drew (refused now)
    and after its release was recorded (replayed)."""
    from dp_spark import cli

    run, _ = _start(ledger)
    monkeypatch.setitem(cli._RUN, "budget", run)
    charged = cli._spent_clause()
    assert "It drew no noise, so a retry with --run-key 'dag-1' reuses that charge." in charged
    run.mark_drawn()
    drawn = cli._spent_clause()
    assert "reuses" not in drawn and "nothing was released" not in drawn
    assert "drew noise before it stopped, so --run-key 'dag-1' is refused from now on: a retry needs a new " \
           "run key; the earlier charge stays." in drawn
    record_release(run, _released(_plan(), 1.0))
    assert "Its release was recorded, so a retry with --run-key 'dag-1' prints and writes that release" \
           in cli._spent_clause()
    monkeypatch.setitem(cli._RUN, "budget", ledger.budget("b"))
    assert cli._spent_clause() == " Nothing was charged to the ledger budget 'b'."


# -- the run identity holds the keys and the domain the release read (§3) --------------------


def _grouped_plan(keys, groups="table:keys"):
    import dataclasses

    from dp_spark.plans.distinct_count import plan

    built = plan(epsilon=1.0, group_by="country", groups=groups, max_groups=1)
    return dataclasses.replace(built, params=dataclasses.replace(built.params, groups=tuple(keys)))


def _topk_plan(domain):
    import dataclasses

    from dp_spark.plans.top_k import plan

    built = plan(epsilon=1.0, k=2, domain="domain.txt")
    return dataclasses.replace(built, params=dataclasses.replace(built.params, domain=list(domain)))


def _cli_budget(ledger, identity):
    budget = ledger.budget("b", run_key="cli-1")
    budget.fix_identity(identity)
    return budget


@pytest.mark.parametrize("groups", ["table:keys", "s3a://bucket/keys/*.csv", "/data/keys-*.csv"])
def test_the_cli_identity_gains_the_digest_of_the_keys_read(ledger, groups):
    """The CLI identity names --groups as given (a table, URI or glob is not
    read before Spark starts); at bind time it gains the digest of the keys
    the release read: other keys under the same name are another run,
    refused before the charge, not replayed. The check before Spark starts
    compares the rest."""
    from dp_spark.cli import _run_identity

    identity = _run_identity("distinct-count", {"input": "events.parquet", "epsilon": 1.0, "group_by": "country",
                                                "groups": groups, "max_groups": 1})
    first = _cli_budget(ledger, identity)
    bind_release(first, _grouped_plan(["de", "fr"], groups))
    assert first.identity["groups"]["keys"].startswith("sha256:")
    _grouped_plan(["de", "fr"], groups).spend(first)
    record_release(first, _released(_grouped_plan(["de", "fr"], groups), 2.0))
    retry = _cli_budget(ledger, identity)
    _grouped_plan(["de", "fr"], groups).check(retry)  # before Spark starts: the keys are not read yet
    changed = _cli_budget(ledger, identity)
    bind_release(changed, _grouped_plan(["de", "it"], groups))
    with pytest.raises(ParameterError, match=r"run key 'cli-1' of budget 'b': distinct-count, released .*this run "
                                             "has other public group keys") as refused:
        _grouped_plan(["de", "it"], groups).spend(changed)
    assert "\n" not in str(refused.value) and changed.record is None
    same = _cli_budget(ledger, identity)
    bind_release(same, _grouped_plan(["de", "fr"], groups))
    _grouped_plan(["de", "fr"], groups).spend(same)
    assert replayed(same).values["estimate"] == 2.0 and ledger.state("b").charges == 1


def test_a_changed_domain_is_another_run_in_the_api_and_the_cli(ledger):
    from dp_spark.cli import _run_identity

    api = ledger.budget("b", run_key="api-1", input="events")
    bind_release(api, _topk_plan(["a", "b", "c"]))
    _topk_plan(["a", "b", "c"]).spend(api)
    again = ledger.budget("b", run_key="api-1", input="events")
    bind_release(again, _topk_plan(["a", "b", "x"]))
    with pytest.raises(ParameterError, match="this run has another public domain"):
        _topk_plan(["a", "b", "x"]).spend(again)
    identity = _run_identity("top-k", {"input": "events.parquet", "epsilon": 1.0, "k": 2, "domain": "domain.txt"})
    cli = _cli_budget(ledger, identity)
    bind_release(cli, _topk_plan(["a", "b", "c"]))
    _topk_plan(["a", "b", "c"]).spend(cli)
    retry = _cli_budget(ledger, identity)
    bind_release(retry, _topk_plan(["a", "b", "c", "d"]))
    with pytest.raises(ParameterError, match="this run has another public domain"):
        _topk_plan(["a", "b", "c", "d"]).spend(retry)
    assert ledger.state("b").charges == 2


def test_a_run_recorded_with_the_previous_identity_is_refused_naming_why(ledger):
    """A grouped CLI run recorded by the previous version (its identity: the
    options, --groups by name only) retried by this version, whose identity
    holds the keys read: refused in one line saying the earlier identity
    did not hold the keys' digest, not replayed (the keys may have changed);
    an ungrouped run's identity is unchanged and replays."""
    from dp_spark.cli import _run_identity

    options = {"input": "events.parquet", "epsilon": 1.0, "group_by": "country", "groups": "table:keys",
               "max_groups": 1}
    old = _cli_budget(ledger, _run_identity("distinct-count", options))
    old.identity = old._fixed_identity  # the previous bind_release: the fixed identity as it was
    plan = _grouped_plan(["de"])
    ledger.charge("b", plan.guarantee, "distinct-count", run_key="cli-1", identity=old.identity)
    ledger.record_release("b", "cli-1", 0, _released(plan, 1.0).to_dict())
    retry = _cli_budget(ledger, _run_identity("distinct-count", options))
    plan.check(retry)  # before Spark starts: it matches on what the CLI knows
    bind_release(retry, plan)
    with pytest.raises(ParameterError, match="recorded by an earlier dp_spark version, whose run identity did not "
                                             "hold the digest of the public group keys the release read") as info:
        plan.spend(retry)
    assert "new run key" in str(info.value) and "\n" not in str(info.value)
    ungrouped = {"input": "events.parquet", "epsilon": 1.0, "max_bound": 5}
    ledger.charge("b", _plan().guarantee, "distinct-count", run_key="cli-2",
                  identity=_run_identity("distinct-count", ungrouped))
    ledger.record_release("b", "cli-2", 0, _released(_plan(), 6.0).to_dict())
    retry = ledger.budget("b", run_key="cli-2")
    retry.fix_identity(_run_identity("distinct-count", ungrouped))
    bind_release(retry, _plan())
    _plan().spend(retry)
    assert replayed(retry).values["estimate"] == 6.0


def test_an_approx_budget_keeps_the_states_apart_per_step(tmp_path):
    """Steps of one keyed run are separate charges: marking one step drawn
    leaves the others as they are."""
    with open_ledger(tmp_path / "l.db", create=True) as led:
        led.create_budget("a", ApproxDP(5.0, 1e-5))
        run = led.budget("a", run_key="r", input="t")
        for plan in (_plan(epsilon=0.5), _plan(epsilon=0.25)):
            bind_release(run, plan)
            plan.spend(run)
            if plan.guarantee.epsilon == 0.5:
                run.mark_drawn()
                record_release(run, _released(plan, 1.0))
        assert [r.state for r in led.runs("a")] == ["released", "charged"]
        retry = led.budget("a", run_key="r", input="t")
        for plan in (_plan(epsilon=0.5), _plan(epsilon=0.25)):
            bind_release(retry, plan)
            plan.spend(retry)
        assert replayed(retry) is None and retry.reused and led.state("a").charges == 2


def test_a_run_refused_at_its_mark_knows_the_run_drew_elsewhere(ledger):
    """Two runs under one key both reuse the charge; the second to mark is
    refused, and its budget then holds the run as the ledger has it
    ('drawn'), so the CLI's failure line says a retry needs a new key, not
    that it reuses the charge."""
    first, _ = _start(ledger)
    second, _ = _start(ledger)
    first.mark_drawn()
    with pytest.raises(ParameterError, match="another run under the key drew noise"):
        second.mark_drawn()
    assert second.run_state == "drawn"
