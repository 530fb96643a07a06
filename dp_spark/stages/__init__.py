"""Spark stages: deterministic, distributed reductions of the input to bounded
summaries. No privacy noise is drawn here; every value is NON-PRIVATE.

``bounded_distinct_counts`` is imported lazily, so that importing this package
(or a stage module's name) does not start importing pyspark by itself."""

__all__ = ["bounded_distinct_counts"]


def __getattr__(name):
    if name == "bounded_distinct_counts":
        from dp_spark.stages.distinct import bounded_distinct_counts

        return bounded_distinct_counts
    raise AttributeError(f"module 'dp_spark.stages' has no attribute {name!r}")
