"""The sharded greedy's per-partition body, run directly on Arrow batches
(no Spark): row order and batch boundaries must not change what it computes
(with long or string ids, under person-key and item-key collisions), and adding a person moves
every count by at most l even when keys collide."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_spark.stages.distinct import _IH, _PH, _SHARD, ITEM_KEY, PERSON, ROUND, _greedy_partition
from dp_spark.stages.kernels import counts_from_rounds


def _batches(rows, split, string_ids):
    """rows: (shard, person_key, person, item_key)."""
    shard, pkey, person, ikey = (list(c) for c in zip(*rows)) if rows else ([], [], [], [])
    person_arr = pa.array([f"p{p}" for p in person]) if string_ids else pa.array(person, pa.int64())
    table = pa.table({_SHARD: pa.array(shard, pa.int32()), _PH: pa.array(pkey, pa.int64()),
                      PERSON: person_arr, _IH: pa.array(ikey, pa.int64())})
    cuts = sorted(set([0, len(rows)] + list(split)))
    return [b for lo, hi in zip(cuts[:-1], cuts[1:]) for b in table.slice(lo, hi - lo).to_batches()]


def _counts(rows, max_bound, split=(), string_ids=False):
    best: dict = {}
    for batch in _greedy_partition(iter(_batches(rows, split, string_ids)), max_bound):
        for x, r in zip(batch.column(ITEM_KEY).to_pylist(), batch.column(ROUND).to_pylist()):
            best[x] = min(r, best.get(x, r))
    return counts_from_rounds(np.array(list(best.values()) or [0]), max_bound)


def _rows(persons: dict, shards: int, person_key, item_key):
    return [(p % shards, person_key(p), p, item_key(x)) for p, items in persons.items() for x in items]


persons_st = st.dictionaries(st.integers(0, 25), st.lists(st.integers(0, 20), min_size=1, max_size=8),
                             max_size=10)


@settings(max_examples=80, deadline=None)
@given(persons_st, st.integers(1, 3), st.integers(1, 6), st.randoms(use_true_random=False), st.booleans())
def test_row_order_and_batches_do_not_matter(persons, shards, max_bound, rnd, string_ids):
    # (String ids "p14" < "p2" order differently from 2 < 14 when person keys
    # collide, so each id type is compared with itself.)
    rows = _rows(persons, shards, lambda p: p % 3, lambda x: x * 7919 % 23)  # heavy key collisions
    base = _counts(rows, max_bound, string_ids=string_ids)
    shuffled = rows[:]
    rnd.shuffle(shuffled)
    split = sorted(rnd.sample(range(len(rows) + 1), min(3, len(rows) + 1)))
    assert _counts(shuffled, max_bound, split, string_ids).tolist() == base.tolist()


def test_person_key_collision_keeps_persons_apart():
    # Two persons with the same person key, one item each: both are matched in
    # round 1 only if they are treated as two persons.
    rows = [(0, 5, 1, 100), (0, 5, 2, 200)]
    assert _counts(rows, 2).tolist() == [2, 2]
    assert _counts(rows, 2, string_ids=True).tolist() == [2, 2]


def test_repeated_rows_count_once():
    rows = [(0, 1, 1, 100)] * 4 + [(0, 2, 2, 100)] * 2
    assert _counts(rows, 3).tolist() == [1, 1, 1]


@settings(max_examples=150, deadline=None)
@given(persons_st, st.lists(st.integers(0, 30), min_size=1, max_size=12), st.integers(1, 3),
       st.integers(1, 6), st.booleans())
def test_adding_a_person_moves_each_count_by_at_most_l_under_collisions(persons, extra, shards, max_bound,
                                                                        string_ids):
    pkey, ikey = (lambda p: p % 4), (lambda x: x % 9)  # many collisions of both keys
    new_id = 1000
    before = _counts(_rows(persons, shards, pkey, ikey), max_bound, string_ids=string_ids)
    after = _counts(_rows({**persons, new_id: extra}, shards, pkey, ikey), max_bound, string_ids=string_ids)
    diff = after - before
    assert np.all(diff >= 0) and np.all(diff <= np.arange(1, max_bound + 1)), diff


def _lean_batches(rows, split):
    """rows: (person, item_key), what sharded_edges sends for long persons."""
    person, ikey = (list(c) for c in zip(*rows)) if rows else ([], [])
    table = pa.table({PERSON: pa.array(person, pa.int64()), _IH: pa.array(ikey, pa.int64())})
    cuts = sorted(set([0, len(rows)] + list(split)))
    return [b for lo, hi in zip(cuts[:-1], cuts[1:]) for b in table.slice(lo, hi - lo).to_batches()]


def _emitted(batches, max_bound, shards=None):
    out = []
    for batch in _greedy_partition(iter(batches), max_bound, shards):
        out += zip(batch.column(ITEM_KEY).to_pylist(), batch.column(ROUND).to_pylist())
    return sorted(out)


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.integers(-2**63, 2**63 - 1), st.lists(st.integers(0, 40), min_size=1, max_size=8),
                       max_size=12), st.integers(1, 4), st.integers(1, 6), st.randoms(use_true_random=False))
def test_lean_rows_emit_what_the_full_rows_emit(persons, shards, max_bound, rnd):
    """Lean rows (person, item key): the kernel's own shard pmod(hash(person),
    shards) and order key xxhash64(person) (numpy, Spark's hashes) give every
    (item key, round) the rows carrying Spark's columns give."""
    from dp_spark.stages.kernels import murmur3_long, xxhash64_long

    ids = np.array(list(persons), dtype=np.int64)
    shard = dict(zip(ids.tolist(), np.mod(murmur3_long(ids).astype(np.int64), shards).tolist()))
    key = dict(zip(ids.tolist(), xxhash64_long(ids).tolist()))
    full = [(shard[p], key[p], p, x * 7919 % 37) for p, items in persons.items() for x in items]
    lean = [(p, x * 7919 % 37) for p, items in persons.items() for x in items]
    rnd.shuffle(lean)
    split = sorted(rnd.sample(range(len(lean) + 1), min(3, len(lean) + 1)))
    assert _emitted(_lean_batches(lean, split), max_bound, shards) == _emitted(_batches(full, (), False), max_bound)


def test_lean_rows_need_the_shard_count():
    import pytest

    with pytest.raises(ValueError):
        list(_greedy_partition(iter(_lean_batches([(1, 2)], ())), 3))


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 60), st.sampled_from([1, 3, 40_000]), st.sampled_from([4, 2**62]), st.randoms(use_true_random=False))
def test_visiting_order_is_the_three_key_sort(n, shards, key_range, rnd):
    """The kernel sorts distinct persons by their 64-bit order key, then
    stably by shard, and falls back to the three-key sort (shard, key,
    value rank) only when two keys are equal: the same order as that sort
    in every case (few keys force collisions; 40,000 shards skip the 16-bit
    radix sort)."""
    from dp_spark.stages.distinct import _visiting_order

    shard = np.array([rnd.randrange(shards) for _ in range(n)], dtype=np.int64)
    key = np.array([rnd.randrange(-key_range, key_range) for _ in range(n)], dtype=np.int64)
    rank = np.array(rnd.sample(range(n), n), dtype=np.int64)
    asked = []
    got = _visiting_order(shard, key, lambda: asked.append(1) or rank)
    assert got.tolist() == np.lexsort((rank, key, shard)).tolist()
    if len(set(key.tolist())) == n:
        assert not asked  # the value rank is computed only for equal keys


def test_key_cuts_put_every_key_in_its_range_of_the_64_bit_space():
    """_key_cuts (the packed combine's key ranges): range j holds exactly
    the keys k with floor((k + 2^63) / w) = j, w = ceil(2^64 / buckets),
    lower bound included, upper excluded, with keys on every bound, just
    below it and at both ends of int64; the cuts never decrease."""
    from dp_spark.stages.distinct import _key_cuts

    lo, hi = -(1 << 63), (1 << 63) - 1
    for buckets in (1, 2, 3, 7, 1250, 10_000):
        width = -(-(1 << 64) // buckets)
        bounds = [lo + j * width for j in range(1, buckets) if lo + j * width <= hi]
        keys = np.array(sorted({lo, hi, 0, -1, *bounds, *[b - 1 for b in bounds]}), dtype=np.int64)
        cuts = _key_cuts(keys, buckets)
        assert len(cuts) == buckets + 1 and cuts[0] == 0 and cuts[-1] == len(keys)
        assert np.all(np.diff(cuts) >= 0)
        for j in range(buckets):
            for k in keys[cuts[j]:cuts[j + 1]].tolist():
                assert (k - lo) // width == j

