"""DP Set Union (partition selection), mechanism layer: pure numpy/scipy.

Gopi, Gulhane, Kulkarni, Shen, Shokouhi, Yekhanin, "Differentially Private
Set Union" (ICML 2020): releases as many items as possible from the union of
the persons' item sets under (ε, δ)-DP, each person's whole contribution
protected.

- :mod:`dp_spark.summaries.set_union` (re-exported): the update policies as
  kernels over one shard of persons, with the sensitivity facts the proof
  needs; they draw no noise.
- :mod:`.thresholds`: noise scale, threshold ρ and cutoff Γ = ρ + α·scale.
- :mod:`.greedy`: Policy Greedy (Carvalho, Wang, Gondara, AAAI 2022): its
  privacy proof and threshold.
- :mod:`.laplace_grid`: the Laplace policies' exact noise step (random
  rounding onto a grid, discrete Laplace, integer threshold) and its proof.
- :mod:`.gaussian_grid`: the Gaussian policies' exact noise step (capped
  weight floored onto a grid, discrete Gaussian, integer threshold) and its proof.
- :mod:`.sips`: rounds of the exact weighted Gaussian, released items
  removed between rounds (DP-SIPS, Swanberg, Desfontaines, Haney 2023):
  constants, proof and a numpy reference run.
- :mod:`.discrete`: the exact variant (integer statistic, discrete Gaussian,
  integer threshold) of the grouped releases' private key step.
- :mod:`.thresholding`: the noise + threshold step per noise bucket
  (:class:`~.thresholding.ThresholdStep`, handed to the Spark stage).

Parameters are checked by :func:`dp_spark.plans.set_union.plan`.
"""

from dp_spark.summaries.set_union import (
    BY_FREQUENCY,
    DEFAULT_SHARDS,
    HELD_SUPPORT,
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
    policy_greedy_update,
    policy_laplace_update,
    sequential_update,
    update_histogram,
    weighted_gaussian_update,
    weighted_laplace_update,
)
from dp_spark.mechanisms.set_union.discrete import (
    EXACT_POLICY,
    DiscreteSetUnionPlan,
    discrete_release_mask,
    grid_statistic,
    plan_discrete_set_union,
    plan_discrete_set_union_zcdp,
)
from dp_spark.mechanisms.set_union.greedy import greedy_failure, rho_greedy
from dp_spark.mechanisms.set_union.thresholding import ThresholdStep, derive_randomness, release_mask
from dp_spark.mechanisms.set_union.thresholds import (
    SHARD_CUTOFFS,
    SetUnionPlan,
    analytic_gaussian_sigma,
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
    "HELD_SUPPORT",
    "BY_FREQUENCY",
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
    "policy_greedy_update",
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
    "rho_greedy",
    "greedy_failure",
    "SHARD_CUTOFFS",
    "shard_cutoff",
    "DEFAULT_SHARDS",
    "ThresholdStep",
    "derive_randomness",
    "release_mask",
    "EXACT_POLICY",
    "DiscreteSetUnionPlan",
    "plan_discrete_set_union",
    "plan_discrete_set_union_zcdp",
    "discrete_release_mask",
    "grid_statistic",
]

