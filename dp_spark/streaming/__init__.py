"""Structured Streaming mode of the continual-distinct release.

- ``continual_distinct_stream``: run or resume a query over a directory of
  event files; each micro-batch is one step; returns a ``Release`` of the
  steps released so far (``dp_spark.streaming.query``).
- ``MechanismCheckpoint`` / ``StepSink``: the driver's checkpointed mechanism
  state (confidential) and the per-step output records.
- ``write_demo_files``: the built-in demo source (one file per step).

Guarantee: item-level ρ-zCDP for the whole series, ρ spent once per
checkpoint (Jain, Kalemaj, Raskhodnikova, Sivakumar, Smith, NeurIPS 2023;
mechanisms in ``dp_spark.mechanisms.continual_distinct``), provided the step grid — which source
files form which step — does not depend on the data (see
``dp_spark.streaming.query``: prefer available-now with one file set per
fixed period, empty files included).
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
