"""Grouped releases at many keys: time against the plain query, and the driver's peak memory.

    flock /tmp/dp_spark_bench.lock .venv/bin/python -m benchmarks.grouped_scale \
        [--rows 2000000 20000000] [--keys 1000 10000 100000 1000000] [--releases set-union distinct-count ...] \
        [--reps 2] [--quick] [--stages] [--json out.json]

Data: dp_spark.datasets.synthetic_events(rows) written once per size to Parquet in a temporary
directory; the group column is pmod(xxhash64(person_id, item), K) for K keys, so a person and an
item spread over many groups. The public keys are ``spark.range(K)`` (a DataFrame: all K keys are
released, also those without rows).

Each (rows, K) runs in its own Python process with its own Spark session (local[2]), so each
process's peak memory is that configuration's. In one process, interleaved over ``--reps`` rounds
after one untimed warm-up of each: the plain query the release replaces and the release.

- set-union: ``select(g, item).distinct()`` (NON-PRIVATE) against ``dp_spark.set_union``
  (policy-gaussian defaults, groups = the K keys, unseeded);
- distinct-count: ``groupBy(g).agg(countDistinct(item))`` against ``dp_spark.distinct_count``
  (ε = 1, greedy, max_groups = 4);
- count-release: ``groupBy(g, item).agg(countDistinct(person))`` against ``dp_spark.count_release``
  (bounded, ρ = 0.5, δ = 1e-6, max_items = 10, max_groups = 4);
- top-k: the same counts and a window's top 5 per group against ``dp_spark.top_k`` (k = 5, ε = 1,
  δ = 1e-6, max_groups = 4).

Every release writes its ``release.groups`` (every group's rows) to Spark's ``noop`` sink, as the
plain query writes its result.

``--stages`` also prints, for the last timed run of each, every Spark stage's wall time, its tasks'
summed run time and JVM CPU time (the difference is mostly the Python workers) and the rows and
bytes it read and wrote through shuffles, from Spark's event log (written for this process only,
to a temporary directory: it holds exact, NON-PRIVATE row counts of synthetic data).

Printed per configuration: median seconds of each, their ratio (target <= 2.5), the driver
Python process's peak resident memory (VmHWM, /proc/self/status: the whole process, Spark's py4j
client included) and its resident memory before the first release, and the JVM heap's peak (all
heap pools' peak usage after a reset before the first release; in local mode the JVM is driver
and executors at once, so this bounds the driver JVM from above). Target: driver memory flat in
K, well under 1 GiB at 100,000 keys. Released values are thrown away; nothing is published.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import REPO_ROOT, start_session

RELEASES = ("set-union", "distinct-count", "count-release", "top-k")
#: The cap on groups per person of the releases that need one (public; the table spreads a person
#: over many groups), and top-k's k.
MAX_GROUPS = 4
TOP_K = 5


def machine_load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def _heap_pools(spark):
    mf = spark._jvm.java.lang.management.ManagementFactory
    return [p for p in mf.getMemoryPoolMXBeans() if str(p.getType()) == "Heap memory"]


def _contenders(spark, release: str, path: str, keys: int):
    import dp_spark
    from pyspark.sql import functions as F

    events = spark.read.parquet(path).select(
        "person_id", "item", F.pmod(F.xxhash64("person_id", "item"), F.lit(keys)).alias("g"))
    key_df = spark.range(keys).select(F.col("id").alias("g"))
    if release == "set-union":
        def plain():
            events.select("g", "item").distinct().write.format("noop").mode("overwrite").save()

        def private():
            out = dp_spark.set_union(events, person_col="person_id", item_col="item", group_by="g",
                                     groups=key_df, epsilon=1.0, delta=1e-6, count=True)
            out.groups.write.format("noop").mode("overwrite").save()
        return plain, private
    if release == "distinct-count":
        def plain():
            events.groupBy("g").agg(F.countDistinct("item")).write.format("noop").mode("overwrite").save()

        def private():
            out = dp_spark.distinct_count(events, person_col="person_id", item_col="item", group_by="g",
                                          groups=key_df, epsilon=1.0, max_groups=MAX_GROUPS)
            out.groups.write.format("noop").mode("overwrite").save()
        return plain, private
    if release == "count-release":
        def plain():
            (events.groupBy("g", "item").agg(F.countDistinct("person_id"))
             .write.format("noop").mode("overwrite").save())

        def private():
            out = dp_spark.count_release(events, person_col="person_id", item_col="item", group_by="g",
                                         groups=key_df, rho=0.5, delta=1e-6, method="bounded", max_items=10,
                                         max_groups=MAX_GROUPS)
            out.groups.write.format("noop").mode("overwrite").save()
        return plain, private
    if release == "top-k":
        from pyspark.sql import Window

        def plain():
            counts = events.groupBy("g", "item").agg(F.countDistinct("person_id").alias("n"))
            rank = F.row_number().over(Window.partitionBy("g").orderBy(F.desc("n"), "item"))
            counts.select("g", "item", rank.alias("r")).where(F.col("r") <= TOP_K) \
                .write.format("noop").mode("overwrite").save()

        def private():
            out = dp_spark.top_k(events, person_col="person_id", item_col="item", group_by="g", groups=key_df,
                                 k=TOP_K, epsilon=1.0, delta=1e-6, max_groups=MAX_GROUPS)
            out.groups.write.format("noop").mode("overwrite").save()
        return plain, private
    raise SystemExit(f"unknown release {release!r}")


def _event_log_conf(directory: str) -> dict[str, str]:
    """Session settings writing an uncompressed event log to ``directory`` (``--stages``)."""
    os.environ["DP_SPARK_ALLOW_SPARK_UI"] = "1"  # dp_spark keeps the event log off unless asked
    return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": directory, "spark.eventLog.compress": "false",
            "spark.eventLog.rolling.enabled": "false"}


def stage_table(log_path: str, groups: tuple[str, ...]) -> dict[str, list[dict]]:
    """Per job group of ``groups``: its stages in order, each with wall seconds, the tasks' summed run
    and JVM CPU seconds, and shuffle rows / MiB read and written (NON-PRIVATE counts)."""
    group_of: dict[int, str] = {}
    infos: dict[int, dict] = {}
    tasks: dict[int, dict] = {}
    with open(log_path) as fh:
        for line in fh:
            event = json.loads(line)
            kind = event["Event"]
            if kind == "SparkListenerJobStart":
                group = (event.get("Properties") or {}).get("spark.jobGroup.id")
                for stage in event["Stage IDs"]:
                    group_of[stage] = group
            elif kind == "SparkListenerStageCompleted":
                infos[event["Stage Info"]["Stage ID"]] = event["Stage Info"]
            elif kind == "SparkListenerTaskEnd":
                m = event.get("Task Metrics") or {}
                read, write = m.get("Shuffle Read Metrics", {}), m.get("Shuffle Write Metrics", {})
                t = tasks.setdefault(event["Stage ID"], dict.fromkeys(
                    ("tasks", "run_s", "jvm_cpu_s", "read_rows", "read_mib", "write_rows", "write_mib"), 0))
                t["tasks"] += 1
                t["run_s"] += m.get("Executor Run Time", 0) / 1e3
                t["jvm_cpu_s"] += m.get("Executor CPU Time", 0) / 1e9
                t["read_rows"] += read.get("Total Records Read", 0)
                t["read_mib"] += (read.get("Remote Bytes Read", 0) + read.get("Local Bytes Read", 0)) / 2**20
                t["write_rows"] += write.get("Shuffle Records Written", 0)
                t["write_mib"] += write.get("Shuffle Bytes Written", 0) / 2**20
    out: dict[str, list[dict]] = {g: [] for g in groups}
    for stage in sorted(infos):
        group = group_of.get(stage)
        if group not in out or stage not in tasks:
            continue
        info = infos[stage]
        wall = (info.get("Completion Time", 0) - info.get("Submission Time", 0)) / 1e3
        out[group].append({"stage": stage, "wall_s": wall, **tasks[stage]})
    return out


def _print_stages(name: str, rows: list[dict]) -> None:
    print(f"  {name}: stage  wall s  run s  JVM CPU s  tasks  shuffle read rows (MiB)  written rows (MiB)")
    for r in rows:
        print(f"  {name}: {r['stage']:5d} {r['wall_s']:7.2f} {r['run_s']:6.2f} {r['jvm_cpu_s']:10.2f} {r['tasks']:6d}"
              f"  {r['read_rows']:>13,} ({r['read_mib']:6.1f})  {r['write_rows']:>12,} ({r['write_mib']:6.1f})")
    total = {k: sum(r[k] for r in rows) for k in ("wall_s", "run_s", "jvm_cpu_s")}
    print(f"  {name}: total {total['wall_s']:7.2f} {total['run_s']:6.2f} {total['jvm_cpu_s']:10.2f}", flush=True)


def one(args) -> dict:
    """One configuration in this process (the child's entry point)."""
    log_dir = tempfile.mkdtemp(prefix="grouped-scale-events-") if args.stages else None
    spark = start_session(f"grouped-scale-{args.release}-{args.keys}",
                          _event_log_conf(log_dir) if log_dir else None)
    plain, private = _contenders(spark, args.release, args.path, args.keys)
    plain()  # warm-up (untimed)
    rss_before = _status_kib("VmRSS")
    pools = _heap_pools(spark)
    for pool in pools:
        pool.resetPeakUsage()
    private()  # warm-up (untimed): also the first release, so the peaks below include it
    times = {"plain": [], "release": []}
    for rep in range(args.reps):
        for name, fn in (("plain", plain), ("release", private)):
            if log_dir:  # the last run of each is the one --stages reports
                spark.sparkContext.setJobGroup(name if rep == args.reps - 1 else f"{name}-{rep}", name)
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    heap_peak = sum(int(p.getPeakUsage().getUsed()) for p in pools)
    out = {
        "release": args.release, "rows": args.rows, "keys": args.keys,
        "plain_s": statistics.median(times["plain"]), "release_s": statistics.median(times["release"]),
        "runs": times, "python_peak_mib": _status_kib("VmHWM") / 1024,
        "python_rss_before_mib": rss_before / 1024, "jvm_heap_peak_mib": heap_peak / 2**20,
    }
    out["ratio"] = out["release_s"] / out["plain_s"]
    app = spark.sparkContext.applicationId
    spark.stop()  # closes the event log
    if log_dir:
        out["stages"] = stage_table(os.path.join(log_dir, app), ("plain", "release"))
        shutil.rmtree(log_dir, ignore_errors=True)
    return out


def key_limit(release: str) -> int:
    """The release's public key limit (``Params.MAX_KEYS``)."""
    import importlib

    return importlib.import_module(f"dp_spark.plans.{release.replace('-', '_')}").Params.MAX_KEYS


def write_data(rows: int, directory: Path) -> str:
    from dp_spark.datasets import synthetic_events

    path = directory / f"events-{rows}.parquet"
    if not path.exists():
        spark = start_session("grouped-scale-data")
        synthetic_events(spark, rows).select("person_id", "item").write.parquet(str(path))
        spark.stop()
    return str(path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.grouped scale", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, nargs="+", default=[2_000_000, 20_000_000])
    p.add_argument("--keys", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000])
    p.add_argument("--releases", nargs="+", choices=RELEASES, default=list(RELEASES))
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="200k rows, 1,000 and 100,000 keys, one rep (smoke)")
    p.add_argument("--stages", action="store_true", help="per-stage times of the last run of each (event log)")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--tmp", type=Path, default=None)
    p.add_argument("--child", nargs=4, metavar=("RELEASE", "ROWS", "KEYS", "PATH"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        release, rows, keys, path = args.child
        child = argparse.Namespace(release=release, rows=int(rows), keys=int(keys), path=path, reps=args.reps,
                                   stages=args.stages)
        print("RESULT " + json.dumps(one(child)), flush=True)
        return 0
    if args.quick:
        args.rows, args.keys, args.reps = [200_000], [1_000, 100_000], 1
    results = []
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        print(f"load at start {machine_load()}", flush=True)
        for rows in args.rows:
            path = write_data(rows, Path(tmp))
            for release in args.releases:
                for keys in args.keys:
                    if keys > key_limit(release):
                        print(f"{release:10s} rows={rows:>11,} keys={keys:>9,}  skipped: above the release's "
                              f"limit of {key_limit(release):,} keys", flush=True)
                        continue
                    cmd = [sys.executable, "-m", "benchmarks.grouped_scale", "--reps", str(args.reps),
                           *(["--stages"] if args.stages else []), "--child", release, str(rows), str(keys), path]
                    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True,
                                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
                    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
                    if line is None:
                        print(f"{release} rows={rows:,} keys={keys:,} FAILED:\n{done.stderr[-3000:]}", flush=True)
                        continue
                    r = json.loads(line[len("RESULT "):])
                    results.append(r)
                    print(f"{release:10s} rows={rows:>11,} keys={keys:>9,}  plain {r['plain_s']:7.2f} s  "
                          f"release {r['release_s']:7.2f} s  ratio {r['ratio']:5.2f}  python peak "
                          f"{r['python_peak_mib']:6.0f} MiB (before {r['python_rss_before_mib']:.0f})  "
                          f"JVM heap peak {r['jvm_heap_peak_mib']:6.0f} MiB", flush=True)
                    for name, stage_rows in r.get("stages", {}).items():
                        _print_stages(name, stage_rows)
        print(f"load at end {machine_load()}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
