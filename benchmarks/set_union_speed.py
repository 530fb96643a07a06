"""Set-union speed: ratios against the plain query and against PipelineDP, one run.

    flock /tmp/dp_spark_bench.lock .venv/bin/python benchmarks/set_union_speed.py \
        [--rows 2000000 20000000] [--reps 3] [--no-pipelinedp] [--profile] [--json out.json]

Data: a heavy-tailed Parquet table written once per size into a temporary
directory (dp_spark.datasets.synthetic_events: persons = rows/10, i.e. 200k
persons at 2M rows, activity exponent 0.7; Zipf 1.05 items over rows/20
words). Every timing below reads that same file, in the same Spark session,
the contenders interleaved round by round (so machine load hits them alike);
medians of ``--reps`` rounds after an untimed warm-up of every contender on
a 20k-row file.

Contenders (ε = 1, δ = 1e-6, at most 10 items per person):
  plain         groupBy(item).agg(countDistinct(person)), written to the noop sink
                (NON-PRIVATE: the floor a Spark user would compare with)
  set-union     dp_spark.set_union, policy-gaussian, 8 shards (defaults), the
                released items materialized and counted
  set-union/cnt dp_spark.set_union, policy count (the statistic PipelineDP's
                partition selection thresholds: persons per item)
  pdp-select    PipelineDP 0.3.x DPEngine.select_partitions on its Spark RDD
                backend (max_partitions_contributed = 10), result counted
  count-release dp_spark.count_release (PCR, ρ = 0.5, δ = 1e-6): noisy distinct
                persons per item with private selection
  pdp-count     PipelineDP DPEngine.aggregate, PRIVACY_ID_COUNT, Gaussian noise,
                private partition selection, result counted

Printed ratios (targets in parentheses): set-union / plain (<= 2), pdp-select /
set-union (>= 5), pdp-select / set-union-count, pdp-count / count-release (>= 5).
``measure(spark, rows)`` returns the same numbers as a dict for an aggregate
benchmark. ``--profile`` adds where set-union's time goes (scan, shuffle and
sort by person, the Arrow round trip, the shard histograms, the whole release). Everything released here is unseeded but thrown
away; nothing is published.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Timer, command_line, format_table, session_summary, start_session, write_json  # noqa: E402

EPSILON, DELTA, MAX_ITEMS = 1.0, 1e-6, 10
RHO = 0.5
PERSON, ITEM = "person_id", "item"
DRIVER_MEMORY = "4g"
WARMUP_ROWS = 20_000
_DATA: dict[int, str] = {}
_TMP = None


def data_path(spark, rows: int) -> str:
    """The heavy-tailed Parquet file of ``rows`` rows (written once per process)."""
    global _TMP
    if rows not in _DATA:
        from dp_spark.datasets import synthetic_events

        if _TMP is None:
            _TMP = tempfile.TemporaryDirectory(prefix="set_union_speed_")
        path = str(Path(_TMP.name) / f"events_{rows}.parquet")
        synthetic_events(spark, rows=rows).write.parquet(path)
        _DATA[rows] = path
    return _DATA[rows]


def _noop(df) -> None:
    df.write.format("noop").mode("overwrite").save()


def plain(spark, path):
    from pyspark.sql import functions as F

    _noop(spark.read.parquet(path).groupBy(ITEM).agg(F.countDistinct(PERSON)))


def set_union(spark, path, method="policy-gaussian"):
    import dp_spark

    release = dp_spark.set_union(spark.read.parquet(path), epsilon=EPSILON, delta=DELTA, max_items=MAX_ITEMS,
                                 method=method)
    return release.released_count


def count_release(spark, path):
    import dp_spark

    return dp_spark.count_release(spark.read.parquet(path), rho=RHO, delta=DELTA).result["released_count"]


def _pipeline_dp(spark, path):
    import pipeline_dp

    rdd = spark.read.parquet(path).rdd.map(lambda r: (r[0], r[1]))
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=EPSILON, total_delta=DELTA)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.SparkRDDBackend(spark.sparkContext))
    extractors = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0],
                                            partition_extractor=lambda r: r[1],
                                            value_extractor=lambda r: 0)
    return pipeline_dp, rdd, accountant, engine, extractors


def pdp_select(spark, path):
    pipeline_dp, rdd, accountant, engine, extractors = _pipeline_dp(spark, path)
    params = pipeline_dp.SelectPartitionsParams(max_partitions_contributed=MAX_ITEMS)
    result = engine.select_partitions(rdd, params, extractors)
    accountant.compute_budgets()
    return result.count()


def pdp_count(spark, path):
    pipeline_dp, rdd, accountant, engine, extractors = _pipeline_dp(spark, path)
    params = pipeline_dp.AggregateParams(
        metrics=[pipeline_dp.Metrics.PRIVACY_ID_COUNT], noise_kind=pipeline_dp.NoiseKind.GAUSSIAN,
        max_partitions_contributed=MAX_ITEMS, max_contributions_per_partition=1)
    result = engine.aggregate(rdd, params, extractors)
    accountant.compute_budgets()
    return result.count()


def _contenders(pipelinedp: bool) -> dict:
    from _common import person_shuffle_floor

    out = {
        "plain": plain,
        "floor": lambda spark, path: person_shuffle_floor(spark, path, PERSON, ITEM),
        "set-union": set_union,
        "set-union-count": lambda spark, path: set_union(spark, path, "count"),
        "count-release": count_release,
    }
    if pipelinedp:
        out.update({"pdp-select": pdp_select, "pdp-count": pdp_count})
    return out


def _ratio(seconds: dict, num: str, den: str):
    if num in seconds and den in seconds and seconds[den] > 0:
        return seconds[num] / seconds[den]
    return None


def measure(spark, rows: int, reps: int = 3, pipelinedp: bool = True, verbose: bool = False) -> dict:
    """Median wall seconds of every contender on one ``rows``-row file, the
    contenders interleaved round by round, and the target ratios."""
    path = data_path(spark, rows)
    contenders = _contenders(pipelinedp)
    runs: dict[str, list[float]] = {name: [] for name in contenders}
    warm = data_path(spark, min(rows, WARMUP_ROWS))
    for run in contenders.values():  # untimed warm-up on a small file (JIT, Python workers)
        run(spark, warm)
    for _ in range(reps):
        for name, run in contenders.items():
            with Timer() as t:
                run(spark, path)
            runs[name].append(t.seconds)
            if verbose:
                print(f"  {rows:,} rows  {name:<16} {t.seconds:7.2f} s", flush=True)
    seconds = {name: statistics.median(ts) for name, ts in runs.items()}
    ratios = {
        "set-union / plain": _ratio(seconds, "set-union", "plain"),
        "set-union / floor": _ratio(seconds, "set-union", "floor"),
        "pdp-select / set-union": _ratio(seconds, "pdp-select", "set-union"),
        "pdp-select / set-union-count": _ratio(seconds, "pdp-select", "set-union-count"),
        "pdp-count / count-release": _ratio(seconds, "pdp-count", "count-release"),
    }
    return {"rows": rows, "reps": reps, "seconds": seconds, "runs": runs, "ratios": ratios}


def profile(spark, rows: int, reps: int = 3) -> dict:
    """Where set-union's time goes, each step its own Spark job (noop sink),
    each adding to the previous one: the scan; the shuffle of the edges by
    person into the shards and the sort inside each; the Arrow transfer to
    Python and back (an identity ``mapInArrow``); the shard histograms
    (restriction + policy kernel, :func:`dp_spark.stages.set_union._shard_histograms`);
    the whole release (adds the shuffle of the shard parts by item, their
    sum, the noise and threshold, and the materialized result)."""
    from pyspark.sql import functions as F

    from dp_spark.mechanisms.set_union import plan_set_union, shard_cutoff
    from dp_spark.stages import set_union as stage
    from dp_spark.stages.edges import edges

    path = data_path(spark, rows)
    plan = plan_set_union(EPSILON, DELTA, MAX_ITEMS, "policy-gaussian")
    shards = stage.DEFAULT_SHARDS
    gamma = shard_cutoff(plan.gamma, shards)

    def keyed_rows():
        return (edges(spark.read.parquet(path), PERSON, ITEM).repartition(shards, "person")
                .select(F.pmod(F.hash("person"), F.lit(shards)).alias("_shard"), F.xxhash64("person").alias("_order"),
                        "person", F.xxhash64(F.lit(1).cast("long"), "person", "item").alias("_key"), "item"))

    def sorted_rows():
        return keyed_rows().sortWithinPartitions("_order", "person", "_key", "item").select("_shard", "person", "item")

    def arrow_identity(rows=sorted_rows):
        df = rows()
        return df.mapInArrow(lambda batches: (b.slice(0, 0) for b in batches), df.schema)

    def ranked_rows():  # the restriction's rank filter in the JVM (an alternative, measured only)
        from pyspark.sql import Window

        by_person = Window.partitionBy("_order", "person").orderBy("_key", "item")
        return (keyed_rows().withColumn("_r", F.dense_rank().over(by_person)).where(F.col("_r") <= MAX_ITEMS)
                .select("_shard", "person", "item"))

    steps = {
        "plain query (noop)": lambda: plain(spark, path),
        "scan (noop)": lambda: _noop(spark.read.parquet(path)),
        "+ shuffle by person, sort": lambda: _noop(sorted_rows()),
        "+ Arrow to Python and back": lambda: _noop(arrow_identity()),
        "alt: JVM rank filter + Arrow": lambda: _noop(arrow_identity(ranked_rows)),
        "+ shard histograms": lambda: _noop(stage._shard_histograms(
            edges(spark.read.parquet(path), PERSON, ITEM), plan.method, MAX_ITEMS, 1, gamma, shards)),
        "whole release": lambda: set_union(spark, path),
    }
    runs = {name: [] for name in steps}
    for _ in range(reps):
        for name, step in steps.items():
            with Timer() as t:
                step()
            runs[name].append(t.seconds)
    return {name: statistics.median(ts) for name, ts in runs.items()}


def _report(result: dict) -> str:
    rows = [(name, f"{s:.2f}", " ".join(f"{x:.1f}" for x in result["runs"][name]))
            for name, s in result["seconds"].items()]
    out = [format_table(["contender", "median s", "runs"], rows,
                        title=f"{result['rows']:,} rows, {result['reps']} interleaved rounds")]
    for name, value in result["ratios"].items():
        out.append(f"  ratio {name:<30} {'-' if value is None else f'{value:.2f}'}")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, nargs="+", default=[2_000_000])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--no-pipelinedp", action="store_true")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    if not args.no_pipelinedp:
        try:
            import pipeline_dp  # noqa: F401
        except ImportError:
            print("pipeline-dp is missing: pip install -e '.[bench]' (or pass --no-pipelinedp)")
            return 2
    spark = start_session("set-union-speed", {"spark.driver.memory": DRIVER_MEMORY})
    print(command_line())
    print(session_summary(spark))
    results = []
    for rows in args.rows:
        load = os.getloadavg()
        result = measure(spark, rows, args.reps, not args.no_pipelinedp, verbose=True)
        result["load_average"] = {"start": load, "end": os.getloadavg()}
        print(_report(result), flush=True)
        print(f"  load average (1, 5, 15 min) at start {load}, at end {result['load_average']['end']}")
        if args.profile:
            result["profile"] = profile(spark, rows, args.reps)
            for name, s in result["profile"].items():
                print(f"  profile {name:<20} {s:.2f} s", flush=True)
        results.append(result)
    if args.json:
        write_json(args.json, {"command": command_line(), "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
