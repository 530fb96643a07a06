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

from dp_spark.streaming.checkpoint import MechanismCheckpoint, StepSink
from dp_spark.streaming.demo import write_demo_files
from dp_spark.streaming.query import continual_distinct_stream

__all__ = ["continual_distinct_stream", "MechanismCheckpoint", "StepSink", "write_demo_files"]
