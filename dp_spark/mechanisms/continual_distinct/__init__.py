"""Continual release of distinct counts over insert/delete streams (mechanism layer).

Jain, Kalemaj, Raskhodnikova, Sivakumar, Smith, "Counting Distinct Elements in
the Turnstile Model with Differential Privacy under Continual Observation"
(NeurIPS 2023). Pure numpy, exact integer noise from an explicit
``numpy.random.Generator``; item-level ρ-zCDP under ``relation`` (:mod:`.relations`).

- :mod:`dp_spark.summaries.continual_distinct` (re-exported): the exact
  per-step arrays (``stream_summaries``) and the kernels the Spark stage runs.
- :mod:`.tree` (``BinaryTreeMechanism``), :mod:`.svt` (``SparseVector``).
- :mod:`.mechanisms`: ``continual_counts`` ("auto", "bounded", "adaptive",
  "baseline"), ``budget_split``, the per-group counters; :mod:`.auto`.
- :mod:`.online`: ``ContinualCounter``, one step at a time, for streaming.
"""

from dp_spark.mechanisms.continual_distinct.auto import AutoPlan, auto_plan
from dp_spark.mechanisms.continual_distinct.mechanisms import (
    DEFAULT_METHOD,
    DEFAULT_STREAM_METHOD,
    MECHANISMS,
    AdaptivePlan,
    ContinualResult,
    RecomputePlan,
    adaptive_plan,
    budget_split,
    continual_counts,
    recompute_plan,
    round_up_flippancy,
)
from dp_spark.mechanisms.continual_distinct.relations import DEFAULT_RELATION, RELATIONS, relation_statement, sensitivity_factor
from dp_spark.mechanisms.continual_distinct.online import ContinualCounter, StepEstimate
from dp_spark.summaries.continual_distinct import (
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
from dp_spark.mechanisms.continual_distinct.svt import SparseVector
from dp_spark.mechanisms.continual_distinct.tree import (
    BinaryTreeMechanism,
    TreeRelease,
    node_sums,
    nodes_per_step,
    num_levels,
    rho_for_flippancy,
    sigma2_for_flippancy,
    sigma_for_flippancy,
)

__all__ = [
    "DEFAULT_METHOD",
    "DEFAULT_STREAM_METHOD",
    "DEFAULT_RELATION",
    "RELATIONS",
    "AutoPlan",
    "auto_plan",
    "budget_split",
    "relation_statement",
    "sensitivity_factor",
    "sigma2_for_flippancy",
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
