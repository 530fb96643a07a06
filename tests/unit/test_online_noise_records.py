"""The online continual-distinct counter records its privacy draws (issue 23, noise as data).

``ContinualCounter.noise_records()`` must say what was drawn (per tree and
per kind, at the batch form's granularity), survive a checkpoint, match the
batch form's records where both forms make the same draws, and read old
states that lack the draw counts.
"""

from __future__ import annotations

import json
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from dp_spark.mechanisms.continual_distinct import ContinualCounter, continual_counts, stream_summaries
from dp_spark.mechanisms.continual_distinct import online as online_module
from dp_spark.mechanisms.continual_distinct import tree as tree_module

CASES = [
    ("bounded", {"max_flippancy": 4}),
    ("adaptive", {}),
    ("baseline", {}),
    ("baseline", {"block": 7}),
    ("auto", {}),
    ("auto", {"tree_levels": 3}),
    ("auto", {"tree_levels": 1}),  # one tree, then the baseline
]


def _stream(seed: int, horizon: int, n_items: int = 120, max_flips: int = 6):
    """Items flipping 1..max_flips times at random distinct steps."""
    rng = np.random.default_rng(seed)
    times, items, ops = [], [], []
    for item in range(n_items):
        flips = int(rng.integers(1, max_flips + 1))
        steps = np.sort(rng.choice(np.arange(1, horizon + 1), size=flips, replace=False))
        for k, step in enumerate(steps):
            times.append(int(step))
            items.append(item)
            ops.append(1 if k % 2 == 0 else -1)
    return stream_summaries(np.array(times), np.array(items), np.array(ops), horizon)


def _columns(s, t: int) -> dict:
    return {"z": s.z[t], "z_truncated": s.z_truncated[:, t], "over_counts": s.over_counts[:, t]}


def _run(counter: ContinualCounter, s, rng, steps) -> list:
    return [counter.step(rng, **_columns(s, t)) for t in steps]


def _nodes_used(steps) -> int:
    """Distinct tree nodes the estimates at ``steps`` sum (level i, node t >> i
    when bit i of t is set): what a lazily drawing tree used at those steps draws."""
    return len({(i, t >> i) for t in steps for i in range(int(t).bit_length()) if (t >> i) & 1})


@pytest.mark.parametrize("method, kwargs", CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_records_count_exactly_the_draws_made(monkeypatch, method, kwargs, seed):
    """Every discrete Gaussian the counter draws is counted by the record of
    its tree or baseline (matched by σ²), nothing else is; the sparse
    vector's record is there exactly when it drew."""
    drawn: Counter = Counter()
    real = tree_module.discrete_gaussian_batch

    def counting(sigma2, n, rng):
        drawn[Fraction(sigma2)] += int(n)
        return real(sigma2, n, rng)

    monkeypatch.setattr(tree_module, "discrete_gaussian_batch", counting)
    monkeypatch.setattr(online_module, "discrete_gaussian_batch", counting)
    T = 64
    s = _stream(seed, T)
    counter = ContinualCounter(T, 2.0, method, **kwargs)
    rng = np.random.default_rng(100 + seed)
    for t in range(T):
        _run(counter, s, rng, [t])
        records = counter.noise_records()
        gaussian = {}
        for r in records:
            if r.kind in ("binary-tree", "discrete-gaussian"):
                key = Fraction(r.scale * r.scale).limit_denominator(10**9)
                gaussian[key] = gaussian.get(key, 0) + r.draws
        assert gaussian == {k.limit_denominator(10**9): v for k, v in drawn.items()}
        svt = getattr(counter, "_svt", None)
        has_svt = any(r.kind == "sparse-vector" for r in records)
        assert has_svt == (svt is not None and svt.queries_answered > 0)
        assert all(r.draws is None for r in records if r.kind == "sparse-vector")
        assert all(0 < r.draws <= 2 * T - 1 for r in records if r.kind == "binary-tree")


@pytest.mark.parametrize("method, kwargs", [c for c in CASES if c[0] != "baseline"])
def test_tree_draw_counts_follow_from_the_released_path(method, kwargs):
    """A tree's draw count is public: the distinct nodes of the steps it produced."""
    T = 64
    s = _stream(3, T)
    counter = ContinualCounter(T, 2.0, method, **kwargs)
    out = _run(counter, s, np.random.default_rng(8), range(T))
    for r in counter.noise_records():
        if r.kind == "binary-tree":
            w = r.parameters["flippancy_bound"]
            steps = [x.step for x in out if x.flippancy_bound == w]
            assert r.draws == _nodes_used(steps)
    if method == "bounded":
        (tree,) = counter.noise_records()
        assert tree.draws == T  # every step used: the T odd-indexed nodes, against 2T − 1 in the batch form


@pytest.mark.parametrize("method, kwargs", CASES)
def test_a_restored_counter_reports_the_records_of_an_unbroken_one(method, kwargs):
    T = 64
    s = _stream(4, T)
    full = ContinualCounter(T, 2.0, method, **kwargs)
    rng = np.random.default_rng(21)
    expected = []
    for t in range(T):
        _run(full, s, rng, [t])
        expected.append(full.noise_records())
    first = ContinualCounter(T, 2.0, method, **kwargs)
    rng = np.random.default_rng(21)
    got = []
    for t in range(23):
        _run(first, s, rng, [t])
        got.append(first.noise_records())
    resumed = ContinualCounter.from_dict(json.loads(json.dumps(first.to_dict())))
    assert resumed.noise_records() == got[-1]
    for t in range(23, T):
        _run(resumed, s, rng, [t])
        got.append(resumed.noise_records())
    assert got == expected
    assert ContinualCounter(T, 2.0, method, **kwargs).noise_records() == ()  # nothing drawn yet


@pytest.mark.parametrize("method, kwargs", CASES)
def test_records_equal_the_batch_forms_where_the_draws_are_the_same(method, kwargs):
    """Same data, same seed: the batch and online forms' records agree in
    step, kind, scale, std, sensitivity, target and parameters, in the same
    order. ``draws`` too, except a tree's: the batch form draws all 2T − 1
    nodes, the online form only the nodes its estimates use. ρ = 10^6 makes
    the sparse vector's noise negligible, so both take the same path."""
    T = 128
    s = _stream(5, T, n_items=100, max_flips=4)
    trees = {"level_counter": "tree"} if method in ("auto", "adaptive") else {}  # the same counters both ways
    batch = continual_counts(s, 1e6, method, rng=np.random.default_rng(42), **kwargs, **trees)
    counter = ContinualCounter(T, 1e6, method, **kwargs, **trees)
    out = _run(counter, s, np.random.default_rng(42), range(T))
    path = [x.flippancy_bound or 0 for x in out]
    batch_path = [0] * T if batch.flippancy_bound is None else batch.flippancy_bound.tolist()
    assert path == batch_path
    online = counter.noise_records()
    assert len(online) == len(batch.noise) > 0
    for a, b in zip(online, batch.noise):
        if b.kind == "binary-tree":
            assert b.draws == 2 * T - 1 and a.draws <= T
            a = a.at(a.step)
            b = b.__class__(**{**b.to_dict(), "draws": a.draws})
        assert a == b


def test_an_old_state_without_draw_counts_loads_and_says_unknown():
    """A checkpoint saved before the counts were kept (trees without
    ``drawn``) still resumes; its trees' records say draws=None (unknown)
    while the baseline's count, which follows from the step, stays exact."""
    T = 64
    s = _stream(6, T)
    for method, kwargs in CASES:
        counter = ContinualCounter(T, 2.0, method, **kwargs)
        rng = np.random.default_rng(3)
        _run(counter, s, rng, range(20))
        state = json.loads(json.dumps(counter.to_dict()))
        for tree in state.get("trees", []):
            tree.pop("drawn", None)  # a BLT level has no count to lose: it draws at every step
        old = ContinualCounter.from_dict(state)
        new = counter.noise_records()
        records = old.noise_records()
        assert [r.step for r in records] == [r.step for r in new]
        for a, b in zip(records, new):
            assert a.draws is None if a.kind == "binary-tree" else a == b
        _run(old, s, rng, range(20, T))  # and it runs on
