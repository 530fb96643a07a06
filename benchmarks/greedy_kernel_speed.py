"""The greedy kernel alone: the vectorised ``greedy_match_rounds`` against the
loop it replaced (``greedy_match_rounds_reference``), no Spark.

    flock /tmp/dp_spark_bench.lock .venv/bin/python benchmarks/greedy_kernel_speed.py
        [--rows 2000000] [--groups 50] [--max-bound 100] [--repeats 5] [--seed 7]
        [--sweep] [--profile] [--json out.json]

Inputs are numpy draws shaped like ``dp_spark.datasets.synthetic_events``
(person activity power law 0.7 over rows/10 persons, item popularity power law
1.05 over rows/20 items, the same inverse-CDF formula), deduplicated per
person, laid out as the Spark stage lays out one shard: persons in the order
of xxhash64(person), each person's items in the order of xxhash64(item).

- ``ungrouped``: one list per person.
- ``grouped``: the same rows split into virtual persons (person, group), with
  group = xxhash64(person * items + item) mod ``--groups`` and items
  (group, item), as the grouped distinct-count's default path feeds the kernel
  (most virtual persons hold 1-2 items).

Each shape: both kernels alternate ``--repeats`` times in the same run; the
table gives their median and fastest seconds and the ratio of the medians.
Before timing, the two outputs are compared element by element (the script
stops if they differ). ``--profile`` splits one vectorised run into its parts
(numpy rounds, the sequential finish of small blocks, the reference loop for
the last rounds, cutting each round into blocks and dropping used items
from a block, and the rest: set-up and the filter between rounds); ``--sweep`` times the vectorised kernel for other
values of its thresholds (how the defaults were chosen). Data sizes printed
are NON-PRIVATE facts about synthetic data.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent))

from _common import command_line, format_table, write_json  # noqa: E402

from dp_spark.stages import kernels  # noqa: E402
from dp_spark.stages.kernels import greedy_match_rounds, greedy_match_rounds_reference, xxhash64_long  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--groups", type=int, default=50)
    p.add_argument("--max-bound", type=int, default=100)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--sweep", action="store_true")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--json", type=Path, default=None)
    return p.parse_args(argv)


def power_law_rank(u: np.ndarray, size: int, exponent: float) -> np.ndarray:
    """``dp_spark.datasets._power_law_rank`` in numpy."""
    a = 1.0 - exponent
    top = float(size + 1) ** a - 1.0
    x = (1.0 + u * top) ** (1.0 / a)
    return np.minimum(np.floor(x) - 1, size - 1).astype(np.int64)


def shard_layout(person: np.ndarray, item: np.ndarray):
    """(indptr, items, n_items) of one shard: distinct (person, item) pairs,
    persons by xxhash64(person), items by xxhash64(item), item codes dense."""
    persons, person_code = np.unique(person, return_inverse=True)
    items, item_code = np.unique(item, return_inverse=True)
    person_rank = np.empty(len(persons), dtype=np.int64)
    person_rank[np.lexsort((persons, xxhash64_long(persons)))] = np.arange(len(persons))
    item_rank = np.empty(len(items), dtype=np.int64)
    item_rank[np.lexsort((items, xxhash64_long(items)))] = np.arange(len(items))
    pairs = np.unique(person_rank[person_code] * len(items) + item_rank[item_code])
    owner = pairs // len(items)
    indptr = np.zeros(len(persons) + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=len(persons)), out=indptr[1:])
    return indptr, pairs - owner * len(items), len(items)


def make_inputs(rows: int, groups: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    n_persons, n_items = max(100, rows // 10), max(100, rows // 20)
    person = power_law_rank(rng.random(rows), n_persons, 0.7)
    item = power_law_rank(rng.random(rows), n_items, 1.05)
    group = np.mod(xxhash64_long(person * n_items + item), groups)
    return {
        "ungrouped": shard_layout(person, item),
        "grouped": shard_layout(person * groups + group, group * n_items + item),
    }


def time_pair(args_, max_bound: int, repeats: int) -> dict:
    ref, vec = [], []
    for _ in range(repeats):
        for fn, out in ((greedy_match_rounds_reference, ref), (greedy_match_rounds, vec)):
            start = time.perf_counter()
            fn(*args_, max_bound)
            out.append(time.perf_counter() - start)
    return {"reference_s": ref, "vectorised_s": vec,
            "ratio": statistics.median(ref) / statistics.median(vec)}


def profile(args_, max_bound: int) -> dict:
    """Seconds of one vectorised run spent in each part (wrappers around the
    module's helpers; the rest is set-up and the between-round filtering)."""
    spent = {"_vector_round": 0.0, "_vector_block": 0.0, "_sequential_round": 0.0, "_sequential_rounds": 0.0}
    counts = {name: 0 for name in spent}
    real = {name: getattr(kernels, name) for name in spent}

    def wrap(name):
        def timed(*a):
            start = time.perf_counter()
            try:
                return real[name](*a)
            finally:
                spent[name] += time.perf_counter() - start
                counts[name] += 1
        return timed

    nested = {"_vector_block", "_sequential_round"}  # called from inside _vector_round
    try:
        for name in spent:
            setattr(kernels, name, wrap(name))
        start = time.perf_counter()
        greedy_match_rounds(*args_, max_bound)
        total = time.perf_counter() - start
    finally:
        for name, fn in real.items():
            setattr(kernels, name, fn)
    rest = total - sum(v for k, v in spent.items() if k not in nested)
    return {"total": total, **spent, "calls": counts, "rest": rest,
            "numpy_blocks_without_finish": spent["_vector_block"] - spent["_sequential_round"],
            "block_cutting": spent["_vector_round"] - spent["_vector_block"]}


SWEEP = {
    "_BLOCK_EDGES": [16_384, 65_536, 262_144, 10**12],
    "_SEQUENTIAL_EDGES": [1, 100, 500, 2_000, 8_000],
    "_SEQUENTIAL_ROUND_EDGES": [0, 5_000, 50_000],
    "_SEQUENTIAL_PERSONS": [0, 1_000, 10_000],
}


def sweep(inputs: dict, max_bound: int, repeats: int) -> list:
    rows = []
    for name, values in SWEEP.items():
        default = getattr(kernels, name)
        try:
            for value in values:
                setattr(kernels, name, value)
                cells = [name, f"{value:,}" + (" (default)" if value == default else "")]
                for args_ in inputs.values():
                    times = []
                    for _ in range(repeats):
                        start = time.perf_counter()
                        greedy_match_rounds(*args_, max_bound)
                        times.append(time.perf_counter() - start)
                    cells.append(f"{statistics.median(times):.4f}")
                rows.append(cells)
        finally:
            setattr(kernels, name, default)
    return rows


def main(argv=None) -> None:
    args = parse_args(argv)
    print(command_line())
    print(f"load average {os.getloadavg()}, cpus {os.cpu_count()}, numpy {np.__version__}")
    inputs = make_inputs(args.rows, args.groups, args.seed)
    result = {"command": command_line(), "rows": args.rows, "max_bound": args.max_bound, "shapes": {}}
    table = []
    for shape, args_ in inputs.items():
        indptr, items, n_items = args_
        want = greedy_match_rounds_reference(*args_, args.max_bound)
        got = greedy_match_rounds(*args_, args.max_bound)
        if not (got.dtype == want.dtype and np.array_equal(got, want)):
            raise SystemExit(f"{shape}: the vectorised kernel differs from the reference")
        timing = time_pair(args_, args.max_bound, args.repeats)
        degrees = np.diff(indptr)
        facts = {"persons": len(degrees), "edges": len(items), "items": n_items,
                 "max_degree": int(degrees.max()), "matched": int(np.count_nonzero(want))}
        result["shapes"][shape] = {**facts, **timing, "equal": True}
        table.append([shape, f"{facts['persons']:,}", f"{facts['edges']:,}", f"{facts['items']:,}",
                      f"{facts['max_degree']:,}", f"{facts['matched']:,}",
                      f"{statistics.median(timing['reference_s']):.3f}", f"{min(timing['reference_s']):.3f}",
                      f"{statistics.median(timing['vectorised_s']):.3f}", f"{min(timing['vectorised_s']):.3f}",
                      f"{timing['ratio']:.2f}x", "yes"])
    print(format_table(
        ["shape", "persons", "edges", "items", "max deg", "matched", "ref med s", "ref min s",
         "vec med s", "vec min s", "speed-up", "equal"],
        table, title=f"NON-PRIVATE synthetic inputs, {args.rows:,} rows, max_bound {args.max_bound}, "
                     f"{args.repeats} alternating repeats"))
    if args.profile:
        rows = []
        for shape, args_ in inputs.items():
            p = profile(args_, args.max_bound)
            result["shapes"][shape]["profile"] = p
            rows.append([shape, f"{p['total']:.4f}", f"{p['numpy_blocks_without_finish']:.4f}",
                         f"{p['_sequential_round']:.4f} ({p['calls']['_sequential_round']})",
                         f"{p['_sequential_rounds']:.4f} ({p['calls']['_sequential_rounds']})",
                         f"{p['block_cutting']:.4f}", f"{p['rest']:.4f}",
                         f"{p['calls']['_vector_round']:,} / {p['calls']['_vector_block']:,}"])
        print()
        print(format_table(["shape", "total s", "numpy blocks s", "block finish s (calls)",
                            "reference tail s (calls)", "cut + free-filter blocks s",
                            "set-up + round filters s", "numpy rounds / blocks"], rows,
                           title="Where one vectorised run spends its time"))
    if args.sweep:
        rows = sweep(inputs, args.max_bound, args.repeats)
        result["sweep"] = rows
        print()
        print(format_table(["threshold", "value", *[f"{s} med s" for s in inputs]], rows,
                           title="Vectorised kernel, one threshold changed at a time"))
    if args.json:
        write_json(args.json, result)


if __name__ == "__main__":
    main()
