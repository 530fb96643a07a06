"""Issue 24: PipelineDP 0.3's count per partition (public partitions) against
dp_spark's grouped count-release, on the same rows, in one run.

    .venv/bin/python -m benchmarks.grouped_count_pipelinedp [--rows 200000] [--groups 20]
        [--items 200] [--rho 0.5] [--delta 1e-6] [--max-partitions 8] [--pipelinedp-l0 L0] [--reps 1] [--seed 0]
        [--pipelinedp-python PATH] [--json out.json]

PipelineDP 0.3 pins numpy < 2 (dp_spark's environment has numpy 2), so it
lives in its own environment and runs in a subprocess
(benchmarks/_pipelinedp_count.py, numpy + pipeline_dp only):

    python -m venv /work/pdp-venv && /work/pdp-venv/bin/pip install pipeline-dp==0.3.0

``--pipelinedp-python`` (default ``$PIPELINEDP_PYTHON``, else
/work/pdp-venv/bin/python) is that environment's interpreter.

Data: synthetic, --rows distinct (person, group, item) rows over --groups
public groups and --items items per group (a public item domain 0..items-1:
PipelineDP's public partitions are every (group, item) of it); each person
holds 1..2·L0 − 1 pairs (L0 = --max-partitions, mean about L0), the group
uniform and the item Zipf-like (p ∝ 1/(rank + 1)), so some pairs are common
and many rare.

Arms, at the same privacy level:
- ours: ``dp_spark.count_release(df, rho, delta, group_by="group",
  groups=<the public keys>)``: PCR on the composite key (group, item)
  (Unknown Domain Gumbel selections + discrete Gaussian counts under a
  privacy filter; no contribution bound, no item domain), person-level
  δ-approximate ρ-zCDP, i.e. (ε, 2δ)-DP with ε = ρ + 2·sqrt(ρ·ln(1/δ)).
- PipelineDP: ``DPEngine.aggregate`` (LocalBackend), ``Metrics.COUNT``,
  Gaussian noise, ``max_partitions_contributed`` = --pipelinedp-l0
  (default L0; rows beyond it per person are dropped by PipelineDP, which
  biases common pairs' counts down; 2·L0 − 1 drops nothing),
  ``max_contributions_per_partition`` = 1, ``public_partitions`` = every
  (group, item) of the public domain, at (ε, 2δ) — the same (ε, δ) ours
  implies. Every public partition is released (no selection).

Times: ours = the ``count_release`` call on a Parquet input plus collecting
``release.groups``, Spark local[2], best of --reps after one warm-up;
PipelineDP = its aggregate (pipeline, budgets, materialized result) inside
the subprocess, and the subprocess's wall time (Python start, imports,
loading the rows). Errors: the absolute error |released − true| and the
relative error |released − true| / true of the released counts, median over
(a) the pairs ours released (both arms on the same pairs) and (b) all public
partitions with a true count > 0 (PipelineDP only; ours releases none of
the rest). True counts are NON-PRIVATE, computed here only to score.
Released values of ours are SEEDED (not for publication); PipelineDP's noise
is python-dp's (not seedable): one run of each is one sample.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Timer, command_line, format_table, session_summary, start_session, write_json  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_PDP_PYTHON = os.environ.get("PIPELINEDP_PYTHON", "/work/pdp-venv/bin/python")
INSTALL = "python -m venv /work/pdp-venv && /work/pdp-venv/bin/pip install pipeline-dp==0.3.0"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--groups", type=int, default=20)
    p.add_argument("--items", type=int, default=200, help="items per group (the public item domain)")
    p.add_argument("--rho", type=float, default=0.5)
    p.add_argument("--delta", type=float, default=1e-6)
    p.add_argument("--max-partitions", type=int, default=8, help="the data's mean pairs per person, and PipelineDP's "
                   "L0 unless --pipelinedp-l0")
    p.add_argument("--pipelinedp-l0", type=int, default=None,
                   help="PipelineDP's max_partitions_contributed (default --max-partitions; 2·max-partitions − 1 "
                        "keeps every row: no bounding bias, more noise)")
    p.add_argument("--kbar", type=int, default=10_000, help="ours: the k̄ largest pair counts collected")
    p.add_argument("--reps", type=int, default=1, help="timed repetitions of ours after one warm-up")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pipelinedp-python", default=DEFAULT_PDP_PYTHON)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    args.pipelinedp_l0 = args.pipelinedp_l0 or args.max_partitions
    if min(args.rows, args.groups, args.items, args.max_partitions, args.reps) < 1:
        p.error("--rows, --groups, --items, --max-partitions and --reps must be >= 1")
    return args


def synthetic(rows: int, groups: int, items: int, l0: int, seed: int):
    """(person, group, item) int64 arrays: distinct rows, about ``rows`` of them."""
    rng = np.random.default_rng(seed)
    persons = max(1, rows // l0)
    per = rng.integers(1, 2 * l0, size=persons)  # 1..2·L0 − 1 pairs, mean L0
    person = np.repeat(np.arange(persons, dtype=np.int64), per)
    weights = 1.0 / np.arange(1, items + 1)
    item = rng.choice(items, size=len(person), p=weights / weights.sum()).astype(np.int64)
    group = rng.integers(0, groups, size=len(person)).astype(np.int64)
    keys = np.unique(np.stack([person, group, item], axis=1), axis=0)  # distinct (person, group, item)
    return keys[:, 0].copy(), keys[:, 1].copy(), keys[:, 2].copy()


def true_counts(group, item, groups: int, items: int) -> np.ndarray:
    """NON-PRIVATE: distinct persons per (group, item) (rows are distinct), a groups × items array."""
    counts = np.zeros((groups, items), dtype=np.int64)
    np.add.at(counts, (group, item), 1)
    return counts


def epsilon_of(rho: float, delta: float) -> float:
    return rho + 2.0 * float(np.sqrt(rho * np.log(1.0 / delta)))


def run_ours(spark, path: str, args, keys: list):
    import dp_spark

    df = spark.read.parquet(path)

    def once(seed):
        release = dp_spark.count_release(df, rho=args.rho, delta=args.delta, kbar=args.kbar, group_by="group",
                                         groups=keys, seed=seed)
        frame = release.groups.select("group", "item", "count").toPandas()
        return release, frame

    once(args.seed + 1)  # warm-up (JVM, Python workers)
    best = None
    for rep in range(args.reps):
        with Timer() as t:
            release, frame = once(args.seed)
        best = t.seconds if best is None else min(best, t.seconds)
    return best, release, frame


def run_pipelinedp(args, npz: Path, out: Path, epsilon: float, delta: float):
    python = args.pipelinedp_python
    if not Path(python).exists():
        raise SystemExit(f"PipelineDP's interpreter {python} does not exist; install it with: {INSTALL} "
                         "(or pass --pipelinedp-python / set PIPELINEDP_PYTHON)")
    cmd = [python, str(HERE / "_pipelinedp_count.py"), str(npz), str(out), "--epsilon", repr(epsilon),
           "--delta", repr(delta), "--max-partitions", str(args.pipelinedp_l0)]
    with Timer() as t:
        subprocess.run(cmd, check=True)
    doc = json.loads(out.read_text())
    return doc["seconds"], t.seconds, doc["rows"]


def errors(released: np.ndarray, truth: np.ndarray) -> dict:
    abs_err = np.abs(released - truth)
    rel = abs_err / np.maximum(truth, 1)
    return {"pairs": int(len(truth)), "median_abs": float(np.median(abs_err)) if len(truth) else None,
            "median_rel": float(np.median(rel)) if len(truth) else None}


def main(argv=None) -> dict:
    args = parse_args(argv)
    person, group, item = synthetic(args.rows, args.groups, args.items, args.max_partitions, args.seed)
    truth = true_counts(group, item, args.groups, args.items)
    epsilon, delta_total = epsilon_of(args.rho, args.delta), 2 * args.delta
    keys = list(range(args.groups))
    partitions = np.array([(g, i) for g in keys for i in range(args.items)], dtype=np.int64)
    print(f"{len(person):,} distinct (person, group, item) rows, {person.max() + 1:,} persons, "
          f"{args.groups} groups x {args.items} items; ours rho={args.rho:g}, delta={args.delta:g} "
          f"=> PipelineDP at (eps={epsilon:.4g}, delta={delta_total:g})")
    spark = start_session("grouped-count-pipelinedp")
    import pandas as pd

    with tempfile.TemporaryDirectory(prefix="gcr-pdp-") as tmp:
        tmp = Path(tmp)
        path = str(tmp / "rows.parquet")
        spark.createDataFrame(pd.DataFrame({"person_id": person, "group": group, "item": item})) \
            .write.parquet(path)
        np.savez(tmp / "rows.npz", person=person, group=group, item=item, partitions=partitions)
        ours_seconds, release, frame = run_ours(spark, path, args, keys)
        pdp_seconds, pdp_wall, pdp_rows = run_pipelinedp(args, tmp / "rows.npz", tmp / "pdp.json", epsilon,
                                                         delta_total)
    pdp = np.zeros((args.groups, args.items))
    for g, i, c in pdp_rows:
        pdp[g, i] = c
    og, oi = frame["group"].to_numpy(np.int64), frame["item"].to_numpy(np.int64)
    ours_counts = frame["count"].to_numpy(np.float64)
    nonzero = truth > 0
    result = {
        "command": command_line(),
        "session": session_summary(spark),
        "rows": int(len(person)), "persons": int(person.max() + 1), "groups": args.groups, "items": args.items,
        "rho": args.rho, "delta": args.delta, "epsilon_equivalent": epsilon, "delta_equivalent": delta_total,
        "max_partitions": args.max_partitions, "pipelinedp_l0": args.pipelinedp_l0,
        "ours_seconds": ours_seconds, "pipelinedp_seconds": pdp_seconds, "pipelinedp_wall_seconds": pdp_wall,
        "ours_released": int(len(frame)), "pipelinedp_released": len(pdp_rows),
        "ours_on_ours_pairs": errors(ours_counts, truth[og, oi].astype(np.float64)),
        "pipelinedp_on_ours_pairs": errors(pdp[og, oi], truth[og, oi].astype(np.float64)),
        "pipelinedp_on_all_nonzero": errors(pdp[nonzero], truth[nonzero].astype(np.float64)),
        "ours_stopped": release.result.get("stopped"),
    }
    table = [
        ("ours: grouped count-release (PCR)", f"{ours_seconds:.1f}", str(len(frame)),
         *_cells(result["ours_on_ours_pairs"]), "-"),
        ("PipelineDP 0.3 COUNT, public partitions", f"{pdp_seconds:.1f} ({pdp_wall:.1f} wall)", str(len(pdp_rows)),
         *_cells(result["pipelinedp_on_ours_pairs"]),
         f"{_cells(result['pipelinedp_on_all_nonzero'])[0]} / {_cells(result['pipelinedp_on_all_nonzero'])[1]}"),
    ]
    print(format_table(["arm", "seconds", "released", "median abs err (ours' pairs)",
                        "median rel err (ours' pairs)", "median abs / rel (all true > 0)"], table))
    if args.json:
        write_json(args.json, result)
    return result


def _cells(e: dict) -> tuple[str, str]:
    if e["median_abs"] is None:
        return "-", "-"
    return f"{e['median_abs']:.2f}", f"{e['median_rel']:.4f}"


if __name__ == "__main__":
    main()
