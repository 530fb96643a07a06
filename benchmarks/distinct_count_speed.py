"""Speed of the distinct-count release against plain Spark COUNT(DISTINCT).

    .venv/bin/python benchmarks/distinct_count_speed.py [--rows 2000000] [--reps 3]
        [--small-rows 200000] [--epsilon 1] [--max-bound 65536] [--shards N]
        [--profile auto|always|never] [--skip-matching] [--tmp DIR] [--json out.json]
    .venv/bin/python benchmarks/distinct_count_speed.py --targets   # ratios at 2M and 20M rows via measure()

Data: dp_spark.datasets.synthetic_events (persons = rows/10, vocabulary =
rows/20, seeded), written once to Parquet in a temporary directory so both
sides read the same file; the directory is removed at the end.

Prints:
1. median wall time over --reps repetitions (after one warm-up) of
   (a) the full greedy release dp_spark.distinct_count(spark.read.parquet(p), epsilon=ε)
   (b) spark.sql("SELECT COUNT(DISTINCT item) FROM parquet.`p`")
   and their ratio next to the target (<= 2.0; printed, not asserted);
2. the split of the release: Spark stage (bounded_distinct_counts) vs the
   driver mechanism (release_from_counts), timed separately;
3. what the release collects to the driver, at two data sizes (persons grow
   with rows): every DataFrame collect/toPandas/toArrow/take/count call made
   during dp_spark.distinct_count is intercepted and its result measured
   (rows, len(pickle.dumps(result)), Arrow IPC size);
4. method="matching" timed once at --rows (reference), if the deduplicated
   edge list fits the default edge limit;
5. with --profile (auto: only when the ratio is above the target), where the
   greedy release spends its time: scan, the sampled person count behind
   the noisy shard choice, the sharded greedy (shuffle; the Arrow hand-off
   to Python alone; the kernel), the final combine.

Values computed from the data without noise (true counts, sizes) are
NON-PRIVATE; the releases are seeded (not for publication).
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    Timer,
    command_line,
    fmt,
    format_table,
    run_rng,
    session_summary,
    start_session,
    write_json,
)

from dp_spark.settings.distinct_count import DEFAULT_MAX_BOUND  # noqa: E402

TARGET_RATIO = 2.0
SESSION_CONF = {"spark.driver.memory": "4g"}  # the project's limit for benchmarks on the shared machine
PERSON_COL, ITEM_COL = "person_id", "item"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2_000_000, help="rows of synthetic data (default 2,000,000)")
    p.add_argument("--small-rows", type=int, default=200_000,
                   help="the second size for the bytes-collected table (default 200,000)")
    p.add_argument("--reps", type=int, default=3, help="timed repetitions after one warm-up (default 3)")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--beta", type=float, default=0.05)
    p.add_argument("--max-bound", type=int, default=DEFAULT_MAX_BOUND, help="default: the release's")
    p.add_argument("--shards", type=int, default=None,
                   help="greedy shards (default: the release's automatic choice from a noisy person "
                        "count; the stage-only timings use the number it chose)")
    p.add_argument("--seed", type=int, default=0, help="base seed of the (seeded) releases")
    p.add_argument("--profile", choices=("auto", "always", "never"), default="auto",
                   help="profile the greedy stage (auto: when the ratio is above the target)")
    p.add_argument("--targets", action="store_true",
                   help="only print the two target ratios (2M and 20M rows) via measure()")
    p.add_argument("--skip-matching", action="store_true", help="do not time method='matching'")
    p.add_argument("--tmp", type=Path, default=None, help="parent directory for the temporary Parquet files")
    p.add_argument("--json", type=Path, default=None, help="also write all results to this JSON file")
    args = p.parse_args(argv)
    if args.reps < 1:
        p.error("--reps must be >= 1")
    return args


def median(xs):
    return float(statistics.median(xs))


def load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


# ------------------------------------------------------------ data to driver

_COLLECTING = ("collect", "toPandas", "toArrow", "take", "head", "first", "tail",
               "toLocalIterator", "count", "isEmpty")


class CollectRecorder:
    """Intercepts every DataFrame action that brings data to the driver while
    active and records what came back: method, rows, pickled bytes, Arrow
    IPC bytes. Nested calls (take -> collect) are recorded once, outermost."""

    def __init__(self, df_class):
        self.df_class = df_class
        self.calls: list[dict] = []
        self._saved = {}
        self._depth = 0

    def __enter__(self):
        for name in _COLLECTING:
            original = getattr(self.df_class, name, None)
            if original is None:
                continue
            self._saved[name] = original
            setattr(self.df_class, name, self._wrap(name, original))
        return self

    def __exit__(self, *exc):
        for name, original in self._saved.items():
            setattr(self.df_class, name, original)
        return False

    def _wrap(self, name, original):
        recorder = self

        def wrapper(df, *args, **kwargs):
            recorder._depth += 1
            try:
                result = original(df, *args, **kwargs)
            finally:
                recorder._depth -= 1
            if recorder._depth == 0:
                recorder.calls.append(collected_size(name, result))
            return result

        return wrapper

    def totals(self) -> dict:
        return {
            "calls": len(self.calls),
            "rows": sum(c["rows"] for c in self.calls),
            "pickle_bytes": sum(c["pickle_bytes"] for c in self.calls),
            "arrow_bytes": sum(c["arrow_bytes"] for c in self.calls),
            "methods": sorted({c["method"] for c in self.calls}),
        }


def _arrow_ipc_bytes(table) -> int:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().size


def collected_size(method: str, result) -> dict:
    import pandas as pd
    import pyarrow as pa

    if isinstance(result, pa.Table):
        rows, table = result.num_rows, result
    elif isinstance(result, pd.DataFrame):
        rows, table = len(result), pa.Table.from_pandas(result, preserve_index=False)
    elif isinstance(result, list):
        rows = len(result)
        table = pa.Table.from_pylist([r.asDict() for r in result]) if result else pa.table({})
    elif result is None or isinstance(result, (int, bool)):
        rows, table = 1, pa.table({"value": [result]})
    else:  # a single Row
        rows, table = 1, pa.Table.from_pylist([result.asDict()])
    return {
        "method": method,
        "rows": int(rows),
        "pickle_bytes": len(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)),
        "arrow_bytes": _arrow_ipc_bytes(table),
    }


# ------------------------------------------------------- targets (one run)

TARGETS = {2_000_000: 2.0, 20_000_000: 2.5}


def measure(spark, rows: int, *, reps: int = 1, epsilon: float = 1.0, max_bound: int = DEFAULT_MAX_BOUND,
            seed: int = 0, tmp: Path | None = None) -> dict:
    """Ratios of the greedy release with automatic shards to
    ``COUNT(DISTINCT item)``, to the per-person aggregate
    ``groupBy(person).agg(countDistinct(item))`` (written to the noop sink)
    and to the bare person-shuffle floor (:func:`_common.person_shuffle_floor`)
    on ``rows`` synthetic rows, all timed in this session on the same
    Parquet file, interleaved, after one warm-up each; plus what the release
    collects to the driver. For aggregate benchmarks. Seeded releases: not
    for publication."""
    from pyspark.sql import functions as F

    import dp_spark
    from dp_spark.datasets import synthetic_events

    base = Path(tempfile.mkdtemp(prefix="dp_spark_measure_", dir=tmp))
    try:
        path = str(base / "events.parquet")
        synthetic_events(spark, rows=rows).write.mode("overwrite").parquet(path)
        sql = f"SELECT COUNT(DISTINCT item) AS n FROM parquet.`{path}`"

        def release(rep):
            return dp_spark.distinct_count(spark.read.parquet(path), person_col=PERSON_COL, item_col=ITEM_COL,
                                           epsilon=epsilon, max_bound=max_bound, seed=seed + rep)

        from _common import person_shuffle_floor

        def per_person():  # the per-person aggregate every row of a person feeds
            (spark.read.parquet(path).groupBy(PERSON_COL).agg(F.countDistinct(ITEM_COL))
             .write.format("noop").mode("overwrite").save())

        others = {"count_distinct": lambda: spark.sql(sql).collect(), "per_person": per_person,
                  "floor": lambda: person_shuffle_floor(spark, path, PERSON_COL, ITEM_COL)}
        with CollectRecorder(type(spark.range(1))) as recorder:
            first = release(0)
        for run in others.values():  # warm-up
            run()
        t_rel, times = [], {name: [] for name in others}
        for rep in range(reps):
            with Timer() as t:
                release(rep + 1)
            t_rel.append(t.seconds)
            for name, run in others.items():
                with Timer() as t:
                    run()
                times[name].append(t.seconds)
        med = {name: median(ts) for name, ts in times.items()}
        return {"rows": rows, "release_s": median(t_rel), "count_distinct_s": med["count_distinct"],
                "per_person_s": med["per_person"], "floor_s": med["floor"],
                "ratio": median(t_rel) / med["count_distinct"],
                "ratio_per_person": median(t_rel) / med["per_person"], "ratio_floor": median(t_rel) / med["floor"],
                "target": TARGETS.get(rows), "shards": first.parameters["shards"],
                "release_times_s": t_rel, "times_s": times, "driver_collect": recorder.totals()}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main_targets(rows_list, reps: int) -> int:
    """Print the issue-15 ratios (2M and 20M rows) measured in one session."""
    spark = start_session("dp_spark benchmark: distinct_count_speed targets", SESSION_CONF)
    print("dp_spark benchmark: distinct-count greedy (automatic shards) vs COUNT(DISTINCT item), one session")
    for rows in rows_list:
        r = measure(spark, rows, reps=reps)
        c = r["driver_collect"]
        print(f"{rows:>12,} rows: release {r['release_s']:.2f} s, COUNT(DISTINCT) {r['count_distinct_s']:.2f} s, "
              f"ratio {r['ratio']:.2f} (target <= {r['target']}), shards {r['shards']}, "
              f"driver collects {c['calls']} call(s), {c['rows']} rows, {c['pickle_bytes']:,} pickled bytes "
              f"(load {load()})")
    spark.stop()
    return 0


# ----------------------------------------------------------------- profiling

def _count_batches(batches):
    """mapInArrow body that only receives the rows (the cost of the JVM to
    Python hand-off alone) and yields one row per partition."""
    import pyarrow as pa

    rows = sum(batch.num_rows for batch in batches)
    yield pa.RecordBatch.from_arrays([pa.array([rows], pa.int64()), pa.array([0], pa.int32())],
                                     names=["item_key", "round"])


def profile_greedy(spark, path: str, max_bound: int, shards: int, reps: int) -> dict:
    """Where the greedy release's time goes: each step is a separate Spark
    job (forced with the no-op sink where it yields a DataFrame), timed
    interleaved so a burst of load elsewhere hits every step alike. The
    shuffle-only step (no Python) separates the shuffle into shards from
    the Arrow transfer, and the batches-only step the transfer from the
    kernel."""

    from dp_spark.plans.distinct_count import PERSON_SAMPLE  # the sample at ε >= 1
    from dp_spark.stages.distinct import ROUND_SCHEMA, bounded_distinct_counts, greedy_rounds, sharded_edges
    from dp_spark.stages.edges import count_sampled_persons, edges

    def noop(df):
        df.write.format("noop").mode("overwrite").save()

    def edge_df():
        return edges(spark.read.parquet(path), PERSON_COL, ITEM_COL)

    steps = [
        ("scan Parquet + edges (null filter)", lambda: noop(edge_df())),
        (f"sampled person count (1-in-{PERSON_SAMPLE}; input of the noisy shard choice)",
         lambda: count_sampled_persons(edge_df(), PERSON_SAMPLE)),
        ("scan + hash + shuffle into the shards (no Python)", lambda: noop(sharded_edges(edge_df(), shards))),
        ("+ Arrow to Python, batches only counted (no kernel)", lambda: noop(
            sharded_edges(edge_df(), shards).mapInArrow(_count_batches, ROUND_SCHEMA))),
        ("greedy_rounds: shuffle by person + Arrow to Python + kernel", lambda: noop(
            greedy_rounds(edge_df(), max_bound, shards))),
        ("bounded_distinct_counts: + combine by item + collect", lambda: bounded_distinct_counts(
            spark.read.parquet(path), PERSON_COL, ITEM_COL, max_bound, "greedy", shards=shards)),
    ]
    for _, fn in steps:
        fn()  # warm-up
    times: list[list[float]] = [[] for _ in steps]
    for _ in range(reps):
        for k, (_, fn) in enumerate(steps):
            with Timer() as t:
                fn()
            times[k].append(t.seconds)
    return {"steps": [{"step": label, "median_s": median(ts), "min_s": min(ts), "times_s": ts}
                      for (label, _), ts in zip(steps, times)]}


# ---------------------------------------------------------------------- main

def main(argv=None) -> int:
    args = parse_args(argv)
    if args.targets:
        return main_targets(sorted(TARGETS), args.reps)
    spark = start_session("dp_spark benchmark: distinct_count_speed", SESSION_CONF)
    import dp_spark
    from dp_spark.datasets import synthetic_events
    from dp_spark.mechanisms.distinct_count.bound import release_from_counts
    from dp_spark.stages import bounded_distinct_counts
    from dp_spark.plans.distinct_count import DEFAULT_EDGE_LIMIT

    shards = args.shards  # None: the release chooses (and reports) its shard count
    tmp = Path(tempfile.mkdtemp(prefix="dp_spark_speed_", dir=args.tmp))
    out: dict = {
        "benchmark": "distinct_count_speed",
        "command": command_line(),
        "seeded": True,
        "not_for_publication": True,
        "session": session_summary(spark),
        "parameters": {"rows": args.rows, "small_rows": args.small_rows, "reps": args.reps,
                       "epsilon": args.epsilon, "beta": args.beta, "max_bound": args.max_bound,
                       "shards": shards, "seed": args.seed},
    }
    print("dp_spark benchmark: distinct-count speed (greedy release vs COUNT(DISTINCT))")
    print(f"command: {command_line()}")
    print("session: " + ", ".join(f"{k}={v}" for k, v in session_summary(spark).items()))
    print(f"epsilon={args.epsilon:g} beta={args.beta:g} max_bound={args.max_bound} greedy shards={shards or 'auto'} "
          f"reps={args.reps} (+1 warm-up); releases SEEDED (seed = {args.seed} + rep): not for publication")
    print(f"temporary Parquet under {tmp} (removed at the end); load average at start: {load()}")
    print()
    try:
        # ------------------------------------------------------------- data
        paths, sizes = {}, {}
        for rows in sorted({args.small_rows, args.rows}):
            path = str(tmp / f"events_{rows}.parquet")
            with Timer() as t:
                synthetic_events(spark, rows=rows).write.mode("overwrite").parquet(path)
            df = spark.read.parquet(path)
            from pyspark.sql import functions as F

            s = df.agg(F.count("*").alias("rows"),
                       F.countDistinct(PERSON_COL).alias("persons"),
                       F.countDistinct(ITEM_COL).alias("items")).collect()[0]
            pairs = df.dropDuplicates([PERSON_COL, ITEM_COL]).count()
            paths[rows] = path
            sizes[rows] = {"rows": int(s["rows"]), "persons": int(s["persons"]),
                           "distinct_items": int(s["items"]), "distinct_pairs": int(pairs),
                           "write_s": t.seconds}
        print(format_table(
            ["synthetic data (NON-PRIVATE)", "rows", "persons", "distinct (person, item)",
             "TRUE distinct items", "Parquet write"],
            [[f"{r:,} rows", fmt(v["rows"]), fmt(v["persons"]), fmt(v["distinct_pairs"]),
              fmt(v["distinct_items"]), f"{v['write_s']:.1f} s"] for r, v in sizes.items()],
        ))
        print()
        out["data"] = sizes

        # ----------------------------------------------------------- timing
        path = paths[args.rows]
        sql = f"SELECT COUNT(DISTINCT item) AS n FROM parquet.`{path}`"

        def release(seed, n_shards=shards):
            return dp_spark.distinct_count(
                spark.read.parquet(path), person_col=PERSON_COL, item_col=ITEM_COL, epsilon=args.epsilon,
                beta=args.beta, max_bound=args.max_bound, method="greedy", seed=seed, shards=n_shards,
            )

        def count_distinct():
            return spark.sql(sql).collect()[0]["n"]

        def stage():
            return bounded_distinct_counts(spark.read.parquet(path), PERSON_COL, ITEM_COL,
                                           args.max_bound, "greedy", shards=stage_shards)

        first = release(args.seed)
        stage_shards = shards or first.parameters["shards"]
        if shards is None:
            print(f"the release chose {stage_shards} greedy shard(s) from a noisy person count; the "
                  "stage-only timings below use that number")
        count_distinct()
        counts = stage()
        t_rel, t_fixed, t_cd, t_stage, t_mech, released = [], [], [], [], [], []
        for rep in range(args.reps):
            with Timer() as t:
                r = release(args.seed + rep)
            t_rel.append(t.seconds)
            released.append(r.to_dict())
            with Timer() as t:
                release(args.seed + rep, stage_shards)  # shards given: no person-count job
            t_fixed.append(t.seconds)
            with Timer() as t:
                true_count = count_distinct()
            t_cd.append(t.seconds)
            with Timer() as t:
                counts = stage()
            t_stage.append(t.seconds)
            rng = run_rng(args.seed, rep, 1)
            with Timer() as t:
                release_from_counts(counts, args.epsilon, args.beta, rng)
            t_mech.append(t.seconds)
        ratio = median(t_rel) / median(t_cd)

        def ts(xs):
            return " ".join(f"{x:.2f}" for x in xs)

        print(format_table(
            [f"wall time at {args.rows:,} rows", "median", "min", "all reps (s)", "ratio of medians"],
            [
                ["(a) dp_spark.distinct_count, greedy, ε=%g" % args.epsilon, f"{median(t_rel):.2f} s",
                 f"{min(t_rel):.2f} s", ts(t_rel), f"{ratio:.2f}  (target <= {TARGET_RATIO:.1f})"],
                [f"(a') the same with shards={stage_shards} given (no person count)",
                 f"{median(t_fixed):.2f} s", f"{min(t_fixed):.2f} s", ts(t_fixed),
                 f"{median(t_fixed) / median(t_cd):.2f}"],
                ["(b) SELECT COUNT(DISTINCT item)", f"{median(t_cd):.2f} s", f"{min(t_cd):.2f} s",
                 ts(t_cd), "1.00"],
                ["  split: Spark stage (bounded_distinct_counts)", f"{median(t_stage):.2f} s",
                 f"{min(t_stage):.2f} s", ts(t_stage), f"{median(t_stage) / median(t_cd):.2f}"],
                ["  split: driver mechanism (release_from_counts)", f"{median(t_mech) * 1000:.1f} ms",
                 f"{min(t_mech) * 1000:.1f} ms", " ".join(f"{x * 1000:.1f}ms" for x in t_mech),
                 f"{median(t_mech) / median(t_cd):.4f}"],
            ],
        ))
        print(f"ratio (a)/(b) = {ratio:.2f} (ratio of minima {min(t_rel) / min(t_cd):.2f}); target <= "
              f"{TARGET_RATIO:.1f}: {'within target' if ratio <= TARGET_RATIO else 'ABOVE target'}")
        print(f"load average after timing: {load()} (2 cores; other work on the machine inflates times)")
        g = np.asarray(counts)
        print(f"TRUE distinct items (NON-PRIVATE): {true_count:,}; greedy DC(l) (NON-PRIVATE) "
              f"l=1: {g[0]:,}, l=10: {g[min(9, len(g) - 1)]:,}, l={len(g)}: {g[-1]:,}")
        print("released (SEEDED, not for publication): " + "; ".join(
            f"l̂={r['result']['bound']} estimate={r['result']['estimate']:,} "
            f"lower_bound={r['result']['lower_bound']:,}" for r in released))
        print()
        out["timing"] = {
            "release_s": t_rel, "release_fixed_shards_s": t_fixed, "count_distinct_s": t_cd, "stage_s": t_stage, "mechanism_s": t_mech,
            "release_median_s": median(t_rel), "count_distinct_median_s": median(t_cd),
            "stage_median_s": median(t_stage), "mechanism_median_s": median(t_mech),
            "ratio": ratio, "ratio_of_minima": min(t_rel) / min(t_cd), "target_ratio": TARGET_RATIO,
        }
        out["non_private"] = {"true_count": int(true_count), "greedy_counts": g.tolist()}
        out["released"] = released

        # ---------------------------------------------------- bytes to driver
        df_class = type(spark.range(1))
        byte_rows, out["collected"] = [], {}
        for rows in sorted(paths):
            with CollectRecorder(df_class) as rec:
                with Timer() as t:
                    dp_spark.distinct_count(spark.read.parquet(paths[rows]), person_col=PERSON_COL,
                                            item_col=ITEM_COL, epsilon=args.epsilon, beta=args.beta,
                                            max_bound=args.max_bound, seed=args.seed, shards=shards)
            tot = rec.totals()
            out["collected"][str(rows)] = {"totals": tot, "calls": rec.calls, "seconds": t.seconds}
            byte_rows.append([f"greedy release, {rows:,} rows", fmt(sizes[rows]["persons"]),
                              fmt(tot["calls"]), ", ".join(tot["methods"]), fmt(tot["rows"]),
                              fmt(tot["pickle_bytes"]), fmt(tot["arrow_bytes"])])

        # --------------------------------------------------- matching (ref.)
        matching = None
        if not args.skip_matching:
            pairs = sizes[args.rows]["distinct_pairs"]
            if pairs <= DEFAULT_EDGE_LIMIT:
                with CollectRecorder(df_class) as rec:
                    with Timer() as t:
                        r = dp_spark.distinct_count(spark.read.parquet(path), person_col=PERSON_COL,
                                                    item_col=ITEM_COL, epsilon=args.epsilon, beta=args.beta,
                                                    max_bound=args.max_bound, method="matching",
                                                    seed=args.seed)
                with Timer() as t_mstage:
                    mcounts = bounded_distinct_counts(spark.read.parquet(path), PERSON_COL, ITEM_COL,
                                                      args.max_bound, "matching")
                tot = rec.totals()
                matching = {"release_s": t.seconds, "stage_s": t_mstage.seconds, "collected": tot,
                            "released": r.to_dict(), "counts_non_private": mcounts.tolist()}
                byte_rows.append([f"matching release, {args.rows:,} rows (reference: collects edges)",
                                  fmt(sizes[args.rows]["persons"]), fmt(tot["calls"]),
                                  ", ".join(tot["methods"]), fmt(tot["rows"]), fmt(tot["pickle_bytes"]),
                                  fmt(tot["arrow_bytes"])])
            else:
                matching = {"skipped": f"{pairs:,} distinct pairs > edge limit {DEFAULT_EDGE_LIMIT:,}"}
        out["matching"] = matching

        print(format_table(
            ["data collected to the driver (every DataFrame action intercepted)", "persons",
             "actions", "which", "rows", "pickle bytes", "Arrow IPC bytes"],
            byte_rows,
        ))
        print("(greedy: with automatic shards, two actions: the person count behind the noisy shard "
              "choice (one row) and counts_from_round_table's histogram collect, at most "
              f"max_bound={args.max_bound} rows (round, count); neither grows with the persons)")
        print()
        if matching and "release_s" in matching:
            m = np.asarray(matching["counts_non_private"])
            print(format_table(
                [f"method='matching' at {args.rows:,} rows (once, reference)", "wall time",
                 "ratio to COUNT(DISTINCT)"],
                [["full release dp_spark.distinct_count(method='matching')", f"{matching['release_s']:.2f} s",
                  f"{matching['release_s'] / median(t_cd):.2f}"],
                 ["stage only bounded_distinct_counts(method='matching')", f"{matching['stage_s']:.2f} s",
                  f"{matching['stage_s'] / median(t_cd):.2f}"]],
            ))
            pts = [l for l in (1, 5, 10, 20, 50, 100) if l <= len(m)]
            print(format_table(
                [f"DC(l) at {args.rows:,} rows — NON-PRIVATE"] + [f"l={l}" for l in pts],
                [["matching (exact)"] + [fmt(int(m[l - 1])) for l in pts],
                 [f"greedy sharded ({stage_shards})"] + [fmt(int(g[l - 1])) for l in pts],
                 ["greedy / matching"] + [f"{g[l - 1] / max(m[l - 1], 1):.3f}" for l in pts]],
            ))
            print()
        elif matching:
            print(f"method='matching' skipped: {matching['skipped']}")
            print()

        # ---------------------------------------------------------- profile
        if args.profile == "always" or (args.profile == "auto" and ratio > TARGET_RATIO):
            prof = profile_greedy(spark, path, args.max_bound, stage_shards, args.reps)
            out["profile"] = prof
            rows_ = [[s_["step"], f"{s_['median_s']:.2f} s", f"{s_['min_s']:.2f} s",
                      " ".join(f"{x:.2f}" for x in s_["times_s"])] for s_ in prof["steps"]]
            rows_.append(["(b) COUNT(DISTINCT item), for comparison", f"{median(t_cd):.2f} s",
                          f"{min(t_cd):.2f} s", " ".join(f"{x:.2f}" for x in t_cd)])
            print(format_table([f"greedy release profile at {args.rows:,} rows (each step its own job; "
                                f"{args.reps} reps)", "median", "min", "all reps (s)"], rows_))
            print(f"load average after profiling: {load()}")
            print()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    if args.json:
        write_json(args.json, out)
        print(f"wrote {args.json}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
