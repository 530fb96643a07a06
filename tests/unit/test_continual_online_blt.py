"""The online counter's "bounded" method with counter="factorized" runs the BLT counter
(dp_spark.mechanisms.continual_distinct.blt): its estimates, noise records and checkpoints
(state version 3; version-2 checkpoints still load)."""

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
    """Saving after 23 of 64 steps (through JSON, state version 3) and resuming gives the same
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
    assert saved["version"] == 3 and saved["config"]["counter"] == "factorized" and saved["blt"]["t"] == 23
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
    """A state saved by version 2 (no counter in the config: always the tree) resumes as the tree
    and draws what the uninterrupted counter draws; it is saved back as version 3."""
    T = 32
    s = _stream(4, T)
    full = ContinualCounter(T, 0.5, method, **kwargs)
    rng = np.random.default_rng(9)
    expected = [full.step(rng, **_columns(s, t)) for t in range(T)]
    first = ContinualCounter(T, 0.5, method, **kwargs)
    rng = np.random.default_rng(9)
    got = [first.step(rng, **_columns(s, t)) for t in range(11)]
    old = json.loads(json.dumps(first.to_dict()))
    old["version"] = 2
    del old["config"]["counter"]
    resumed = ContinualCounter.from_dict(old)
    got += [resumed.step(rng, **_columns(s, t)) for t in range(11, T)]
    assert got == expected
    assert resumed.to_dict()["version"] == 3 and resumed.to_dict()["config"]["counter"] == "tree"
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
    assert online_module._STATE_VERSION == 3
