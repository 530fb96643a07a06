"""Cost of the exact selection samplers (``dp_spark.noise.selection``) against the float
report-noisy-max draws they replaced, on distinct-count's bound choice.

No Spark. CPU milliseconds per call of ``gem.permute_and_flip_rows`` (Laplace form) and
``gem.exponential_rows`` (zCDP form) on GEM same-direction scores of G groups (one row each, the
release's candidate grid 1, 4, …, 65,536 and a 30-candidate stress grid), against the float
formulas the module used before (argmax of c·(s − max s) plus Exp(1) or Gumbel noise, written out
here as the baseline). Interleaved repetitions, the median; the ratio is exact / float in one run.
Seeded PCG64 generators: nothing here is private; only the times matter.

    .venv/bin/python benchmarks/selection_sampler.py [--reps 5] [--json FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import command_line, format_table, write_json  # noqa: E402

from dp_spark.accounting.exact import ratio_down  # noqa: E402
from dp_spark.mechanisms.distinct_count.gem import (exponential_rows, permute_and_flip_rows,  # noqa: E402
                                                    same_direction_scores_batch)

GRIDS = {"release grid (9 candidates)": [4**i for i in range(9)],
         "stress grid (30 candidates)": [int(round(1.45**i)) + i for i in range(30)]}
GROUPS = (1, 1_000, 100_000)
EPSILON = 0.25


def _scores(groups: int, cands: list[int], seed: int) -> np.ndarray:
    """GEM same-direction scores of concave per-group count curves c_l (sizes spread over groups)."""
    rng = np.random.default_rng(seed)
    size = np.exp(rng.uniform(np.log(5), np.log(50_000), size=(groups, 1)))
    knee = rng.uniform(1, 200, size=(groups, 1))
    cand = np.asarray(cands, dtype=np.float64)
    counts = np.floor(size * (1 - np.exp(-cand[None, :] / knee))).astype(np.int64)
    margins = np.ceil(3 * cand).astype(np.int64)
    return same_direction_scores_batch(counts - margins[None, :], np.asarray(cands), EPSILON, 0.05)


def _float_pf(s, eps, rng):
    c = ratio_down(eps, 2.0)
    return np.argmax(c * (s - s.max(axis=1, keepdims=True)) + rng.standard_exponential(size=s.shape), axis=1)


def _float_em(s, eps, rng):
    c = ratio_down(eps, 2.0)
    return np.argmax(c * (s - s.max(axis=1, keepdims=True)) + rng.gumbel(size=s.shape), axis=1)


SAMPLERS = {"permute-and-flip": (permute_and_flip_rows, _float_pf),
            "exponential": (exponential_rows, _float_em)}


def _ms(fn, s, calls: int) -> float:
    rng = np.random.default_rng(3)
    start = time.process_time()
    for _ in range(calls):
        fn(s, EPSILON, rng)
    return (time.process_time() - start) / calls * 1e3


def _measure(exact, floating, s, reps: int) -> tuple[float, float]:
    """Median CPU ms per call of each, interleaved repetitions."""
    calls = max(1, 2_000 // s.shape[0])
    times = {exact: [], floating: []}
    for _ in range(reps):
        for fn in times:
            times[fn].append(_ms(fn, s, calls))
    return statistics.median(times[exact]), statistics.median(times[floating])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    print(f"# {command_line()}")
    rows = []
    for grid, cands in GRIDS.items():
        for groups in GROUPS:
            s = _scores(groups, cands, seed=groups)
            for name, (exact, floating) in SAMPLERS.items():
                exact_ms, float_ms = _measure(exact, floating, s, args.reps)
                rows.append([grid, groups, name, round(exact_ms, 3), round(float_ms, 3),
                             round(exact_ms / float_ms, 1)])
                print(*rows[-1], sep="  ", flush=True)
    headers = ["grid", "groups", "sampler", "exact ms", "float ms", "ratio"]
    print(format_table(headers, rows))
    if args.json:
        write_json(args.json, {"command": command_line(), "rows": [dict(zip(headers, r)) for r in rows]})


if __name__ == "__main__":
    main()
