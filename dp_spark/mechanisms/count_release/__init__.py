"""Private count release, mechanism layer (pure numpy/scipy): Rogers, "Private
Count Release: A Simple and Scalable Approach for Private Data Analytics"
(arXiv 2403.05073); ALGORITHMS.md 5.2-5.3. :mod:`.loop`: Private Count Release
(Algorithm 2), δ-approximate ρ-zCDP, no contribution bound; :mod:`.bounded`:
the contribution-bounding ("Plume") baseline, δ-approximate ρ-zCDP;
:mod:`.keyed`: noise keyed per item for draws made inside Spark.
"""

from dp_spark.mechanisms.count_release.bounded import (
    BoundedPlan,
    bounded_plan,
    gaussian_threshold_select,
    keyed_noisy_counts,
    selection_probability,
)
from dp_spark.mechanisms.count_release.keyed import item_generator, keyed_normals, keyed_uniforms, noise_key
from dp_spark.mechanisms.count_release.loop import (
    ACCURACY_FACTOR,
    DELTA_MIN,
    EPSILON_MIN,
    PCRResult,
    ReleasedCount,
    check_pcr_parameters,
    pcr_sigma,
    private_count_release,
    within_relative_error_probability,
)

__all__ = [
    "ACCURACY_FACTOR",
    "DELTA_MIN",
    "EPSILON_MIN",
    "PCRResult",
    "ReleasedCount",
    "check_pcr_parameters",
    "pcr_sigma",
    "private_count_release",
    "within_relative_error_probability",
    "BoundedPlan",
    "bounded_plan",
    "gaussian_threshold_select",
    "keyed_noisy_counts",
    "selection_probability",
    "noise_key",
    "keyed_uniforms",
    "keyed_normals",
    "item_generator",
]
