"""The per-group top-k mechanisms (dp_spark.mechanisms.top_k.error.grouped_domain_top_k,
unknown_domain.grouped_unknown_domain; an ungrouped release is one group at m = 1):
each group's selection is the ungrouped mechanism at (ε/m, δ/m) (numpy only; the release's Spark part is
tests/spark/test_grouped_top_k.py, the privacy audit tests/audit/test_topk_audit.py)."""

from __future__ import annotations

import pickle
from typing import NamedTuple

import numpy as np
import pytest

from dp_spark.accounting.exact import exact
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.top_k import unknown_domain_calibration, unknown_domain_gumbel
from dp_spark.mechanisms.top_k._common import group_share
from dp_spark.mechanisms.top_k.error import domain_top_k, grouped_domain_top_k
from dp_spark.mechanisms.top_k.groups import GroupSelection
from dp_spark.mechanisms.top_k.unknown_domain import grouped_unknown_domain
from dp_spark.mechanisms.top_k.zcdp import grouped_zcdp_top_k
from dp_spark.noise.rng import StreamRoot, secure_generator
from randomgen import ChaCha


class TopCounts(NamedTuple):
    """The shape of dp_spark.stages.item_counts.TopCounts (the stage imports pyspark; this tier must not)."""

    items: list
    counts: np.ndarray
    next_count: int


@pytest.mark.parametrize("epsilon, delta, m", [(1.0, 1e-6, 3), (0.7, 0.0, 1), (2.5, 1e-9, 19), (1e-3, 1e-5, 7)])
def test_m_shares_never_sum_above_the_budget(epsilon, delta, m):
    eps_g, delta_g = group_share(epsilon, delta, m)
    assert m * exact(eps_g) <= exact(epsilon) and m * exact(delta_g) <= exact(delta)
    assert eps_g == pytest.approx(epsilon / m) and delta_g == pytest.approx(delta / m)
    with pytest.raises(ParameterError):
        group_share(epsilon, delta, 0)


@pytest.mark.parametrize("method, delta", [("joint", 0.0), ("pnf-joint", 0.0), ("pnf-peel", 0.0),
                                           ("cdp-peel", 1e-6)])
def test_each_group_is_the_ungrouped_mechanism_at_its_share(method, delta):
    rng = np.random.default_rng(1)
    counts = rng.integers(0, 60, size=(4, 25))
    m, eps = 3, 2.0
    got = grouped_domain_top_k(method, counts, 3, eps, delta, m, np.random.default_rng(7))
    same = np.random.default_rng(7)
    eps_g, delta_g = group_share(eps, delta, m)
    want = [domain_top_k(method, counts[g], 3, eps_g, delta_g, same)[0] for g in range(4)]
    assert [a.tolist() for a in got] == [b.tolist() for b in want]


def test_unknown_domain_per_group_is_calibrated_at_the_groups_share():
    tops = [TopCounts(list(range(5)), np.array([90, 80, 70, 10, 5]), 0), TopCounts([], np.zeros(0, np.int64), 0)]
    got = grouped_unknown_domain(tops, 2, 4.0, 1e-6, 5, 2, np.random.default_rng(3))
    same = np.random.default_rng(3)
    eps_item, d_thr, _ = unknown_domain_calibration(*group_share(4.0, 1e-6, 2), 2)
    want = [unknown_domain_gumbel(t.counts, 2, eps_item, d_thr, 5, same, t.next_count) for t in tops]
    assert [r.indices.tolist() for r in got] == [r.indices.tolist() for r in want]
    assert got[1].bottom and got[1].indices.size == 0  # a group without items: ⊥


def test_a_larger_cap_means_more_noise_per_group():
    """ε/m per group: with the same counts, a large m picks the true top less often."""
    counts = np.array([[40, 30, 20] + [0] * 20])
    hits = {m: sum(grouped_domain_top_k("joint", counts, 1, 2.0, 0.0, m, np.random.default_rng(s))[0][0] == 0
                   for s in range(400)) for m in (1, 8)}
    assert hits[1] > hits[8] + 100


# -- each group's own stream (issue 40): the selection the executors and the driver both run ---------------


def _root(seed: int = 5) -> StreamRoot:
    return StreamRoot.of(np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed))), seeded=True)


@pytest.mark.parametrize("method, delta", [("joint", 0.0), ("pnf-joint", 0.0), ("pnf-peel", 0.0),
                                           ("cdp-peel", 1e-6)])
def test_a_groups_selection_is_the_ungrouped_mechanism_on_its_own_stream(method, delta):
    counts = np.random.default_rng(2).integers(0, 60, size=(5, 25))
    root = _root()
    select = GroupSelection.laplace(method, 3, 2.0, delta, 3, 1000, root)
    eps_g, delta_g = group_share(2.0, delta, 3)
    for g in (4, 0, 2):  # any order: group g's draws depend on g only
        got, bottom = select(g, counts[g])
        want = domain_top_k(method, counts[g], 3, eps_g, delta_g, root.stream(g))[0]
        assert got.tolist() == want.tolist() and not bottom
    assert select(1, counts[1])[0].tolist() == select(1, counts[1])[0].tolist()  # seeded: the same on every call


def test_unknown_domain_and_zcdp_selections_are_the_ungrouped_mechanisms_at_the_groups_share():
    root = _root(8)
    top = np.array([90, 80, 70, 10, 5])
    got, bottom = GroupSelection.laplace("unknown-domain", 2, 4.0, 1e-6, 2, 5, root)(3, top, 0.0)
    eps_item, d_thr, _ = unknown_domain_calibration(*group_share(4.0, 1e-6, 2), 2)
    want = unknown_domain_gumbel(top, 2, eps_item, d_thr, 5, root.stream(3), 0.0)
    assert got.tolist() == want.indices.tolist() and bottom == want.bottom
    none, bottom = GroupSelection.laplace("unknown-domain", 2, 4.0, 1e-6, 2, 5, root)(0, np.zeros(0, np.int64))
    assert none.size == 0 and bottom  # a group without items: ⊥
    counts = np.random.default_rng(4).integers(0, 40, size=30)
    for method in ("joint", "cdp-peel"):
        picked, _ = grouped_zcdp_top_k(method, counts[None, :], 3, 0.5, 2, root.stream(6))
        assert GroupSelection.zcdp(method, 3, 0.5, 2, root)(6, counts)[0].tolist() == picked[0].tolist()
    with pytest.raises(ParameterError):
        GroupSelection.laplace("auto", 2, 1.0, 0.0, 1, 5, root)


def test_group_streams_are_distinct_and_an_unseeded_root_is_one_chacha20_keystream():
    root = _root()
    draws = [root.stream(g).integers(0, 2**62, size=4).tolist() for g in range(50)]
    assert len({tuple(d) for d in draws}) == 50
    assert pickle.loads(pickle.dumps(root)).stream(7).integers(0, 2**62) == root.stream(7).integers(0, 2**62)
    release_rng = secure_generator(np.random.SeedSequence(11, pool_size=8))  # a release's ChaCha20
    unseeded = StreamRoot.of(release_rng, seeded=False)
    assert unseeded.entropy is None and 0 < unseeded.secret < 2**256 and str(unseeded.secret) not in repr(unseeded)
    assert unseeded == StreamRoot.of(secure_generator(np.random.SeedSequence(11, pool_size=8)), seeded=False)
    assert unseeded.stream(3).integers(0, 2**62) == pickle.loads(pickle.dumps(unseeded)).stream(3).integers(0, 2**62)
    stream = unseeded.stream(0).bit_generator
    assert type(stream).__name__ == "ChaCha" and stream.state["state"]["rounds"] == 20
    # group g's stream is the key's one keystream from 32-bit word g·2^64 on (the keystream read from
    # 32 words before it runs into it): disjoint blocks of one keystream, never shared
    for g in (1, 5):
        before = ChaCha(key=unseeded.secret, counter=(g << 64) - 32, rounds=20).random_raw(32)
        assert np.array_equal(before[16:], unseeded.stream(g).bit_generator.random_raw(16))
    with pytest.raises(ParameterError):
        unseeded.stream(2**64)
    other = _root(6)
    assert other.stream(0).integers(0, 2**62) != root.stream(0).integers(0, 2**62)  # another release, another root
