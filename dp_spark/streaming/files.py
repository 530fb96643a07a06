"""The source files of one micro-batch, and the check that each has the stream's columns.

Every file is read with the schema fixed at checkpoint creation, so a file
with other column names would read as rows of nulls. Before a step is
released, :func:`missing_column` reads each file's own column names; a file
with rows but without a required column fails the step with a one-line
InputError (not committed). JSON-lines files are not checked: a missing key
is a bad value (the event dropped), since whether a step fails must not
depend on one item's events.

The files come from Spark's file-source log in the checkpoint
(``sources/0/<batch id>`` or ``<n>.compact``: JSON lines after a version line).
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
    column, or None. Reads schemas only (no data value used or reported); JSON
    lines are never checked (module docstring)."""
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
