"""Streamed continual-distinct: seconds per step by state partitions (issue 26).

Runs the streaming release (trigger available-now, one demo file per step,
``write_demo_files``) in a session with Spark's default 200 shuffle
partitions, three ways, each on a fresh checkpoint, in one run:

- ``200 (session)``: what the query used before issue 26 (the session's
  shuffle partitions became the state partitions);
- ``default``: ``state_partitions=None``, now two per task slot
  (``dp_spark.stages.partitioning.python_partitions``);
- ``1``: one partition, the smallest possible.

Prints seconds per released step and the ratio to the default. Seeded
(not for publication); nothing released is printed.

    python -m benchmarks.stream_partitions [--steps 16] [--items 20000] [--reps 2]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from benchmarks._common import format_table, session_summary, start_session


def _run(spark, source: Path, work: Path, name: str, steps: int, partitions) -> float:
    from dp_spark.streaming import continual_distinct_stream

    checkpoint, sink = work / f"ckpt-{name}", work / f"out-{name}"
    start = time.perf_counter()
    release = continual_distinct_stream(spark, str(source), checkpoint=str(checkpoint), sink=str(sink), rho=1.0,
                                        horizon=steps, method="auto", seed=1, state_partitions=partitions)
    seconds = time.perf_counter() - start
    assert release.released_count == steps
    shutil.rmtree(checkpoint)
    shutil.rmtree(sink)
    return seconds / steps


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=16, help="horizon = number of files (a power of two)")
    p.add_argument("--items", type=int, default=20_000)
    p.add_argument("--reps", type=int, default=2)
    args = p.parse_args(argv)

    from dp_spark.stages.partitioning import python_partitions
    from dp_spark.streaming.demo import write_demo_files

    spark = start_session("stream-partitions", {"spark.sql.shuffle.partitions": "200"})
    print(session_summary(spark), flush=True)
    work = Path(tempfile.mkdtemp(prefix="dp-stream-bench-"))
    try:
        source = work / "in"
        write_demo_files(spark, source, args.steps, items=args.items)
        ways = [(f"default ({python_partitions(spark)})", None), ("1", 1), ("200 (session, before)", 200)]
        _run(spark, source, work, "warm", args.steps, None)  # JIT, Python workers, file listing
        best = {}
        for rep in range(args.reps):
            for name, partitions in ways:
                value = _run(spark, source, work, f"{rep}", args.steps, partitions)
                best[name] = min(best.get(name, value), value)
                print(f"rep {rep + 1}: {name}: {value:.3f} s / step", flush=True)
        default = best[ways[0][0]]
        rows = [(name, f"{best[name]:.3f}", f"{best[name] / default:.2f}") for name, _ in ways]
        print(format_table(["state partitions", "s / step (best)", "ratio to default"], rows,
                           title=f"streamed continual-distinct, {args.steps} steps, {args.items:,} demo items"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
