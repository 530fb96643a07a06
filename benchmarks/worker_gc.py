"""Where a small release's CPU goes: the driver JVM, the driver's Python and the Python workers.

Runs every release of the registry on small tables (its demo parameters, ungrouped and grouped by
country with public keys), ``--reps`` times after one warm-up round, in one local[2] session, and
prints the wall time and the CPU seconds of each kind of process over the timed rounds, read from
/proc (the JVM, this process, and the workers forked by pyspark.daemon, exited ones included through
the daemon's reaped-children time). Run it from two checkouts to compare them, e.g.

    python -m benchmarks.worker_gc --reps 3
    PYTHONPATH=/tmp/oldtree python -m benchmarks.worker_gc --reps 3   # with cwd /tmp/oldtree

Seeded releases (NOT for publication); nothing printed is a release's value.
"""

from __future__ import annotations

import argparse
import os
import time

import pandas as pd

from benchmarks._common import command_line, session_summary, start_session

TICK = os.sysconf("SC_CLK_TCK")


def _tree_cpu(root: int) -> dict[str, float]:
    """CPU seconds (user + system) of ``root``'s process tree by kind: 'jvm', 'driver', 'workers'.
    A process's own time, plus its reaped children's for the pyspark daemon (exited workers)."""
    children: dict[int, list[int]] = {}
    info: dict[int, tuple[str, float, float, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        pid, ppid = int(name), int(fields[1])
        own = (int(fields[11]) + int(fields[12])) / TICK
        reaped = (int(fields[13]) + int(fields[14])) / TICK
        info[pid] = (cmd, own, reaped, ppid)
        children.setdefault(ppid, []).append(pid)
    out = {"jvm": 0.0, "driver": 0.0, "workers": 0.0}
    stack = [root]
    while stack:
        pid = stack.pop()
        stack += children.get(pid, [])
        if pid not in info:
            continue
        cmd, own, reaped, ppid = info[pid]
        if pid == root:
            out["driver"] += own
        elif "java" in cmd.split(" ")[0]:
            out["jvm"] += own
        elif "pyspark.daemon" in cmd:
            parent = info.get(ppid, ("",))[0]  # the JVM for the daemon itself, the daemon for a forked worker
            out["workers"] += own + (reaped if "java" in parent.split(" ")[0] else 0.0)
    return out


def _events_table(spark):
    rows = []
    for i in range(200):
        rows.append((i % 40 + 1, f"i{i % 37}", 1, f"g{i % 3}"))
        if i % 3 == 0:
            rows.append((i % 40 + 45, f"i{i % 37}", -1, f"g{i % 3}"))
    return spark.createDataFrame(pd.DataFrame(rows, columns=["time", "item", "op", "country"])).cache()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rows", type=int, default=2000, help="rows of the persons table")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra Spark setting of the session (repeatable)")
    args = parser.parse_args(argv)

    from dp_spark.accounting import ZCDP, ApproxDP, PrivacyFilter
    from dp_spark.datasets import synthetic_events
    from dp_spark.releases import RELEASES

    extra = dict(item.split("=", 1) for item in args.conf)
    spark = start_session("worker_gc", {"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "2",
                                        **extra})
    tables = {"persons": synthetic_events(spark, args.rows).cache(), "events": _events_table(spark)}
    for frame in tables.values():
        frame.count()
    countries = sorted(r.country for r in tables["persons"].select("country").distinct().collect())  # NON-PRIVATE
    keys = {"persons": countries, "events": ["g0", "g1", "g2"]}

    cases = []
    for name, spec in RELEASES.items():
        params = dict(spec.example.parameters)
        cases.append((name, "ungrouped", params))
        if "group_by" in spec.plan_parameters():
            grouped = dict(params, group_by="country", groups=keys[spec.example.input], max_groups=1)
            cases.append((name, "public keys", grouped))

    def run_all():
        times = {}
        for name, form, params in cases:
            budget = PrivacyFilter(ZCDP(1e6, 0.5) if "rho" in params else ApproxDP(1e6, 0.5))
            start = time.perf_counter()
            RELEASES[name].function(tables[RELEASES[name].example.input], **params, seed=5, budget=budget)
            times[(name, form)] = time.perf_counter() - start
        return times

    run_all()  # warm-up: the JVM's JIT, the workers' imports
    before, wall0 = _tree_cpu(os.getpid()), time.perf_counter()
    load0 = os.getloadavg()[0]
    per_case: dict = {}
    for _ in range(args.reps):
        for key, seconds in run_all().items():
            per_case.setdefault(key, []).append(seconds)
    wall = time.perf_counter() - wall0
    after = _tree_cpu(os.getpid())
    cpu = {k: after[k] - before[k] for k in after}
    releases = args.reps * len(cases)

    print(f"# worker_gc: {len(cases)} cases x {args.reps} rounds = {releases} releases; "
          f"load {load0:.1f} -> {os.getloadavg()[0]:.1f}; {os.cpu_count()} cores")
    print(f"# {command_line()}; {session_summary(spark)}; extra settings {extra}")
    print(f"{'case':40s} {'median s':>9s}")
    for (name, form), seconds in per_case.items():
        print(f"{name + ' ' + form:40s} {sorted(seconds)[len(seconds) // 2]:9.3f}")
    total = sum(cpu.values())
    print(f"wall {wall:.1f} s ({wall / releases:.3f} s a release); CPU {total:.1f} s "
          f"({total / releases:.3f} s a release): JVM {cpu['jvm']:.1f}, driver Python {cpu['driver']:.1f}, "
          f"workers {cpu['workers']:.1f}")
    spark.stop()


if __name__ == "__main__":
    main()
