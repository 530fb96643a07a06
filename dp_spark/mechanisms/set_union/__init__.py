"""DP Set Union (partition selection), mechanism layer: pure numpy/scipy.

Gopi, Gulhane, Kulkarni, Shen, Shokouhi, Yekhanin, "Differentially Private
Set Union" (ICML 2020). Releases as many items as possible from the union of
the persons' item sets under (ε, δ)-DP with each person's whole contribution
protected.

- :mod:`.policies`: the update policies (count, weighted-laplace,
  weighted-gaussian, policy-laplace, policy-gaussian) as kernels over one
  shard of persons, with the sensitivity facts the privacy proof needs, and
  the fixed-point units (2^-30, rounded down) of the additive policies.
- :mod:`.thresholds`: noise scale (Laplace b, analytic Gaussian σ), the
  threshold ρ of the paper's theorems and the cutoff Γ = ρ + α·scale.
- :mod:`.thresholding`: the noise + threshold step for one partition, with
  per-partition generators spawned from one OS-seeded root.

Never imports pyspark or pandas; the Spark stages in
:mod:`dp_spark.stages.set_union` call these functions.
"""

from dp_spark.mechanisms.set_union.policies import (
    NOISE_OF,
    POLICIES,
    SEQUENTIAL,
    UNIT,
    UNIT_BITS,
    build_histogram,
    check_policy,
    count_update,
    person_units,
    person_weight,
    policy_gaussian_update,
    policy_laplace_update,
    sequential_update,
    update_histogram,
    weighted_gaussian_update,
    weighted_laplace_update,
)
from dp_spark.mechanisms.set_union.thresholding import NoiseRoot, derive_randomness, release_mask
from dp_spark.mechanisms.set_union.thresholds import (
    ALPHA_LIMIT,
    MAX_ITEMS_LIMIT,
    PARTITIONS_LIMIT,
    SHARDS_LIMIT,
    SHARD_CUTOFFS,
    SetUnionPlan,
    analytic_gaussian_sigma,
    check_whole,
    gaussian_mechanism_delta,
    laplace_isf,
    per_item_tail,
    plan_set_union,
    rho_count,
    rho_gaussian,
    rho_laplace,
    shard_cutoff,
)

__all__ = [
    "POLICIES",
    "NOISE_OF",
    "SEQUENTIAL",
    "check_policy",
    "person_weight",
    "person_units",
    "UNIT_BITS",
    "UNIT",
    "count_update",
    "weighted_laplace_update",
    "weighted_gaussian_update",
    "policy_laplace_update",
    "policy_gaussian_update",
    "update_histogram",
    "sequential_update",
    "build_histogram",
    "SetUnionPlan",
    "plan_set_union",
    "per_item_tail",
    "laplace_isf",
    "analytic_gaussian_sigma",
    "gaussian_mechanism_delta",
    "rho_count",
    "rho_laplace",
    "rho_gaussian",
    "SHARD_CUTOFFS",
    "shard_cutoff",
    "check_whole",
    "MAX_ITEMS_LIMIT",
    "ALPHA_LIMIT",
    "SHARDS_LIMIT",
    "PARTITIONS_LIMIT",
    "NoiseRoot",
    "derive_randomness",
    "release_mask",
]

