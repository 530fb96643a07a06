"""Issue 26: the distinct-count greedy pass with a JVM kernel, against the Python kernel.

    flock /tmp/dp_spark_bench.lock .venv/bin/python -m benchmarks.jvm_kernel_speed \
        [--rows 2000000 20000000] [--reps 1] [--shards N] [--check-shards 3 16] \
        [--shape spark-defaults] [--check-only] [--json out.json]

A MEASUREMENT, not a feature: ``benchmarks/jvm_kernel/GreedyKernel.java`` is
a JVM copy of the per-shard greedy of ``dp_spark.stages.distinct._greedy_partition``
(lean rows: a long person column). This script compiles it with ``javac``
against the pyspark wheel's jars into a jar under a temporary directory
(removed at the end; no build step in the package, no jar committed), starts
a session of one of ``_common.SESSION_SHAPES`` (default Spark's defaults)
with that jar on the driver class path, and calls it through py4j on the
same rows the Python kernel reads (``sharded_edges`` with the same shard
count and partitions), so both produce (item key, round) rows that
``counts_from_round_table`` combines. (``greedy_counts``, the Python stage
timed below, has combined packed key ranges in Python since 2026-11-26
instead; the JVM stage keeps the per-item JVM combine, so its time
includes that difference.)

For each row count (the synthetic tables ``speed_all`` times:
``dp_spark.datasets.synthetic_events`` written to Parquet):
1. checks that the JVM kernel's counts c_1..c_L EQUAL the Python kernel's
   (``greedy_counts``) at the release's shard count, and at the smallest row
   count also at ``--check-shards`` and that the two round tables are the
   same multiset of rows; exits 1 if any differs;
2. times in turn, after one warm-up each (the checks warm up the kernels),
   ``--reps`` times: the Python-kernel stage (``greedy_counts``), the
   JVM-kernel stage (the same with the JVM kernel), the per-person aggregate
   ``groupBy(person).agg(countDistinct(item))`` (noop sink), the bare
   person-shuffle floor (``_common.person_shuffle_floor``) and the release's
   other job, the sampled person count behind the noisy shard choice;
3. prints medians, the ratios JVM / floor, Python / floor, JVM / Python,
   and the load average.

Shard count: the release's own choice (one seeded ``dp_spark.distinct_count``
run, its reported ``shards``), unless ``--shards``. Counts and sizes are
NON-PRIVATE and stay in this process's output (benchmark data, seeded
synthetic table); nothing here is a release.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import (  # noqa: E402
    DRIVER_MEMORY,
    MASTER,
    SESSION_SHAPES,
    Timer,
    command_line,
    format_table,
    person_shuffle_floor,
    write_json,
)

JAVA_SOURCE = HERE / "jvm_kernel" / "GreedyKernel.java"
JAVA_CLASS = "dpspark.bench.GreedyKernel"
PERSON_COL, ITEM_COL = "person_id", "item"


def pyspark_jars() -> str:
    import pyspark

    return str(Path(pyspark.__file__).resolve().parent / "jars")


def build_jar(out_dir: Path, javac: str = "javac") -> Path:
    """Compile GreedyKernel.java against pyspark's jars into ``out_dir/greedy-kernel.jar``."""
    classes = out_dir / "classes"
    classes.mkdir(parents=True, exist_ok=True)
    subprocess.run([javac, "--release", "17", "-nowarn", "-cp", os.path.join(pyspark_jars(), "*"),
                    "-d", str(classes), str(JAVA_SOURCE)], check=True)
    jar = out_dir / "greedy-kernel.jar"
    with zipfile.ZipFile(jar, "w") as zf:
        zf.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        for path in sorted(classes.rglob("*.class")):
            zf.write(path, path.relative_to(classes).as_posix())
    return jar


def start_session_with_jar(shape: str, jar: Path):
    """A session of ``_common.SESSION_SHAPES[shape]`` (the same master, driver
    memory and UI settings as ``_common.start_shaped_session``) with ``jar``
    on the driver class path (local mode: the executors run in the driver JVM)."""
    from pyspark.sql import SparkSession

    from dp_spark.session import prepare_environment

    prepare_environment()
    conf = {"spark.driver.memory": DRIVER_MEMORY, "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false", "spark.driver.extraClassPath": str(jar)}
    if SESSION_SHAPES[shape] is None:  # the project's own session
        from dp_spark.session import get_session

        return get_session(master=MASTER, conf={**conf, "spark.app.name": "dp_spark jvm_kernel_speed"})
    builder = SparkSession.builder.master(MASTER).appName(f"dp_spark jvm_kernel_speed ({shape})")
    for key, value in {**conf, **SESSION_SHAPES[shape]}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


# ------------------------------------------------------------ the two kernels

def jvm_rounds(spark, edge_df, max_bound: int, shards: int):
    """(item key, round) rows of the JVM kernel on the rows the Python kernel reads."""
    from pyspark.sql import DataFrame

    from dp_spark.stages.distinct import _IH, greedy_partitions, sharded_edges
    from dp_spark.stages.edges import PERSON

    lean = sharded_edges(edge_df, shards, greedy_partitions(spark, shards))
    kernel = spark._jvm.dpspark.bench.GreedyKernel
    return DataFrame(kernel.rounds(lean._jdf, PERSON, _IH, int(max_bound), int(shards)), spark)


def jvm_counts(spark, edge_df, max_bound: int, shards: int) -> np.ndarray:
    from dp_spark.stages.distinct import ITEM_KEY, counts_from_round_table

    return counts_from_round_table(jvm_rounds(spark, edge_df, max_bound, shards), max_bound, ITEM_KEY)


def python_counts(edge_df, max_bound: int, shards: int) -> np.ndarray:
    from dp_spark.stages.distinct import greedy_counts

    return greedy_counts(edge_df, max_bound, shards)


def same_round_tables(spark, edge_df, max_bound: int, shards: int) -> bool:
    """Whether both kernels emit the same multiset of (item key, round) rows."""
    from dp_spark.stages.distinct import greedy_rounds

    py = greedy_rounds(edge_df, max_bound, shards)
    jv = jvm_rounds(spark, edge_df, max_bound, shards)
    return py.exceptAll(jv).isEmpty() and jv.exceptAll(py).isEmpty()


# ----------------------------------------------------------------- one size

def measure(spark, path: str, rows: int, *, reps: int, max_bound: int, shards: int | None,
            check_shards: list[int], check_tables: bool) -> dict:
    from pyspark.sql import functions as F

    import dp_spark
    from dp_spark.plans.distinct_count import PERSON_SAMPLE  # the sample at ε >= 1
    from dp_spark.stages.edges import count_sampled_persons, edges

    def edge_df():
        return edges(spark.read.parquet(path), PERSON_COL, ITEM_COL)

    if shards is None:  # the release's own choice (seeded run; the count is not released anywhere)
        shards = int(dp_spark.distinct_count(spark.read.parquet(path), person_col=PERSON_COL, item_col=ITEM_COL,
                                             epsilon=1.0, max_bound=max_bound, seed=0).parameters["shards"])
    checks = []
    for s in [shards, *[c for c in check_shards if c != shards]]:
        py, jv = python_counts(edge_df(), max_bound, s), jvm_counts(spark, edge_df(), max_bound, s)
        entry = {"shards": s, "counts_equal": bool(np.array_equal(py, jv)),
                 "python_c1_cL": [int(py[0]), int(py[-1])], "jvm_c1_cL": [int(jv[0]), int(jv[-1])],
                 "first_difference": None if np.array_equal(py, jv) else int(np.flatnonzero(py != jv)[0] + 1)}
        if check_tables:
            entry["round_tables_equal"] = same_round_tables(spark, edge_df(), max_bound, s)
        checks.append(entry)
        print(f"{rows:,} rows, {s} shards: counts c_1..c_{max_bound} equal: {entry['counts_equal']} "
              f"(NON-PRIVATE c_1, c_{max_bound}: Python {entry['python_c1_cL']}, JVM {entry['jvm_c1_cL']})"
              + (f", round tables equal: {entry['round_tables_equal']}" if check_tables else ""), flush=True)

    def per_person():
        (spark.read.parquet(path).groupBy(PERSON_COL).agg(F.countDistinct(ITEM_COL))
         .write.format("noop").mode("overwrite").save())

    contenders = {
        "python_stage": lambda: python_counts(edge_df(), max_bound, shards),
        "jvm_stage": lambda: jvm_counts(spark, edge_df(), max_bound, shards),
        "per_person": per_person,
        "floor": lambda: person_shuffle_floor(spark, path, PERSON_COL, ITEM_COL),
        "person_count": lambda: count_sampled_persons(edge_df(), PERSON_SAMPLE),
    }
    for name in ("per_person", "floor", "person_count"):  # the kernels were warmed up by the checks
        contenders[name]()
    times = {name: [] for name in contenders}
    load_start = os.getloadavg()
    for _ in range(reps):
        for name, run in contenders.items():
            with Timer() as t:
                run()
            times[name].append(t.seconds)
    med = {name: float(statistics.median(ts)) for name, ts in times.items()}
    return {"rows": rows, "shards": shards, "checks": checks, "times_s": times, "median_s": med,
            "ratios": {"jvm / floor": med["jvm_stage"] / med["floor"],
                       "python / floor": med["python_stage"] / med["floor"],
                       "jvm / python": med["jvm_stage"] / med["python_stage"],
                       "jvm / per-person": med["jvm_stage"] / med["per_person"],
                       "python / per-person": med["python_stage"] / med["per_person"],
                       "(jvm + person count) / floor": (med["jvm_stage"] + med["person_count"]) / med["floor"]},
            "load_average_start": load_start, "load_average_end": os.getloadavg()}


def print_run(run: dict, reps: int) -> None:
    m, r = run["median_s"], run["ratios"]
    rows = [[label, f"{m[key]:.2f}", " ".join(f"{x:.2f}" for x in run["times_s"][key])] for key, label in (
        ("python_stage", "Python-kernel stage (greedy_counts)"),
        ("jvm_stage", "JVM-kernel stage (same rows, same combine)"),
        ("per_person", "per-person aggregate groupBy(person).countDistinct(item)"),
        ("floor", "bare person-shuffle floor"),
        ("person_count", "sampled person count (the release's other job)"),
    )]
    la, lb = run["load_average_start"], run["load_average_end"]
    print(format_table([f"{run['rows']:,} rows, {run['shards']} shards, median of {reps}", "s", "all reps (s)"],
                       rows, title=f"load average at start / end of timing: {la[0]:.2f} {la[1]:.2f} {la[2]:.2f} / "
                                   f"{lb[0]:.2f} {lb[1]:.2f} {lb[2]:.2f}"))
    print("ratios: " + ", ".join(f"{k} {v:.2f}" for k, v in r.items()), flush=True)


def profile(spark, path: str, rows: int, *, reps: int, max_bound: int, shards: int) -> dict:
    """Where the stage's time goes, each step its own job to the noop sink,
    after one warm-up, interleaved: the shuffle into the shards alone, each
    kernel's rounds without the combine, and each full stage (with the
    combine by item and the collect)."""
    from dp_spark.stages.distinct import greedy_partitions, greedy_rounds, sharded_edges
    from dp_spark.stages.edges import edges

    def edge_df():
        return edges(spark.read.parquet(path), PERSON_COL, ITEM_COL)

    def noop(df):
        df.write.format("noop").mode("overwrite").save()

    steps = {
        "shuffle into the shards (sharded_edges, no kernel)":
            lambda: noop(sharded_edges(edge_df(), shards, greedy_partitions(spark, shards))),
        "Python kernel rounds (greedy_rounds, no combine)": lambda: noop(greedy_rounds(edge_df(), max_bound, shards)),
        "JVM kernel rounds (no combine)": lambda: noop(jvm_rounds(spark, edge_df(), max_bound, shards)),
        "Python-kernel stage (+ combine + collect)": lambda: python_counts(edge_df(), max_bound, shards),
        "JVM-kernel stage (+ combine + collect)": lambda: jvm_counts(spark, edge_df(), max_bound, shards),
        "bare person-shuffle floor": lambda: person_shuffle_floor(spark, path, PERSON_COL, ITEM_COL),
    }
    for run in steps.values():
        run()
    times = {name: [] for name in steps}
    load_start = os.getloadavg()
    for _ in range(reps):
        for name, run in steps.items():
            with Timer() as t:
                run()
            times[name].append(t.seconds)
    la, lb = load_start, os.getloadavg()
    print(format_table([f"profile, {rows:,} rows, {shards} shards, median of {reps}", "s", "all reps (s)"],
                       [[name, f"{statistics.median(ts):.2f}", " ".join(f"{x:.2f}" for x in ts)]
                        for name, ts in times.items()],
                       title=f"load average at start / end: {la[0]:.2f} / {lb[0]:.2f}"), flush=True)
    return {"rows": rows, "shards": shards, "profile_s": times, "checks": []}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, nargs="+", default=[2_000_000, 20_000_000])
    p.add_argument("--reps", type=int, default=1, help="timed repetitions after the warm-up (default 1)")
    p.add_argument("--max-bound", type=int, default=100)
    p.add_argument("--shards", type=int, default=None, help="default: the release's automatic choice")
    p.add_argument("--check-shards", type=int, nargs="*", default=[3, 16],
                   help="further shard counts whose counts must match, at the smallest --rows (default 3 16)")
    p.add_argument("--shape", choices=list(SESSION_SHAPES), default="spark-defaults")
    p.add_argument("--check-only", action="store_true", help="only the equality checks, no timing")
    p.add_argument("--profile-only", action="store_true",
                   help="only the stage's split (needs --shards; no checks): shuffle, rounds per kernel, stages")
    p.add_argument("--javac", default=shutil.which("javac") or "javac")
    p.add_argument("--tmp", type=Path, default=None, help="parent of the temporary jar and Parquet files")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    if args.profile_only and args.shards is None:
        p.error("--profile-only needs --shards")

    from dp_spark.datasets import synthetic_events

    base = Path(tempfile.mkdtemp(prefix="dp_spark_jvm_kernel_", dir=args.tmp))
    try:
        jar = build_jar(base, args.javac)
        spark = start_session_with_jar(args.shape, jar)
        conf = {k: spark.conf.get(k) for k in ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled")}
        print(f"command: {command_line()}")
        print(f"session shape {args.shape}: {conf}, {MASTER}, driver {DRIVER_MEMORY}, spark {spark.version}, "
              f"{os.cpu_count()} cores; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
        out = {"command": command_line(), "shape": args.shape, "conf": conf, "runs": []}
        ok = True
        for k, rows in enumerate(sorted(args.rows)):
            path = str(base / f"events_{rows}.parquet")
            synthetic_events(spark, rows=rows).write.mode("overwrite").parquet(path)
            if args.profile_only:
                run = profile(spark, path, rows, reps=args.reps, max_bound=args.max_bound, shards=args.shards)
            elif args.check_only:
                run = measure_checks_only(spark, path, rows, args)
            else:
                run = measure(spark, path, rows, reps=args.reps, max_bound=args.max_bound, shards=args.shards,
                              check_shards=args.check_shards if k == 0 else [], check_tables=k == 0)
                print_run(run, args.reps)
            ok &= all(c["counts_equal"] and c.get("round_tables_equal", True) for c in run["checks"])
            out["runs"].append(run)
        spark.stop()
        if args.json:
            write_json(args.json, out)
        if not ok:
            print("JVM kernel NOT identical to the Python kernel (see the checks above)", flush=True)
            return 1
        return 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


def measure_checks_only(spark, path: str, rows: int, args) -> dict:
    """The equality checks alone (every shard count given, round tables too): the smoke test's run."""
    from dp_spark.stages.edges import edges

    checks = []
    for s in [args.shards or 1, *args.check_shards]:
        edge_df = edges(spark.read.parquet(path), PERSON_COL, ITEM_COL)
        py, jv = python_counts(edge_df, args.max_bound, s), jvm_counts(spark, edge_df, args.max_bound, s)
        checks.append({"shards": s, "counts_equal": bool(np.array_equal(py, jv)),
                       "python_c1_cL": [int(py[0]), int(py[-1])], "jvm_c1_cL": [int(jv[0]), int(jv[-1])],
                       "round_tables_equal": same_round_tables(spark, edge_df, args.max_bound, s)})
        print(f"{rows:,} rows, {s} shards: {checks[-1]}", flush=True)
    return {"rows": rows, "checks": checks}


if __name__ == "__main__":
    sys.exit(main())
