"""Demo input for the streaming mode: one JSON-lines file of events per step.

The built-in synthetic stream (``dp_spark.continual_data.synthetic_stream``)
as files ``events-000001.json`` … (empty for a step without events), written
atomically with increasing modification times, so a file source with
``maxFilesPerTrigger=1`` sees them in step order. Demo data only.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from dp_spark.continual_data import synthetic_stream
from dp_spark.errors import ParameterError


def write_demo_files(
    spark,
    directory: str | os.PathLike,
    horizon: int,
    *,
    first_step: int = 1,
    last_step: int | None = None,
    items: int = 2_000,
    max_flippancy: int = 8,
    seed: int = 7,
) -> list[Path]:
    """Write the demo stream's files for steps first_step..last_step (default: to the horizon).
    The same ``horizon``, ``items``, ``max_flippancy`` and ``seed`` give the same
    events, so a later call can add later steps' files."""
    last_step = horizon if last_step is None else last_step
    if not 1 <= first_step <= last_step <= horizon:
        raise ParameterError("need 1 <= first_step <= last_step <= horizon for the demo files.")
    events = synthetic_stream(spark, items=items, horizon=horizon, max_flippancy=max_flippancy, seed=seed)
    pdf = events.where((events.time >= first_step) & (events.time <= last_step)).toPandas()
    by_step = {int(step): group for step, group in pdf.groupby("time")}
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    start = time.time()
    written = []
    for index, step in enumerate(range(first_step, last_step + 1)):
        path = target / f"events-{step:06d}.json"
        tmp = target / f".{path.name}.tmp"
        group = by_step.get(step)
        with open(tmp, "w", encoding="utf-8") as fh:
            if group is not None:
                for row in group.itertuples(index=False):
                    fh.write(json.dumps({"time": int(row.time), "item": str(row.item), "op": int(row.op)}) + "\n")
        os.replace(tmp, path)
        stamp = start + 0.01 * index
        os.utime(path, (stamp, stamp))
        written.append(path)
    return written
