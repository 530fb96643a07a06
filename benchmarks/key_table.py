"""The key table of a grouped release as a LocalRelation against dp_spark's Arrow chunks.

A table of N public keys (long key, int index) made on the driver from Arrow, three ways: Spark's
``createDataFrame`` (a LocalRelation below ``spark.sql.execution.arrow.localRelationThreshold``),
``dp_spark.stages.arrow_frames.arrow_frame`` (IPC chunks above ``LOCAL_ROWS``), and, for scale, the
same rows already in Spark (``spark.range``). For each: the frame's creation, the mean time of one
DataFrame call on a plan holding it (the release's join with 2M rows,
``dp_spark.stages.group_items.join_keys``: broadcast up to 100,000 keys, sort-merge above; then ten
``withColumn``), and a run of that join to the noop sink (best of ``--reps``). ``--domain D``: also top-k over a public domain of D items
(``w0`` .. ``w{D-1}``, the synthetic generator's names, most without rows) on 2M synthetic rows, ungrouped
(joint, k 10) and by 10 hashed groups (k 5), the median of ``--reps`` after a warm-up: the domain table
takes the same path. Timings only; the releases are seeded and NOT for publication.

    .venv/bin/python -m benchmarks.key_table --keys 20000 100000 1000000
    .venv/bin/python -m benchmarks.key_table --keys --domain 1000000
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pyarrow as pa

from benchmarks._common import start_session


def _joined(events, keys, n: int):
    """The release's join with its key table (broadcast up to 100,000 keys, a sort-merge join above)."""
    from dp_spark.stages.group_items import join_keys

    return join_keys(events, keys, "g", n)


def _ms_per_call(events, keys, n: int) -> float:
    from pyspark.sql import functions as F

    start = time.perf_counter()
    frame = _joined(events, keys, n)
    for i in range(10):
        frame = frame.withColumn(f"c{i}", F.col("item") + i)
    return (time.perf_counter() - start) / 11 * 1e3


def _join_run(events, keys, n: int, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        _joined(events, keys, n).write.format("noop").mode("overwrite").save()
        best = min(best, time.perf_counter() - start)
    return best


def _top_k_domain(spark, size: int, reps: int) -> None:
    import tempfile

    from pyspark.sql import functions as F

    import dp_spark
    from dp_spark.datasets import synthetic_events

    domain = [f"w{i}" for i in range(size)]
    with tempfile.TemporaryDirectory(prefix="key_table_") as tmp:
        synthetic_events(spark, 2_000_000).select("person_id", "item").write.parquet(f"{tmp}/events")
        df = spark.read.parquet(f"{tmp}/events").select("person_id", "item",
                                                        F.pmod(F.xxhash64("person_id"), F.lit(10)).alias("g"))

        def ungrouped(seed):
            dp_spark.top_k(df, k=10, epsilon=1.0, method="joint", domain=domain, seed=seed)

        def grouped(seed):
            release = dp_spark.top_k(df, k=5, epsilon=1.0, delta=1e-6, domain=domain, group_by="g",
                                     groups=list(range(10)), seed=seed)
            release.groups.write.format("noop").mode("overwrite").save()

        for name, run in (("ungrouped", ungrouped), ("grouped, 10 keys", grouped)):
            run(0)
            times = []
            for rep in range(reps):
                start = time.perf_counter()
                run(rep + 1)
                times.append(time.perf_counter() - start)
            print(f"top-k, domain {size:,}, {name}: median {sorted(times)[len(times) // 2]:.2f} s "
                  f"({' '.join(f'{t:.2f}' for t in times)})", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.key_table", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", type=int, nargs="*", default=[20_000, 100_000, 1_000_000])
    p.add_argument("--domain", type=int, default=0, help="top-k over a public domain of this many items")
    p.add_argument("--rows", type=int, default=2_000_000, help="rows joined with the key table")
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args(argv)

    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from dp_spark.stages.arrow_frames import arrow_frame

    spark = start_session("key-table")
    schema = T.StructType([T.StructField("g", T.LongType(), False), T.StructField("idx", T.IntegerType(), False)])
    print(f"load at start {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.keys:
        print(f"{'keys':>9} {'way':<16} {'create s':>9} {'ms/call':>8} {'join run s':>11}")
    for n in args.keys:
        events = spark.range(args.rows).select((F.col("id") % n).alias("g"), (F.col("id") % 777).alias("item"))
        table = pa.table({"g": pa.array(np.arange(n, dtype=np.int64)), "idx": pa.array(np.arange(n, dtype=np.int32))})
        ways = {
            "createDataFrame": lambda: spark.createDataFrame(table, schema),
            "arrow_frame": lambda: arrow_frame(spark, table, schema, bound=n),
            "spark.range": lambda: spark.range(n).select("id", F.col("id").cast("int")).toDF("g", "idx"),
        }
        for way, make in ways.items():
            start = time.perf_counter()
            keys = make()
            created = time.perf_counter() - start
            calls = min(_ms_per_call(events, keys, n) for _ in range(2))
            run = _join_run(events, keys, n, args.reps)
            print(f"{n:>9,} {way:<16} {created:>9.3f} {calls:>8.1f} {run:>11.2f}", flush=True)
    if args.domain:
        _top_k_domain(spark, args.domain, args.reps)
    print(f"load at end {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
