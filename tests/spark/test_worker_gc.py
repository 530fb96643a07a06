"""A wrapped Python pass settles its Spark worker's modules before its first batch
(dp_spark/stages/python_worker.py): on a real worker, not only in this process."""

from __future__ import annotations

import pyarrow as pa

from dp_spark.stages.python_worker import worker_pass


def test_a_wrapped_pass_runs_on_a_worker_whose_modules_are_frozen(spark):
    def probe(batches):
        import gc
        import sys

        from dp_spark.stages import python_worker

        rows = sum(b.num_rows for b in batches)
        yield pa.RecordBatch.from_pydict({
            "rows": [rows],
            "frozen": [gc.get_freeze_count()],
            # settled with every module loaded before the batches (the probe's imports are loaded already)
            "settled": [python_worker._modules_at_freeze == len(sys.modules)],
        })

    df = spark.range(0, 1000, numPartitions=4)
    out = df.mapInArrow(worker_pass(probe), "rows long, frozen long, settled boolean").collect()
    assert sum(r.rows for r in out) == 1000 and len(out) == 4
    assert all(r.frozen > 1000 for r in out), out  # the worker's modules moved out of the collector's way
    assert all(r.settled for r in out), out

