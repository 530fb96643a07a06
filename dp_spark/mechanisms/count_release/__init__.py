"""Private count release, mechanism layer (pure numpy/scipy, no pyspark).

Rogers, "Private Count Release: A Simple and Scalable Approach for Private
Data Analytics" (arXiv 2403.05073); ALGORITHMS.md 5.2-5.3.

- :mod:`.loop`: Private Count Release (Algorithm 2), δ-approximate ρ-zCDP:
  Unknown Domain Gumbel top-1 with growing ε under a privacy filter, then
  discrete Gaussian noise on the found count; no contribution bound.
- :mod:`.bounded`: the contribution-bounding ("Plume") baseline's mechanism
  half, δ-approximate ρ-zCDP: calibration, Gaussian-threshold partition
  selection and discrete Gaussian counts (pure functions the Spark stage
  calls inside mapInPandas with an explicit noise key), threshold
  T = (2+r)σ/r.
- :mod:`.keyed`: noise keyed per item (keyed BLAKE2b), so draws made inside
  Spark do not depend on partitioning, batching or task retries.
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
