"""dp_spark: differentially private releases about people, on Apache Spark.

Five releases of one shape, ``dp_spark.<release>(df, *, <privacy>, method=..., ..., seed=None, budget=None)
-> Release``: :func:`distinct_count`, :func:`set_union`, :func:`top_k`, :func:`count_release`,
:func:`continual_distinct`. Each builds a frozen :class:`Plan` from its parameters
(``dp_spark.plans.<release>``), charges the budget before reading data, runs a Spark stage that reduces the
data to a bounded summary (``dp_spark.stages``), then a driver-side mechanism (pure numpy,
``dp_spark.mechanisms.<release>``) that draws all privacy noise. The release functions
(:data:`dp_spark.releases.RELEASES`) are imported lazily, so that importing a mechanism-layer module never
imports pyspark.
"""

import importlib

from dp_spark.releases import RELEASES as _RELEASES  # the one list of releases; imports no release

__version__ = "0.1.0"

_LAZY = {
    **{spec.python_name: (spec.module, spec.python_name) for spec in _RELEASES.values()},
    "Release": ("dp_spark.report", "Release"),
    "Plan": ("dp_spark.plan", "Plan"),
    "get_session": ("dp_spark.session", "get_session"),
    "PrivacyFilter": ("dp_spark.accounting", "PrivacyFilter"),
    "PureDP": ("dp_spark.accounting", "PureDP"),
    "ApproxDP": ("dp_spark.accounting", "ApproxDP"),
    "ZCDP": ("dp_spark.accounting", "ZCDP"),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dp_spark' has no attribute {name!r}")
