"""A keyed run's 'drawn' state with real releases (issue 35 §1): every
release, grouped or not, marks its run 'drawn' before its first privacy
draw; a run that failed before drawing reuses its charge; a run
interrupted after drawing is refused under its key, through the API and
the CLI, and the ledger is left as it was. And the CLI's run identity holds
the keys and domain the release read (§3): a changed key table named by a
``table:`` name, a glob or a ``file:`` URI, or a changed ``--domain`` file,
is another run, not a replay."""

from __future__ import annotations

import dataclasses
import json
import logging

import pytest

import dp_spark
from dp_spark.accounting import ZCDP, ApproxDP
from dp_spark.cli import main
from dp_spark.errors import ParameterError, SparkJobError
from dp_spark.ledger import open_ledger
from dp_spark.ledger.budget import LedgerBudget
from dp_spark.releases import RELEASES

PERSONS = [(p, f"item{(p * 7 + j) % 13}", f"g{(p + j) % 3}") for p in range(120) for j in range(1 + p % 3)]
EVENTS = [(t, f"i{(t * 5) % 11}", 1 if (t // 11) % 2 == 0 else -1, f"g{(t * 5) % 11 % 3}") for t in range(1, 60)]
SCHEMAS = {"persons": "person_id long, item string, country string",
           "events": "time long, item string, op int, country string"}
KEYS = ["g0", "g1", "g2"]


@pytest.fixture
def ledger_path(tmp_path):
    path = tmp_path / "budgets.db"
    with open_ledger(path, create=True) as led:
        led.create_budget("approx", ApproxDP(1000.0, 0.5))
        led.create_budget("zcdp", ZCDP(1000.0, 0.5))
    return str(path)


def _runs(path, budget):
    with open_ledger(path) as led:
        return led.runs(budget), led.history(budget)


def _snapshot(raw) -> str:
    """Everything a draw from ``raw`` (or a child spawned from it) changes."""
    return json.dumps([raw.bit_generator.state, raw.bit_generator.seed_seq.n_children_spawned],
                      default=lambda a: a.tolist())


#: The parameters a method needs beyond its release's example.
METHOD_NEEDS = {("continual-distinct", "bounded"): {"max_flippancy": 8}, ("count-release", "bounded"): {"max_items": 3}}


def _cases():
    """Every release of the registry: its example, ungrouped, with public
    keys and (an (ε, δ) release) with private keys, and ungrouped with each
    other method of its plan module's METHODS (a domain method with a
    public domain)."""
    import importlib

    out = {}
    for name, spec in RELEASES.items():
        example = dict(spec.example.parameters)
        out[f"{name}/plain"] = (name, example)
        plans = importlib.import_module(f"dp_spark.plans.{spec.python_name}")
        for method in getattr(plans, "METHODS", ()):
            if method != example.get("method"):
                domain = {"domain": [f"item{i}" for i in range(13)]} if method in getattr(
                    plans, "DOMAIN_METHODS", ()) else {}
                out[f"{name}/plain/{method}"] = (name, dict(example, method=method, **domain,
                                                            **METHOD_NEEDS.get((name, method), {})))
        if "group_by" not in spec.plan_parameters():
            continue  # a release without groups has no grouped form
        grouped = dict(example, group_by="country", max_groups=2)
        out[f"{name}/public"] = (name, dict(grouped, groups=KEYS))
        if spec.plan_function.Params.KEYS_BUDGET is not None:  # continual-distinct refuses private keys
            out[f"{name}/private"] = (name, grouped)
    return out


CASES = _cases()


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_release_marks_its_run_drawn_before_its_first_draw(spark, ledger_path, monkeypatch, case):
    """Through the registry (a release added later is covered): the run's
    generator is untouched when the ledger marks the run 'drawn', the mark
    happens once, the run draws from that generator after it, and the run
    ends 'released'. The executor noise's root (set-union's buckets, top-k's
    groups: a key drawn from the run's generator) is made only after the mark too."""
    import dp_spark.noise as noise
    from dp_spark.noise.rng import StreamRoot

    name, parameters = CASES[case]
    spec = RELEASES[name]
    made, marks, roots = [], [], []
    real_make_rng, real_mark, real_from_child = noise.make_rng, LedgerBudget.mark_drawn, StreamRoot.from_child

    def make_rng(seed=None):  # the template's (it imports make_rng from dp_spark.noise when it runs)
        rng = real_make_rng(seed)
        if not made:
            made.extend([rng, _snapshot(rng)])
        return rng

    def mark_drawn(self, seq=None):
        marks.append(_snapshot(made[0]))
        real_mark(self, seq)

    def from_child(cls, child, seeded):
        roots.append(len(marks))  # how many marks had been made when executor noise was set up
        return real_from_child(child, seeded)

    monkeypatch.setattr(noise, "make_rng", make_rng)
    monkeypatch.setattr(LedgerBudget, "mark_drawn", mark_drawn)
    monkeypatch.setattr(StreamRoot, "from_child", classmethod(from_child))
    kind = "zcdp" if spec.example.zcdp else "approx"
    df = spark.createDataFrame(EVENTS if spec.example.input == "events" else PERSONS, SCHEMAS[spec.example.input])
    with open_ledger(ledger_path) as led:
        spec.function(df, **parameters, ledger=led.budget(kind, run_key=case, input="demo"))
    assert marks == [made[1]], "the run was marked after a draw, or more than once"
    assert _snapshot(made[0]) != made[1], "the release drew nothing from the run's generator"
    assert all(at == 1 for at in roots), roots
    runs, history = _runs(ledger_path, kind)
    assert [r.state for r in runs] == ["released"] and len(history) == 1


def _distinct(df, led, key="k-1", **kw):
    return dp_spark.distinct_count(df, epsilon=0.5, max_bound=3, shards=1,
                                   ledger=led.budget("approx", run_key=key, input="events-2024-01-01"), **kw)


def test_a_run_that_failed_in_its_spark_stage_reuses_its_charge(spark, ledger_path, unreadable_events):
    """The common failure: the Spark stage fails (here its input is gone)
    before anything is drawn. The run stays 'charged' and a retry under the
    key (the same input, readable again) reuses the charge and releases."""
    with open_ledger(ledger_path) as led:
        with pytest.raises(SparkJobError):
            _distinct(unreadable_events, led)
        assert [r.state for r in led.runs("approx")] == ["charged"]
        frame = spark.createDataFrame([(p, f"x{p % 17}") for p in range(80)], "person_id long, item string")
        release = _distinct(frame, led)
        assert release.replay is None and release.result["estimate"] is not None
        assert [r.state for r in led.runs("approx")] == ["released"] and led.state("approx").charges == 1


def test_a_run_interrupted_after_its_first_draw_is_refused_and_the_ledger_unchanged(spark, ledger_path,
                                                                                    monkeypatch):
    """The mechanism draws, then the process is interrupted before the
    record: the retry under the key is refused in one line, before anything
    is read; the ledger keeps the one charge, 'drawn'. Before: the retry
    reused the charge and drew again."""
    from dp_spark.releases import distinct_count as release

    real = release.release_from_counts

    def drawn_then_interrupted(*args, **kwargs):
        real(*args, **kwargs)
        raise KeyboardInterrupt

    frame = spark.createDataFrame([(p, f"x{p % 17}") for p in range(80)], "person_id long, item string")
    with open_ledger(ledger_path) as led:
        with monkeypatch.context() as patch:
            patch.setattr(release, "release_from_counts", drawn_then_interrupted)
            with pytest.raises(KeyboardInterrupt):
                _distinct(frame, led)
        before = (led.history("approx"), led.runs("approx"))
        assert [r.state for r in before[1]] == ["drawn"]
        with pytest.raises(ParameterError) as refused:
            _distinct(frame, led)
        message = str(refused.value)
        assert message.startswith("run key 'k-1' drew noise for budget 'approx' (distinct-count, charged ")
        assert message.endswith("a new run key is needed; the earlier charge stays.") and "\n" not in message
        assert (led.history("approx"), led.runs("approx")) == before
        assert _distinct(frame, led, key="k-2").replay is None  # a new key: a new charge
        assert led.state("approx").charges == 2


def test_a_run_whose_key_was_released_meanwhile_returns_that_release(spark, ledger_path, monkeypatch):
    """Two runs reused one 'charged' run; the other recorded its release
    while this one was in its Spark stage: at its first draw this run
    returns that release (a replay) and draws nothing."""
    from dp_spark.ledger.budget import bind_release, record_release
    from dp_spark.releases import distinct_count as release

    real = release._bounded_counts
    frame = spark.createDataFrame([(p, f"x{p % 17}") for p in range(80)], "person_id long, item string")
    with open_ledger(ledger_path) as led:
        def stage_while_the_other_run_records(edge_df, plan, *args, **kwargs):
            other = led.budget("approx", run_key="k-1", input="events-2024-01-01")
            bind_release(other, plan)
            plan.spend(other)
            other.mark_drawn()
            record_release(other, dataclasses.replace(fake, created="the other run"))
            return real(edge_df, plan, *args, **kwargs)

        fake = dp_spark.report.Release.from_plan(
            release.make_plan(epsilon=0.5, max_bound=3, shards=1), values={"estimate": -1.0, "method": "greedy"},
            errors={}, statement="the other run's", seeded=False, budget_split=[])
        monkeypatch.setattr(release, "_bounded_counts", stage_while_the_other_run_records)
        got = _distinct(frame, led)
        assert got.replay["run_key"] == "k-1" and got.result["estimate"] == -1.0 and got.created == "the other run"
        assert [r.state for r in led.runs("approx")] == ["released"] and led.state("approx").charges == 1


class _InterruptAtFirstInfo(logging.Handler):
    """Raises KeyboardInterrupt at the first INFO record it sees (a user's
    Ctrl-C at the first progress line)."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.fired = False

    def emit(self, record):
        if not self.fired:
            self.fired = True
            raise KeyboardInterrupt

    def handleError(self, record):  # pragma: no cover - emit raises on purpose
        raise


def test_cli_interrupted_at_the_first_progress_line_after_the_draw(capsys, spark, tmp_path, ledger_path):
    """The issue's run: keys chosen privately (--group-by without --groups),
    interrupted at the first progress line after the key step's draw. The
    failure line says a retry needs a new run key; the retry is refused in
    one line before Spark reads anything; one charge, 'drawn'."""
    table = tmp_path / "events.parquet"
    spark.createDataFrame(PERSONS, SCHEMAS["persons"]).coalesce(1).write.parquet(str(table))
    argv = ["distinct-count", "--input", str(table), "--group-by", "country", "--max-groups", "2", "--epsilon",
            "2", "--max-bound", "3", "--shards", "1", "--ledger", ledger_path, "--ledger-budget", "approx",
            "--run-key", "dag/1", "--quiet"]
    handler = _InterruptAtFirstInfo()
    keys_log = logging.getLogger("dp_spark.releases.group_keys")  # its first line follows the key step's draw
    keys_log.addHandler(handler)
    try:
        assert main(argv) == 130
    finally:
        keys_log.removeHandler(handler)
    err = capsys.readouterr().err.strip()
    assert handler.fired and "\n" not in err
    assert "It drew noise before it stopped, so --run-key 'dag/1' is refused from now on: a retry needs a new " \
           "run key; the earlier charge stays." in err and "reuses" not in err, err
    runs, history = _runs(ledger_path, "approx")
    assert [r.state for r in runs] == ["drawn"] and len(history) == 1
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("dp-spark: error: run key 'dag/1' drew noise for budget 'approx' (distinct-count, "), err
    assert err.endswith("a new run key is needed; the earlier charge stays.") and "\n" not in err
    assert captured.out == "" and _runs(ledger_path, "approx") == (runs, history)


def test_cli_run_failing_before_its_first_draw_says_a_retry_reuses_the_charge(capsys, spark, tmp_path,
                                                                              ledger_path, monkeypatch):
    from dp_spark.releases import distinct_count as release

    def fail(*args, **kwargs):
        raise SparkJobError("Spark failed while computing bounded counts: Spark error X.")

    argv = ["distinct-count", "--rows", "2000", "--max-bound", "3", "--epsilon", "0.5", "--shards", "1",
            "--ledger", ledger_path, "--ledger-budget", "approx", "--run-key", "fail-1", "--quiet"]
    with monkeypatch.context() as patch:
        patch.setattr(release, "_bounded_counts", fail)
        assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert "It drew no noise, so a retry with --run-key 'fail-1' reuses that charge." in err and "\n" not in err
    assert main(argv) == 0
    assert "replay" not in json.loads(capsys.readouterr().out)
    runs, history = _runs(ledger_path, "approx")
    assert [r.state for r in runs] == ["released"] and len(history) == 1


# -- the CLI's run identity holds what the release read (§3) ----------------------------------


def _keys_table(spark, path, keys):
    spark.createDataFrame([(k,) for k in keys], "country string").coalesce(1).write.mode("overwrite") \
        .option("header", "true").csv(str(path))


@pytest.mark.parametrize("form", ["table", "glob", "uri"])
def test_a_changed_key_table_is_another_cli_run_not_a_replay(capsys, spark, tmp_path, ledger_path, form):
    """The same --groups name with other keys behind it under one run key:
    before, the CLI identity held the name only (a table, glob or URI is
    not hashed before Spark starts) and the retry printed the recorded
    release for the old keys. Now the release's identity holds the keys it
    read: refused in one line, nothing charged or written."""
    table = tmp_path / "events.parquet"
    spark.createDataFrame(PERSONS, SCHEMAS["persons"]).coalesce(1).write.parquet(str(table))
    folder = tmp_path / "keys"

    def point_at(keys):
        _keys_table(spark, folder, keys)
        if form == "table":
            spark.read.option("header", "true").csv(str(folder)).createOrReplaceTempView("drawn_keys")
            return "table:drawn_keys"
        return f"{folder}/*.csv" if form == "glob" else folder.resolve().as_uri()

    report = tmp_path / "r.json"
    argv = ["distinct-count", "--input", str(table), "--group-by", "country", "--max-groups", "1", "--epsilon",
            "1", "--max-bound", "3", "--shards", "1", "--ledger", ledger_path, "--ledger-budget", "approx",
            "--run-key", f"keys-{form}", "--quiet", "--output", str(report), "--overwrite"]
    assert main([*argv, "--groups", point_at(["g0", "g1"])]) == 0, capsys.readouterr().err
    first = json.loads(capsys.readouterr().out)
    assert main([*argv, "--groups", point_at(["g0", "g1"])]) == 0  # the same keys: replayed
    assert json.loads(capsys.readouterr().out)["result"] == first["result"]
    written = report.read_text()
    assert main([*argv, "--groups", point_at(["g0", "g2"])]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert f"run key 'keys-{form}' of budget 'approx': distinct-count, released" in err, err
    assert "this run has other public group keys" in err and "\n" not in err and captured.out == ""
    assert report.read_text() == written and len(_runs(ledger_path, "approx")[1]) == 1


def test_a_changed_domain_file_is_another_cli_run_not_a_replay(capsys, spark, tmp_path, ledger_path):
    table = tmp_path / "events.parquet"
    spark.createDataFrame(PERSONS, SCHEMAS["persons"]).coalesce(1).write.parquet(str(table))
    domain = tmp_path / "domain.txt"
    argv = ["top-k", "--input", str(table), "--k", "2", "--epsilon", "1", "--method", "joint", "--domain",
            str(domain), "--ledger", ledger_path, "--ledger-budget", "approx", "--run-key", "domain-1", "--quiet"]
    domain.write_text("\n".join(f"item{i}" for i in range(10)) + "\n")
    assert main(argv) == 0, capsys.readouterr().err
    capsys.readouterr()
    domain.write_text("\n".join(f"item{i}" for i in range(3, 13)) + "\n")
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "run key 'domain-1' of budget 'approx': top-k, released" in err and "another public domain" in err, err
    assert len(_runs(ledger_path, "approx")[1]) == 1
