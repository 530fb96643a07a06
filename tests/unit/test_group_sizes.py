"""dp_spark.group_sizes: every group's released size summarised for the report (the largest groups,
a 1-2-5 histogram), checked against brute force on random sizes."""

from __future__ import annotations

import numpy as np
import pytest

from dp_spark.group_sizes import LARGEST_GROUPS, size_edges, size_summary


@pytest.mark.parametrize("seed", range(20))
def test_summary_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    sizes = np.round(rng.lognormal(2.0, 2.0, size=n)) - (rng.integers(0, 5, size=n) if seed % 2 else 0)
    keys = [f"k{i:04d}" for i in range(n)]
    out = size_summary(keys, sizes, "items")
    edges, counts = out["edges"], out["counts"]
    assert out["groups"] == n and sum(counts) == n and len(counts) == len(edges) - 1
    assert edges == sorted(edges) and edges[0] <= sizes.min() and edges[-1] > sizes.max()
    for lo, hi, c in zip(edges, edges[1:], counts):  # each size in [lo, hi) exactly once
        assert c == sum(1 for s in sizes if lo <= s < hi)
    order = sorted(range(n), key=lambda i: (-sizes[i], i))[:LARGEST_GROUPS]  # ties: key order
    assert [r["group"] for r in out["largest"]] == [keys[i] for i in order]
    assert [r["size"] for r in out["largest"]] == [sizes[i] for i in order]


def test_edges_are_one_two_five_per_decade():
    assert size_edges(0, 0) == [0, 1]
    assert size_edges(0, 1) == [0, 1, 2]
    assert size_edges(3, 999) == [0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]
    assert size_edges(-2.5, 4) == [-3, 0, 1, 2, 5]


def test_a_million_groups_give_a_bounded_summary():
    sizes = np.arange(1_000_000, dtype=np.int64) % 1_000
    out = size_summary(range(1_000_000), sizes, "items")
    assert len(out["largest"]) == LARGEST_GROUPS and len(out["counts"]) < 40
    assert [r["size"] for r in out["largest"]] == [999] * LARGEST_GROUPS
    assert [r["group"] for r in out["largest"]] == [999 + 1000 * i for i in range(LARGEST_GROUPS)]


def test_no_keys_and_a_size_per_key():
    assert size_summary([], np.array([]), "x")["counts"] == []
    with pytest.raises(ValueError):
        size_summary(["a", "b"], np.array([1.0]), "x")
