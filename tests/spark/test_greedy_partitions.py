"""The greedy pass's partition count (dp_spark.stages.distinct.greedy_partitions,
issue 26): from the shard count and the cluster's task slots only, minimising
the shards the busiest slot runs. Stand-in session objects; this tier because
the stage module imports pyspark."""

from __future__ import annotations

from tests.unit.test_partitioning import _Classic


def test_greedy_partitions_minimise_the_busiest_slots_shards():
    """greedy_partitions (dp_spark.stages.distinct): 9 shards on 2 slots get 9
    partitions (5 shards on the busiest slot), not the divisor 3 (6); the
    layout depends on the shard count and the slots only."""
    from dp_spark.stages.distinct import greedy_partitions

    two = _Classic(2, {"spark.sql.shuffle.partitions": "200"})
    assert [greedy_partitions(two, s) for s in (1, 3, 4)] == [1, 3, 4]  # at most 2 per slot: one per shard
    assert greedy_partitions(two, 9) == 9
    assert greedy_partitions(two, 8) == 8  # 4 shards on the busiest slot either way (4 or 8): more partitions
    assert greedy_partitions(two, 12) == 12
    assert greedy_partitions(two, 31) == 31  # a prime up to 8x: one per shard (16 on the busiest slot, not 31)
    assert greedy_partitions(two, 33) == 3  # above 8x: the divisor 3 (22 on the busiest slot)
    assert greedy_partitions(two, 4000) == 4
    assert greedy_partitions(two, 1_000_003) == 4  # a prime above 8x: several whole shards per partition
    for s in range(1, 200):
        t = greedy_partitions(two, s)
        assert 1 <= t <= max(s, 4) and (s % t == 0 or t == s or (s > 32 and t == 4))
