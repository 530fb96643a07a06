"""Time of top-k's exact samplers against the floating-point draws they replaced, in one run.

    .venv/bin/python benchmarks/topk_exact.py [--baseline COMMIT] [--repeat 3]

- joint: ``joint_top_k`` (exact) against the float Gumbel-max sampler of ``--baseline`` (the
  joint.py of that commit, loaded from git; skipped without it), on Zipf counts and on flat random
  counts (the sweep runs further);
- cdp-peel: ``cdp_peel_top_k`` (the exact peel) against one-shot Gumbel noise and a sort (what it
  ran before), and ``unknown_domain_gumbel`` against the same float form with a threshold;
- per group: the same at a group's size (50 items, k = 5), the mean of 2,000 calls (a grouped
  release makes one per group).

Prints one line per case: seconds per call (best of ``--repeat``) and the ratio.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dp_spark.mechanisms.top_k import cdp_peel_top_k, joint_top_k, unknown_domain_gumbel  # noqa: E402
from dp_spark.mechanisms.top_k.peeling import cdp_peel_epsilon_per_step  # noqa: E402


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def baseline_joint(commit: str):
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:dp_spark/mechanisms/top_k/joint.py"],
                            check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "baseline_joint.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("baseline_joint", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.joint_top_k


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="commit whose float joint sampler to time against")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    old_joint = baseline_joint(args.baseline) if args.baseline else None

    print("case                                   exact (s)   float (s)   ratio")
    for shape, d, k, eps in [("zipf", 1_000, 10, 1.0), ("zipf", 100_000, 10, 1.0), ("zipf", 1_000_000, 10, 1.0),
                             ("zipf", 1_000_000, 50, 1.0), ("flat", 100_000, 10, 0.1),
                             ("flat", 1_000_000, 10, 0.1)]:
        if shape == "zipf":
            counts = np.floor(1e5 / np.arange(1, d + 1) ** 1.1).astype(np.int64)
        else:
            counts = rng.integers(0, 100, size=d)
        exact = best(lambda: joint_top_k(counts, k, eps, rng), args.repeat)
        if old_joint is None:
            print(f"joint {shape:4} d={d:>9,} k={k:<3} ε={eps:<4} {exact:10.4f}")
            continue
        floating = best(lambda: old_joint(counts, k, eps, rng), args.repeat)
        print(f"joint {shape:4} d={d:>9,} k={k:<3} ε={eps:<4} {exact:10.4f}  {floating:10.4f}  {exact / floating:6.2f}")

    for d, k in [(10_000, 10), (100_000, 10), (1_000_000, 10), (100_000, 100)]:
        counts = np.floor(1e5 / np.arange(1, d + 1) ** 1.1)
        step = cdp_peel_epsilon_per_step(1.0, 1e-6, k)
        exact = best(lambda: cdp_peel_top_k(counts, k, 1.0, 1e-6, rng), args.repeat)
        floating = best(lambda: np.argsort(-(counts + rng.gumbel(scale=1 / step, size=d)))[:k], args.repeat)
        print(f"cdp-peel d={d:>9,} k={k:<3}             {exact:10.4f}  {floating:10.4f}  {exact / floating:6.2f}")

    for kbar, k in [(1_000, 10), (100_000, 10)]:
        top = np.sort(rng.integers(1, 10_000, size=kbar))[::-1].astype(np.float64)
        exact = best(lambda: unknown_domain_gumbel(top, k, 1.0, 1e-6, kbar, rng), args.repeat)

        def floating_ud():
            noisy = top + rng.gumbel(size=kbar)
            kept = np.flatnonzero(noisy > 20.0 + rng.gumbel())
            return kept[np.argsort(-noisy[kept])][:k]

        floating = best(floating_ud, args.repeat)
        print(f"unknown-domain k̄={kbar:>7,} k={k:<3}        {exact:10.4f}  {floating:10.4f}  {exact / floating:6.2f}")
    per_group(rng, old_joint)


def per_group(rng, old_joint) -> None:
    counts = np.floor(200 / np.arange(1, 51)).astype(np.int64)
    calls = 2_000

    def mean(fn):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - t) / calls

    step = cdp_peel_epsilon_per_step(1.0, 1e-6, 5)
    rows = [("cdp-peel", mean(lambda: cdp_peel_top_k(counts, 5, 1.0, 1e-6, rng)),
             mean(lambda: np.argsort(-(counts + rng.gumbel(scale=1 / step, size=50)))[:5])),
            ("unknown-domain", mean(lambda: unknown_domain_gumbel(counts, 5, 1.0, 1e-6, 50, rng)),
             mean(lambda: np.argsort(-(counts + rng.gumbel(size=50)))[:5]))]
    if old_joint is not None:
        rows.append(("joint", mean(lambda: joint_top_k(counts, 5, 1.0, rng)),
                     mean(lambda: old_joint(counts, 5, 1.0, rng))))
    for name, exact, floating in rows:
        print(f"per group d=50 k=5 {name:15}      {exact * 1e3:7.3f} ms  {floating * 1e3:7.3f} ms  "
              f"{exact / floating:6.2f}")


if __name__ == "__main__":
    main()
