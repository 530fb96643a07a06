"""The cost of drawing privacy noise from ChaCha20 instead of PCG64 (issue 21 §4).

No Spark: the driver-side (and per-partition) noise code on the same inputs,
once with numpy's PCG64 and once with ChaCha20 (``randomgen.ChaCha``, 20
rounds, what ``dp_spark.noise.make_rng()`` now returns unseeded), interleaved
repetitions, median wall seconds and the ratio ChaCha20 / PCG64 (and the
ratio of the fastest repetitions, steadier on a loaded machine):

0. raw generation, 10⁷ uniform doubles (the cost per bit, an upper bound);
1. the joint top-k sampler (``joint_top_k``), d = 10⁶ Zipf counts, k = 100;
2. set-union's noise step (``release_mask``): Laplace noise and threshold
   for 10⁶ items, as 8 partitions of 125,000 with a generator each;
3. count-release's keyed noise (``keyed_noisy_counts``, the bounded
   method's count step run inside Spark): one exact discrete Gaussian per
   item from a generator keyed by the item's digest, 2·10⁴ items (the keyed
   path always builds ChaCha20 now; its PCG64 column rebuilds the old
   per-item PCG64 generator for comparison);
4. the continual-distinct mechanism at T = 2²⁰ (``continual_counts``,
   method auto, ρ = 0.5) on a synthetic stream.

Every generator is seeded (common random inputs across the two columns):
nothing here is differentially private; only the times matter.

    .venv/bin/python benchmarks/noise_cost.py [--reps 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from unittest import mock

import numpy as np
from randomgen import ChaCha

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import Timer, command_line, fmt, format_table  # noqa: E402

import dp_spark.mechanisms.count_release.bounded as bounded  # noqa: E402
from dp_spark.mechanisms.continual_distinct import continual_counts, stream_summaries  # noqa: E402
from dp_spark.mechanisms.count_release.keyed import item_digests, noise_key  # noqa: E402
from dp_spark.mechanisms.set_union.thresholds import plan_set_union  # noqa: E402
from dp_spark.mechanisms.set_union.thresholding import release_mask  # noqa: E402
from dp_spark.mechanisms.top_k import joint_top_k  # noqa: E402

GENERATORS = {
    "PCG64": lambda seq: np.random.Generator(np.random.PCG64(seq)),
    "ChaCha20": lambda seq: np.random.Generator(ChaCha(seq, rounds=20)),
}


def _old_item_generator(item, key, stream):
    """The per-item generator before issue 21 §4: PCG64 seeded by the digest."""
    (digest,) = item_digests([item], key, stream, size=32)
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(int.from_bytes(digest, "big"))))


def workloads():
    zipf = np.random.Generator(np.random.PCG64(1))
    d = 1_000_000
    counts = np.floor(1e6 / (zipf.permutation(d) + 1.0) ** 1.1).astype(np.int64)

    def joint(make):
        joint_top_k(counts, 100, 1.0, make(np.random.SeedSequence(7)))

    plan = plan_set_union(1.0, 1e-6, 10, "policy-laplace")
    weights = zipf.exponential(1.0, size=d)
    parts = np.array_split(weights, 8)

    def set_union(make):
        root = np.random.SeedSequence(8)
        for part, seq in zip(parts, root.spawn(len(parts))):
            release_mask(part, plan, make(seq))

    items = [f"item{j}" for j in range(20_000)]
    item_counts = zipf.integers(0, 1000, size=len(items))
    key = noise_key(np.random.Generator(np.random.PCG64(9)))

    def keyed(make):
        if make is GENERATORS["PCG64"]:
            with mock.patch.object(bounded, "item_generator", _old_item_generator):
                bounded.keyed_noisy_counts(items, item_counts, sigma=20.0, key=key)
        else:
            bounded.keyed_noisy_counts(items, item_counts, sigma=20.0, key=key)

    T = 1 << 20
    s = np.random.Generator(np.random.PCG64(10))
    n_items = 20_000
    times = np.sort(s.integers(1, T - 2, size=(n_items, 4)), axis=1) + np.arange(4)  # strictly increasing
    labels = np.repeat(np.arange(n_items), 4)
    ops = np.tile([1, -1, 1, -1], n_items)
    summaries = stream_summaries(times.ravel(), labels, ops, T)

    def continual(make):
        continual_counts(summaries, 0.5, "auto", rng=make(np.random.SeedSequence(11)))

    def raw(make):
        make(np.random.SeedSequence(12)).random(10_000_000)

    return [
        ("raw: 10^7 uniform doubles", raw),
        ("joint top-k, d = 10^6, k = 100", joint),
        ("set-union noise, 10^6 items / 8 partitions", set_union),
        ("count-release keyed noise, 2·10^4 items", keyed),
        ("continual-distinct auto, T = 2^20", continual),
    ]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=3, help="interleaved repetitions per generator (default 3)")
    p.add_argument("--json", help="also write the numbers to this file")
    args = p.parse_args(argv)
    print(command_line())
    rows, out = [], {}
    for name, run in workloads():
        run(GENERATORS["PCG64"])  # warm-up (imports, caches)
        seconds = {g: [] for g in GENERATORS}
        for _ in range(args.reps):
            for g, make in GENERATORS.items():
                with Timer() as t:
                    run(make)
                seconds[g].append(t.seconds)
        med = {g: float(np.median(v)) for g, v in seconds.items()}
        ratio = med["ChaCha20"] / med["PCG64"]
        min_ratio = min(seconds["ChaCha20"]) / min(seconds["PCG64"])
        rows.append([name, fmt(med["PCG64"], 3), fmt(med["ChaCha20"], 3), fmt(ratio, 2), fmt(min_ratio, 2),
                     " ".join(fmt(x, 2) for x in seconds["PCG64"]), " ".join(fmt(x, 2) for x in seconds["ChaCha20"])])
        out[name] = {"pcg64_seconds": seconds["PCG64"], "chacha20_seconds": seconds["ChaCha20"],
                     "ratio_of_medians": ratio, "ratio_of_minima": min_ratio}
        print(f"  done: {name}", flush=True)
    print(format_table(["workload", "PCG64 s (median)", "ChaCha20 s (median)", "ratio", "ratio of minima",
                        "PCG64 reps", "ChaCha20 reps"], rows))
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.json:
        import json

        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
