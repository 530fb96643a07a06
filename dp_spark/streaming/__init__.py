"""Structured Streaming mode of the continual-distinct release.

``continual_distinct_stream`` runs or resumes a query over a directory of
event files, one step per micro-batch (``dp_spark.streaming.query``);
``MechanismCheckpoint`` / ``StepSink`` hold the confidential mechanism state
and the per-step output; ``write_demo_files`` writes the demo source.
Item-level ρ-zCDP for the whole series, ρ spent once per checkpoint (Jain,
Kalemaj, Raskhodnikova, Sivakumar, Smith, NeurIPS 2023), provided the step
grid does not depend on the data.
"""

from importlib import import_module

__all__ = ["continual_distinct_stream", "MechanismCheckpoint", "StepSink", "write_demo_files"]

# Loaded on first use, so that importing a light submodule (the options a
# dry run checks) does not import pyspark through the query module.
_HOMES = {
    "continual_distinct_stream": "dp_spark.streaming.query",
    "MechanismCheckpoint": "dp_spark.streaming.checkpoint",
    "StepSink": "dp_spark.streaming.checkpoint",
    "write_demo_files": "dp_spark.streaming.demo",
}


def __getattr__(name: str):
    if name in _HOMES:
        value = getattr(import_module(_HOMES[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
