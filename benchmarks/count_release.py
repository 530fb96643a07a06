"""Private Count Release vs the contribution-bounding baseline (Rogers 2024, Section 4).

    .venv/bin/python benchmarks/count_release.py [--trials 10] [--rhos 0.1 0.5 1]
        [--delta 1e-6] [--relative-error 0.1] [--kbar 10000] [--percentiles 95 99]
        [--datasets movielens amazon-words] [--seed 0] [--data ../shared/data] [--json out.json]

Data, read in place from ../shared/data:
  movielens     MovieLens 100k u.data: person = user, item = movie.
  amazon-words  Amazon Fashion 5-core: person = reviewerID, item = the words
                (runs of [a-z]+) of the lower-cased reviewText.

For each data set the NON-PRIVATE summaries are computed once: the true
per-item counts of distinct persons (for the error metric), and the per-person
numbers of distinct items (their percentiles; the baseline's m is the TRUE
95th / 99th percentile, as in the paper — a non-private choice, labelled so).

pcr: the Spark stage (top k̄+1 counts) runs once per data set; the driver loop
(dp_spark.mechanisms.count_release.private_count_release, exactly what dp_spark.count_release
runs) once per trial. bounded: the full release dp_spark.count_release(...,
method="bounded", max_items=m) runs once per trial (Spark bounding, Spark-side
noisy selection, driver counts); "bounded+T" is the same run with the
threshold T = (2 + r)σ/r applied (post-processing of the same noisy counts,
i.e. what count_threshold=True returns for the same seed). All generators are
seeded by (seed, data set, ρ, method, trial): NOT private, not for publication.

Metrics per trial (the paper's): recall = number of counts released; the share
of released counts whose relative error |c − c~|/c exceeds r (lower is
better). Printed: medians (and 25/75th percentiles) over trials.
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
    format_table,
    percentiles,
    run_rng,
    start_session,
    write_json,
)

DATASETS = ("movielens", "amazon-words")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--rhos", type=float, nargs="+", default=[0.1, 0.5, 1.0])
    p.add_argument("--delta", type=float, default=1e-6)
    p.add_argument("--relative-error", type=float, default=0.1)
    p.add_argument("--kbar", type=int, default=10_000)
    p.add_argument("--percentiles", type=int, nargs="+", default=[95, 99])
    p.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    if args.trials < 1:
        p.error("--trials must be >= 1")
    return args


def load(spark, name: str, data: Path):
    from pyspark.sql import functions as F

    if name == "movielens":
        df = spark.read.csv(str(data / "movielens-100k" / "u.data"), sep="\t",
                            schema="user long, movie long, rating int, ts long")
        return df.select("user", "movie"), "user", "movie"
    reviews = spark.read.json(str(data / "amazon-fashion-5core" / "AMAZON_FASHION_5.json.gz"))
    words = reviews.select("reviewerID", F.explode(F.split(F.lower("reviewText"), "[^a-z]+")).alias("word"))
    return words.where(F.length("word") > 0), "reviewerID", "word"


def true_summaries(df, person_col, item_col):
    """NON-PRIVATE: all per-item counts (dict) and per-person distinct items."""
    from dp_spark.stages import item_counts as stage
    from dp_spark.stages.edges import PERSON

    edge_df = stage.edge_table(df, person_col, item_col)
    counts = stage.item_counts(edge_df).toPandas()
    per_person = edge_df.dropDuplicates().groupBy(PERSON).count().toPandas()["count"].to_numpy()
    return edge_df, dict(zip(counts["item"].tolist(), counts["count"].tolist())), per_person


def score(rows, truth, r):
    """(recall, share of released counts with relative error > r)."""
    if not rows:
        return 0, 0.0
    bad = sum(abs(truth[x["item"]] - x["count"]) / truth[x["item"]] > r for x in rows)
    return len(rows), bad / len(rows)


def main(argv=None) -> int:
    import dp_spark
    from dp_spark.mechanisms.count_release import bounded_plan, private_count_release
    from dp_spark.stages import item_counts as stage

    args = parse_args(argv)
    spark = start_session("count_release")
    r = args.relative_error
    print(f"# {command_line()}")
    print(f"# δ = {args.delta:g}, r = {r:g}, k̄ = {args.kbar:,}, {args.trials} trials. "
          "Released values are SEEDED (not private).")
    stats_rows, result_rows, results = [], [], []
    for d_index, name in enumerate(args.datasets):
        df, person_col, item_col = load(spark, name, args.data)
        df = df.cache()
        with Timer() as t:
            edge_df, truth, per_person = true_summaries(df, person_col, item_col)
            top = stage.top_item_counts(edge_df, args.kbar)
        ms = {q: int(np.ceil(np.percentile(per_person, q))) for q in args.percentiles}
        stats_rows.append([name, f"{len(per_person):,}", f"{len(truth):,}",
                           *(f"{np.percentile(per_person, q):.0f}" for q in (50, 75, 95, 99)),
                           f"{t.seconds:.1f}"])
        for rho_index, rho in enumerate(args.rhos):
            variants = {"pcr": [], **{f"bounded m={m} (p{q})": [] for q, m in ms.items()},
                        **{f"bounded+T m={m} (p{q})": [] for q, m in ms.items()}}
            seconds = {key: [] for key in variants}
            for trial in range(args.trials):
                rng = run_rng(args.seed, d_index, rho_index, 0, trial)
                with Timer() as t:
                    res = private_count_release(top.counts, top.next_count, rho, args.delta, r, args.kbar, rng)
                rows = [{"item": top.items[x.index], "count": x.count} for x in res.released]
                variants["pcr"].append(score(rows, truth, r))
                seconds["pcr"].append(t.seconds)
                for m_index, (q, m) in enumerate(ms.items()):
                    seed = int(run_rng(args.seed, d_index, rho_index, 1 + m_index, trial).integers(2**31))
                    with Timer() as t:
                        release = dp_spark.count_release(df, rho=rho, delta=args.delta, relative_error=r,
                                                         method="bounded", max_items=m, person_col=person_col,
                                                         item_col=item_col, seed=seed)
                    threshold = bounded_plan(rho, args.delta, m, 0.5, r).count_threshold
                    released = release.result["items"]
                    variants[f"bounded m={m} (p{q})"].append(score(released, truth, r))
                    variants[f"bounded+T m={m} (p{q})"].append(
                        score([x for x in released if x["count"] >= threshold], truth, r))
                    seconds[f"bounded m={m} (p{q})"].append(t.seconds)
            for key, scores in variants.items():
                recall = [s[0] for s in scores]
                share = [100 * s[1] for s in scores]
                rq, sq = percentiles(recall, (25, 50, 75)), percentiles(share, (25, 50, 75))
                secs = seconds.get(key) or seconds[key.replace("bounded+T", "bounded")]
                result_rows.append([name, f"{rho:g}", key, f"{rq[1]:.0f}", f"{rq[0]:.0f}-{rq[2]:.0f}",
                                    f"{sq[1]:.1f}", f"{sq[0]:.1f}-{sq[2]:.1f}", f"{np.median(secs):.2f}"])
                results.append({"dataset": name, "rho": rho, "method": key, "recall": recall,
                                "share_above_r_percent": share})
            result_rows.append([""] * 8)
            print(f"  {name} ρ={rho:g} done", file=sys.stderr, flush=True)
        df.unpersist()
    print(format_table(["data set", "persons", "items", "p50", "p75", "p95", "p99", "stage s"], stats_rows,
                       title="NON-PRIVATE data summary: distinct items per person (percentiles; the "
                             "baseline's m uses p95 / p99, as in the paper)"))
    print()
    print(format_table(["data set", "ρ", "method", "recall", "recall IQR", f"% err>{r:g}", "IQR", "s/run"],
                       result_rows[:-1],
                       title=f"Counts released (recall) and % of them with relative error > {r:g} "
                             "(medians over trials; lower % is better)"))
    if args.json:
        write_json(args.json, {"command": command_line(), "results": results})
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
