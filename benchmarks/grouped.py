"""Grouped releases: every release at 1,000 to 1,000,000 keys (``scale``), and the grouped
distinct-count's accuracy and speed (the first grouped release).

    .venv/bin/python -m benchmarks.grouped scale [--rows 2000000 20000000] [--keys 1000 10000 100000 1000000]
        [--releases set-union distinct-count count-release top-k] [--reps 2] [--quick] [--json out.json]

runs :mod:`benchmarks.grouped_scale` (each grouped release against the plain ``groupBy`` query it
replaces, with the driver's peak memory; its docstring says what is measured). Without ``scale``:

    .venv/bin/python -m benchmarks.grouped [--runs 20] [--epsilon 1] [--rows 2000000]
        [--groups 50] [--group-hash pair|person] [--reps 2] [--hand-rolled-sample 5]
        [--skip-accuracy] [--skip-speed] [--quick] [--json out.json]

Top-k per genre (the issue's second accuracy target) comes when grouped
top-k exists; this file measures the distinct-count only.

1. Accuracy, MovieLens 100K by genre (u.data ratings joined with u.item's 19
   genre flags; person = user, item = movie, group = genre; a movie has
   several genres, so a person is in many groups), ε = --epsilon:
   - ours: ``dp_spark.distinct_count(group_by="genre", groups=<the 19 genre
     names>, shards=1, seed=s)`` with max_groups=19 (a public cap that
     removes nothing) and None (the default: m and one bound l chosen
     jointly, ε/4), for noise="laplace" (the default, pure ε-DP) and
     noise="gaussian" (ρ = ε²/2-zCDP, the zCDP level ε-DP implies), plus
     --extra-caps (public caps) and --cap-shares (the joint choice at other
     shares of ε). Each seed runs through ``GroupedReplica``: the release's
     driver half on the NON-PRIVATE counts computed once by the release's
     own stage functions (for m=None the one pass over every cap candidate,
     ``joint_counts``), with the plan's own split; it is checked equal to
     the release for the first seed of the four main arms. Measured here
     only: the previous private m (GEM over the rows each cap keeps, ε/20,
     then l per group), the joint choice of m followed by l per group, and
     one l for all groups at m = 19 (``joint_release``);
   - hand-rolled: one ungrouped distinct-count per genre at ε/19 (a person
     is in every genre they rated: basic composition over the 19 runs). Its
     NON-PRIVATE greedy counts DC(l) are computed once per genre with
     ``bounded_distinct_counts(..., "greedy", shards=1)`` and the driver
     mechanism ``release_from_counts(counts, ε/19, β, rng)`` — exactly what
     ``dp_spark.distinct_count(shards=1)`` does after its stage — runs per
     seed; and the zCDP split: per genre the zCDP mechanism at ρ/19.
   Metric: the median over genres and runs of |estimate − truth| / truth and
   of lower_bound / truth. Truth = countDistinct(item) per genre in Spark,
   NON-PRIVATE, used only here. Target: ours (the default: max_groups=None,
   noise="laplace") ≤ 0.75× hand-rolled (pure).
2. Speed on dp_spark.datasets.synthetic_events(--rows) written to Parquet,
   with a public group column pmod(xxhash64(...), --groups): ``pair`` (the
   default) hashes (person_id, item), so a person spreads over many groups
   and an item over many groups (the grouped kernel's hardest case: virtual
   persons ≈ distinct (person, group)); ``person`` hashes the person only
   (disjoint groups, one group per person). Times: the grouped release
   (max_groups = --groups, public; shards=1 given), the plain
   ``groupBy(group).agg(countDistinct(item))``, and the hand-rolled per-group
   runs (``dp_spark.distinct_count`` on ``where(group = g)`` at ε/G, shards=1),
   of which --hand-rolled-sample are timed and extrapolated linearly to G.
   Targets: grouped ≤ 2.5× the plain query; hand-rolled ≥ 5× the grouped.

Released values are SEEDED (not for publication); truths and DC(l) are
NON-PRIVATE. Speed figures on a busy machine are provisional (load printed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path
from collections import Counter
from statistics import median

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

GENRES = ("unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime", "Documentary", "Drama",
          "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance", "Sci-Fi", "Thriller", "War", "Western")
ACCURACY_TARGET = 0.75  # ours / hand-rolled median relative error
SPEED_TARGET = 2.5      # grouped / plain groupBy countDistinct
HAND_TARGET = 5.0       # hand-rolled / grouped
SESSION_CONF = {"spark.driver.memory": "4g"}
from dp_spark.settings.distinct_count import DEFAULT_MAX_BOUND as MAX_BOUND  # noqa: E402 - the release's default
#: The release's share of ε for the joint (m, l) choice (plans.distinct_count).
from dp_spark.plans.distinct_count import JOINT_CAP_EPSILON_SHARE as JOINT_SHARE  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    p.add_argument("--runs", type=int, default=50, help="seeded runs per accuracy arm (default 50)")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--beta", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rows", type=int, default=2_000_000, help="synthetic rows of the speed part")
    p.add_argument("--groups", type=int, default=50, help="public groups of the speed part")
    p.add_argument("--group-hash", choices=("pair", "person"), default="pair")
    p.add_argument("--reps", type=int, default=2, help="timed repetitions (after one warm-up)")
    p.add_argument("--hand-rolled-sample", type=int, default=5,
                   help="per-group runs timed, extrapolated linearly to all groups")
    p.add_argument("--cap-shares", type=float, nargs="*", default=[],
                   help="extra arms: the joint (m, l) choice at these shares of ε (the release: 0.25)")
    p.add_argument("--extra-caps", type=int, nargs="*", default=[],
                   help="also run the grouped release with these smaller public caps max_groups (e.g. 1 2 4 8)")
    p.add_argument("--profile", action="store_true",
                   help="after the speed table, time the grouped release's Spark steps one by one (--reps each)")
    p.add_argument("--skip-accuracy", action="store_true")
    p.add_argument("--skip-speed", action="store_true")
    p.add_argument("--quick", action="store_true",
                   help="a smoke run (under a minute): 1 accuracy run without the private-m arm, 20,000 synthetic rows, "
                        "1 rep, 1 hand-rolled group, no warm-up")
    p.add_argument("--tmp", type=Path, default=None)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    if args.quick:
        args.runs, args.rows, args.reps, args.hand_rolled_sample = 1, 20_000, 1, 1
    if any(not 0.0 < x < 1.0 for x in args.cap_shares):
        p.error("--cap-shares must be in (0, 1)")
    if any(not 1 <= m <= len(GENRES) for m in args.extra_caps):
        p.error(f"--extra-caps must be in 1..{len(GENRES)}")
    if args.runs < 1 or args.reps < 1 or args.groups < 1 or not 1 <= args.hand_rolled_sample <= args.groups:
        p.error("--runs, --reps, --groups >= 1 and 1 <= --hand-rolled-sample <= --groups")
    return args


def load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


# ------------------------------------------------------------------ accuracy

def movielens_by_genre(spark, data: Path):
    """(person_id, item, genre) rows: u.data ratings × u.item's genre flags."""
    from pyspark.sql import functions as F

    d = data / "movielens-100k"
    ratings = spark.read.csv(str(d / "u.data"), sep="\t", schema="person_id long, movie long, rating int, ts long")
    items = spark.read.csv(str(d / "u.item"), sep="|", encoding="ISO-8859-1", inferSchema=False)
    flags = [F.when(F.col(f"_c{5 + i}") == "1", F.lit(g)) for i, g in enumerate(GENRES)]
    genres = items.select(F.col("_c0").cast("long").alias("movie"),
                          F.explode(F.array_compact(F.array(*flags))).alias("genre"))
    return (ratings.join(genres, "movie")
            .select("person_id", F.col("movie").cast("string").alias("item"), "genre"))


def key_order() -> tuple:
    """The genres in the release's canonical key order (its group indices,
    its noise draws and ``release.groups``): sorted, not u.item's order."""
    from dp_spark.keys import GroupKeys

    return tuple(GroupKeys.of(list(GENRES), whole=False))


def _restricted(spark, edges_df):
    """The release's edge table restricted to the 19 public keys (column
    ``group_index`` = the key's position in :func:`key_order`), as the template builds it."""
    from pyspark.sql import functions as F

    from dp_spark.stages.edges import GROUP, edges as edge_table

    keys = spark.createDataFrame([(g, i) for i, g in enumerate(key_order())], f"{GROUP} string, group_index int")
    return edge_table(edges_df, "person_id", "item", "genre").join(F.broadcast(keys), on=GROUP)


class GroupedReplica:
    """The grouped release's driver half on counts computed once: per seed,
    ``make_rng(seed)``, the private cap (when m=None) from the groups-per-
    person histogram, then :func:`release_groups` on the per-group greedy
    counts of the capped table, with the plan's own split: the same draws in
    the same order as ``dp_spark.distinct_count(shards=1, seed=seed)``
    (checked against the release for the first seed). NON-PRIVATE counts
    and histogram, computed once per cap by the release's own stage
    functions."""

    def __init__(self, spark, edges_df, args):
        from dp_spark.settings.distinct_count import bound_candidates

        self.restricted = _restricted(spark, edges_df).cache()
        self.args = args
        self.cands = bound_candidates(MAX_BOUND)
        self._counts: dict[int, np.ndarray] = {}
        self._hist = None
        self._joint = None

    def counts(self, m: int) -> np.ndarray:  # NON-PRIVATE
        from dp_spark.stages.distinct import grouped_greedy_counts
        from dp_spark.stages.groups import cap_groups

        if m not in self._counts:
            self._counts[m] = grouped_greedy_counts(cap_groups(self.restricted, m), MAX_BOUND, 1, len(GENRES),
                                                    self.cands)
        return self._counts[m]

    def histogram(self) -> np.ndarray:  # NON-PRIVATE
        from dp_spark.stages.groups import groups_per_person_histogram

        if self._hist is None:
            self._hist = groups_per_person_histogram(self.restricted, len(GENRES))
        return self._hist

    def plan(self, m, noise):
        from dp_spark.plans.distinct_count import plan

        return plan(epsilon=self.args.epsilon, beta=self.args.beta, max_bound=MAX_BOUND, shards=1,
                    group_by="genre", groups=list(GENRES), max_groups=m, noise=noise)

    def joint(self) -> np.ndarray:  # NON-PRIVATE: at[k, g, j] at every cap candidate, one pass (the release's)
        from dp_spark.mechanisms.distinct_count.cap_bound import cap_candidates
        from dp_spark.stages.distinct import joint_counts

        if self._joint is None:
            self._joint = joint_counts(self.restricted, cap_candidates(len(GENRES)), len(GENRES), MAX_BOUND, 1,
                                       self.cands)
        return self._joint

    def split(self, noise: str, cap_share: float, per_group_l: bool) -> tuple[float, float, float]:
        """(cap, select, count) budgets of a grouped m=None run whose cap step
        spends ``cap_share`` of ε (or ρ): the rest to the counts (joint l), or
        in halves to the per-group selections and counts (``per_group_l``).
        At the default share and joint l these are the plan's own."""
        from dp_spark.accounting import pure_to_zcdp, remainder

        total = pure_to_zcdp(self.args.epsilon) if noise == "gaussian" else self.args.epsilon
        plan = self.plan(None, noise)
        if not per_group_l and cap_share == JOINT_SHARE:
            cost = plan.split.cost
            get = (lambda s: cost(s).rho) if noise == "gaussian" else (lambda s: cost(s).epsilon)
            return get("max_groups"), 0.0, get("count")
        cap = total * cap_share
        rest = remainder(total, cap)
        return (cap, rest / 2.0, rest / 2.0) if per_group_l else (cap, 0.0, rest)

    def run(self, m, noise: str, seed: int, bound: str = "per-group", cap_method: str = "joint",
            cap_share: float | None = None):
        """(estimates, lower bounds, m) in :func:`key_order` for one seed. m=None:
        ``cap_method="joint"`` is the release (the joint (m, l) choice at
        ``cap_share`` of the budget, default the plan's); ``"joint-per-group-l"``
        the same choice of m, then l per group at m (measured only);
        ``"rows"`` the previous release (GEM over the rows each cap keeps at
        ε/20, then l per group; measured only)."""
        from dp_spark.accounting import pure_to_zcdp, remainder
        from dp_spark.accounting.exact import exact, sqrt_down
        from dp_spark.mechanisms.distinct_count.cap_bound import (
            cap_candidates,
            choose_cap_and_bound,
            joint_margins,
            release_at_bound,
        )
        from dp_spark.mechanisms.distinct_count.cap_bound import release_groups
        from dp_spark.mechanisms.groups import choose_max_groups
        from dp_spark.noise import make_rng
        from dp_spark.releases.group_cap import CAP_GEM_BETA

        gaussian = noise == "gaussian"
        rng = make_rng(seed)
        if m is None and cap_method in ("joint", "joint-per-group-l"):
            per_group_l = cap_method == "joint-per-group-l"
            cap, select, count = self.split(noise, JOINT_SHARE if cap_share is None else cap_share, per_group_l)
            caps, kind = cap_candidates(len(GENRES)), "laplace" if not gaussian else "gaussian"
            eps = sqrt_down(8 * exact(cap)) if gaussian else cap
            # the margins of the count that follows: at ε_count/m with joint l; per-group l: the count's half
            at = self.joint()
            k, j = choose_cap_and_bound(at, caps, self.cands, joint_margins(caps, self.cands, self.args.beta, kind,
                                                                            count), eps, rng,
                                        sampler="exponential" if gaussian else "permute-and-flip")
            m = caps[k]
            if not per_group_l:
                out = release_at_bound(at[k, :, j], m, self.cands[j], self.args.beta, rng, noise=kind, count=count)
                return [r["estimate"] for r in out], [r["lower_bound"] for r in out], (m, self.cands[j])
            released, _ = release_groups(at[k], self.cands, MAX_BOUND, m, self.args.beta, rng, noise=noise,
                                         select=select, count=count)
            return [r["estimate"] for r in released], [r["lower_bound"] for r in released], m
        if m is None:  # "rows": the previous release's split (ε/20 for the cap, halves of the rest)
            total = pure_to_zcdp(self.args.epsilon) if gaussian else self.args.epsilon
            cap = total * 0.05
            select = count = remainder(total, cap) / 2.0
            eps = sqrt_down(8 * exact(cap)) if gaussian else cap
            m = int(choose_max_groups(self.histogram(), eps, rng, method="gem", beta=CAP_GEM_BETA))
        else:
            cost = self.plan(m, noise).split.cost
            select, count = ((cost("select").rho, cost("count").rho) if gaussian
                             else (cost("select").epsilon, cost("count").epsilon))
        if bound == "joint":
            return (*joint_release(self.counts(m), self.cands, m, self.args.beta, rng, noise, select, count), m)
        released, _ = release_groups(self.counts(m), self.cands, MAX_BOUND, m, self.args.beta, rng, noise=noise,
                                     select=select, count=count)
        return [r["estimate"] for r in released], [r["lower_bound"] for r in released], m


def joint_release(at, cands, m, beta, rng, noise, select, count):
    """MEASURED, NOT IN THE RELEASE: one bound l̂ for every group (the
    joint-ℓ option of issue 24), then each group's count at l̂ with the
    release's per-group noise. The choice: GEM (monotone) over the
    candidates with utilities S_l − G·m_l, S_l = Σ_g c_{g,l}, sensitivities
    m·l (one person moves c_{g,l} by 0..l in ≤ m groups, all in one
    direction, so S_l by 0..m·l), at the step's full budget (ε = select
    by permute-and-flip; under zCDP the exponential mechanism at √(8ρ)).
    Returns (estimates, lower bounds) in group order."""
    from dp_spark.accounting.exact import exact, ratio_down, ratio_up, sqrt_down
    from dp_spark.mechanisms.distinct_count.bound import noise_margins
    from dp_spark.mechanisms.distinct_count.gem import generalized_exponential, generalized_permute_and_flip
    from dp_spark.mechanisms.distinct_count.bound import gaussian_margins
    from dp_spark.mechanisms.groups import group_noise_scale
    from dp_spark.noise import discrete_gaussian, discrete_laplace

    at = np.asarray(at, dtype=np.int64)
    idx = np.asarray(cands) - 1
    if noise == "gaussian":
        sigmas = {c: group_noise_scale(m, c, rho=count).scale for c in cands}
        margins = gaussian_margins(sigmas, beta, MAX_BOUND)[idx]
        draw, eps = generalized_exponential, sqrt_down(8 * exact(select))
    else:
        eps_count = ratio_down(count, m)
        margins = noise_margins(2.0 * eps_count, beta, MAX_BOUND)[idx]
        draw, eps = generalized_permute_and_flip, select
    scores = at.sum(axis=0).astype(np.float64) - at.shape[0] * margins.astype(np.float64)
    j = draw(scores, m * np.asarray(cands, dtype=np.float64), eps, 0.2, rng, monotone=True)
    bound = cands[j]
    if noise == "gaussian":
        noisy = at[:, j] + np.array([discrete_gaussian(sigmas[bound], rng) for _ in range(len(at))])
    else:
        noisy = at[:, j] + np.array([discrete_laplace(ratio_up(bound, eps_count), rng) for _ in range(len(at))])
    return [max(int(x), 0) for x in noisy], [max(int(x) - int(margins[j]), 0) for x in noisy]


def accuracy(spark, args) -> dict:
    from pyspark.sql import functions as F

    import dp_spark
    from dp_spark.accounting import pure_to_zcdp
    from dp_spark.mechanisms.distinct_count.bound import release_from_counts
    from dp_spark.mechanisms.distinct_count.cap_bound import release_groups
    from dp_spark.settings.distinct_count import bound_candidates
    from dp_spark.stages import bounded_distinct_counts

    edges = movielens_by_genre(spark, args.data).cache()
    G = len(GENRES)
    truth = {r["genre"]: int(r["n"]) for r in  # NON-PRIVATE, benchmark only
             edges.groupBy("genre").agg(F.countDistinct("item").alias("n")).collect()}
    per_person = edges.select("person_id", "genre").distinct().groupBy("person_id").count()
    gpp = per_person.agg(F.percentile_approx("count", 0.5).alias("med"), F.max("count").alias("max")).collect()[0]
    print(f"MovieLens 100K by genre: {edges.count():,} (rating, genre) rows; genres per person (NON-PRIVATE) "
          f"median {gpp['med']}, max {gpp['max']}")
    print("TRUE distinct movies per genre (NON-PRIVATE): " + ", ".join(f"{g} {truth.get(g, 0)}" for g in GENRES))
    true = [truth[g] for g in key_order()]  # the replica's group order
    rho = pure_to_zcdp(args.epsilon)
    print(f"equal privacy: the pure arms are {args.epsilon:g}-DP, the zCDP arms rho = epsilon^2/2 = {rho:g}-zCDP "
          f"(what {args.epsilon:g}-DP implies; Bun-Steinke 2016 Prop. 1.4)")

    replica = GroupedReplica(spark, edges, args)
    # the replica is the release: the first seed of each main arm is checked against dp_spark.distinct_count
    for m, noise in ((G, "laplace"), (None, "laplace"), (G, "gaussian"), (None, "gaussian")):
        r = dp_spark.distinct_count(edges, person_col="person_id", item_col="item", epsilon=args.epsilon,
                                    beta=args.beta, max_bound=MAX_BOUND, shards=1, seed=args.seed,
                                    group_by="genre", groups=list(GENRES), max_groups=m, noise=noise)
        assert [g["group"] for g in r.result["groups"]] == list(key_order())
        got = [g["estimate"] for g in r.result["groups"]], [g["lower_bound"] for g in r.result["groups"]]
        if got != replica.run(m, noise, args.seed)[:2]:
            raise AssertionError(f"the benchmark's replica differs from the release (m={m}, noise={noise})")
    print("replica check: the driver replica equals dp_spark.distinct_count for the first seed of the 4 main arms")

    arms: dict[str, dict] = {}
    J = f"max_groups=None (the release: m and l jointly, cap share {JOINT_SHARE:g})"
    variants = [(f"pure (laplace), max_groups={G}", G, "laplace", "per-group", "joint", None),
                (f"pure (laplace), {J}", None, "laplace", "per-group", "joint", None),
                ("pure (laplace), max_groups=None, previous release (GEM over rows kept, ε/20, l per group)", None,
                 "laplace", "per-group", "rows", None),
                (f"pure (laplace), max_groups=None, joint choice of m, then l per group (cap share {JOINT_SHARE:g})",
                 None, "laplace", "per-group", "joint-per-group-l", None),
                (f"zCDP (gaussian), max_groups={G}", G, "gaussian", "per-group", "joint", None),
                (f"zCDP (gaussian), {J}", None, "gaussian", "per-group", "joint", None),
                ("zCDP (gaussian), max_groups=None, previous release (GEM over rows kept, ρ/20, l per group)", None,
                 "gaussian", "per-group", "rows", None),
                (f"joint l: pure, max_groups={G}", G, "laplace", "joint", "joint", None),
                (f"joint l: zCDP, max_groups={G}", G, "gaussian", "joint", "joint", None)]
    variants += [(f"cap share: pure, max_groups=None, m and l jointly, cap share {x:g}", None, "laplace",
                  "per-group", "joint", x) for x in args.cap_shares if x != JOINT_SHARE]
    variants += [(f"extra: {n}, max_groups={m}", m, n, "per-group", "joint", None)
                 for m in args.extra_caps for n in ("laplace", "gaussian")]
    for label, m, noise, bound, cap, share in variants:
        rel, low, chosen = [], [], []
        for i in range(args.runs):
            est, lb, used = replica.run(m, noise, args.seed + i, bound=bound, cap_method=cap, cap_share=share)
            rel += [abs(e - t) / t for e, t in zip(est, true)]
            low += [b / t for b, t in zip(lb, true)]
            chosen.append(used)
        arms[label] = {"rel": rel, "low": low, "m": chosen if m is None else None}

    counts = {g: bounded_distinct_counts(edges.where(F.col("genre") == g), "person_id", "item", MAX_BOUND,
                                         "greedy", shards=1) for g in GENRES}  # NON-PRIVATE
    cands = bound_candidates(MAX_BOUND)
    rel, low, zrel, zlow = [], [], [], []
    for i in range(args.runs):
        for k, g in enumerate(GENRES):
            r = release_from_counts(counts[g], args.epsilon / G, args.beta, run_rng(args.seed, i, k))
            rel.append(abs(r["estimate"] - truth[g]) / truth[g])
            low.append(r["lower_bound"] / truth[g])
            # the zCDP split: one ungrouped zCDP release per genre at rho/19 (halves for choice and count)
            z, _ = release_groups(np.array([counts[g][np.array(cands) - 1]]), cands, MAX_BOUND, 1, args.beta,
                                  run_rng(args.seed, i, k, 1), noise="gaussian", select=rho / G / 2,
                                  count=rho / G / 2)
            zrel.append(abs(z[0]["estimate"] - truth[g]) / truth[g])
            zlow.append(z[0]["lower_bound"] / truth[g])
    hand = f"hand-rolled: {G} ungrouped pure releases at ε/{G}"
    arms[hand] = {"rel": rel, "low": low}
    arms[f"hand-rolled zCDP: {G} ungrouped zCDP releases at ρ/{G}"] = {"rel": zrel, "low": zlow}
    edges.unpersist()
    replica.restricted.unpersist()

    base = median(arms[hand]["rel"])
    rows = []
    for label, a in arms.items():
        ratio = median(a["rel"]) / base
        chosen = Counter(a.get("m") or [])  # (m, l) for the joint choice, m otherwise
        ms = " ".join(f"{'/'.join(map(str, c)) if isinstance(c, tuple) else c}:{n}"
                      for c, n in sorted(chosen.items(), key=lambda x: -x[1])[:4])
        rows.append([label, f"{median(a['rel']):.4f}", f"{np.percentile(a['rel'], 90):.4f}",
                     f"{median(a['low']):.4f}", f"{ratio:.3f}", ms])
    print(format_table([f"ε={args.epsilon:g}, {args.runs} seeded runs × {G} genres (SEEDED)",
                        "median |est−truth|/truth", "p90", "median lower_bound/truth", "ratio to hand-rolled",
                        "private m (or m/l) chosen: runs"], rows))
    # equal privacy: the default (pure ε) against the pure ε/19 split; gaussian against the zCDP split
    default = median(arms[f"pure (laplace), max_groups={G}"]["rel"]) / base
    default_none = median(arms[f"pure (laplace), {J}"]["rel"]) / base
    previous = median(arms[[k for k in arms if k.startswith("pure (laplace), max_groups=None, previous")][0]]["rel"])
    zcdp_base = median(arms[[k for k in arms if k.startswith("hand-rolled zCDP")][0]]["rel"])
    zcdp = median(arms[f"zCDP (gaussian), max_groups={G}"]["rel"]) / zcdp_base
    print(f"ratio ours (the default: max_groups=None, noise laplace, pure ε)/hand-rolled pure split: "
          f"{default_none:.3f}; target <= {ACCURACY_TARGET}: {'met' if default_none <= ACCURACY_TARGET else 'MISSED'}"
          f" (max_groups={G}: {default:.3f}; the previous private m: {previous / base:.3f})")
    zcdp_none = median(arms[f"zCDP (gaussian), {J}"]["rel"]) / zcdp_base
    print(f"ratio ours (noise='gaussian')/hand-rolled zCDP split at rho/{G}: {zcdp_none:.3f} (max_groups=None), "
          f"{zcdp:.3f} (max_groups={G})")
    print()
    return {"truth_non_private": truth,
            "arms": {k: {"median_rel_error": median(v["rel"]), "median_lower_ratio": median(v["low"]),
                         "p90_rel_error": float(np.percentile(v["rel"], 90)),
                         "chosen_max_groups": v.get("m")} for k, v in arms.items()},
            "ratio_public_m": default, "ratio_private_m": default_none, "ratio_previous_private_m": previous / base}


# --------------------------------------------------------------------- speed

def speed(spark, args) -> dict:
    from pyspark.sql import functions as F

    import dp_spark
    from dp_spark.datasets import synthetic_events

    G = args.groups
    tmp = Path(tempfile.mkdtemp(prefix="dp_spark_grouped_", dir=args.tmp))
    try:
        path = str(tmp / "events.parquet")
        key = (F.xxhash64("person_id", "item") if args.group_hash == "pair" else F.xxhash64("person_id"))
        (synthetic_events(spark, rows=args.rows).withColumn("grp", F.pmod(key, F.lit(G)).cast("int"))
         .write.mode("overwrite").parquet(path))
        keys = list(range(G))

        def grouped(seed):
            r = dp_spark.distinct_count(spark.read.parquet(path), epsilon=args.epsilon, beta=args.beta,
                                        max_bound=MAX_BOUND, shards=1, seed=seed, group_by="grp", groups=keys,
                                        max_groups=G)
            return r.groups.collect()

        def grouped_default(seed):  # max_groups=None: the joint private choice of (m, l), every cap candidate
            r = dp_spark.distinct_count(spark.read.parquet(path), epsilon=args.epsilon, beta=args.beta,
                                        max_bound=MAX_BOUND, shards=1, seed=seed, group_by="grp", groups=keys)
            return r.groups.collect()

        def plain():
            return (spark.read.parquet(path).groupBy("grp").agg(F.countDistinct("item").alias("n")).collect())

        def hand_rolled(seed):
            df = spark.read.parquet(path)
            for g in keys[:args.hand_rolled_sample]:
                dp_spark.distinct_count(df.where(F.col("grp") == g), epsilon=args.epsilon / G, beta=args.beta,
                                        max_bound=MAX_BOUND, shards=1, seed=seed + g)

        print(f"speed: synthetic_events({args.rows:,}) → Parquet, group = pmod(xxhash64("
              f"{'person_id, item' if args.group_hash == 'pair' else 'person_id'}), {G}); load at start: {load()}")
        if not args.quick:
            grouped(args.seed), grouped_default(args.seed), plain(), hand_rolled(args.seed)  # warm-up
        t_g, t_d, t_p, t_h = [], [], [], []
        for rep in range(args.reps):
            with Timer() as t:
                grouped(args.seed + rep)
            t_g.append(t.seconds)
            with Timer() as t:
                grouped_default(args.seed + rep)
            t_d.append(t.seconds)
            with Timer() as t:
                plain()
            t_p.append(t.seconds)
            with Timer() as t:
                hand_rolled(args.seed + rep)
            t_h.append(t.seconds * G / args.hand_rolled_sample)
        r_plain, r_hand = median(t_g) / median(t_p), median(t_h) / median(t_g)
        r_default = median(t_d) / median(t_p)

        def ts(xs):
            return " ".join(f"{x:.2f}" for x in xs)

        print(format_table(
            [f"wall time, {args.rows:,} rows, {G} groups", "median", "all reps (s)", "ratio"],
            [[f"(a) grouped distinct-count (max_groups={G}, shards=1)", f"{median(t_g):.2f} s", ts(t_g),
              f"{r_plain:.2f} × (b)  (target <= {SPEED_TARGET})"],
             ["(a') the same, max_groups=None (the default: m and l chosen privately)", f"{median(t_d):.2f} s",
              ts(t_d), f"{r_default:.2f} × (b)"],
             ["(b) groupBy(grp).agg(countDistinct(item))", f"{median(t_p):.2f} s", ts(t_p), "1.00"],
             [f"(c) hand-rolled {G} runs at ε/{G} ({args.hand_rolled_sample} timed, ×{G / args.hand_rolled_sample:g})",
              f"{median(t_h):.2f} s", ts(t_h), f"{r_hand:.2f} × (a)  (target >= {HAND_TARGET})"]]))
        print(f"grouped/plain {r_plain:.2f} ({'met' if r_plain <= SPEED_TARGET else 'MISSED'}); hand-rolled/grouped "
              f"{r_hand:.2f} ({'met' if r_hand >= HAND_TARGET else 'MISSED'}); max_groups=None/plain {r_default:.2f} "
              f"({'met' if r_default <= SPEED_TARGET else 'MISSED'}); load after: {load()} (provisional)")
        print()
        prof = profile(spark, path, G, args.reps) if args.profile else None
        return {"profile": prof, "grouped_s": t_g, "grouped_default_s": t_d, "ratio_default_plain": r_default,
                "plain_s": t_p, "hand_rolled_extrapolated_s": t_h, "ratio_plain": r_plain,
                "ratio_hand_rolled": r_hand, "group_hash": args.group_hash, "groups": G, "rows": args.rows}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def profile(spark, path: str, G: int, reps: int) -> list:
    """Each Spark step of the grouped release as its own job (the release's
    own stage functions, NON-PRIVATE intermediates, nothing released): the
    edge table restricted to the keys, + the per-person cap (m = G) as a
    window and as the release now runs it (m >= the G public keys: skipped,
    :func:`dp_spark.stages.groups.cap_groups`), and the one-pass greedy
    counts with and without the window, with a cap inside the kernel (as the
    release applies m < G), and at every cap candidate (max_groups=None)."""
    from pyspark.sql import functions as F

    from dp_spark.mechanisms.distinct_count.cap_bound import cap_candidates
    from dp_spark.settings.distinct_count import bound_candidates
    from dp_spark.stages.distinct import grouped_greedy_counts
    from dp_spark.stages.edges import GROUP, edges
    from dp_spark.stages.groups import cap_groups

    def restricted():
        e = edges(spark.read.parquet(path), "person_id", "item", "grp")
        keys = spark.createDataFrame([(g, g) for g in range(G)], f"{GROUP} int, group_index int")
        return e.join(F.broadcast(keys), on=GROUP)

    def noop(df):
        df.write.format("noop").mode("overwrite").save()

    cands = bound_candidates(MAX_BOUND)
    steps = [
        ("plain groupBy(grp).agg(countDistinct(item))",
         lambda: spark.read.parquet(path).groupBy("grp").agg(F.countDistinct("item")).collect()),
        ("edge table restricted to the keys (noop sink)", lambda: noop(restricted())),
        (f"+ cap_groups(m={G}) (window by person; noop sink)", lambda: noop(cap_groups(restricted(), G))),
        (f"+ cap_groups(m={G}, public_keys={G}) (what the release runs: m >= #keys, no window; noop sink)",
         lambda: noop(cap_groups(restricted(), G, public_keys=G))),
        ("grouped_greedy_counts without the cap", lambda: grouped_greedy_counts(restricted(), MAX_BOUND, 1, G, cands)),
        (f"grouped_greedy_counts after cap_groups(m={G})",
         lambda: grouped_greedy_counts(cap_groups(restricted(), G), MAX_BOUND, 1, G, cands)),
        (f"grouped_greedy_counts, cap m={G // 2} in the kernel",
         lambda: grouped_greedy_counts(restricted(), MAX_BOUND, 1, G, cands, caps=[G // 2])),
        (f"grouped_greedy_counts at every cap candidate {cap_candidates(G)} (max_groups=None's one pass)",
         lambda: grouped_greedy_counts(restricted(), MAX_BOUND, 1, G, cands, caps=cap_candidates(G))),
    ]
    out = []
    for label, fn in steps:
        ts = []
        for _ in range(reps):
            with Timer() as t:
                fn()
            ts.append(t.seconds)
        out.append({"step": label, "median_s": median(ts), "times_s": ts})
    print(format_table([f"grouped release profile (each step its own job, {reps} reps)", "median", "all reps (s)"],
                       [[o["step"], f"{o['median_s']:.2f} s", " ".join(f"{x:.2f}" for x in o["times_s"])]
                        for o in out]))
    print(f"load after profiling: {load()}")
    print()
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["scale"]:  # every grouped release at many keys
        repo = str(Path(__file__).resolve().parents[1])
        if repo not in sys.path:  # run as a script (python benchmarks/grouped.py scale): the package's root
            sys.path.append(repo)
        from benchmarks import grouped_scale

        return grouped_scale.main(argv[1:])
    args = parse_args(argv)
    spark = start_session("dp_spark benchmark: grouped", SESSION_CONF)
    print("dp_spark benchmark: grouped distinct-count (issue 24); top-k per genre: when grouped top-k exists")
    print(f"command: {command_line()}")
    print("session: " + ", ".join(f"{k}={v}" for k, v in session_summary(spark).items()))
    print(f"load average at start: {load()}; released values SEEDED (not for publication)")
    print()
    out = {"benchmark": "grouped", "command": command_line(), "seeded": True, "not_for_publication": True}
    if not args.skip_accuracy:
        out["accuracy"] = accuracy(spark, args)
    if not args.skip_speed:
        out["speed"] = speed(spark, args)
    if args.json:
        write_json(args.json, out)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
