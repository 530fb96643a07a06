"""The distinct-count's bound candidates, measured across shapes (issue 36).

    .venv/bin/python benchmarks/distinct_count_grid.py [--epsilons 0.5 1 2] [--beta 0.05]
        [--grids default today ...] [--small] [--json out.json]
    .venv/bin/python benchmarks/distinct_count_grid.py --speed [--rows 2000000] [--reps 3]

For every shape of tests/accuracy/shapes.py (the accuracy tier's tables:
supplier prices ~93 items per person, 1,000 items per person, tiny l,
heavy-tailed, Amazon Fashion, MovieLens 100K) the greedy counts g_l (one
shard, numpy: the Spark stage's kernel) are computed once, NON-PRIVATE; then
for each candidate grid the EXACT distribution of the release
(dp_spark.mechanisms.distinct_count.accuracy.release_distribution: GEM's
permute-and-flip probabilities times the discrete Laplace pmf, no sampling
error) gives the median and 10th percentile of the lower bound and the
median estimate, as % of the true count (NON-PRIVATE), the likeliest l̂ and
P[l̂ = 1]. Also the best fixed l in hindsight: the candidate whose count
alone (no choice, the full ε on the count) has the highest median lower
bound — what a user who knew the data would set; and the chance of an ℓ̂
far above it (at least 16 times the best fixed ℓ and at least 256), where
the lower bound is near 0.

Prints one table per ε. Nothing here is private or for publication.

``--speed``: what the wider grid costs on Spark, in one session: the release
``dp_spark.distinct_count(df, epsilon=1, shards=1, seed=…)`` with
max_bound 100 (the previous default) and with the default (65,536), greedy,
on dp_spark.datasets.synthetic_events(--rows) and on the supplier-prices
shape (--rows / 93 persons), written once to Parquet; then matching with
max_bound 100 and its default (1,024) on the supplier shape. Median wall time
of --reps repetitions after a warm-up, the two settings alternating, and
their ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import command_line, format_table, write_json  # noqa: E402

from tests.accuracy import shapes  # noqa: E402

SHAPES = {
    "supplier": shapes.supplier_prices,
    "thousand": shapes.thousand_items,
    "tiny": shapes.tiny,
    "heavy": shapes.heavy_tailed,
    "fashion": shapes.amazon_fashion,
    "movielens": shapes.movielens,
}
SMALL = {"supplier": {"persons": 2_000}, "thousand": {"persons": 300}, "tiny": {"persons": 20_000},
         "heavy": {"persons": 5_000}}


def powers(ratio: float, top: int) -> list[int]:
    """round(ratio^i) < top, then top (distinct, increasing)."""
    out, i = [], 0
    while round(ratio ** i) < top:
        value = int(round(ratio ** i))
        if not out or value > out[-1]:
            out.append(value)
        i += 1
    return out + [int(top)]


#: Grids measured with one GEM β for every candidate instead of the
#: release's per-candidate thresholds: fixed at 0.2 (t = (2/ε)·ln(k/0.2)
#: grows with ln k), or scaled to 0.05·k (t = (2/ε)·ln 20 for every
#: candidate, far ones included).
FIXED_BETA = "GEM β 0.2"
SCALED_BETA = "one GEM β 0.05·k"


def grids() -> dict[str, list[int]]:
    """Every grid runs with the release's per-candidate GEM thresholds
    unless its name says FIXED_BETA or SCALED_BETA."""
    from dp_spark.settings.distinct_count import DEFAULT_MAX_BOUND, bound_candidates

    return {
        "default": bound_candidates(DEFAULT_MAX_BOUND),
        f"default with {FIXED_BETA}": bound_candidates(DEFAULT_MAX_BOUND),
        f"default with {SCALED_BETA}": bound_candidates(DEFAULT_MAX_BOUND),
        f"powers of 2 to 2^16 with {FIXED_BETA}": powers(2, 2 ** 16),
        "today (1,4,16,64; max_bound 100)": [1, 4, 16, 64],
        "1..100 (before the grid)": list(range(1, 101)),
        "powers of 4 to 4^8": powers(4, 4 ** 8),
        "powers of 2 to 2^10": powers(2, 2 ** 10),
        "powers of 2 to 2^16": powers(2, 2 ** 16),
        "powers of 2 to 10^6": powers(2, 10 ** 6),
        "powers of 4 to 10^6": powers(4, 10 ** 6),
        "powers of sqrt2 to 2^16": powers(2 ** 0.5, 2 ** 16),
    }


def best_fixed(values, cands, epsilon: float, beta: float) -> tuple[int, float]:
    """The candidate whose count alone (discrete Laplace at the full ε, its
    (1−β) margin subtracted) has the highest median lower bound: the best
    fixed l in hindsight. Returns (l, median lower bound)."""
    from dp_spark.mechanisms.distinct_count.bound import margins_at

    margins = margins_at(2.0 * epsilon, beta, cands)  # the (1−β) quantile of DLap(l/ε): the full ε on the count
    medians = np.asarray(values) - margins  # the noise is symmetric: the median of c + X − m is c − m
    j = int(np.argmax(medians))
    return int(cands[j]), float(medians[j])


def speed(rows: int, reps: int) -> None:
    """The --speed table (module docstring)."""
    import shutil
    import statistics
    import tempfile

    import pandas as pd

    import dp_spark
    from dp_spark.datasets import synthetic_events

    from _common import start_session

    spark = start_session("distinct_count_grid --speed")
    tmp = Path(tempfile.mkdtemp(prefix="dc_grid_"))
    try:
        supplier = shapes.supplier_prices(persons=max(rows // 93, 100))
        owner = np.repeat(np.arange(supplier.persons), np.diff(supplier.indptr))
        synthetic_events(spark, rows=rows).write.parquet(str(tmp / "events"))
        spark.createDataFrame(pd.DataFrame({"person_id": owner, "item": supplier.items.astype(str)})) \
            .write.parquet(str(tmp / "supplier"))
        cases = [("synthetic_events", "events", "greedy"), ("supplier prices", "supplier", "greedy"),
                 ("supplier prices", "supplier", "matching")]
        table = []
        for label, name, method in cases:
            df = spark.read.parquet(str(tmp / name))
            times: dict = {100: [], None: []}
            for rep in range(reps + 1):  # the first round is a warm-up
                for bound in (100, None):
                    start = time.perf_counter()
                    r = dp_spark.distinct_count(df, epsilon=1.0, method=method, max_bound=bound, shards=1,
                                                seed=rep)
                    if rep:
                        times[bound].append(time.perf_counter() - start)
                    times.setdefault(("bound", bound), r.result["bound"])
            old, new = statistics.median(times[100]), statistics.median(times[None])
            table.append([label, method, f"{old:.2f}", f"{new:.2f}", f"{new / old:.2f}",
                          f"{times[('bound', 100)]} / {times[('bound', None)]}"])
        print(format_table(["table", "method", "max_bound 100 (s)", "default (s)", "ratio", "l̂ (seeded)"], table,
                           title=f"Cost of the default grid, {rows:,} rows, median of {reps} after a warm-up"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    p.add_argument("--beta", type=float, default=0.05)
    p.add_argument("--grids", nargs="*", default=None, help="grid names (default: all)")
    p.add_argument("--small", action="store_true", help="the accuracy tier's smaller sizes")
    p.add_argument("--json", default=None)
    p.add_argument("--speed", action="store_true", help="the Spark cost of the default grid (docstring)")
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args(argv)
    if args.speed:
        print(command_line())
        speed(args.rows, args.reps)
        return 0

    from dp_spark.mechanisms.distinct_count.accuracy import release_distribution
    from dp_spark.settings.distinct_count import SELECTION_BETA

    print(command_line())
    all_grids = grids()
    chosen = {k: v for k, v in all_grids.items() if args.grids is None or k in args.grids}
    top = max(max(g) for g in chosen.values())
    data = []
    for key, make in SHAPES.items():
        t = time.perf_counter()
        shape = make(**(SMALL.get(key, {}) if args.small else {}))
        counts = shape.greedy_counts(top)
        data.append((shape, counts))
        print(f"{shape.name}: {shape.persons:,} persons, {shape.pairs:,} pairs, TRUE count {shape.truth:,} "
              f"(NON-PRIVATE), greedy {time.perf_counter() - t:.1f} s")
    out: dict = {}
    for eps in args.epsilons:
        rows = []
        for shape, counts in data:
            truth = shape.truth
            fixed, median = best_fixed(counts, np.arange(1, top + 1), eps, args.beta)
            far = max(256, 16 * fixed)
            for g, (label, cands) in enumerate(chosen.items()):
                cands = np.asarray(cands, dtype=np.int64)
                values = counts[cands - 1]
                gem_beta = (SELECTION_BETA if FIXED_BETA in label else
                            min(0.05 * len(cands), 0.9) if SCALED_BETA in label else None)
                dist = release_distribution(values, cands, eps, args.beta, gem_beta=gem_beta)
                likeliest, p_likeliest = dist.likeliest_bound()
                cell = {
                    "lower_bound_median_pct": 100 * dist.lower_bound_quantile(0.5) / truth,
                    "lower_bound_p10_pct": 100 * dist.lower_bound_quantile(0.1) / truth,
                    "estimate_median_pct": 100 * dist.estimate_quantile(0.5) / truth,
                    "likeliest_bound": likeliest, "p_likeliest": p_likeliest,
                    "p_bound_1": dist.bound_probabilities.get(1, 0.0),
                    "candidates": len(cands),
                    "lower_bound_p02_pct": 100 * dist.lower_bound_quantile(0.02) / truth,
                    "p_far": dist.bound_at_least(far), "far": far,
                }
                out.setdefault(f"eps={eps:g}", {})[f"{shape.name} / {label}"] = cell
                rows.append([shape.name if g == 0 else "", label, len(cands),
                             f"{cell['lower_bound_median_pct']:.2f} / {cell['lower_bound_p10_pct']:.2f} / "
                             f"{cell['lower_bound_p02_pct']:.2f}",
                             f"{cell['estimate_median_pct']:.2f}", f"{likeliest}: {p_likeliest:.3f}",
                             f"{cell['p_bound_1']:.3f}", f"{cell['p_far']:.4f} (>= {far})"])
            rows.append(["", "best fixed l in hindsight (full ε on the count)", "-",
                         f"{100 * median / truth:.2f} / - / -", "-", f"{fixed}", "-", "-"])
        print(format_table(
            ["shape (TRUE count NON-PRIVATE)", "candidates", "k", "EXACT lower bound % median / p10 / p2",
             "EXACT estimate % median", "likeliest l̂: P", "P[l̂ = 1]", "P[l̂ far above the best fixed l]"],
            rows, title=f"Bound candidates at ε = {eps:g}, β = {args.beta:g}, greedy counts (one shard), exact "
                        "distributions (not sampled)"))
        print()
    if args.json:
        write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
