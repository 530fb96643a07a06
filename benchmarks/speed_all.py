"""Every issue-15/26 speed ratio, in three session shapes, one run.

    flock /tmp/dp_spark_bench.lock .venv/bin/python -m benchmarks.speed_all \
        [--rows 2000000 20000000] [--reps 3] [--no-pipelinedp] \
        [--releases distinct-count set-union top-k continual-distinct] \
        [--shapes project spark-defaults shuffle8] [--json speed_all.json]

Runs every release in each session shape of ``_common.SESSION_SHAPES``
(issue 26): dp_spark's own session, Spark's defaults (a plain
``SparkSession.builder``: 200 shuffle partitions, adaptive execution on) and
Spark's defaults with 8 shuffle partitions — one child process (one JVM) per
shape, one after the other (``--shape NAME`` runs one shape in this
process). In each, calls each release's own ``measure(spark, ...)``
(distinct_count_speed, set_union_speed, topk_speed (top-k and count-release
end to end), continual_speed) for each row count, and prints one table of
ratios against the targets, plus the bytes the distinct-count release
collects to the driver; then one table of every ratio by shape. Beside each
per-person release's plain query it times the bare person-shuffle floor
(every row shuffled by person, consumed in the JVM:
``_common.person_shuffle_floor``). Continual-distinct
has its own size (an event stream, not person rows): T = 2^20 steps and
about 10M events for row counts below 20M, about 20M events (same T) at 20M
rows and above, so the larger run shows how the stage grows with the data;
its ratio is the stage against its floor (events per step, collected). The joint top-k driver time
(d = 10^6, k = 100) is measured without Spark. Seeded releases: timings only,
nothing here is for publication. PipelineDP needs the ``bench`` extra
(``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import SESSION_SHAPES, Timer, command_line, format_table, start_shaped_session, write_json  # noqa: E402

TARGETS = {
    "distinct-count / COUNT(DISTINCT)": 2.0,
    "set-union / groupBy countDistinct": 2.0,
    "top-k joint / histogram + top 10k": 1.3,
    "count-release / histogram + top 10k": 1.3,
    "continual-distinct stage / floor": 2.0,
    "distinct-count / per-person aggregate": 1.0,
    "distinct-count / person-shuffle floor": 2.5,
    "set-union / person-shuffle floor": None,
    "PipelineDP select / set-union": 5.0,
    "PipelineDP count / count-release": 5.0,
}
LOWER_IS_BETTER = {"distinct-count / COUNT(DISTINCT)", "set-union / groupBy countDistinct",
                   "top-k joint / histogram + top 10k", "count-release / histogram + top 10k",
                   "continual-distinct stage / floor", "distinct-count / per-person aggregate",
                   "distinct-count / person-shuffle floor", "set-union / person-shuffle floor"}
#: Issue 26's distinct-count targets hold at 20M rows; below, the ratios are shown without one.
AT_20M = {"distinct-count / per-person aggregate", "distinct-count / person-shuffle floor"}


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


RELEASES = ("distinct-count", "set-union", "top-k", "continual-distinct")


def continual_events(rows: int) -> int:
    """Continual-distinct's own size for a run at ``rows`` person rows."""
    return 10_000_000 if rows < 20_000_000 else 20_000_000


def measure_all(spark, rows: int, reps: int, pipelinedp: bool, releases=RELEASES,
                continual_size: int | None = None) -> dict:
    import distinct_count_speed
    import set_union_speed
    import continual_speed
    import topk_speed

    ratios, out = {}, {"rows": rows}
    if "distinct-count" in releases:
        dc = out["distinct_count"] = distinct_count_speed.measure(spark, rows, reps=reps)
        ratios["distinct-count / COUNT(DISTINCT)"] = dc["ratio"]
        ratios["distinct-count / per-person aggregate"] = dc["ratio_per_person"]
        ratios["distinct-count / person-shuffle floor"] = dc["ratio_floor"]
    if "set-union" in releases:
        su = out["set_union"] = set_union_speed.measure(spark, rows, reps=reps, pipelinedp=pipelinedp)
        ratios["set-union / groupBy countDistinct"] = su["ratios"]["set-union / plain"]
        ratios["set-union / person-shuffle floor"] = su["ratios"]["set-union / floor"]
        if pipelinedp:
            ratios["PipelineDP select / set-union"] = su["ratios"]["pdp-select / set-union"]
            ratios["PipelineDP count / count-release"] = su["ratios"]["pdp-count / count-release"]
    if "top-k" in releases:
        tk = out["top_k"] = topk_speed.measure(spark, rows, repeats=reps)
        ratios["top-k joint / histogram + top 10k"] = tk["ratio"]
        ratios["count-release / histogram + top 10k"] = tk["ratio_count_release"]
    if "continual-distinct" in releases:
        ct = out["continual_distinct"] = continual_speed.measure(spark, continual_size or continual_events(rows),
                                                                 reps=reps)
        ratios["continual-distinct stage / floor"] = ct["ratio"]
    out["ratios"] = ratios
    return out


def _target(name: str, rows: int) -> float | None:
    """The issue-15/26 target; distinct-count's is 2.5 at 20M rows and more,
    and its per-person targets hold at 20M rows."""
    if name == "distinct-count / COUNT(DISTINCT)" and rows >= 20_000_000:
        return 2.5
    if name in AT_20M and rows < 20_000_000:
        return None
    return TARGETS[name]


def _met(name: str, value, rows: int) -> str:
    target = _target(name, rows)
    if value is None or target is None:
        return "n/a" if value is None else ""
    ok = value <= target if name in LOWER_IS_BETTER else value >= target
    return "yes" if ok else "NO"


def _seconds_line(run: dict) -> list[list]:
    """Median seconds behind the ratios: release / plain query / person-shuffle floor."""
    out = []
    if "distinct_count" in run:
        d = run["distinct_count"]
        out.append([f"{run['rows']:,}", "distinct-count s: release / COUNT(DISTINCT) / per-person / floor",
                    f"{d['release_s']:.1f} / {d['count_distinct_s']:.1f} / {d['per_person_s']:.1f} / "
                    f"{d['floor_s']:.1f} ({d['shards']} shards)", "", ""])
    if "set_union" in run:
        s = run["set_union"]["seconds"]
        out.append([f"{run['rows']:,}", "set-union s: release / groupBy countDistinct / floor",
                    f"{s['set-union']:.1f} / {s['plain']:.1f} / {s['floor']:.1f}", "", ""])
    return out


def run_shape(args) -> dict:
    """Every measurement in one session of shape ``args.shape``, in this process."""
    import os

    spark = start_shaped_session(f"dp_spark speed_all ({args.shape})", args.shape)
    conf = {key: spark.conf.get(key) for key in ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled")}
    results = {"command": command_line(), "shape": args.shape, "conf": conf, "cores": os.cpu_count(),
               "parallelism": spark.sparkContext.defaultParallelism,
               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "load_average_start": os.getloadavg(),
               "joint_driver_s_d1e6_k100": joint_driver_seconds(), "runs": []}
    for rows in args.rows:
        results["runs"].append(measure_all(spark, rows, args.reps, not args.no_pipelinedp, args.releases,
                                           args.continual_events))
    table = []
    for run in results["runs"]:
        for name, value in run["ratios"].items():
            shown = "n/a" if value is None else f"{value:.2f}"
            target = _target(name, run["rows"])
            table.append([f"{run['rows']:,}", name, shown, "" if target is None else target,
                          _met(name, value, run["rows"])])
        table.extend(_seconds_line(run))
        if "distinct_count" in run:
            c = run["distinct_count"]["driver_collect"]
            table.append([f"{run['rows']:,}", "distinct-count to the driver (actions, rows, pickled bytes)",
                          f"{c['calls']}, {c['rows']}, {c['pickle_bytes']:,}", "flat", ""])
        if "continual_distinct" in run:
            c = run["continual_distinct"]
            table.append([f"{run['rows']:,}", f"continual-distinct: T = 2^{c['horizon'].bit_length() - 1}, "
                          f"{c['events']:,} events, "
                          f"{c['shards']} shards, stage / floor (s)",
                          f"{c['stage_s']:.1f} / {c['floor_s']:.1f}", "", ""])
    j = results["joint_driver_s_d1e6_k100"]
    table.append(["-", "joint top-k driver, d=1e6, k=100 (s)", f"{j:.2f}", 3.0, "yes" if j <= 3.0 else "NO"])
    results["load_average_end"] = os.getloadavg()
    print(format_table(["rows", "ratio", "measured", "target", "met"], table,
                       title=f"speed ratios, session shape {args.shape} (shuffle partitions "
                             f"{conf['spark.sql.shuffle.partitions']}, adaptive {conf['spark.sql.adaptive.enabled']}), "
                             f"{results['date']}, {os.cpu_count()} cores, one run (load average at start / end: "
                             f"{results['load_average_start'][0]:.1f} / {results['load_average_end'][0]:.1f})"),
          flush=True)
    spark.stop()
    return results


def _child_argv(args, shape: str, json_path: Path) -> list[str]:
    argv = [sys.executable, "-m", "benchmarks.speed_all", "--shape", shape, "--json", str(json_path),
            "--reps", str(args.reps), "--rows", *map(str, args.rows), "--releases", *args.releases]
    if args.continual_events:
        argv += ["--continual-events", str(args.continual_events)]
    return argv + (["--no-pipelinedp"] if args.no_pipelinedp else [])


def by_shape_table(shapes: dict) -> str:
    """One row per (rows, ratio), one column per shape, and whether every shape met the target."""
    names = list(shapes)
    first = shapes[names[0]]
    table = []
    for i, run in enumerate(first["runs"]):
        rows = run["rows"]
        for name in run["ratios"]:
            values = [shapes[s]["runs"][i]["ratios"].get(name) for s in names]
            target = _target(name, rows)
            marks = [_met(name, v, rows) for v in values]
            met = "" if target is None else ("yes" if all(m == "yes" for m in marks) else "NO")
            table.append([f"{rows:,}", name, *("n/a" if v is None else f"{v:.2f}" for v in values),
                          "" if target is None else target, met])
    loads = ", ".join(f"{s} {shapes[s]['load_average_start'][0]:.1f}/{shapes[s]['load_average_end'][0]:.1f}"
                      for s in names)
    return format_table(["rows", "ratio", *names, "target", "met in every shape"], table,
                        title=f"issue-26 speed ratios by session shape, {first['date']}, one run per shape "
                              f"(load average start/end: {loads})")


def main(argv=None) -> int:
    import subprocess
    import tempfile

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, nargs="+", default=[2_000_000])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--no-pipelinedp", action="store_true")
    p.add_argument("--releases", nargs="+", choices=RELEASES, default=list(RELEASES),
                   help="which releases to time (default: all four)")
    p.add_argument("--shapes", nargs="+", choices=list(SESSION_SHAPES), default=list(SESSION_SHAPES),
                   help="session shapes, one child process each (default: all three)")
    p.add_argument("--shape", choices=list(SESSION_SHAPES), default=None,
                   help="run one shape in this process (what each child does)")
    p.add_argument("--parallel", action="store_true",
                   help="run the shapes' processes at the same time (each ratio still compares contenders "
                        "timed in turn in one session; absolute seconds then share the machine)")
    p.add_argument("--continual-events", type=int, default=None,
                   help="continual-distinct's size in events (default: continual_events(rows))")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    if args.shape is not None:
        results = run_shape(args)
        if args.json:
            write_json(args.json, results)
        return 0
    shapes = {}
    with tempfile.TemporaryDirectory(prefix="dp_spark_speed_all_") as tmp:
        outs = {shape: Path(tmp) / f"{shape}.json" for shape in args.shapes}
        if args.parallel:
            children = {shape: subprocess.Popen(_child_argv(args, shape, out)) for shape, out in outs.items()}
            codes = {shape: child.wait() for shape, child in children.items()}
        else:
            codes = {shape: subprocess.run(_child_argv(args, shape, out), check=False).returncode
                     for shape, out in outs.items()}
        for shape, out in outs.items():
            if codes[shape] != 0 or not out.is_file():
                print(f"session shape {shape}: the child process failed (exit {codes[shape]})", flush=True)
                continue
            shapes[shape] = json.loads(out.read_text())
    if not shapes:
        return 1
    print(by_shape_table(shapes), flush=True)
    if args.json:
        write_json(args.json, {"command": command_line(), "shapes": shapes})
    return 0 if len(shapes) == len(args.shapes) else 1


if __name__ == "__main__":
    sys.exit(main())
