"""The joint choice of the group cap m and the bound l (issue 24,
``max_groups=None``): the one-pass counts at every cap candidate
(the grouped kernel with every cap candidate) and the
sensitivity of the joint scores q_{m,l} = Σ_g (c_{g,m,l} − margin(m, l)) on
random add/remove-one-person neighbours: every score moves in [0, m·l] when a
person is added, all in the same direction (what GEM's max(Δ, Δ')
denominators need); and the counts at each candidate are exactly those
of ``cap_groups`` at that cap."""

from __future__ import annotations

import numpy as np
import pytest

from dp_spark.mechanisms.distinct_count.cap_bound import cap_candidates as caps_for, joint_margins, joint_scores
from dp_spark.stages.distinct import joint_counts
from dp_spark.releases.groups import GROUP_INDEX
from dp_spark.settings.distinct_count import bound_candidates
from dp_spark.stages.distinct import grouped_greedy_counts
from dp_spark.stages.edges import GROUP
from dp_spark.stages.groups import cap_groups

SCHEMA = "person long, item string, group string"
KEYS = [f"g{j}" for j in range(5)]


def random_rows(rng, persons, groups=5, items=10):
    rows = []
    for p in persons:
        for _ in range(int(rng.integers(1, 14))):
            rows.append((int(p), f"i{rng.integers(items)}", f"g{rng.integers(groups)}"))
    return rows


def restricted(spark, rows):
    edges = spark.createDataFrame(rows, SCHEMA)
    keys = spark.createDataFrame([(k, i) for i, k in enumerate(KEYS)], f"{GROUP} string, {GROUP_INDEX} int")
    return edges.join(keys, on=GROUP)


@pytest.mark.parametrize("seed", range(4))
def test_joint_scores_move_in_0_to_m_l_all_in_one_direction(spark, seed):
    rng = np.random.default_rng(700 + seed)
    max_bound, shards = 16, int(rng.integers(1, 3))
    persons = rng.choice(10_000, size=int(rng.integers(8, 25)), replace=False)
    y, others = persons[0], persons[1:]
    base = random_rows(rng, others)
    added = random_rows(rng, [y])
    caps, cands = caps_for(len(KEYS)), bound_candidates(max_bound)
    assert caps == [1, 2, 4, 5]
    without = joint_counts(restricted(spark, base), caps, len(KEYS), max_bound, shards, cands)
    with_y = joint_counts(restricted(spark, base + added), caps, len(KEYS), max_bound, shards, cands)
    # per (m, g, l): 0..l, and per m at most m groups move
    diff = with_y - without
    assert (diff >= 0).all() and (diff <= np.asarray(cands)[None, None, :]).all()
    for k, m in enumerate(caps):
        assert len(np.flatnonzero(diff[k].any(axis=1))) <= m
    # the scores: every move in [0, m·l] (adding y), so all in the same direction; removing y is the reverse
    margins = joint_margins(caps, cands, 0.05, "laplace", 0.5)
    q0, sens = joint_scores(without, caps, cands, margins)
    q1, sens1 = joint_scores(with_y, caps, cands, margins)
    assert (sens == sens1).all() and (sens == np.outer(caps, cands).ravel()).all()
    moves = q1 - q0
    assert (moves >= 0).all() and (moves <= sens).all()
    assert moves.any() or not added  # the test is not vacuous: y has rows, some score moved


@pytest.mark.parametrize("person_type", ["long", "string"])
def test_each_candidate_counts_cap_groups_at_that_cap(spark, person_type):
    """The kernel's cap at every candidate = the template's ``cap_groups``
    at that cap followed by the uncapped kernel: the same rows, visited in
    the same order, so the same counts; for long persons (lean rows: the
    kernel hashes the persons) and string persons (shard and order key
    carried from Spark)."""
    rng = np.random.default_rng(11)
    df = restricted(spark, random_rows(rng, rng.choice(1000, size=30, replace=False)))
    if person_type == "string":
        df = df.withColumn("person", df["person"].cast("string"))
    caps, cands = [1, 2, 4], bound_candidates(16)
    for shards in (1, 3):
        at = joint_counts(df, caps, len(KEYS), 16, shards, cands)
        assert at.shape == (len(caps), len(KEYS), len(cands))
        for k, m in enumerate(caps):
            alone = grouped_greedy_counts(cap_groups(df, m), 16, shards, len(KEYS), cands)
            assert (at[k] == alone).all()
            assert (grouped_greedy_counts(df, 16, shards, len(KEYS), cands, caps=[m])[0] == alone).all()
        # the caps bite: cap 1 keeps fewer items than cap 4 somewhere (the test is not vacuous)
        assert (at[0] <= at[-1]).all() and (at[0] < at[-1]).any()


def test_kernel_matches_a_per_group_ungrouped_run(spark):
    """Without a cap, each group's counts are the ungrouped sharded greedy
    of that group's rows alone (:func:`greedy_counts`, same shards): the
    grouped kernel visits persons as the ungrouped one does."""
    from dp_spark.stages.distinct import greedy_counts

    rng = np.random.default_rng(3)
    df = restricted(spark, random_rows(rng, rng.choice(1000, size=30, replace=False), items=6))
    cands = bound_candidates(16)
    for shards in (1, 2):
        out = grouped_greedy_counts(df, 16, shards, len(KEYS), cands)
        for g, key in enumerate(KEYS):
            alone = greedy_counts(df.where(df[GROUP] == key), 16, shards)
            assert (out[g] == alone[np.asarray(cands) - 1]).all()


def _reference_per_group(person, key, group, order_key, caps, shards, max_bound):
    """What the grouped kernel must emit, from the ungrouped kernel: for every
    cap k (index 0 without caps) and group g, the ungrouped partition body on
    the rows of g of the persons that keep g under caps[k] (their groups ranked
    by (order key, group index))."""
    import pyarrow as pa

    from dp_spark.stages.distinct import _IH, ITEM_KEY, PERSON, ROUND, _greedy_partition

    pairs = sorted({(int(p), int(g), int(o)) for p, g, o in zip(person, group, order_key)})
    rank = {}
    for p in {p for p, _, _ in pairs}:
        mine = sorted((o, g) for q, g, o in pairs if q == p)
        rank.update({(p, g): r + 1 for r, (_, g) in enumerate(mine)})
    out = []
    for k, cap in enumerate(caps or [None]):
        for g in sorted(set(group.tolist())):
            keep = np.array([h == g and (cap is None or rank[(int(p), g)] <= cap) for p, h in zip(person, group)])
            if not keep.any():
                continue
            batch = pa.RecordBatch.from_arrays([pa.array(person[keep]), pa.array(key[keep])], names=[PERSON, _IH])
            for b in _greedy_partition(iter([batch]), max_bound, shards):
                out += [(k, g, x, r) for x, r in zip(b.column(ITEM_KEY).to_pylist(), b.column(ROUND).to_pylist())]
    return sorted(out)


@pytest.mark.parametrize("caps", [None, (1,), (1, 2, 4)])
def test_kernel_equals_the_ungrouped_kernel_per_group_on_every_path(monkeypatch, caps):
    """The grouped kernel emits, for every (cap, group), what the ungrouped
    kernel emits on that group's rows after the cap (a reference built from
    the ungrouped partition body, not from the grouped one): with the direct
    (group position, key rank) numbering, with the factorised numbering
    (forced), and with the two-key sort of a partition too large for one
    64-bit key (forced). Groups 1, 3 and 4 of 0..5 only, so a group's
    position among the partition's groups differs from its index."""
    import pyarrow as pa

    import dp_spark.stages.distinct as distinct

    rng = np.random.default_rng(9)
    n = 3000
    person = rng.integers(0, 300, n).astype(np.int64)
    group = rng.choice([1, 3, 4], n).astype(np.int32)
    key = rng.integers(0, 40, n).astype(np.int64) * 7919
    order_key = person * 31 + group * 17
    batch = pa.RecordBatch.from_arrays([pa.array(person), pa.array(key), pa.array(group), pa.array(order_key)],
                                       names=["person", distinct._IH, GROUP_INDEX, distinct._GO])

    def run():
        out = pa.Table.from_batches(list(distinct._grouped_greedy_partition(iter([batch]), 16, 3, 5, caps)))
        return sorted(zip(*[out.column(c).to_pylist() for c in out.column_names]))

    want = _reference_per_group(person, key, group, order_key, caps, 3, 16)
    assert run() == want and len(want) > 50
    monkeypatch.setattr(distinct, "_SPARSE_FACTOR", 0)  # virtual items numbered by a factorisation
    assert run() == want
    monkeypatch.setattr(distinct, "_ONE_KEY_LIMIT", 1)  # and a two-key sort
    assert run() == want


def test_counts_do_not_depend_on_the_layout(spark):
    """Without a cap the rows are laid out by (shard, group) over any number
    of partitions; with caps by shard: the counts are the same for every
    number of partitions."""
    rng = np.random.default_rng(21)
    df = restricted(spark, random_rows(rng, rng.choice(1000, size=30, replace=False), items=6))
    cands = bound_candidates(16)
    base = grouped_greedy_counts(df, 16, 3, len(KEYS), cands, partitions=1)
    for parts in (2, 5, 16):
        assert (grouped_greedy_counts(df, 16, 3, len(KEYS), cands, partitions=parts) == base).all()
    capped = grouped_greedy_counts(df, 16, 3, len(KEYS), cands, caps=[1, 5], partitions=1)
    assert (capped[1] == base).all()  # cap 5 = the number of keys: nothing dropped
    assert (grouped_greedy_counts(df, 16, 3, len(KEYS), cands, caps=[1, 5], partitions=3) == capped).all()


def test_one_shard_histogram_in_the_kernel_equals_the_per_item_path(spark, monkeypatch):
    """With one shard the kernel emits its (cap, group, bucket) histogram
    itself: the same counts as emitting every matched item's round and
    combining them in Spark (the path every shard count > 1 takes)."""
    import dp_spark.stages.distinct as distinct

    rng = np.random.default_rng(33)
    df = restricted(spark, random_rows(rng, rng.choice(1000, size=40, replace=False), items=8))
    cands = bound_candidates(16)
    fast = [grouped_greedy_counts(df, 16, 1, len(KEYS), cands, caps=caps) for caps in (None, [1, 2, 5])]
    monkeypatch.setattr(distinct, "_KERNEL_HISTOGRAM", False)
    slow = [grouped_greedy_counts(df, 16, 1, len(KEYS), cands, caps=caps) for caps in (None, [1, 2, 5])]
    for a, b in zip(fast, slow):
        assert a.shape == b.shape and (a == b).all() and a.sum() > 0


def test_a_group_index_outside_the_groups_given_is_refused(spark):
    """A direct caller's contract: group indices in 0..groups-1 (the release
    builds them from the keys). An index past the count would merge one
    person's groups with the next person's; it is refused instead."""
    rng = np.random.default_rng(4)
    df = restricted(spark, random_rows(rng, rng.choice(1000, size=10, replace=False)))
    with pytest.raises(Exception, match="PYTHON_EXCEPTION"):  # raised in the kernel (the message is withheld)
        grouped_greedy_counts(df, 4, 1, 3, bound_candidates(4), caps=[1])
    assert grouped_greedy_counts(df, 4, 1, 5, bound_candidates(4), caps=[1]).shape == (1, 5, 2)


@pytest.mark.parametrize("seed", range(6))
def test_group_ranks_equal_the_two_key_sort(seed):
    """The kernel ranks a person's groups by one 64-bit sort (the person,
    then the order key's top bits), falling back to the two-key sort when two
    of one person's keys share their top bits: the same ranks as the two-key
    sort by (person, order key), ties of the key in group order. Keys drawn
    from a few values force full ties; keys differing only in their low bits
    force the fallback; large persons leave fewer key bits."""
    from dp_spark.stages.distinct import _group_ranks

    rng = np.random.default_rng(seed)
    groups = 7
    bits = [4, 20, 40][seed % 3]
    persons = rng.choice(rng.integers(0, np.int64(1) << bits, size=12), size=300)  # ~25 rows a person
    pair = np.unique(persons * groups + rng.integers(0, groups, size=300))
    assert np.bincount(np.unique(pair // groups, return_inverse=True)[1]).max() > 3
    kind = seed // 2 % 3
    if kind == 0:
        key = rng.integers(-2**63, 2**63 - 1, size=len(pair), dtype=np.int64)
    elif kind == 1:
        key = rng.integers(-3, 3, size=len(pair)).astype(np.int64)  # full ties
    else:
        key = (np.int64(1) << 40) + rng.integers(0, 8, size=len(pair)).astype(np.int64)  # low bits only differ
    person = pair // groups
    order = np.lexsort((key, person))
    first = np.flatnonzero(np.r_[True, person[order][1:] != person[order][:-1]])
    want = np.empty(len(pair), dtype=np.int64)
    want[order] = np.arange(len(pair)) - first[np.cumsum(np.r_[True, person[order][1:] != person[order][:-1]]) - 1] + 1
    assert _group_ranks(pair, key, groups).tolist() == want.tolist()
