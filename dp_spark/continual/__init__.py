"""Continual release of distinct counts over insert/delete streams (mechanism layer).

Jain, Kalemaj, Raskhodnikova, Sivakumar, Smith, "Counting Distinct Elements in
the Turnstile Model with Differential Privacy under Continual Observation"
(NeurIPS 2023). Pure numpy; every noise draw comes from an explicit
``numpy.random.Generator``. Guarantee: item-level ρ-zCDP (neighbouring streams
differ by all events of one item).

- ``stream_summaries`` / ``StreamSummaries``: the exact per-step arrays the
  Spark stage produces (reference implementation), its kernels ``flip_events``,
  ``flip_cells``, ``flip_level``, ``summaries_from_cells`` (run per item shard
  by the Spark stage), plus dense references ``existence_and_flippancy``,
  ``truncate_existence``, ``summaries_from_existence``.
- ``BinaryTreeMechanism``: Gaussian binary tree, online (checkpointable) and batch.
- ``SparseVector``: AboveThreshold with a cutoff, ρ-zCDP.
- ``continual_counts``: "bounded" (Algorithm 1), "adaptive" (Algorithm 3),
  "baseline" (periodic recompute; the Theorem 3.10 comparison).
- ``ContinualCounter``: the same mechanisms one step at a time, for streaming.
"""

from dp_spark.continual.mechanisms import (
    MECHANISMS,
    AdaptivePlan,
    ContinualResult,
    RecomputePlan,
    adaptive_plan,
    continual_counts,
    recompute_plan,
    round_up_flippancy,
)
from dp_spark.continual.online import ContinualCounter, StepEstimate
from dp_spark.continual.stream import (
    ExistenceTable,
    FlipEvents,
    StreamSummaries,
    count_after,
    existence_and_flippancy,
    flip_cells,
    flip_events,
    flip_level,
    stream_summaries,
    summaries_from_cells,
    summaries_from_existence,
    truncate_existence,
)
from dp_spark.continual.svt import SparseVector
from dp_spark.continual.tree import (
    BinaryTreeMechanism,
    TreeRelease,
    node_sums,
    nodes_per_step,
    num_levels,
    rho_for_flippancy,
    sigma_for_flippancy,
)

__all__ = [
    "MECHANISMS",
    "AdaptivePlan",
    "BinaryTreeMechanism",
    "ContinualCounter",
    "ContinualResult",
    "ExistenceTable",
    "FlipEvents",
    "RecomputePlan",
    "SparseVector",
    "StepEstimate",
    "StreamSummaries",
    "TreeRelease",
    "adaptive_plan",
    "continual_counts",
    "count_after",
    "existence_and_flippancy",
    "flip_cells",
    "flip_events",
    "flip_level",
    "node_sums",
    "nodes_per_step",
    "num_levels",
    "recompute_plan",
    "rho_for_flippancy",
    "round_up_flippancy",
    "sigma_for_flippancy",
    "stream_summaries",
    "summaries_from_cells",
    "summaries_from_existence",
    "truncate_existence",
]
