"""Distinct-count mechanisms (Knop & Steinke 2023): :mod:`.gem` (the
Generalized Exponential Mechanism), :mod:`.bound` (bound selection and the
noisy count with its lower bound, one group's) and :mod:`.cap_bound` (every
group's release, vectorised over groups, and the joint choice of the group
cap and the bound)."""

from dp_spark.mechanisms.distinct_count.bound import (
    choose_shards,
    matching_fits,
    noise_margins,
    noisy_size,
    release_from_counts,
    select_bound,
)
from dp_spark.mechanisms.distinct_count.gem import generalized_exponential

__all__ = ["choose_shards", "generalized_exponential", "matching_fits", "noise_margins", "noisy_size",
           "release_from_counts", "select_bound"]
