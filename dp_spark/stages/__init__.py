"""Spark stages: deterministic, distributed reductions of the input to bounded
summaries. No privacy noise is drawn here; every value is NON-PRIVATE."""

from dp_spark.stages.distinct import bounded_distinct_counts

__all__ = ["bounded_distinct_counts"]
