"""Driver time of the joint exponential mechanism (Gillenwater et al. 2022).

    .venv/bin/python benchmarks/topk_speed.py [--ds 10000 100000 1000000] [--ks 10 100]
        [--repeats 3] [--zipf 1.1] [--max-count 1000000] [--seed 0] [--json out.json]

No Spark: this is the driver-side cost after the stage has collected d counts.
Counts are Zipf-like: c_j = floor(max_count / (j+1)^s) for a random
permutation of ranks j (many ties in the tail, as in real count data). Each
(d, k) runs ``--repeats`` times with seeded generators (not private) and the
median wall time is printed, with cdp-peel (one Gumbel draw per item) as the
linear-time floor and dk/second as the joint sampler's throughput.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Timer, command_line, format_table, run_rng, write_json  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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


def main(argv=None) -> int:
    from dp_spark.selection.topk import cdp_peel_top_k, joint_top_k

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
    print(format_table(["d", "k", "joint s", "joint M entries/s", "cdp-peel s"], rows,
                       title="Joint exponential mechanism: driver time"))
    if args.json:
        write_json(args.json, {"command": command_line(), "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
