"""What every Python pass does first on its worker: settle the imported modules out of the cyclic
garbage collector's way. No privacy noise; nothing here reads data, logs or names a job.

PySpark reuses a Python worker for task after task (``spark.python.worker.reuse``, on by default) and
runs a full ``gc.collect()`` after each one (``pyspark/daemon.py``). A full collection traverses every
object the collector tracks: in a worker that has imported numpy, pyarrow, pandas, scipy and dp_spark's
stages, about 90,000 objects and 40 ms — per task, whatever the task's size. A release on a small table
runs tens of Python tasks, so those collections were most of its Python CPU (py-spy on the workers of the
transcript audit's releases: 95 % of their samples in that ``gc.collect()``;
benchmarks/results/2026-11-30-worker-gc.md).

:func:`worker_pass` wraps a pass's body (the function given to ``mapInArrow`` / ``mapInPandas``) so that
it first calls :func:`settle_imports`: when modules were loaded since the last call in this process, one
``gc.collect()`` (so no garbage is kept) and ``gc.freeze()``, which moves every object alive now (the
modules, their functions and tables) to the collector's permanent generation. The collection after each
task then traverses only what tasks created since. Frozen objects are still freed by reference counting;
only a reference cycle among them would stay (modules' own objects, alive for the worker's life anyway).
A process that loads no new module (every task after a worker's first few) pays one length comparison."""

from __future__ import annotations

import functools
import gc
import sys

#: ``len(sys.modules)`` at this process's last freeze (0: never frozen).
_modules_at_freeze = 0


def settle_imports() -> bool:
    """When modules were loaded since the last call in this process: collect, then freeze every
    object alive (``gc.freeze``); return whether it froze. O(1) otherwise."""
    global _modules_at_freeze
    loaded = len(sys.modules)
    if loaded == _modules_at_freeze:
        return False
    gc.collect()
    gc.freeze()
    _modules_at_freeze = loaded
    return True


def worker_pass(body):
    """``body`` (a Python pass's function, run on a worker) calling :func:`settle_imports` first. The
    wrapper keeps ``body``'s module and name, so it pickles by reference like ``body``."""

    @functools.wraps(body)
    def run(*args, **kwargs):
        settle_imports()
        return body(*args, **kwargs)

    return run
