"""Speed of the wide exact discrete Gaussian sampler (``discrete_gaussian_batch_wide``).

No Spark. Microseconds of CPU per draw at the σ² its callers use, in the block sizes they draw:
set union's grid noise (policy-gaussian, ε = 1, δ = 1e-6, Δ0 = 100: σ ≈ 2^42; one call per noise
bucket, ~5,000 items a bucket at 10⁶ candidates, a few hundred at 10⁵) and a factorized counter's
2^40-scaled strategy (σ² ≈ 20·2^40). Columns: the certified path (the default) and the all-integer
path (``_certified=False``) where the checkout has it; the same draws either way (tests/unit/
test_wide_sampler_certified.py). Interleaved repetitions, the median and the fastest. Seeded PCG64
generators: nothing here is private; only the times matter. Run it from another checkout with
PYTHONPATH set to it for a before/after (a checkout without ``_certified`` prints its one path).

    .venv/bin/python benchmarks/wide_sampler.py [--reps 5] [--draws 200000] [--json FILE]
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import command_line  # noqa: E402

import dp_spark  # noqa: E402
from dp_spark.mechanisms.set_union.gaussian_grid import plan_gaussian_grid  # noqa: E402
from dp_spark.noise.discrete_batch import discrete_gaussian_batch_wide  # noqa: E402

CASES = {
    "set union grid (σ≈2^42)": plan_gaussian_grid("policy-gaussian", 1.0, 1e-6, 100).sigma ** 2,
    "factorized strategy (σ²≈20·2^40)": 20 * 2**40 + 12345,
}
BLOCKS = (256, 4096, 65536)


def _per_draw(sigma2, block: int, draws: int, **kwargs) -> float:
    rng = np.random.default_rng(1)
    start, n = time.process_time(), 0
    while n < draws:
        discrete_gaussian_batch_wide(sigma2, block, rng, **kwargs)
        n += block
    return (time.process_time() - start) / n * 1e6


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--draws", type=int, default=200_000, help="draws per repetition and block size")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    paths = {"certified": {}}
    if "_certified" in inspect.signature(discrete_gaussian_batch_wide).parameters:
        paths["integer"] = {"_certified": False}
    else:
        paths = {"(one path)": {}}
    print(f"# {command_line()}  (dp_spark from {Path(dp_spark.__file__).parent})")
    rows = []
    for case, sigma2 in CASES.items():
        for block in BLOCKS:
            times = {name: [] for name in paths}
            for _ in range(args.reps):
                for name, kwargs in paths.items():
                    times[name].append(_per_draw(sigma2, block, args.draws, **kwargs))
            row = {"case": case, "block": block}
            for name, values in times.items():
                row[f"{name} median µs"] = round(statistics.median(values), 3)
                row[f"{name} min µs"] = round(min(values), 3)
            rows.append(row)
            print("  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
