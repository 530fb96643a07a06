"""Top-k accuracy on MovieLens 100k (Gillenwater et al. 2022, Section 5 protocol).

    .venv/bin/python benchmarks/topk_accuracy.py [--trials 50] [--ks 5 10 20 50 100 200]
        [--epsilon 1] [--delta 1e-6] [--mechanisms joint pnf-peel cdp-peel] [--seed 0]
        [--data ../shared/data] [--json out.json]

Data: ../shared/data/movielens-100k/u.data read in place (tab-separated user,
movie, rating, time). Person = user, item = movie, count = distinct raters;
the public domain is the movie list in u.item (1,682 ids). The NON-PRIVATE
per-movie counts are computed once with the Spark stage
(dp_spark.stages.item_counts.domain_item_counts, exactly what dp_spark.top_k
runs); then each mechanism runs on the driver once per trial, on the counts
in a fresh random order (the paper permutes the counts every trial, so ties
are broken at random), with a generator seeded by (seed, k, mechanism,
trial). Seeded: NOT differentially private, not for publication.

Metrics per trial (ALGORITHMS.md 3.5): ℓ∞ = max_i |c_(i) − c_{s_i}| and
ℓ1 = Σ_i |c_(i) − c_{s_i}|, the true counts of the released items against the
true top-k. Prints their 25th/50th/75th percentiles per (k, mechanism), the
driver time per trial, and the gaps between the top true counts (non-private)
— the paper's qualitative result is that joint wins on ℓ∞ where those gaps
are large; CDP-Peel, an (ε, δ) method, may win for large k.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    DEFAULT_DATA_DIR,
    Timer,
    command_line,
    fmt,
    format_table,
    percentiles,
    run_rng,
    session_summary,
    start_session,
    write_json,
)

MECHANISMS = ("joint", "pnf-joint", "pnf-peel", "cdp-peel")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    p.add_argument("--trials", type=int, default=50)
    p.add_argument("--ks", type=int, nargs="+", default=[5, 10, 20, 50, 100, 200])
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--delta", type=float, default=1e-6, help="cdp-peel only")
    p.add_argument("--mechanisms", nargs="+", default=["joint", "pnf-peel", "cdp-peel"], choices=MECHANISMS)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    if args.trials < 1:
        p.error("--trials must be >= 1")
    return args


def movielens_counts(spark, folder: Path):
    """NON-PRIVATE: distinct raters per movie of the public u.item list."""
    from dp_spark.stages import item_counts as stage

    domain = [int(line.split("|", 1)[0]) for line in
              (folder / "u.item").read_text(encoding="latin-1").splitlines() if line.strip()]
    ratings = spark.read.csv(str(folder / "u.data"), sep="\t",
                             schema="user long, movie long, rating int, ts long")
    edge_df = stage.edge_table(ratings, "user", "movie")
    return domain, stage.domain_item_counts(edge_df, stage.normalise_domain(domain, True))


def run_mechanism(name, counts, k, epsilon, delta, rng):
    from dp_spark.selection.topk import cdp_peel_top_k, joint_top_k, pnf_joint_top_k, pnf_peel_top_k

    if name == "joint":
        return joint_top_k(counts, k, epsilon, rng)
    if name == "pnf-joint":
        return pnf_joint_top_k(counts, k, epsilon, rng)
    if name == "pnf-peel":
        return pnf_peel_top_k(counts, k, epsilon, rng)
    return cdp_peel_top_k(counts, k, epsilon, delta, rng)


def main(argv=None) -> int:
    args = parse_args(argv)
    spark = start_session("topk_accuracy")
    with Timer() as t:
        domain, counts = movielens_counts(spark, args.data / "movielens-100k")
    print(f"# {command_line()}")
    print(f"# MovieLens 100k: d = {len(domain):,} movies, stage {t.seconds:.1f} s; "
          f"{session_summary(spark)['spark.master']}, ε = {args.epsilon:g}, "
          f"δ = {args.delta:g} (cdp-peel), {args.trials} trials. Released values are SEEDED (not private).")
    ordered = np.sort(counts)[::-1]
    top = max(args.ks)
    gaps = -np.diff(ordered[: top + 1])
    print("# NON-PRIVATE: true counts at ranks 1, 5, 10, 20, 50, 100, 200: "
          + ", ".join(f"{ordered[i - 1]}" for i in (1, 5, 10, 20, 50, 100, 200) if i <= len(ordered)))
    print("# NON-PRIVATE: mean gap between consecutive top counts, ranks 1-10: "
          f"{gaps[:10].mean():.1f}; ranks 10-50: {gaps[10:50].mean():.1f}; ranks 50-200: {gaps[50:200].mean():.2f}")
    print()

    results = []
    rows = []
    for k in args.ks:
        truth = ordered[:k]
        for m_index, name in enumerate(args.mechanisms):
            linf, l1, seconds = [], [], []
            for trial in range(args.trials):
                rng = run_rng(args.seed, k, m_index, trial)
                perm = rng.permutation(len(counts))
                shuffled = counts[perm]
                with Timer() as timer:
                    chosen = run_mechanism(name, shuffled, k, args.epsilon, args.delta, rng)
                seconds.append(timer.seconds)
                err = np.abs(truth - shuffled[chosen])
                linf.append(float(err.max()))
                l1.append(float(err.sum()))
            q_inf, q_1 = percentiles(linf, (25, 50, 75)), percentiles(l1, (25, 50, 75))
            results.append({"k": k, "mechanism": name, "linf": linf, "l1": l1,
                            "seconds_median": float(np.median(seconds))})
            rows.append([f"k={k}", name, *(fmt(v) for v in q_inf), *(fmt(v) for v in q_1),
                         f"{np.median(seconds) * 1000:.1f}"])
        rows.append([""] * 9)
    print(format_table(
        ["k", "mechanism", "ℓ∞ 25%", "ℓ∞ 50%", "ℓ∞ 75%", "ℓ1 25%", "ℓ1 50%", "ℓ1 75%", "ms/trial"],
        rows[:-1], title="Top-k error: true counts of the released items vs the true top-k (lower is better)"))
    print()
    winners = []
    for k in args.ks:
        med = {r["mechanism"]: np.median(r["linf"]) for r in results if r["k"] == k}
        best = min(med, key=med.get)
        winners.append([f"k={k}", best, *(fmt(med[m]) for m in args.mechanisms)])
    print(format_table(["k", "best median ℓ∞", *args.mechanisms], winners, title="Median ℓ∞ by mechanism"))
    if args.json:
        write_json(args.json, {"command": command_line(), "epsilon": args.epsilon, "delta": args.delta,
                               "d": len(domain), "results": results})
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
