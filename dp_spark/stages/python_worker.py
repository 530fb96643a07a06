"""What every Python pass does first on its worker: settle the imported modules out of the cyclic
garbage collector's way. No privacy noise; nothing here reads data, logs or names a job.

PySpark reuses a Python worker for task after task (``spark.python.worker.reuse``, on by default) and
runs a full ``gc.collect()`` after each one (``pyspark/daemon.py``). A full collection traverses every
object the collector tracks: in a worker that has imported numpy, pyarrow, pandas, scipy and dp_spark's
stages, about 90,000 objects and 40 ms — per task, whatever the task's size. A release on a small table
runs tens of Python tasks, so those collections were most of its Python CPU (py-spy on the workers of the
transcript audit's releases: 95 % of their samples in that ``gc.collect()``;
benchmarks/results/2026-11-30-worker-gc.md).

:func:`worker_pass` wraps a pass's body (the function given to ``mapInArrow`` / ``mapInPandas`` /
``applyInPandasWithState``, or made a ``pandas_udf``) so that it first calls :func:`settle_imports`: in a
worker PySpark reuses (``SPARK_REUSE_WORKER`` set, the daemon's own test), when modules were loaded since
the last call in the process, one ``gc.collect()`` (so no garbage is kept) and ``gc.freeze()``, which moves
every object alive now to the collector's permanent generation. The collection after each task then
traverses only what tasks created since. Elsewhere (a worker used once, PySpark's simple worker, a driver
calling a body directly) nothing runs a collection per task, so nothing is done.

What a freeze keeps: every object alive at that moment — the modules and their objects, and the current
task's unpickled function, its arguments and task context (with pipelined UDF input, batches already
read). Frozen objects are still freed by reference counting; one that later becomes part of a garbage
reference cycle is never collected. Freezes happen only when the module count changed — a worker's
first task or few — so what can stay is bounded by a few tasks' objects for the worker's life, not per
task. A process that loads no new module (every task after a worker's first few) pays one environment
lookup and one length comparison."""

from __future__ import annotations

import functools
import gc
import inspect
import os
import sys

#: Set by Spark in a Python worker's environment when workers are reused (``spark.python.worker.reuse``).
REUSE_ENV = "SPARK_REUSE_WORKER"

#: ``len(sys.modules)`` at this process's last freeze (0: never frozen).
_modules_at_freeze = 0


def settle_imports() -> bool:
    """In a reused worker (:data:`REUSE_ENV` set), when modules were loaded since the last call in
    this process: collect, then freeze every object alive (``gc.freeze``); return whether it froze.
    O(1) otherwise."""
    global _modules_at_freeze
    if not os.environ.get(REUSE_ENV):
        return False
    loaded = len(sys.modules)
    if loaded == _modules_at_freeze:
        return False
    gc.collect()
    gc.freeze()
    _modules_at_freeze = loaded
    return True


def worker_pass(body):
    """``body`` (a Python pass's function, run on a worker) calling :func:`settle_imports` first. The
    wrapper keeps ``body``'s module and name, so it pickles by reference like ``body``, and its
    signature (``__signature__``: PySpark reads a grouped function's arity with
    ``inspect.getfullargspec``, which does not follow ``__wrapped__``)."""

    @functools.wraps(body)
    def run(*args, **kwargs):
        settle_imports()
        return body(*args, **kwargs)

    run.__signature__ = inspect.signature(body)
    return run
