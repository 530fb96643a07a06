"""dp_spark: differentially private releases about people, on Apache Spark.

Each release is a Spark stage that reduces the data to a bounded summary,
followed by a driver-side mechanism (pure numpy) that draws all privacy noise.

The release functions are imported lazily, so that ``import dp_spark.noise``
(or any other mechanism-layer module) never imports pyspark.
"""

__version__ = "0.1.0"

_LAZY = {
    "distinct_count": ("dp_spark.releases.distinct_count", "distinct_count"),
    "top_k": ("dp_spark.releases.top_k", "top_k"),
    "count_release": ("dp_spark.releases.count_release", "count_release"),
    "set_union": ("dp_spark.releases.set_union", "set_union"),
    "continual_distinct": ("dp_spark.releases.continual_distinct", "continual_distinct"),
    "Release": ("dp_spark.report", "Release"),
    "get_session": ("dp_spark.session", "get_session"),
    "PrivacyFilter": ("dp_spark.accounting", "PrivacyFilter"),
    "PureDP": ("dp_spark.accounting", "PureDP"),
    "ApproxDP": ("dp_spark.accounting", "ApproxDP"),
    "ZCDP": ("dp_spark.accounting", "ZCDP"),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dp_spark' has no attribute {name!r}")
