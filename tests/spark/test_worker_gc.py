"""A wrapped Python pass settles its Spark worker's modules before its first batch
(dp_spark/stages/python_worker.py): on a real, reused worker, not only in this process."""

from __future__ import annotations

import colorsys
from functools import partial

import pyarrow as pa

from dp_spark.stages.python_worker import worker_pass


def test_a_wrapped_pass_freezes_the_modules_its_task_loaded(spark):
    """The pass's argument is a function of ``colorsys`` (a module nothing else here loads), so
    unpickling the task loads a module before the wrapper runs: a worker's first such task must
    freeze with it loaded (``_modules_at_freeze`` = the module count inside the body). A wrapper
    that did nothing would leave the count of an earlier freeze, or none."""

    def probe(batches, marker):
        import gc
        import sys

        from dp_spark.stages import python_worker

        rows = sum(b.num_rows for b in batches)
        yield pa.RecordBatch.from_pydict({
            "rows": [rows],
            "frozen": [gc.get_freeze_count()],
            "settled": [python_worker._modules_at_freeze == len(sys.modules) and "colorsys" in sys.modules],
        })

    df = spark.range(0, 1000, numPartitions=4)
    out = df.mapInArrow(partial(worker_pass(probe), marker=colorsys.rgb_to_hls),
                        "rows long, frozen long, settled boolean").collect()
    assert sum(r.rows for r in out) == 1000 and len(out) == 4
    assert all(r.frozen > 1000 for r in out), out  # the worker's modules moved out of the collector's way
    assert all(r.settled for r in out), out
