"""Top-k ``auto`` against every shipped mechanism on many count profiles, and the fit of its rule.

    .venv/bin/python benchmarks/topk_auto_fit.py [--trials 101] [--ks 5 10 20 50]
        [--epsilons 0.5 1 2] [--delta 1e-6] [--profiles ...] [--seed 0] [--jobs 2]
        [--data ../shared/data] [--raw raw.npz] [--json out.json]
    .venv/bin/python benchmarks/topk_auto_fit.py --fit raw.npz   # grid search on saved runs, no new draws

Profiles (NON-PRIVATE per-item distinct-person counts, numpy only, no Spark):
  movielens        ../shared/data/movielens-100k/u.data: distinct raters per
                   movie, d = 1,682 (every movie of u.item is rated).
  amazon-words     ../shared/data/amazon-fashion-5core: distinct reviewers per
                   word (maximal runs of [a-z]+ in the lower-cased reviewText,
                   as benchmarks/topk_accuracy.py reads it with Spark), d = 1,464
                   observed words.
  zipf<s>-<C>      ⌊C/i^s⌋, i = 1..2,000, s ∈ {0.7, 1, 1.5}, C ∈ {1,000, 10,000}
                   (many ties and zeros in the tail).
  flat             ⌊1000/i^0.3⌋, i = 1..2,000: small gaps past the first ranks.

Protocol (as benchmarks/topk_accuracy.py; Gillenwater et al. 2022, ALGORITHMS.md
3.5): ℓ∞ = max_i (c_(i) − c_{s_i}), median over the trials; each trial
shuffles the counts (ties broken at random) and gives every column a
generator with the same seed (seed, profile, ε, k, trial): common random
numbers. Columns: joint, pnf-joint, pnf-peel, cdp-peel at the whole (ε, δ),
and ``auto`` as dp_spark.mechanisms.top_k.auto ships it. Seeded: NOT
differentially private, not for publication.

For the fit the run also records, per trial and per candidate share s of ε
(``--shares``), what a private choice would see and what it would get: the
two noisy statistics (T₁, T_k) exactly as ``choose_mechanism`` draws them
(:func:`noisy_rank_counts` on auto's child stream, ε₀ = s·ε) and the error of
pnf-joint and cdp-peel at ε₁ = ε − ε₀ on the trial's generator (what auto's
selection draws). Any rule that maps (T₁, T_k) and the public parameters to a
mechanism can then be scored on the same draws without running it
(``--fit``); :func:`dp_spark.mechanisms.top_k.auto.rule_pick` is the rule,
with its constants as arguments. Scoring: per cell the median error of the
rule's picks over the trials against the best of the four shipped
mechanisms' medians ("best"); cells where best is 0 count as within 1.25×
when the rule's median is 0 too.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DEFAULT_DATA_DIR, Timer, command_line, fmt, format_table, run_rng, write_json  # noqa: E402

MECHANISMS = ("joint", "pnf-joint", "pnf-peel", "cdp-peel")
PROFILES = ("movielens", "amazon-words", "zipf0.7-1000", "zipf0.7-10000", "zipf1-1000", "zipf1-10000",
            "zipf1.5-1000", "zipf1.5-10000", "flat")
SYNTHETIC_D = 2000
TOLERANCE = 1.25
SHARES = (0.05,)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR)
    p.add_argument("--trials", type=int, default=101)
    p.add_argument("--ks", type=int, nargs="+", default=[5, 10, 20, 50])
    p.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    p.add_argument("--delta", type=float, default=1e-6)
    p.add_argument("--profiles", nargs="+", default=list(PROFILES), choices=PROFILES)
    p.add_argument("--shares", type=float, nargs="+", default=list(SHARES),
                   help="candidate shares of ε for the private choice, recorded for --fit")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--raw", type=Path, default=None, help="save the per-trial records (npz) for --fit")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--fit", type=Path, default=None, help="score candidate rules on a saved --raw file")
    args = p.parse_args(argv)
    if args.trials < 1:
        p.error("--trials must be >= 1")
    return args


def profile_counts(name: str, data: Path) -> np.ndarray:
    """NON-PRIVATE per-item distinct-person counts of a profile."""
    if name == "movielens":
        pairs = np.unique(np.loadtxt(data / "movielens-100k" / "u.data", dtype=np.int64, usecols=(0, 1)), axis=0)
        return np.unique(pairs[:, 1], return_counts=True)[1].astype(np.int64)
    if name == "amazon-words":
        pairs = set()
        with gzip.open(data / "amazon-fashion-5core" / "AMAZON_FASHION_5.json.gz", "rt", encoding="utf-8") as fh:
            for line in fh:
                review = json.loads(line)
                text = review.get("reviewText")
                if text is not None:
                    pairs.update((review["reviewerID"], w) for w in re.split("[^a-z]+", text.lower()) if w)
        _, counts = np.unique(np.array([w for _, w in pairs]), return_counts=True)
        return counts.astype(np.int64)
    ranks = np.arange(1, SYNTHETIC_D + 1, dtype=np.float64)
    if name == "flat":
        return np.floor(1000.0 / ranks**0.3).astype(np.int64)
    s, top = name[len("zipf"):].split("-")
    return np.floor(float(top) / ranks ** float(s)).astype(np.int64)


def _run(name, counts, k, eps, delta, rng):
    from dp_spark.mechanisms.top_k import cdp_peel_top_k, joint_top_k, pnf_joint_top_k, pnf_peel_top_k
    from dp_spark.mechanisms.top_k.auto import auto_top_k

    if name == "auto":
        indices, choice = auto_top_k(counts, k, eps, delta, rng)
        return indices, choice.method
    return {"joint": lambda: joint_top_k(counts, k, eps, rng),
            "pnf-joint": lambda: pnf_joint_top_k(counts, k, eps, rng),
            "pnf-peel": lambda: pnf_peel_top_k(counts, k, eps, rng),
            "cdp-peel": lambda: cdp_peel_top_k(counts, k, eps, delta, rng)}[name](), name


def cell(task) -> dict:
    """One (profile, ε, k) cell: per-trial errors of every column, auto's
    picks, and the fit's records for each candidate share."""
    from dp_spark.accounting.exact import remainder
    from dp_spark.mechanisms.top_k.auto import auto_anchor_ranks, choice_stream, noisy_rank_counts

    counts, profile, p_index, eps, k, delta, trials, shares, seed = task
    ordered = np.sort(counts)[::-1]
    key = (seed, p_index, int(round(eps * 1000)), k)
    out = {"profile": profile, "epsilon": eps, "k": k, "d": len(counts),
           "err": {m: [] for m in (*MECHANISMS, "auto")}, "auto_pick": [],
           "shares": {s: {"top": [], "kth": [], "pnf-joint": [], "cdp-peel": []} for s in shares}}
    error = lambda idx: float(np.max(ordered[:k] - shuffled[idx]))  # noqa: E731
    for trial in range(trials):
        shuffled = counts[run_rng(*key, trial, 0).permutation(len(counts))]
        for name in out["err"]:
            indices, used = _run(name, shuffled, k, eps, delta, run_rng(*key, trial, 1))
            out["err"][name].append(error(indices))
            if name == "auto":
                out["auto_pick"].append(used)
        for s, rec in out["shares"].items():
            eps0 = eps * s
            eps1 = remainder(eps, eps0)
            noisy = noisy_rank_counts(shuffled, auto_anchor_ranks(k, len(counts)), eps0,
                                      choice_stream(run_rng(*key, trial, 1)))
            rec["top"].append(float(noisy[0]))
            rec["kth"].append(float(noisy[-1]))
            for name in ("pnf-joint", "cdp-peel"):
                rec[name].append(error(_run(name, shuffled, k, eps1, delta, run_rng(*key, trial, 1))[0]))
    return out


def summarise(cells) -> tuple[list, int]:
    rows, within = [], 0
    for c in cells:
        med = {m: float(np.median(e)) for m, e in c["err"].items()}
        best = min(med[m] for m in MECHANISMS)
        ok = med["auto"] <= TOLERANCE * best
        within += ok
        picks = c["auto_pick"]
        ran = f"{sum(p != 'cdp-peel' for p in picks)}/{len(picks)}"
        rows.append([c["profile"], f"{c['epsilon']:g}", str(c["k"]), *(fmt(med[m], 0) for m in MECHANISMS),
                     fmt(med["auto"], 0), ran, fmt(best, 0), "-" if best == 0 else f"{med['auto'] / best:.2f}",
                     "yes" if ok else "NO"])
    return rows, within


def save_raw(path: Path, cells, args) -> None:
    arrays = {"meta": np.array(json.dumps({"command": command_line(), "delta": args.delta,
                                           "shares": args.shares, "trials": args.trials}))}
    for i, c in enumerate(cells):
        arrays[f"c{i}_info"] = np.array(json.dumps({m: c[m] for m in ("profile", "epsilon", "k", "d")}))
        for m, e in c["err"].items():
            arrays[f"c{i}_err_{m}"] = np.array(e)
        arrays[f"c{i}_auto_pick"] = np.array(c["auto_pick"])
        for s, rec in c["shares"].items():
            for field, values in rec.items():
                arrays[f"c{i}_s{s:g}_{field}"] = np.array(values)
    np.savez_compressed(path, **arrays)


def load_raw(path: Path) -> tuple[dict, list]:
    z = np.load(path)
    meta = json.loads(str(z["meta"]))
    cells, i = [], 0
    while f"c{i}_info" in z:
        c = json.loads(str(z[f"c{i}_info"]))
        c["err"] = {m: z[f"c{i}_err_{m}"] for m in (*MECHANISMS, "auto")}
        c["auto_pick"] = z[f"c{i}_auto_pick"].tolist()
        c["shares"] = {s: {f: z[f"c{i}_s{s:g}_{f}"] for f in ("top", "kth", "pnf-joint", "cdp-peel")}
                       for s in meta["shares"]}
        cells.append(c)
        i += 1
    return meta, cells


def score(cells, delta: float, share: float, **constants) -> dict:
    """The rule ``rule_pick`` with ``constants`` on the recorded draws: per
    cell the median error of its picks (the public choice where it makes one:
    the chosen mechanism's error at the whole ε) against the best mechanism."""
    from dp_spark.mechanisms.top_k.auto import rule_pick

    ratios, within, worst = [], 0, (0.0, None)
    for c in cells:
        k, eps, d = c["k"], c["epsilon"], c["d"]
        best = min(float(np.median(c["err"][m])) for m in MECHANISMS)
        rec = c["shares"][share]
        picks, spent = rule_pick(rec["top"], rec["kth"], k, eps, delta, d, share, **constants)
        source = c["err"] if spent == 0.0 else rec  # a public choice runs at the whole ε
        got = float(np.median(np.where(picks == "cdp-peel", source["cdp-peel"], source["pnf-joint"])))
        ratio = (1.0 if got == 0 else np.inf) if best == 0 else got / best
        ratios.append(ratio)
        within += ratio <= TOLERANCE
        if ratio > worst[0]:
            worst = (ratio, f"{c['profile']} ε={eps:g} k={k}")
    finite = np.minimum(np.array(ratios), 10.0)
    return {"within": within, "cells": len(cells), "worst": worst, "over_1.5": int(np.sum(finite > 1.5)),
            "mean_log": float(np.mean(np.log(finite))), "ratios": ratios}


def fit(path: Path) -> int:
    """Grid search of the rule's constants on saved draws (no new noise)."""
    from dp_spark.mechanisms.top_k import auto

    meta, cells = load_raw(path)
    print(f"# fit on {path} ({meta['command']}); {len(cells)} cells, {meta['trials']} trials")
    auto.model_errors = lru_cache(maxsize=None)(auto.model_errors)  # the model depends on no constant below
    grid = {"small_k_per_epsilon": [5.0, 9.9, 10.0], "joint_error_fraction": [0.6, 0.7, 0.8, 0.9, 1.0]}
    results = []
    for share in meta["shares"]:
        for values in itertools.product(*grid.values()):
            constants = dict(zip(grid, values))
            results.append((score(cells, meta["delta"], share, **constants), share, constants))
    results.sort(key=lambda r: (-r[0]["within"], r[0]["over_1.5"], r[0]["worst"][0], r[0]["mean_log"]))
    today = score(cells, meta["delta"], auto.AUTO_SHARE) if auto.AUTO_SHARE in meta["shares"] else None
    if today:
        print(f"shipped constants: {today['within']}/{today['cells']} within {TOLERANCE}×, "
              f"{today['over_1.5']} over 1.5×, worst {today['worst'][0]:.2f} ({today['worst'][1]})")
    for res, share, constants in results[:15]:
        print(f"share {share:g} {constants}: {res['within']}/{res['cells']}, {res['over_1.5']} over 1.5×, "
              f"worst {res['worst'][0]:.2f} ({res['worst'][1]}), mean log ratio {res['mean_log']:.3f}")
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.fit:
        return fit(args.fit)
    print(f"# {command_line()}")
    print(f"# median ℓ∞ error over {args.trials} trials; δ = {args.delta:g} for cdp-peel and auto; "
          "released values are SEEDED (not private)")
    tasks = []
    for p_index, name in enumerate(args.profiles):
        counts = profile_counts(name, args.data)
        ordered = np.sort(counts)[::-1]
        print(f"# {name}: d = {len(counts):,}; NON-PRIVATE counts at ranks 1, 5, 10, 20, 50, 100: "
              + ", ".join(str(ordered[r - 1]) for r in (1, 5, 10, 20, 50, 100)))
        p_index = PROFILES.index(name)
        tasks += [(counts, name, p_index, eps, k, args.delta, args.trials, tuple(args.shares), args.seed)
                  for eps in args.epsilons for k in args.ks]
    with Timer() as t, ProcessPoolExecutor(max_workers=args.jobs) as pool:
        cells = []
        for c in pool.map(cell, tasks):
            cells.append(c)
            print(f"  {c['profile']} ε={c['epsilon']:g} k={c['k']}: done", file=sys.stderr, flush=True)
    rows, within = summarise(cells)
    print(format_table(
        ["profile", "ε", "k", *MECHANISMS, "auto", "auto→joint", "best", "auto/best", f"≤{TOLERANCE}×"], rows,
        title="Median ℓ∞ error (lower is better); auto→joint: trials where auto ran joint or pnf-joint"))
    print(f"\nauto within {TOLERANCE}× of the best mechanism in {within} of {len(rows)} cells "
          f"({t.seconds:.0f} s)")
    if args.raw:
        save_raw(args.raw, cells, args)
    if args.json:
        write_json(args.json, {"command": command_line(), "delta": args.delta, "trials": args.trials,
                               "cells": [{k: v for k, v in c.items() if k != "shares"} for c in cells]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
