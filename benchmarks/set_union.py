"""DP Set Union (Gopi et al., ICML 2020) with dp_spark: release sizes and sharding.

    .venv/bin/python benchmarks/set_union.py [--runs 5] [--rows 2000000]
        [--max-items 1 10 50 100 200 300] [--methods policy-greedy ...] [--shards-sweep 1 2 8 32] [--sweep-runs 3]
        [--sweep-max-items 100] [--seed 0] [--data ../shared/data] [--json out.json]

Settings of the paper's Table 2: ε = 3, δ = e^-10, α = 2, one pass.

Table 1 and 2 — items released (mean ± sd over ``--runs`` runs) for each
policy and Δ0, on
  * Amazon Fashion words (../shared/data/amazon-fashion-5core, read in place;
    person = reviewerID, items = [a-z]+ runs of lower(reviewText)); every run
    redraws the per-person item sampling (a new salt) and the noise;
  * synthetic Zipf words from dp_spark.datasets.synthetic_events (``--rows``,
    default 2M; 200k persons, 100k-word vocabulary, Zipf 1.05 words); the
    histogram is built once per (policy, Δ0) with one salt and each run
    redraws the noise only (the histogram dominates the cost at this size).
Policy Greedy (Carvalho, Wang, Gondara, AAAI 2022) keeps each person's Δ0
most frequent items instead of a sample (its restriction), from the same salt.
Both next to the paper's Reddit figures (Table 2; the Reddit file is not
available, so compare the ordering and the shape in Δ0, not the numbers).
The sequential policies use dp_spark's defaults (8 shards, each with the
cutoff Γ/√8); the shards sweep shows what that costs.

Table 3 — the shards sweep: the full ``dp_spark.set_union`` call (the
sequential policies of ``--methods``, Δ0 = ``--sweep-max-items``) on the synthetic data with
shards = 1, 2, 8, 32, each shard with the default cutoff Γ/√shards and with
Γ: released items (mean ± sd) and wall time (median) per call, next to a
non-private floor (distinct items of the same table).

Table 4 (``--mass``, instead of Tables 1-3) — items and missing mass: one
full ``dp_spark.set_union`` call per method at ε = 3, δ = e^-10, α = 2,
Δ0 = ``--mass-max-items`` (100), on each table of ``--mass-data``: the
review-word shape (``review-words``: 50,000 persons with ~130 distinct words
each from a Zipf(1.05) vocabulary of 100,000: 8.85M rows, person exponent 0),
MovieLens 100K (``movielens``: person = user id, item = movie id), Amazon
Fashion words (``amazon``), and the default Zipf table at 2M and 20M rows
(``zipf-2m``, ``zipf-20m``). Per method: the released items, the missing mass
(the share of the distinct (person, item) pairs of the UNBOUNDED input whose
item is not released; Raman, Dick, Joseph, ICLR 2026, report it beside the
item count because the two can disagree) and the call's wall time against a
plain ``groupBy(item).count()`` of the same cached table (warmed once, then
timed once). ``sips`` (the multi-round exact weighted Gaussian,
dp_spark.mechanisms.set_union.sips) runs at the stage level (edges and its
rounds; no report or ledger), the others through ``dp_spark.set_union``.

Everything released here is SEEDED (run i of a cell uses
SeedSequence([seed, table, cell, i])): NOT differentially private, not for
publication. Lines marked NON-PRIVATE are exact statistics of the data.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    DEFAULT_DATA_DIR,
    Timer,
    command_line,
    format_table,
    run_rng,
    session_summary,
    start_session,
    write_json,
)

DATA_FILE = Path("amazon-fashion-5core") / "AMAZON_FASHION_5.json.gz"
EPSILON = 3.0
DELTA = math.exp(-10)
ALPHA = 2.0
POLICIES = ("count", "weighted-laplace", "weighted-gaussian", "policy-laplace", "policy-gaussian", "policy-greedy")

# Gopi et al., supplement Table 2 (Reddit unigrams, ε = 3, δ = e^-10, α = 2,
# one pass, mean ± sd over 5 user orders), from ALGORITHMS.md 2.5.
PAPER_REDDIT = {
    1: {"policy-laplace": "4236 ± 14", "policy-gaussian": "3135 ± 25"},
    10: {"policy-laplace": "12452 ± 31", "policy-gaussian": "10784 ± 22"},
    50: {"policy-laplace": "15056 ± 35", "policy-gaussian": "15763 ± 33"},
    100: {"policy-laplace": "14562 ± 50", "policy-gaussian": "14562 ± 50"},
    200: {"policy-laplace": "14005 ± 33", "policy-gaussian": "14005 ± 33"},
    300: {"policy-laplace": "13702 ± 37", "policy-gaussian": "13702 ± 37"},
}


#: Methods Table 4 runs at the stage level (the release API does not offer them yet): the
#: multi-round exact weighted Gaussian (dp_spark.mechanisms.set_union.sips), edges + rounds.
STAGE_ONLY = ("sips",)
#: Table 4's tables, in the order run.
MASS_DATA = ("review-words", "movielens", "amazon", "zipf-2m", "zipf-20m")
#: synthetic_events arguments of the synthetic tables of Table 4.
MASS_SYNTHETIC = {
    "review-words": dict(rows=8_850_000, persons=50_000, items=100_000, person_exponent=0.0),
    "zipf-2m": dict(rows=2_000_000),
    "zipf-20m": dict(rows=20_000_000),
}
MOVIELENS_FILE = Path("movielens-100k") / "u.data"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    p.add_argument("--runs", type=int, default=5, help="runs per (policy, Δ0) cell (default 5)")
    p.add_argument("--rows", type=int, default=2_000_000, help="synthetic rows (default 2M)")
    p.add_argument("--max-items", type=int, nargs="+", default=[1, 10, 50, 100, 200, 300])
    p.add_argument("--methods", nargs="+", choices=POLICIES + STAGE_ONLY, default=None,
                   help="policies of Tables 1, 2 and 4 (default: all; sips in Table 4 only)")
    p.add_argument("--shards", type=int, default=None,
                   help="person shards of the sequential policies in Tables 1 and 2 (default: dp_spark's 8)")
    p.add_argument("--persons", type=int, default=None, help="synthetic persons (default rows/10)")
    p.add_argument("--vocabulary", type=int, default=None, help="synthetic vocabulary (default rows/20)")
    p.add_argument("--person-exponent", type=float, default=0.7,
                   help="synthetic person activity exponent (default 0.7; 0 = every person alike)")
    p.add_argument("--shards-sweep", type=int, nargs="+", default=[1, 2, 8, 32])
    p.add_argument("--sweep-runs", type=int, default=3)
    p.add_argument("--sweep-max-items", type=int, default=100)
    p.add_argument("--skip", choices=["amazon", "synthetic", "sweep"], nargs="*", default=[])
    p.add_argument("--mass", action="store_true", help="run Table 4 (items and missing mass) instead of 1-3")
    p.add_argument("--mass-data", nargs="+", choices=MASS_DATA, default=list(MASS_DATA[:-1]),
                   help="the tables of Table 4 (default: all but zipf-20m)")
    p.add_argument("--mass-max-items", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    if args.runs < 1 or args.sweep_runs < 1:
        p.error("--runs and --sweep-runs must be >= 1")
    if args.methods is None:
        args.methods = list(POLICIES) + (list(STAGE_ONLY) if args.mass else [])
    if not args.mass and set(args.methods) & set(STAGE_ONLY):
        p.error("sips runs in Table 4 (--mass) only")
    return args


def amazon_edges(spark, path: Path):
    from pyspark.sql import functions as F

    raw = spark.read.json(str(path))
    words = F.regexp_extract_all(F.lower(F.col("reviewText")), F.lit("[a-z]+"), F.lit(0))
    return raw.select(F.col("reviewerID").alias("person_id"), F.explode(words).alias("item")).where(
        F.length("item") > 0
    )


def data_line(edge_df) -> str:
    """NON-PRIVATE statistics of a (person, item) table."""
    from pyspark.sql import functions as F

    pairs = edge_df.select("person", "item").dropDuplicates()
    per = pairs.groupBy("person").count()
    s = per.agg(F.count("*").alias("persons"), F.sum("count").alias("pairs"),
                F.percentile_approx("count", [0.5, 0.9, 0.99], 10000).alias("q"),
                F.max("count").alias("max")).collect()[0]
    vocab = pairs.select("item").distinct().count()
    q = s["q"]
    return (f"NON-PRIVATE: {s['persons']:,} persons, {s['pairs']:,} distinct (person, item) pairs, "
            f"{vocab:,} distinct items; items per person median {q[0]}, p90 {q[1]}, p99 {q[2]}, "
            f"max {s['max']}")


def mean_sd(values) -> str:
    a = np.asarray(values, dtype=np.float64)
    return f"{a.mean():,.1f} ± {a.std(ddof=1) if len(a) > 1 else 0.0:,.1f}"


def grid(spark, edge_df, max_items_list, runs, seed, table, resample, shards, methods=POLICIES):
    """released[(policy, Δ0)] = list of release sizes; seconds[(policy, Δ0)]. Policy Greedy's sets
    keep each person's most frequent items in that order (its restriction), the others' a salted-hash
    sample; both from the same salt."""
    from dp_spark.mechanisms.set_union import (BY_FREQUENCY, ThresholdStep, derive_randomness, plan_set_union,
                                               shard_cutoff)
    from dp_spark.stages.set_union import released_items, restricted_sets, weight_histogram

    def restrict(d0, salt):
        kinds = {p in BY_FREQUENCY for p in methods}
        return {kind: restricted_sets(edge_df, d0, salt, by_frequency=kind).cache() for kind in kinds}

    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    released, seconds = {}, {}
    for d_index, d0 in enumerate(max_items_list):
        plans = {p: plan_set_union(EPSILON, DELTA, d0, p, ALPHA) for p in methods}
        fixed_sets = None
        if not resample:
            salt, _ = derive_randomness(run_rng(seed, table, d_index, 999))
            fixed_sets = restrict(d0, salt)
        hists = {}
        for run in range(runs):
            if resample:
                salt, _ = derive_randomness(run_rng(seed, table, d_index, run, 999))
                sets = restrict(d0, salt)
            else:
                sets = fixed_sets
            for policy in methods:
                plan = plans[policy]
                _, root = derive_randomness(run_rng(seed, table, d_index, run, POLICIES.index(policy)))
                with Timer() as t:
                    if resample or policy not in hists:
                        gamma = shard_cutoff(plan.gamma, shards) if plan.gamma is not None else None
                        hist = weight_histogram(sets[policy in BY_FREQUENCY], policy, gamma, shards)
                        if not resample:
                            hist = hist.cache()
                            hists[policy] = hist
                    else:
                        hist = hists[policy]
                    n = released_items(hist, ThresholdStep(plan, root), partitions).count()
                released.setdefault((policy, d0), []).append(int(n))
                seconds.setdefault((policy, d0), []).append(t.seconds)
            if resample:
                for frame in sets.values():
                    frame.unpersist()
        for hist in hists.values():
            hist.unpersist()
        for frame in (fixed_sets or {}).values():
            frame.unpersist()
        print(f"  Δ0 = {d0}: done", flush=True)
    return released, seconds


def grid_table(title, released, seconds, max_items_list, with_paper, methods=POLICIES):
    headers = ["Δ0"] + list(methods) + (["paper Reddit: policy-lap.", "policy-gau."] if with_paper else [])
    rows = []
    for d0 in max_items_list:
        row = [str(d0)] + [mean_sd(released[(p, d0)]) for p in methods]
        if with_paper:
            paper = PAPER_REDDIT.get(d0, {})
            row += [paper.get("policy-laplace", "-"), paper.get("policy-gaussian", "-")]
        rows.append(row)
    print(format_table(headers, rows, title))
    per_cell = np.median([s for v in seconds.values() for s in v])
    print(f"(median seconds per (policy, Δ0, run) cell: {per_cell:.1f})")
    print()


def movielens_edges(spark, path: Path):
    """(person_id, item) = (user id, movie id) of MovieLens 100K's u.data (tab-separated), read in place."""
    from pyspark.sql import functions as F

    raw = spark.read.csv(str(path), sep="\t", schema="user long, movie long, rating int, ts long")
    return raw.select(F.col("user").alias("person_id"), F.col("movie").cast("string").alias("item"))


def mass_source(spark, name: str, data_dir: Path, tmp: Path):
    """The (person_id, item) table ``name`` of Table 4, cached, and a line saying where it came from."""
    from dp_spark.datasets import synthetic_events

    if name == "movielens":
        path = (data_dir / MOVIELENS_FILE).resolve()
        return movielens_edges(spark, path).cache(), f"MovieLens 100K: {path} (read in place)"
    if name == "amazon":
        path = (data_dir / DATA_FILE).resolve()
        return amazon_edges(spark, path).cache(), f"Amazon Fashion words: {path} (read in place)"
    kwargs = MASS_SYNTHETIC[name]
    path = tmp / f"{name}.parquet"
    synthetic_events(spark, **kwargs).select("person_id", "item").write.parquet(str(path))
    shown = ", ".join(f"{k}={v:,}" if isinstance(v, int) else f"{k}={v:g}" for k, v in kwargs.items())
    return spark.read.parquet(str(path)).cache(), f"{name}: dp_spark.datasets.synthetic_events({shown})"


def sips_items(df, max_items: int, seed: int):
    """The multi-round exact weighted Gaussian at (ε, δ) = (3, e^-10) on (person_id, item), at the stage
    level: edges, then the rounds of dp_spark.mechanisms.set_union.sips (SEEDED)."""
    from dp_spark.mechanisms.set_union import ThresholdStep, derive_randomness
    from dp_spark.mechanisms.set_union.sips import plan_sips
    from dp_spark.stages.edges import edges
    from dp_spark.stages.set_union import rounds_items_of_edges

    plan = plan_sips(EPSILON, DELTA, max_items)
    rng = np.random.default_rng(seed)
    rounds = []
    for r in plan.rounds:
        salt, root = derive_randomness(rng)
        rounds.append((salt, ThresholdStep(r, root)))
    return rounds_items_of_edges(edges(df, "person_id", "item"), max_items=max_items, rounds=rounds)


def missing_mass(pairs, total: int, items) -> float:
    """The share of the distinct (person, item) pairs ``pairs`` (``total`` of them) whose item is not
    among the released ``items`` (a DataFrame with an ``item`` column). NON-PRIVATE input, SEEDED output."""
    kept = pairs.join(items.select("item").distinct(), "item", "left_semi").count()
    return 1.0 - kept / total if total else 0.0


def mass_table(spark, args) -> dict:
    """Table 4 (module docstring): per table of ``--mass-data`` and method, released items, missing
    mass and seconds against groupBy(item).count()."""
    import dp_spark
    from pyspark.sql import functions as F

    out = {}
    tmp = Path(tempfile.mkdtemp(prefix="dp_spark_set_union_mass_"))
    try:
        for t_index, name in enumerate(args.mass_data):
            df, where = mass_source(spark, name, args.data, tmp)
            print(where, flush=True)
            df.count()
            pairs = df.select("person_id", "item").dropDuplicates().cache()
            total = pairs.count()
            print(data_line(df.select(F.col("person_id").alias("person"), "item")))
            df.groupBy("item").count().count()  # warm-up
            with Timer() as floor:
                df.groupBy("item").count().count()
            rows, cells = [], {}
            for policy in args.methods:
                seed = int(run_rng(args.seed, 4, t_index, (POLICIES + STAGE_ONLY).index(policy)).integers(0, 2**31))
                with Timer() as t:
                    if policy in STAGE_ONLY:
                        items = sips_items(df, args.mass_max_items, seed)
                        released = items.count()
                    else:
                        release = dp_spark.set_union(df, epsilon=EPSILON, delta=DELTA,
                                                     max_items=args.mass_max_items, method=policy, alpha=ALPHA,
                                                     seed=seed)
                        released, items = release.released_count, release.items
                mass = missing_mass(pairs, total, items)
                items.unpersist()
                cells[policy] = {"released": int(released), "missing_mass": mass, "seconds": t.seconds}
                rows.append([policy, f"{released:,}", f"{mass:.4f}", f"{t.seconds:.1f}",
                             f"{t.seconds / floor.seconds:.2f}"])
                print(f"  {name}, {policy}: done", flush=True)
            print(format_table(
                ["method", "released items", "missing mass", "seconds", "× groupBy"], rows,
                f"Table 4. {name}: one seeded call per method, ε = {EPSILON:g}, δ = e^-10, α = {ALPHA:g}, "
                f"Δ0 = {args.mass_max_items}; missing mass over the {total:,} distinct (person, item) pairs "
                "of the unbounded input",
            ))
            print(f"non-private floor: groupBy(item).count() on the same cached table: {floor.seconds:.1f} s\n",
                  flush=True)
            out[name] = {"pairs": total, "groupby_seconds": floor.seconds, "methods": cells}
            pairs.unpersist()
            df.unpersist()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.mass:
        spark = start_session("dp_spark benchmark: set_union missing mass")
        print("dp_spark benchmark: DP Set Union, items and missing mass (Table 4)")
        print(f"command: {command_line()}")
        print("session: " + ", ".join(f"{k}={v}" for k, v in session_summary(spark).items()))
        print(f"SEEDED (base seed {args.seed}): the released sizes below are NOT differentially "
              "private and NOT for publication.")
        print()
        tables = mass_table(spark, args)
        if args.json:
            write_json(args.json, {"args": {k: str(v) for k, v in vars(args).items()}, "tables": {"mass": tables}})
            print(f"results written to {args.json}")
        return 0
    data_path = (args.data / DATA_FILE).resolve()
    if "amazon" not in args.skip and not data_path.is_file():
        print(f"error: {data_path} not found (set --data)", file=sys.stderr)
        return 2
    spark = start_session("dp_spark benchmark: set_union")
    import dp_spark
    from dp_spark.datasets import synthetic_events
    from dp_spark.stages.edges import edges
    from dp_spark.stages.set_union import DEFAULT_SHARDS

    shards = args.shards or DEFAULT_SHARDS
    print("dp_spark benchmark: DP Set Union (Gopi et al., ICML 2020)")
    print(f"command: {command_line()}")
    print("session: " + ", ".join(f"{k}={v}" for k, v in session_summary(spark).items()))
    print(f"ε = {EPSILON:g}, δ = e^-10, α = {ALPHA:g}, one pass; sequential policies in {shards} "
          f"shards with cutoff Γ/√{shards} (defaults: 8 shards, Γ/√8); runs per cell = {args.runs}")
    print(f"SEEDED (base seed {args.seed}): the released sizes below are NOT differentially "
          "private and NOT for publication.")
    print()
    out: dict = {"args": {k: str(v) for k, v in vars(args).items()}, "tables": {}}

    if "amazon" not in args.skip:
        edge_df = edges(amazon_edges(spark, data_path), "person_id", "item").cache()
        print(f"Amazon Fashion words: {data_path} (read in place)")
        print(data_line(edge_df))
        with Timer() as t:
            released, seconds = grid(spark, edge_df, args.max_items, args.runs, args.seed, 1, True, shards,
                                     args.methods)
        grid_table(f"Table 1. Amazon Fashion words: items released (mean ± sd, {args.runs} runs; "
                   "item sampling and noise redrawn per run)", released, seconds, args.max_items, True,
                   args.methods)
        print(f"(Table 1 total: {t.seconds:.0f} s)\n")
        out["tables"]["amazon"] = {f"{p}|{d}": v for (p, d), v in released.items()}
        edge_df.unpersist()

    synthetic = None
    if "synthetic" not in args.skip or "sweep" not in args.skip:
        tmp = Path(tempfile.mkdtemp(prefix="dp_spark_set_union_bench_"))
        path = tmp / "synthetic.parquet"
        synthetic_events(spark, rows=args.rows, persons=args.persons, items=args.vocabulary,
                         person_exponent=args.person_exponent).write.parquet(str(path))
        synthetic = spark.read.parquet(str(path)).cache()
        synthetic_edges = edges(synthetic, "person_id", "item").cache()
        print(f"Synthetic Zipf words: dp_spark.datasets.synthetic_events(rows={args.rows:,}, "
              f"persons={args.persons}, items={args.vocabulary}, person_exponent={args.person_exponent:g}) "
              f"written to {path}")
        print(data_line(synthetic_edges))

    if "synthetic" not in args.skip:
        with Timer() as t:
            released, seconds = grid(spark, synthetic_edges, args.max_items, args.runs, args.seed, 2,
                                     False, shards, args.methods)
        grid_table(f"Table 2. Synthetic Zipf words ({args.rows:,} rows): items released (mean ± sd, "
                   f"{args.runs} runs; histogram once per cell, noise redrawn per run)",
                   released, seconds, args.max_items, True, args.methods)
        print(f"(Table 2 total: {t.seconds:.0f} s)\n")
        out["tables"]["synthetic"] = {f"{p}|{d}": v for (p, d), v in released.items()}

    if "sweep" not in args.skip:
        from pyspark.sql import functions as F

        with Timer() as floor:
            synthetic.agg(F.countDistinct("item")).collect()
        rows = []
        sweep = {}
        from dp_spark.mechanisms.set_union import SEQUENTIAL

        for policy in [m for m in args.methods if m in SEQUENTIAL]:
            for s_index, n_shards in enumerate(args.shards_sweep):
                cells = {}
                for rule in ("scaled", "full"):
                    if n_shards == 1 and rule == "full":
                        continue  # one shard: both rules are the paper's Γ
                    sizes, times = [], []
                    for run in range(args.sweep_runs):
                        seed = int(run_rng(args.seed, 3, s_index, run).integers(0, 2**31))
                        with Timer() as t:
                            release = dp_spark.set_union(
                                synthetic, epsilon=EPSILON, delta=DELTA, max_items=args.sweep_max_items,
                                method=policy, alpha=ALPHA, shards=n_shards, seed=seed,
                                shard_cutoff=rule,
                            )
                        sizes.append(release.released_count)
                        times.append(t.seconds)
                        release.items.unpersist()
                    cells[rule] = {"sizes": sizes, "seconds": times}
                sweep[f"{policy}|{n_shards}"] = cells
                full = cells.get("full", cells["scaled"])
                rows.append([policy, str(n_shards), mean_sd(cells["scaled"]["sizes"]),
                             mean_sd(full["sizes"]),
                             f"{np.median(cells['scaled']['seconds'] + full['seconds']):.1f}"])
                print(f"  {policy}, {n_shards} shards: done", flush=True)
        print(format_table(
            ["policy", "shards", "released (Γ/√shards, default)", "released (Γ per shard)",
             "seconds / call (median)"], rows,
            f"Table 3. Shards sweep: full dp_spark.set_union call on the synthetic data, "
            f"Δ0 = {args.sweep_max_items}, {args.sweep_runs} runs per cell (item sampling and "
            "noise redrawn; the same seeds for both cutoff rules)",
        ))
        print(f"non-private floor: countDistinct(item) on the same cached table: {floor.seconds:.1f} s")
        out["tables"]["sweep"] = sweep

    if synthetic is not None:
        synthetic.unpersist()
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        write_json(args.json, out)
        print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
