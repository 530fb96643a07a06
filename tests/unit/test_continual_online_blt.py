"""The online counter runs the BLT counter (dp_spark.mechanisms.continual_distinct.blt) for
"bounded" with counter="factorized" and at the levels of "auto" and "adaptive" where its bound is
the smaller: its estimates, noise records and checkpoints (state version 4; versions 2 and 3 still
load, as trees)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dp_spark.errors import ParameterError
from dp_spark.mechanisms.continual_distinct import ContinualCounter
from dp_spark.mechanisms.continual_distinct import online as online_module
from dp_spark.mechanisms.continual_distinct.blt import BLTCounter, table_params
from dp_spark.mechanisms.continual_distinct.mechanisms import bounded_label
from dp_spark.noise.records import overspent_steps
from tests.unit.test_online_noise_records import _columns, _stream


@pytest.mark.parametrize("relation", ["subset", "item-removal"])
def test_factorized_bounded_runs_the_blt_counter_on_the_truncated_column(relation):
    """Step by step, the estimates and std are those of a BLTCounter calibrated to (T, ρ, w,
    relation) fed the w-truncated column (w = 4 after rounding 3 up), with the same draws; the
    error bound is std·√(2 ln(2T/β)) + 1/2 + the fixed-point bias; estimates are ints."""
    T, rho, beta = 64, 0.5, 0.05
    s = _stream(1, T)
    counter = ContinualCounter(T, rho, "bounded", 3, relation=relation, counter="factorized", beta=beta)
    reference = BLTCounter.for_flippancy(T, rho, 4, relation)
    rng_a, rng_b = np.random.default_rng(7), np.random.default_rng(7)
    quantile = math.sqrt(2.0 * math.log(2.0 * T / beta))
    for t in range(T):
        got = counter.step(rng_a, **_columns(s, t))
        estimate, std = reference.step(int(s.z_truncated[2, t]), rng_b)
        assert (got.estimate, got.std, got.flippancy_bound) == (estimate, std, 4)
        assert type(got.estimate) is int
        assert got.error_bound == pytest.approx(std * quantile + 0.5, abs=1e-6)
        assert got.error_bound > std * quantile + 0.5


def test_factorized_noise_record_counts_the_draws_and_costs_rho():
    """One record, kind "factorized-counter", charged to the factorized bounded label, draws = t,
    cost ρ (up to the exact rounding up of σ̌²); nothing before the first step."""
    T, rho = 32, 0.7
    s = _stream(2, T)
    counter = ContinualCounter(T, rho, "bounded", 2, counter="factorized")
    assert counter.noise_records() == ()
    rng = np.random.default_rng(1)
    for t in range(19):
        counter.step(rng, **_columns(s, t))
    (record,) = counter.noise_records()
    assert record.kind == "factorized-counter" and record.draws == 19
    assert record.step == bounded_label(2, "factorized")
    assert record.parameters == {"flippancy_bound": 2, "norm": 2}
    assert rho * (1 - 1e-5) <= record.cost().rho <= rho * (1 + 1e-12)


def test_factorized_checkpoint_restart_resumes_bit_identically():
    """Saving after 23 of 64 steps (through JSON, state version 4) and resuming gives the same
    later estimates and records as the uninterrupted counter; a tampered BLT state is refused."""
    T = 64
    s = _stream(3, T)
    full = ContinualCounter(T, 0.5, "bounded", 2, counter="factorized")
    rng = np.random.default_rng(77)
    expected = [full.step(rng, **_columns(s, t)) for t in range(T)]
    first = ContinualCounter(T, 0.5, "bounded", 2, counter="factorized")
    rng = np.random.default_rng(77)
    got = [first.step(rng, **_columns(s, t)) for t in range(23)]
    saved = json.loads(json.dumps(first.to_dict()))
    assert saved["version"] == 4 and saved["config"]["counter"] == "factorized" and saved["blt"]["t"] == 23
    resumed = ContinualCounter.from_dict(saved)
    got += [resumed.step(rng, **_columns(s, t)) for t in range(23, T)]
    assert got == expected
    assert resumed.noise_records() == full.noise_records()
    assert resumed.to_dict() == full.to_dict()

    for key, value in (("sigma2", [1, 1]), ("t", 22)):
        bad = json.loads(json.dumps(saved))
        bad["blt"][key] = value
        with pytest.raises(ParameterError, match="does not match"):
            ContinualCounter.from_dict(bad)
    bad = json.loads(json.dumps(saved))
    del bad["blt"]
    with pytest.raises(ParameterError, match="no BLT counter"):
        ContinualCounter.from_dict(bad)


@pytest.mark.parametrize("method, kwargs", [("bounded", {"max_flippancy": 2}), ("auto", {}), ("adaptive", {})])
def test_a_version_two_checkpoint_still_loads(method, kwargs):
    """A state saved by version 2 (no counter and no level_counter in the config: trees at every
    level) resumes as trees and draws what the uninterrupted tree counter draws; it is saved back
    as version 4 with level_counter "tree"."""
    T = 32
    s = _stream(4, T)
    trees = {"level_counter": "tree"}  # what versions 2 and 3 ran
    full = ContinualCounter(T, 0.5, method, **kwargs, **trees)
    rng = np.random.default_rng(9)
    expected = [full.step(rng, **_columns(s, t)) for t in range(T)]
    first = ContinualCounter(T, 0.5, method, **kwargs, **trees)
    rng = np.random.default_rng(9)
    got = [first.step(rng, **_columns(s, t)) for t in range(11)]
    old = json.loads(json.dumps(first.to_dict()))
    old["version"] = 2
    del old["config"]["counter"], old["config"]["level_counter"]
    resumed = ContinualCounter.from_dict(old)
    got += [resumed.step(rng, **_columns(s, t)) for t in range(11, T)]
    assert got == expected
    saved = resumed.to_dict()
    assert saved["version"] == 4 and saved["config"]["counter"] == "tree" and saved["config"]["level_counter"] == "tree"
    old["version"] = 1
    with pytest.raises(ParameterError, match="version"):
        ContinualCounter.from_dict(old)


def test_factorized_counter_only_for_bounded_and_table_parameters_used():
    with pytest.raises(ParameterError, match="only to method 'bounded'"):
        ContinualCounter(32, 0.5, "adaptive", counter="factorized")
    with pytest.raises(ParameterError, match="counter must be one of"):
        ContinualCounter(32, 0.5, "bounded", 2, counter="sqrt")
    counter = ContinualCounter(1024, 0.5, "bounded", 8, counter="factorized")
    assert counter.to_dict()["blt"]["params"] == table_params(1024, 8).to_dict()
    assert online_module._STATE_VERSION == 4


# ------------------------------------------------ "auto" and "adaptive" online: BLT counters per level

LEVELED = [("adaptive", {}), ("auto", {"tree_levels": 3})]


@pytest.mark.parametrize("method, kwargs", LEVELED)
def test_online_levels_run_the_blt_counter_where_its_bound_is_smaller(method, kwargs):
    """By default ("best") every level whose BLT bound beats the tree's runs a BLTCounter calibrated
    to that level's (T, ρ_j, 2^j, relation); "tree" keeps binary trees. The records of the levels the
    path reached are "factorized-counter" records charged to steps of the stream plan's split (the
    online budget_split), at most their share, with draws = steps fed; unreached levels record nothing."""
    from dp_spark.mechanisms.continual_distinct import budget_split

    T, rho = 256, 0.5
    s = _stream(11, T, n_items=150, max_flips=5)
    counter = ContinualCounter(T, rho, method, **kwargs)
    plan = counter._plan if method == "adaptive" else counter._auto
    counters = plan.counters
    assert "factorized" in counters
    for j, level in enumerate(counter._trees):
        assert isinstance(level, BLTCounter) == (counters[j] == "factorized")
    trees = ContinualCounter(T, rho, method, level_counter="tree", **kwargs)
    assert not any(isinstance(level, BLTCounter) for level in trees._trees)
    rng = np.random.default_rng(5)
    out = [counter.step(rng, **_columns(s, t)) for t in range(T)]
    split = dict(budget_split(method, rho, T, online=True) if method == "adaptive" else plan.budget_split())
    reached = {int(math.log2(x.flippancy_bound)) for x in out if x.flippancy_bound}
    records = [r for r in counter.noise_records() if r.kind == "factorized-counter"]
    assert {int(math.log2(r.parameters["flippancy_bound"])) for r in records} == {
        j for j in reached if counters[j] == "factorized"}
    for record in counter.noise_records():
        assert record.step in split
    parts = [{"step": label, "kind": "zcdp", "rho": rho} for label, rho in split.items()]
    assert overspent_steps(counter.noise_records(), parts) == []  # the records of one step add up within it
    for j, level in enumerate(counter._trees):  # each BLT level calibrated to its own (T, ρ_j, 2^j, relation)
        if isinstance(level, BLTCounter):
            rho_j = plan.rho_tree if method == "adaptive" else plan.tree_rho[j]
            fresh = BLTCounter.for_flippancy(T, rho_j, 1 << j, "subset")
            assert (level.sigma2, level.params, level.sensitivity_int) == (
                fresh.sigma2, fresh.params, fresh.sensitivity_int)
    phase = getattr(counter, "_phase", None)
    fed = T if phase is None else phase.start  # "auto" stops feeding its levels when the baseline starts
    assert records and all(r.draws == fed for r in records)


def test_auto_charges_each_started_blt_level_and_the_baseline_gets_the_rest():
    """"auto" with three forced levels on a stream of flippancy up to 6 climbs to the baseline: the
    filter holds exactly the started levels (those the path reached) and the baseline's ρ, the
    records of the shared step add up to at most ρ_rest, and the BLT levels stopped being fed at
    the switch."""
    T, rho = 256, 0.5
    s = _stream(11, T, n_items=150, max_flips=6)
    counter = ContinualCounter(T, rho, "auto", tree_levels=3)
    rng = np.random.default_rng(5)
    out = [counter.step(rng, **_columns(s, t)) for t in range(T)]
    reached = sorted({int(math.log2(x.flippancy_bound)) for x in out if x.flippancy_bound})
    assert out[-1].flippancy_bound is None and counter._phase is not None  # the baseline ran at the end
    assert sorted(counter._started) == reached and reached
    plan = counter._auto
    spent = sum(plan.tree_rho[j] for j in reached) + counter._phase.rho
    assert spent <= plan.rho_rest * (1 + 1e-12)
    split = [{"step": label, "kind": "zcdp", "rho": r} for label, r in plan.budget_split()]
    assert overspent_steps(counter.noise_records(), split) == []
    assert all(level.steps_done == counter._phase.start for level in counter._trees)


def test_adaptive_records_only_the_levels_it_released():
    """When one step climbs several levels, the BLT levels passed over were never released: they
    are neither recorded nor (after a checkpoint) claimed; the one reached is."""
    T = 64
    s = _stream(4, T, n_items=60, max_flips=6)
    over = np.array(s.over_counts, copy=True)
    over[:, 0] = 10**6  # far above every threshold at step 1 for the first levels: climb at once
    over[3:, 0] = 0
    counter = ContinualCounter(T, 1e6, "adaptive")
    rng = np.random.default_rng(2)
    first = counter.step(rng, z=int(s.z[0]), z_truncated=s.z_truncated[:, 0], over_counts=over[:, 0])
    assert first.flippancy_bound == 8
    levels = [r.parameters["flippancy_bound"] for r in counter.noise_records() if r.kind == "factorized-counter"]
    assert levels == [8]
    restored = ContinualCounter.from_dict(json.loads(json.dumps(counter.to_dict())))
    assert restored.noise_records() == counter.noise_records()


def test_online_blt_levels_noise_is_within_its_stated_part():
    """Against the *truncated* truth of the level that ran (so no truncation term helps), each
    released BLT estimate is within std·q + 1/2 + bias at every step in ≥ 1 − β of 100 runs
    (β = 0.2: binomial 1e-4 lower tail ≥ 0.66): the noise statement itself, not the slack of the
    truncation bound. A std understated by half fails it."""
    from tests.unit.test_continual import _one_update_per_step
    from dp_spark.mechanisms.continual_distinct import stream_summaries

    T, beta, runs = 256, 0.2, 100
    s = stream_summaries(*_one_update_per_step(np.random.default_rng(31), T, 4), T)
    truncated = np.cumsum(np.asarray(s.z_truncated), axis=1)
    covered = 0
    for run in range(runs):
        counter = ContinualCounter(T, 0.3, "adaptive", beta=beta)
        q = counter._plan.tree_quantile
        rng = np.random.default_rng(run)
        ok = True
        for t in range(T):
            x = counter.step(rng, **_columns(s, t))
            level = int(math.log2(x.flippancy_bound))
            blt = counter._trees[level]
            assert isinstance(blt, BLTCounter)
            ok &= abs(x.estimate - truncated[level, t]) <= x.std * q + 0.5 + blt.bias_bound()
        covered += bool(ok)
    assert covered / runs >= 0.66


@pytest.mark.parametrize("method, kwargs", LEVELED)
def test_online_blt_levels_resume_bit_identically(method, kwargs):
    """A checkpoint after 23 of 64 steps (through JSON) resumes with the same later estimates, std,
    bounds, records and state as the uninterrupted counter, BLT levels and their draws made ahead
    included; a BLT level's state swapped for a tree's is refused."""
    T = 64
    s = _stream(3, T)
    full = ContinualCounter(T, 0.5, method, **kwargs)
    rng = np.random.default_rng(13)
    expected = [full.step(rng, **_columns(s, t)) for t in range(T)]
    first = ContinualCounter(T, 0.5, method, **kwargs)
    rng = np.random.default_rng(13)
    got = [first.step(rng, **_columns(s, t)) for t in range(23)]
    saved = json.loads(json.dumps(first.to_dict()))
    assert saved["version"] == 4 and saved["config"]["level_counter"] == "best"
    assert any(tree["kind"].endswith("BLTCounter") for tree in saved["trees"])
    resumed = ContinualCounter.from_dict(saved)
    got += [resumed.step(rng, **_columns(s, t)) for t in range(23, T)]
    assert got == expected
    assert resumed.noise_records() == full.noise_records() and resumed.to_dict() == full.to_dict()
    bad = json.loads(json.dumps(saved))
    bad["config"]["level_counter"] = "tree"
    with pytest.raises(ParameterError):
        ContinualCounter.from_dict(bad)


@pytest.mark.parametrize("method, kwargs", LEVELED)
def test_online_blt_levels_bounds_cover_the_truth(method, kwargs):
    """Every step's error_bound (BLT std × the level quantile + rounding + fixed-point bias +
    truncation) holds simultaneously in ≥ 1 − β of 150 runs (β = 0.2; binomial 1e-4 lower tail
    ≥ 0.69) on a stream of one update per step and flippancy ≤ 4, and the BLT levels lower the
    median largest error against trees."""
    from tests.unit.test_continual import _one_update_per_step
    from dp_spark.mechanisms.continual_distinct import stream_summaries

    T, beta, runs = 256, 0.2, 150
    s = stream_summaries(*_one_update_per_step(np.random.default_rng(2718), T, 4), T)
    truth = np.cumsum(s.z)
    covered, errors = 0, {"best": [], "tree": []}
    for run in range(runs):
        for levels in ("best", "tree") if run < 20 else ("best",):
            counter = ContinualCounter(T, 0.3, method, beta=beta, level_counter=levels, **kwargs)
            rng = np.random.default_rng(run)
            out = [counter.step(rng, **_columns(s, t)) for t in range(T)]
            error = np.abs(np.array([x.estimate for x in out]) - truth)
            if levels == "best":
                covered += bool(np.all(error <= np.array([x.error_bound for x in out])))
            errors[levels].append(error.max())
    assert covered / runs >= 0.69
    assert np.median(errors["best"][:20]) < np.median(errors["tree"])
