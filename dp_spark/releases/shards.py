"""The greedy distinct count's shard count, chosen privately (ungrouped and grouped alike).

Knop & Steinke's greedy (Algorithm 2) runs sharded on Spark; with
``shards=None`` the count of shards comes from a noisy count of the persons in
a fixed 1-in-r hash sample of the ids (whether a person is in it is a public
function of its id: sensitivity 1; r = :func:`dp_spark.plans.distinct_count.person_sample`
of the step's ε, at most 64, so that the noise stays within 6,400 persons), discrete Laplace at the
plan's ``shards`` step (ε/100 of the release's ε: pure ε-DP), one shard per
200,000 persons (:func:`dp_spark.mechanisms.distinct_count.choose_shards`,
post-processing). Given shards are used as they are and spend nothing.

Why the count is its own pass, before the greedy's (issue 26 asked to fold
it in): the shard count fixes the greedy's layout — every shard must lie
whole in one Python task, so the shuffle that reads the rows needs it. A
count made in that same pass comes too late, unless the layout is fixed
first and every task is at least one shard (shards >= the pass's
partitions, two per task slot: a cluster-dependent floor on the shard count
that splits small data into more greedy sequences and lowers its counts;
benchmarks/README.md measured 39 shards against 10 at 2M persons: g_1 −13%)
or the data is read twice anyway. So the count stays a separate job, made
cheap: it aggregates the persons of the 1-in-r sample only (r = 64 from
ε = 1; at 20M rows 1.37 s against 2.40 s for the fixed 1-in-16 sample it
used before), and the ungrouped release counts the input's person ids
(:func:`dp_spark.stages.edges.person_ids`: the person column alone, not the
item column the edge table's null rule reads; 1.0 s against 1.7 s). A
person whose items are all null is then counted too: the count is a size
for the layout, with sensitivity 1 either way (benchmarks/README.md, "Issue
26 at 20M rows").
"""

from __future__ import annotations

import logging

from dp_spark.mechanisms.distinct_count import choose_shards, noisy_size
from dp_spark.plans.distinct_count import person_sample
from dp_spark.stages import edges as edge_stage

log = logging.getLogger(__name__)


def greedy_shards(person_df, shards: int | None, epsilon: float, rng) -> tuple[int, dict, list]:
    """(shards, the released parameters saying how they were chosen, the
    noise records of the choice): ``shards`` when given, else the noisy
    sampled person count's choice at ``epsilon`` (pure ε-DP). ``person_df``:
    a frame with the ``person`` column whose persons are counted (the
    ungrouped release: the input's person ids,
    :func:`dp_spark.stages.edges.person_ids`; the grouped one: its edge
    table, restricted to the public keys)."""
    if shards is not None:
        return int(shards), {"shards_chosen": "by the caller", "shards": int(shards)}, []
    log.info("distinct-count: choosing the number of greedy shards from a noisy sampled person count")
    one_in = person_sample(epsilon)
    sampled, drawn = noisy_size(edge_stage.count_sampled_persons(person_df, one_in), 1, epsilon, rng,
                                target=f"the number of persons in a 1-in-{one_in} hash sample")
    chosen = int(choose_shards(sampled * one_in))
    how = {"shards_chosen": f"automatically (noisy person count of a 1-in-{one_in} hash sample)",
           "shards": chosen}
    return chosen, how, [drawn.at("shards")]
