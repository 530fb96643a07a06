"""Every issue-15 speed ratio, measured in one session and one run.

    .venv/bin/python -m benchmarks.speed_all [--rows 2000000 20000000] [--reps 3]
        [--no-pipelinedp] [--json speed_all.json]

Calls each release's own ``measure(spark, rows)`` (distinct_count_speed,
set_union_speed, topk_speed) on the same session, for each row count, and
prints one table of ratios against the targets, plus the bytes the
distinct-count release collects to the driver. The joint top-k driver time
(d = 10^6, k = 100) is measured without Spark. Seeded releases: timings only,
nothing here is for publication. PipelineDP needs the ``bench`` extra
(``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import Timer, command_line, format_table, start_session, write_json  # noqa: E402

TARGETS = {
    "distinct-count / COUNT(DISTINCT)": 2.0,
    "set-union / groupBy countDistinct": 2.0,
    "top-k joint / histogram + top 10k": 1.3,
    "PipelineDP select / set-union": 5.0,
    "PipelineDP count / count-release": 5.0,
}
LOWER_IS_BETTER = {"distinct-count / COUNT(DISTINCT)", "set-union / groupBy countDistinct",
                   "top-k joint / histogram + top 10k"}


def joint_driver_seconds(d: int = 1_000_000, k: int = 100, repeats: int = 3) -> float:
    """Median wall seconds of the joint sampler alone (no Spark)."""
    from dp_spark.mechanisms.top_k import joint_top_k

    rng = np.random.default_rng(0)
    counts = np.floor(1e6 / (rng.permutation(d) + 1.0) ** 1.1).astype(np.int64)
    times = []
    for rep in range(repeats):
        with Timer() as t:
            joint_top_k(counts, k, 1.0, np.random.default_rng(rep))
        times.append(t.seconds)
    return float(np.median(times))


def measure_all(spark, rows: int, reps: int, pipelinedp: bool) -> dict:
    import distinct_count_speed
    import set_union_speed
    import topk_speed

    dc = distinct_count_speed.measure(spark, rows, reps=reps)
    su = set_union_speed.measure(spark, rows, reps=reps, pipelinedp=pipelinedp)
    tk = topk_speed.measure(spark, rows, repeats=reps)
    ratios = {
        "distinct-count / COUNT(DISTINCT)": dc["ratio"],
        "set-union / groupBy countDistinct": su["ratios"]["set-union / plain"],
        "top-k joint / histogram + top 10k": tk["ratio"],
    }
    if pipelinedp:
        ratios["PipelineDP select / set-union"] = su["ratios"]["pdp-select / set-union"]
        ratios["PipelineDP count / count-release"] = su["ratios"]["pdp-count / count-release"]
    return {"rows": rows, "ratios": ratios, "distinct_count": dc, "set_union": su, "top_k": tk}


def _met(name: str, value) -> str:
    if value is None:
        return "n/a"
    target = TARGETS[name]
    ok = value <= target if name in LOWER_IS_BETTER else value >= target
    return "yes" if ok else "NO"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, nargs="+", default=[2_000_000])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--no-pipelinedp", action="store_true")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    import os

    spark = start_session("dp_spark speed_all")
    results = {"command": command_line(), "cores": os.cpu_count(),
               "joint_driver_s_d1e6_k100": joint_driver_seconds(), "runs": []}
    for rows in args.rows:
        results["runs"].append(measure_all(spark, rows, args.reps, not args.no_pipelinedp))
    table = []
    for run in results["runs"]:
        for name, value in run["ratios"].items():
            table.append([f"{run['rows']:,}", name, f"{value:.2f}", TARGETS[name], _met(name, value)])
        collected = run["distinct_count"].get("driver_collect")
        table.append([f"{run['rows']:,}", "distinct-count bytes to the driver", str(collected), "flat", ""])
    j = results["joint_driver_s_d1e6_k100"]
    table.append(["-", "joint top-k driver, d=1e6, k=100 (s)", f"{j:.2f}", 3.0, "yes" if j <= 3.0 else "NO"])
    print(format_table(["rows", "ratio", "measured", "target", "met"], table,
                       title=f"issue-15 speed ratios, {os.cpu_count()} cores, one session"))
    if args.json:
        write_json(args.json, results)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
