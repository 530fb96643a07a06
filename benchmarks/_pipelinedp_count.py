"""PipelineDP 0.3's count per partition with public partitions, run in its own
Python (PipelineDP 0.3 pins numpy < 2, dp_spark's environment has numpy 2):
the arm of benchmarks/grouped_count_pipelinedp.py. Imports numpy and
pipeline_dp only (never dp_spark).

    <pipelinedp-python> benchmarks/_pipelinedp_count.py DATA.npz OUT.json \\
        --epsilon E --delta D --max-partitions L0

DATA.npz holds int64 arrays ``person``, ``group``, ``item`` (one row per
distinct (person, group, item)) and ``partitions`` (n × 2: the public
(group, item) keys). Runs ``DPEngine.aggregate`` on the LocalBackend with
``Metrics.COUNT``, Gaussian noise, ``max_partitions_contributed`` = L0,
``max_contributions_per_partition`` = 1 (rows are distinct per partition, so
COUNT is the number of distinct persons, the statistic the grouped
count-release releases) and ``public_partitions`` = the public keys.
PipelineDP draws its noise from python-dp (not seedable). Writes the released (group, item, count) rows and the time of the aggregate
(building the pipeline, computing budgets and materializing the result).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pipeline_dp


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("data")
    p.add_argument("out")
    p.add_argument("--epsilon", type=float, required=True)
    p.add_argument("--delta", type=float, required=True)
    p.add_argument("--max-partitions", type=int, required=True)
    args = p.parse_args()
    data = np.load(args.data)
    rows = list(zip(data["person"].tolist(), data["group"].tolist(), data["item"].tolist()))
    partitions = [(int(g), int(i)) for g, i in data["partitions"].tolist()]
    start = time.perf_counter()
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=args.epsilon, total_delta=args.delta)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        metrics=[pipeline_dp.Metrics.COUNT], noise_kind=pipeline_dp.NoiseKind.GAUSSIAN,
        max_partitions_contributed=args.max_partitions, max_contributions_per_partition=1)
    extractors = pipeline_dp.DataExtractors(
        privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: (r[1], r[2]),
        value_extractor=lambda r: 0)
    result = engine.aggregate(rows, params, extractors, public_partitions=partitions)
    accountant.compute_budgets()
    released = [(int(k[0]), int(k[1]), float(m.count)) for k, m in result]
    seconds = time.perf_counter() - start
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"seconds": seconds, "rows": released, "pipeline_dp": "0.3.0"}, f)


if __name__ == "__main__":
    main()
