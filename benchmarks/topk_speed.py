"""Top-k speed: the joint sampler on the driver, and the release end to end.

    .venv/bin/python benchmarks/topk_speed.py [--ds 10000 100000 1000000] [--ks 10 100]
        [--repeats 3] [--zipf 1.1] [--max-count 1000000] [--seed 0]
        [--rows 2000000] [--skip-spark] [--json out.json]

Part 1 (no Spark): the driver-side cost after the stage has collected d counts.
Counts are Zipf-like: c_j = floor(max_count / (j+1)^s) for a random
permutation of ranks j (many ties in the tail, as in real count data). Each
(d, k) runs ``--repeats`` times with seeded generators (not private) and the
median wall time is printed, with cdp-peel (one Gumbel draw per item) as the
linear-time floor and dk/second as the joint sampler's throughput. Target
(issue 15): d = 10^6, k = 100 in at most 3 s on 2 cores.

Part 2 (Spark, :func:`measure`): on ``--rows`` rows of the built-in synthetic
events (written once to Parquet), the whole ``dp_spark.top_k`` release (joint,
k = 10, public domain = the generator's item list) against the non-private
floor "per-item distinct-person histogram + top 10,000 collected", timed in the
same run, alternating, median of ``--repeats``; the ratio target is <= 1.3.
The whole ``dp_spark.count_release`` release (default method, ρ = 0.5,
δ = 1e-6, as in set_union_speed.py) is timed in the same loop against the same
floor (issue 15 gives both releases that target).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Timer, command_line, format_table, run_rng, write_json  # noqa: E402
from set_union_speed import DELTA as COUNT_RELEASE_DELTA, RHO as COUNT_RELEASE_RHO  # noqa: E402 - one pair of values


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--skip-spark", action="store_true")
    p.add_argument("--ds", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    p.add_argument("--ks", type=int, nargs="+", default=[10, 100])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--zipf", type=float, default=1.1)
    p.add_argument("--max-count", type=int, default=1_000_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None)
    return p.parse_args(argv)


def zipf_counts(d: int, exponent: float, max_count: int, rng) -> np.ndarray:
    ranks = rng.permutation(d)
    return np.floor(max_count / (ranks + 1.0) ** exponent).astype(np.int64)


def measure(spark, rows: int, repeats: int = 3, k: int = 10) -> dict:
    """Wall seconds of top-k (joint, end to end) and of the non-private floor on
    the same Parquet input of ``rows`` synthetic rows, and their ratio (median
    of ``repeats`` alternating runs, one session)."""
    import tempfile

    from pyspark.sql import functions as F

    import dp_spark
    from dp_spark.datasets import synthetic_events

    items = max(100, rows // 20)  # synthetic_events' default vocabulary: w0 .. w{items-1}
    domain = [f"w{i}" for i in range(items)]
    with tempfile.TemporaryDirectory(prefix="topk_speed_") as tmp:
        path = f"{tmp}/events.parquet"
        synthetic_events(spark, rows).write.parquet(path)
        df = spark.read.parquet(path)
        floor_s, topk_s, count_s = [], [], []
        for rep in range(repeats):
            with Timer() as t:
                (df.groupBy("item").agg(F.countDistinct("person_id").alias("n"))
                 .orderBy(F.desc("n")).limit(10_000).collect())
            floor_s.append(t.seconds)
            with Timer() as t:
                dp_spark.top_k(df, k=k, epsilon=1.0, method="joint", domain=domain, seed=rep)
            topk_s.append(t.seconds)
            with Timer() as t:  # collects its released rows: the whole release
                dp_spark.count_release(df, rho=COUNT_RELEASE_RHO, delta=COUNT_RELEASE_DELTA, seed=rep)
            count_s.append(t.seconds)
    f, j, c = (float(np.median(x)) for x in (floor_s, topk_s, count_s))
    return {"rows": rows, "domain_size": items, "k": k, "floor_seconds": floor_s,
            "top_k_seconds": topk_s, "count_release_seconds": count_s, "floor_median": f,
            "top_k_median": j, "count_release_median": c, "ratio": j / f, "ratio_count_release": c / f}


def main(argv=None) -> int:
    from dp_spark.mechanisms.top_k import cdp_peel_top_k, joint_top_k

    args = parse_args(argv)
    print(f"# {command_line()}")
    print(f"# Zipf exponent {args.zipf}, max count {args.max_count:,}, ε = 1, median of {args.repeats}")
    rows, results = [], []
    for d in args.ds:
        counts = zipf_counts(d, args.zipf, args.max_count, run_rng(args.seed, d))
        for k in args.ks:
            joint_s, cdp_s = [], []
            for rep in range(args.repeats):
                rng = run_rng(args.seed, d, k, rep)
                with Timer() as t:
                    joint_top_k(counts, k, 1.0, rng)
                joint_s.append(t.seconds)
                with Timer() as t:
                    cdp_peel_top_k(counts, k, 1.0, 1e-6, rng)
                cdp_s.append(t.seconds)
            j, c = float(np.median(joint_s)), float(np.median(cdp_s))
            results.append({"d": d, "k": k, "joint_seconds": joint_s, "cdp_peel_seconds": cdp_s})
            rows.append([f"{d:,}", f"{k}", f"{j:.3f}", f"{d * k / j / 1e6:.1f}", f"{c:.4f}"])
            print(f"  d={d:,} k={k}: joint {j:.3f} s", file=sys.stderr, flush=True)
    print(format_table(["d", "k", "joint s", "d·k per s (M, effective)", "cdp-peel s"], rows,
                       title="Joint exponential mechanism: driver time"))
    out = {"command": command_line(), "results": results}
    if not args.skip_spark:
        from _common import session_summary, start_session

        spark = start_session("topk_speed", {"spark.driver.memory": "4g"})
        m = measure(spark, args.rows, args.repeats)
        print(f"\n# {session_summary(spark)['spark.master']}, {m['rows']:,} rows, domain {m['domain_size']:,} items")
        print(format_table(["run", "median s", "runs"], [
            ["histogram + top 10,000 collected (non-private floor)", f"{m['floor_median']:.2f}",
             " ".join(f"{x:.2f}" for x in m["floor_seconds"])],
            [f"dp_spark.top_k joint, k = {m['k']} (end to end)", f"{m['top_k_median']:.2f}",
             " ".join(f"{x:.2f}" for x in m["top_k_seconds"])],
            [f"dp_spark.count_release, ρ = {COUNT_RELEASE_RHO} (end to end)", f"{m['count_release_median']:.2f}",
             " ".join(f"{x:.2f}" for x in m["count_release_seconds"])],
        ], title="Top-k and count-release end to end vs the floor"))
        print(f"ratio top-k / floor = {m['ratio']:.2f}, count-release / floor = "
              f"{m['ratio_count_release']:.2f} (target <= 1.3 each)")
        out["end_to_end"] = m
        spark.stop()
    if args.json:
        write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
