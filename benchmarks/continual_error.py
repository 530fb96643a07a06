"""Error and speed of continual-distinct (Jain et al., NeurIPS 2023; issue 5, item 7).

    .venv/bin/python benchmarks/continual_error.py [--log2-horizons 12 16 20]
        [--flippancies 1 4 16 64 256] [--items 2000] [--reps 3] [--rho 0.5]
        [--speed-events 10000000] [--speed-log2-horizon 20] [--speed-flippancy 16]
        [--skip-speed] [--tmp DIR]

1. Accuracy (numpy only, the mechanism layer on exact summaries): synthetic
   streams with controlled maximum flippancy w (``--items`` items; item 0
   flips exactly w times, the others 1 + ⌊U²·w⌋ times at random distinct
   steps, alternating insert/delete) and horizon T. For each (T, w), over
   ``--reps`` seeded runs: the maximum and the mean over t of |estimate(t) −
   D(t)| for Algorithm 1 given w ("bounded"), Algorithm 3 ("adaptive") and the
   periodic-recompute baseline, ρ = ``--rho``. The column alg1/√w·L divides
   Algorithm 1's max error by √w·log2(2T): roughly constant if the error grows
   like √w·polylog T (the tree's noise is σ·sqrt(popcount t) with σ² = w·L/(2ρ)).
2. Speed of the Spark stage (local[2]) at T = 2^``--speed-log2-horizon`` and
   about ``--speed-events`` events from dp_spark.continual_data.synthetic_stream
   (written once to Parquet in a temporary directory): the stage alone
   (continual_summaries), the whole release (stage + adaptive mechanism), and a
   non-private floor on the same file (events per step, groupBy + collect).

True counts are NON-PRIVATE and printed only as errors; every release here is
seeded (not for publication). Prints tables, asserts nothing.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Timer, command_line, fmt, format_table, run_rng  # noqa: E402

from dp_spark.continual import continual_counts, stream_summaries  # noqa: E402


def synthetic_stream(rng: np.random.Generator, horizon: int, items: int, w: int):
    """(times, items, ops) with maximum flippancy exactly min(w, T) (numpy)."""
    w = min(w, horizon)
    flips = np.minimum(w, 1 + np.floor(rng.random(items) ** 2 * w).astype(np.int64))
    flips[0] = w
    times, labels, ops = [], [], []
    for item, f in enumerate(flips):
        steps = np.sort(rng.choice(horizon, size=int(f), replace=False)) + 1
        times.append(steps)
        labels.append(np.full(f, item))
        ops.append(np.where(np.arange(f) % 2 == 0, 1, -1))
    return np.concatenate(times), np.concatenate(labels), np.concatenate(ops)


def accuracy(args) -> None:
    rows = []
    for log2_t in args.log2_horizons:
        T = 1 << log2_t
        L = log2_t + 1
        for w in args.flippancies:
            rng = run_rng(log2_t, w)
            times, items, ops = synthetic_stream(rng, T, args.items, w)
            summaries = stream_summaries(times, items, ops, T)
            truth = np.cumsum(summaries.z).astype(np.float64)
            errs = {name: ([], []) for name in ("bounded", "adaptive", "baseline")}
            final_w = []
            with Timer() as timer:
                for rep in range(args.reps):
                    for name in errs:
                        extra = {"max_flippancy": w} if name == "bounded" else {}
                        out = continual_counts(summaries, args.rho, name, rng=run_rng(log2_t, w, rep, len(name)),
                                               **extra)
                        error = np.abs(out.estimates - truth)
                        errs[name][0].append(error.max())
                        errs[name][1].append(error.mean())
                        if name == "adaptive":
                            final_w.append(int(out.flippancy_bound[-1]))
            del summaries
            alg1_max = float(np.mean(errs["bounded"][0]))
            rows.append([
                f"2^{log2_t}", w, f"{len(times):,}", fmt(float(truth.mean()), 0),
                fmt(alg1_max), fmt(float(np.mean(errs["bounded"][1]))),
                fmt(alg1_max / (math.sqrt(w) * L), 2),
                fmt(float(np.mean(errs["adaptive"][0]))), fmt(float(np.mean(errs["adaptive"][1]))),
                "/".join(str(v) for v in sorted(set(final_w))),
                fmt(float(np.mean(errs["baseline"][0]))), fmt(float(np.mean(errs["baseline"][1]))),
                fmt(timer.seconds, 1),
            ])
            print(f"  done T=2^{log2_t} w={w} ({timer.seconds:.1f} s)", flush=True)
    print()
    print(format_table(
        ["T", "w", "events", "mean D(t)", "alg1 max", "alg1 mean", "alg1/√w·L", "adapt max", "adapt mean",
         "adapt final w", "base max", "base mean", "secs"],
        rows,
        title=f"Absolute error over all steps, mean over {args.reps} runs, rho = {args.rho} "
              f"(item-level zCDP); true counts are non-private",
    ))


def speed(args) -> None:
    from _common import start_session
    from pyspark.sql import functions as F

    from dp_spark.continual_data import items_for_events, synthetic_stream as spark_stream
    from dp_spark.releases.continual_distinct import continual_distinct
    from dp_spark.stages.continual import continual_summaries

    spark = start_session("continual_error_speed")
    T = 1 << args.speed_log2_horizon
    tmp = Path(tempfile.mkdtemp(prefix="continual_speed_", dir=args.tmp))
    try:
        path = str(tmp / "events.parquet")
        items = items_for_events(args.speed_events, args.speed_flippancy)
        with Timer() as gen:
            spark_stream(spark, items=items, horizon=T, max_flippancy=args.speed_flippancy).write.parquet(path)
        events = spark.read.parquet(path)
        n = events.count()
        shards = int(spark.conf.get("spark.sql.shuffle.partitions"))
        print(f"  generated {n:,} events over {items:,} items in {gen.seconds:.1f} s", flush=True)
        rows = []
        with Timer() as floor:
            spark.read.parquet(path).groupBy("time").count().collect()
        rows.append(["non-private floor: events per step (groupBy time, collect)", fmt(floor.seconds, 1)])
        with Timer() as floor_items:
            spark.read.parquet(path).groupBy("item").agg(F.sum("op")).count()
        rows.append(["non-private floor: net op per item (groupBy item, count)", fmt(floor_items.seconds, 1)])
        with Timer() as stage:
            out = continual_summaries(spark.read.parquet(path), horizon=T)
        rows.append([f"Spark stage: continual_summaries ({shards} item shards)", fmt(stage.seconds, 1)])
        del out
        with Timer() as release:
            continual_distinct(spark.read.parquet(path), args.rho, horizon=T, seed=1)
        rows.append(["whole release: stage + adaptive mechanism + series", fmt(release.seconds, 1)])
        print()
        print(format_table(
            ["local[2], one run each", "seconds"], rows,
            title=f"Speed at T = 2^{args.speed_log2_horizon}, {n:,} events, max flippancy "
                  f"{args.speed_flippancy} (stage / floors = {stage.seconds / floor.seconds:.1f}x, "
                  f"{stage.seconds / floor_items.seconds:.1f}x)",
        ))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log2-horizons", type=int, nargs="+", default=[12, 16, 20])
    parser.add_argument("--flippancies", type=int, nargs="+", default=[1, 4, 16, 64, 256])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rho", type=float, default=0.5)
    parser.add_argument("--speed-events", type=int, default=10_000_000)
    parser.add_argument("--speed-log2-horizon", type=int, default=20)
    parser.add_argument("--speed-flippancy", type=int, default=16)
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-accuracy", action="store_true")
    parser.add_argument("--tmp", default=None)
    args = parser.parse_args()
    print(command_line(), flush=True)
    if not args.skip_accuracy:
        accuracy(args)
    if not args.skip_speed:
        speed(args)


if __name__ == "__main__":
    main()
