"""The source files of one micro-batch, and the check that each has the stream's columns.

The streaming query reads every file with one schema, fixed when its
checkpoint was created. A later file written with other column names (a
renamed field, another export) would then read as rows of nulls — dropped
as bad events — and its step would be released as a step without events.
``missing_column`` catches that: before a step is released, each file of
the micro-batch is read for its own column names (a schema read: a Parquet
footer, a CSV header) and a file that holds rows but lacks a required column
fails the step with a one-line InputError (the batch is not committed: fix
or move the file and restart). An empty file (no rows, no columns) is a step
without events, as the step grid needs. JSON-lines files are not checked:
their keys belong to the rows, so a missing key is a bad value (null, the
event dropped), never a failed step — whether a step fails must not depend
on one item's events.

Which files a micro-batch read is taken from Spark's file-source log in the
checkpoint (``<checkpoint>/spark/sources/0/<batch id>``, or the compacted
``<n>.compact`` file holding the entries of every batch up to n): JSON lines
``{"path": ..., "batchId": ...}`` after a version line.
"""

from __future__ import annotations

import json
from pathlib import Path

SOURCE_LOG = Path("sources") / "0"


def batch_files(spark_checkpoint: Path, batch_id: int) -> list[str]:
    """The paths (URIs) of the source files micro-batch ``batch_id`` read; []
    for a batch without new files (a no-data batch of the interval grid)."""
    log_dir = Path(spark_checkpoint) / SOURCE_LOG
    for name in (str(int(batch_id)), f"{int(batch_id)}.compact"):
        path = log_dir / name
        if not path.is_file():
            continue
        entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]
        return [entry["path"] for entry in entries if int(entry.get("batchId", -1)) == int(batch_id)]
    return []


def missing_column(spark, files: list[str], fmt: str, required: list[str]) -> tuple[str, str] | None:
    """The first (file, column) where a file with columns lacks a required
    column, or None. Reads each file's schema only (public: no value of the
    data is used or reported): a Parquet footer, a CSV header. JSON lines are
    never checked: their keys are part of the rows (a row without a key is a
    bad value, null and dropped per event), so a file holding only one
    item's rows must not decide whether the step fails (issue 21 §3)."""
    if fmt == "json":
        return None
    for path in files:
        reader = spark.read.format(fmt)
        if fmt == "csv":
            reader = reader.option("header", "true")
        try:
            columns = reader.load(path).columns
        except Exception:  # noqa: BLE001 - an empty JSON/CSV file has no schema to infer
            columns = []
        if not columns:
            continue
        for name in required:
            if name not in columns:
                return path, name
    return None
