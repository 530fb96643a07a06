"""The private key step of grouped releases before and after exact noise:
how many keys each releases and how much of the data it misses.

Before commit 50ebe1f (code of 2f98c96) ``choose_keys`` ran set-union's
policy-Gaussian histogram (α = 2, 8 person shards with the cutoff Γ/√8,
:func:`shard_cutoff` "scaled") with FLOAT Gaussian noise
(``plan_set_union(ε_k, δ_k, Δ0, "policy-gaussian", 2.0)``, ``release_mask``
with ``rng.normal``). Since 50ebe1f / cbd5036 it runs the weighted-Gaussian
histogram with EXACT discrete Gaussian noise and an integer threshold
(``dp_spark.plan.key_mechanism`` = ``plan_discrete_set_union``,
``discrete_release_mask``). This script measures both at the key step's real
budget: (ε_k, δ_k) = (0.1·ε, min(1e-6, 0.1·δ)) for ε ∈ {1, 3}, δ = 1e-6, and
Δ0 ∈ {4, 100}.

No Spark: the mechanism layer in numpy, as the stage runs it.

- Restriction (both): each person keeps at most Δ0 of their distinct keys,
  a uniform random subset drawn afresh for every noise draw (the stage's
  smallest salted xxhash64, with a fresh salt per release).
- Old histogram: persons split into 8 shards and visited in a fixed random
  order (the stage: shard pmod(murmur3(person), 8), order xxhash64(person),
  both unsalted, so fixed across releases; here one seeded random shard
  assignment and permutation per shape), each shard's policy-Gaussian
  histogram with cutoff Γ/√8, added in shard order 0..7.
- New histogram: the weighted-Gaussian integer units (order-free).
- Noise: each version's own mask with a seeded numpy Generator (NOT private:
  benchmark seeds).

The two versions run in two subprocesses of /work/main/.venv/bin/python:
the old one with PYTHONPATH on a scratch checkout of 2f98c96
(``--old-checkout``, cloned from the repository if missing), the new one on
this repository. Each worker checks which ``dp_spark`` it imported.

Shapes (persons = the data's persons, keys = the group column; read in place
from ../shared/data): MovieLens 100K (users × genre of the rated movie, ×
rating day (UTC date of the timestamp), × movie); Amazon Fashion 5-core
(reviewers × review month (UTC), × product; exact repeated reviews
dropped); synthetic Zipf (10^5 persons, each 1-20 draws uniform, keys drawn
with replacement from Zipf(1.1) over 10^4 keys, deduplicated).

Printed per (shape, ε, Δ0): distinct keys (NON-PRIVATE), the median over
the draws of the keys released, old and new, their ratio, and the median
missing mass: the share of the shape's distinct (person, key) pairs whose
key is not released. Never asserts.

    .venv/bin/python benchmarks/private_keys_step.py [--draws 10] [--json FILE]
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = REPO_ROOT.parent / "shared" / "data"
OLD_COMMIT = "2f98c96"
EPSILONS = (1.0, 3.0)
DELTA = 1e-6
KEY_SHARE_EPS, KEY_DELTA_CAP, KEY_SHARE_DELTA = 0.1, 1e-6, 0.1  # dp_spark.plan's KEYS_* (both versions)
CAPS = (4, 100)
OLD_SHARDS = 8  # DEFAULT_SHARDS of 2f98c96's key step


def key_budget(epsilon: float, delta: float) -> tuple[float, float]:
    """(ε_k, δ_k) of the plan's "group_keys" step."""
    return KEY_SHARE_EPS * epsilon, min(KEY_DELTA_CAP, KEY_SHARE_DELTA * delta)


# ------------------------------------------------------------------ shapes

def _pairs(persons, keys) -> tuple[np.ndarray, np.ndarray, int]:
    """CSR of the distinct (person, key) pairs: (indptr, codes, n_keys), persons in code order."""
    _, p = np.unique(np.asarray(persons), return_inverse=True)
    _, k = np.unique(np.asarray(keys), return_inverse=True)
    pairs = np.unique(np.stack([p.ravel(), k.ravel()], axis=1), axis=0)
    counts = np.bincount(pairs[:, 0], minlength=int(p.max()) + 1)
    indptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    return indptr, pairs[:, 1].astype(np.int64), int(k.max()) + 1


def movielens_shapes(root: Path) -> dict:
    raw = np.loadtxt(root / "u.data", dtype=np.int64)
    user, movie, stamp = raw[:, 0], raw[:, 1], raw[:, 3]
    genres = {}
    with open(root / "u.item", encoding="latin-1") as f:
        for line in f:
            parts = line.rstrip("\n").split("|")
            genres[int(parts[0])] = [g for g, flag in enumerate(parts[5:24]) if flag == "1"]
    gu = [u for u, m in zip(user.tolist(), movie.tolist()) for _ in genres[m]]
    gk = [g for m in movie.tolist() for g in genres[m]]
    day = stamp // 86400  # UTC date
    return {"movielens genre": _pairs(gu, gk), "movielens day": _pairs(user, day),
            "movielens movie": _pairs(user, movie)}


def amazon_shapes(root: Path) -> dict:
    seen, rows = set(), []
    with gzip.open(root / "AMAZON_FASHION_5.json.gz", "rt", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            key = (r["reviewerID"], r["asin"], r["unixReviewTime"], r.get("reviewText", ""))
            if key not in seen:  # the 89 exact repeats (one per style variant)
                seen.add(key)
                rows.append((r["reviewerID"], r["asin"], r["unixReviewTime"]))
    person = [r[0] for r in rows]
    month = [dt.datetime.fromtimestamp(r[2], dt.timezone.utc).strftime("%Y-%m") for r in rows]
    return {"amazon month": _pairs(person, month), "amazon product": _pairs(person, [r[1] for r in rows])}


def zipf_shape(seed: int = 20261128, persons: int = 100_000, keys: int = 10_000, exponent: float = 1.1) -> dict:
    rng = np.random.default_rng(seed)
    p = np.arange(1, keys + 1, dtype=np.float64) ** -exponent
    draws = rng.integers(1, 21, size=persons)
    who = np.repeat(np.arange(persons), draws)
    what = rng.choice(keys, size=int(draws.sum()), p=p / p.sum())
    return {"zipf 1.1 (synthetic)": _pairs(who, what)}


# ------------------------------------------------------------------ worker

def restrict(indptr: np.ndarray, codes: np.ndarray, cap: int, rng: np.random.Generator):
    """Each person's keys cut to a uniform random subset of at most ``cap`` (CSR)."""
    sizes = np.diff(indptr)
    person = np.repeat(np.arange(len(sizes)), sizes)
    rank = np.empty(len(codes), dtype=np.int64)
    order = np.lexsort((rng.random(len(codes)), person))  # random order inside each person
    rank[order] = np.arange(len(codes)) - np.repeat(indptr[:-1], sizes)
    keep = rank < cap
    kept = np.minimum(sizes, cap)
    return np.concatenate(([0], np.cumsum(kept))).astype(np.int64), codes[keep]


def _subset(indptr, codes, persons):
    """CSR of the given persons, in that order."""
    sizes = np.diff(indptr)[persons]
    out = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    take = np.arange(out[-1], dtype=np.int64) + np.repeat(indptr[persons] - out[:-1], sizes)
    return out, codes[take]


def _sharded_policy(shards, n_keys: int, gamma: float, build_histogram) -> np.ndarray:
    """The old stage's histogram: each shard's policy-Gaussian run with the cutoff ``gamma``, added in shard order."""
    hist = np.zeros(n_keys)
    for sp, sc in shards:
        hist = hist + build_histogram(sp, sc, n_keys, "policy-gaussian", gamma)
    return hist


def worker(version: str, data: Path, draws: int) -> dict:
    """Per (shape, ε, Δ0) and arm: keys released and missing mass of each draw.

    Arms: "old" (2f98c96's step) or "new" (HEAD's step), and with the HEAD
    code two diagnostic arms that are NOT private mechanisms of dp_spark:
    "w_float" — HEAD's weighted-Gaussian histogram with the old float
    constants (analytic Gaussian σ, the paper's ρ: ``plan_set_union(...,
    "weighted-gaussian")``), so new/w_float is the cost of exactness alone
    and w_float/old that of the histogram; "p_exact" — the old sharded
    policy-Gaussian histogram (Γ = ρ + 2σ of the exact plan, /√8) floored
    onto the exact plan's grid with its discrete noise and integer
    threshold: what an exact fixed-point policy would release if its
    rounding cost nothing (an upper bound for such a version)."""
    import dp_spark

    where = str(Path(dp_spark.__file__).resolve())
    from dp_spark.mechanisms.set_union import build_histogram, release_mask, shard_cutoff
    from dp_spark.accounting import ApproxDP
    from dp_spark.plan import KEYS_POLICY
    from dp_spark.plan import key_mechanism as key_mechanism_of_version

    def key_mechanism(cost, cap):  # the old checkout's key_mechanism took (ε, δ, Δ0); today's takes the cost
        if version == "old":
            return key_mechanism_of_version(cost.epsilon, cost.delta, cap)
        return key_mechanism_of_version(cost, cap)

    if version == "new":
        from dp_spark.mechanisms.set_union import discrete_release_mask, plan_set_union

        assert KEYS_POLICY == "weighted-gaussian", KEYS_POLICY
    else:
        assert KEYS_POLICY == "policy-gaussian", KEYS_POLICY
    arrays = np.load(data)
    names = json.loads(str(arrays["names"]))
    out = {"dp_spark": where, "results": [], "constants": []}
    for eps in EPSILONS:
        for cap in CAPS:
            plan = key_mechanism(ApproxDP(*key_budget(eps, DELTA)), cap)
            gamma = shard_cutoff(plan.gamma, OLD_SHARDS, "scaled") if version == "old" else None
            out["constants"].append({"epsilon": eps, "cap": cap, "sigma": plan.scale, "rho": plan.rho, "gamma": gamma})
    for s, name in enumerate(names):
        indptr, codes, n_keys = arrays[f"indptr{s}"], arrays[f"codes{s}"], int(arrays[f"nkeys{s}"])
        pairs_per_key = np.bincount(codes, minlength=n_keys)
        n_persons = len(indptr) - 1
        fixed = np.random.default_rng([7, s])  # the stage's unsalted shard and order: fixed per shape
        shard_of, visit = fixed.integers(0, OLD_SHARDS, n_persons), fixed.permutation(n_persons)
        for cap in CAPS:
            plans = {eps: key_mechanism(ApproxDP(*key_budget(eps, DELTA)), cap) for eps in EPSILONS}
            rows = {eps: {} for eps in EPSILONS}
            for d in range(draws):
                r_indptr, r_codes = restrict(indptr, codes, cap, np.random.default_rng([11, s, cap, d]))
                shards = [_subset(r_indptr, r_codes, visit[shard_of[visit] == k]) for k in range(OLD_SHARDS)]
                if version == "new":
                    weighted = build_histogram(r_indptr, r_codes, n_keys, KEYS_POLICY, None)
                for eps, plan in plans.items():
                    seed = [13, s, cap, d, int(eps)]
                    masks = {}
                    if version == "old":
                        gamma = shard_cutoff(plan.gamma, OLD_SHARDS, "scaled")
                        masks["old"] = release_mask(_sharded_policy(shards, n_keys, gamma, build_histogram), plan,
                                                    np.random.default_rng(seed))
                    else:
                        masks["new"] = discrete_release_mask(weighted, plan, np.random.default_rng(seed))
                        float_plan = plan_set_union(*key_budget(eps, DELTA), cap, "weighted-gaussian")
                        masks["w_float"] = release_mask(weighted, float_plan, np.random.default_rng(seed + [1]))
                        gamma = shard_cutoff(plan.rho + 2.0 * plan.scale, OLD_SHARDS, "scaled")
                        masks["p_exact"] = discrete_release_mask(
                            _sharded_policy(shards, n_keys, gamma, build_histogram), plan,
                            np.random.default_rng(seed + [2]))
                    for arm, mask in masks.items():
                        row = rows[eps].setdefault(arm, {"released": [], "missing": []})
                        row["released"].append(int(mask.sum()))
                        row["missing"].append(float(pairs_per_key[~mask].sum() / len(codes)))
            for eps in EPSILONS:
                for arm, row in rows[eps].items():
                    out["results"].append({"shape": name, "epsilon": eps, "cap": cap, "arm": arm, **row})
    return out


# ------------------------------------------------------------------ driver

def old_checkout(path: Path) -> Path:
    if not (path / "dp_spark").is_dir():
        subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(path)], check=True)
        subprocess.run(["git", "-C", str(path), "checkout", "-q", OLD_COMMIT], check=True)
    head = subprocess.run(["git", "-C", str(path), "rev-parse", "--short=7", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()
    if head != OLD_COMMIT:
        raise SystemExit(f"{path} is at {head}, not {OLD_COMMIT}")
    return path


def run_worker(version: str, root: Path, data: Path, draws: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, __file__, "--worker", version, "--input", str(data),
                           "--draws", str(draws)], env=env, check=True, capture_output=True, text=True)
    result = json.loads(done.stdout)
    if not result["dp_spark"].startswith(str(root.resolve())):
        raise SystemExit(f"the {version} worker imported {result['dp_spark']}, not from {root}")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--data", type=Path, default=DATA_DIR)
    ap.add_argument("--old-checkout", type=Path, default=Path(tempfile.gettempdir()) / "oldkeys")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--worker", choices=("old", "new"))
    ap.add_argument("--input", type=Path)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.input, args.draws)))
        return
    start = time.time()
    shapes = {**movielens_shapes(args.data / "movielens-100k"), **amazon_shapes(args.data / "amazon-fashion-5core"),
              **zipf_shape()}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "shapes.npz"
        arrays = {"names": json.dumps(list(shapes))}
        for s, (indptr, codes, n_keys) in enumerate(shapes.values()):
            arrays.update({f"indptr{s}": indptr, f"codes{s}": codes, f"nkeys{s}": n_keys})
        np.savez(data, **arrays)
        old = run_worker("old", old_checkout(args.old_checkout), data, args.draws)
        new = run_worker("new", REPO_ROOT, data, args.draws)
    results = {(r["shape"], r["epsilon"], r["cap"], r["arm"]): r for r in old["results"] + new["results"]}
    print(f"private key step, old ({OLD_COMMIT}: policy-Gaussian α=2, 8 shards, float noise) vs new (HEAD: "
          f"weighted-Gaussian, exact discrete Gaussian); δ = {DELTA:g}, (ε_k, δ_k) = (0.1ε, min(1e-6, 0.1δ)); "
          f"medians over {args.draws} draws (seeded, NOT private)\n")
    print("constants (public; weight units): old σ, ρ, shard cutoff Γ/√8 | new σ = s·2^-g, threshold R·2^-g")
    for c in old["constants"]:
        n = next(x for x in new["constants"] if (x["epsilon"], x["cap"]) == (c["epsilon"], c["cap"]))
        print(f"  ε = {c['epsilon']:g} (ε_k {key_budget(c['epsilon'], DELTA)[0]:g}), Δ0 = {c['cap']:>3}: "
              f"old σ {c['sigma']:.2f}, ρ {c['rho']:.1f}, Γ/√8 {c['gamma']:.1f} | "
              f"new σ {n['sigma']:.2f}, threshold {n['rho']:.1f} (ρ new/old {n['rho'] / c['rho']:.3f})")
    head = (f"{'shape':<22} {'ε':>3} {'Δ0':>4} {'persons':>7} {'pairs':>7} {'keys':>6} "
            f"{'rel old':>8} {'rel new':>8} {'new/old':>8} {'miss old':>9} {'miss new':>9}"
            f" | {'rel Wf':>7} {'rel Px':>7} {'miss Wf':>8} {'miss Px':>8}")
    print()
    print(head)
    print("-" * len(head))
    table = []
    for name, (indptr, codes, n_keys) in shapes.items():
        for cap in CAPS:
            for eps in EPSILONS:
                arms = {arm: results[(name, eps, cap, arm)] for arm in ("old", "new", "w_float", "p_exact")}
                rel = {a: float(np.median(r["released"])) for a, r in arms.items()}
                miss = {a: float(np.median(r["missing"])) for a, r in arms.items()}
                ratio = f"{rel['new'] / rel['old']:.3f}" if rel["old"] else "-"
                print(f"{name:<22} {eps:>3g} {cap:>4} {len(indptr) - 1:>7} {len(codes):>7} {n_keys:>6} "
                      f"{rel['old']:>8g} {rel['new']:>8g} {ratio:>8} {miss['old']:>9.2%} {miss['new']:>9.2%}"
                      f" | {rel['w_float']:>7g} {rel['p_exact']:>7g} {miss['w_float']:>8.2%} {miss['p_exact']:>8.2%}")
                table.append({"shape": name, "epsilon": eps, "keys_epsilon": key_budget(eps, DELTA)[0], "cap": cap,
                              "persons": len(indptr) - 1, "pairs": len(codes), "keys": n_keys,
                              **{f"released_{a}": r["released"] for a, r in arms.items()},
                              **{f"missing_{a}": r["missing"] for a, r in arms.items()}})
    print("Wf: HEAD's weighted histogram with the old float constants (cost of exactness = new vs Wf; of the "
          "histogram = Wf vs old). Px: the old policy histogram under the exact plan's grid, noise and threshold "
          "(not a dp_spark mechanism: what an exact fixed-point policy would release at best).")
    print(f"({time.time() - start:.0f} s; old dp_spark {old['dp_spark']}, new {new['dp_spark']})")
    if args.json:
        args.json.write_text(json.dumps({"draws": args.draws, "delta": DELTA, "rows": table}, indent=1))

if __name__ == "__main__":
    main()
