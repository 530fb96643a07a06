"""Marks on dp_spark's outputs: "not for publication" on a seeded run's, and "written by dp_spark" on all.

A ``seed`` makes the noise reproducible, so a seeded run's outputs are NOT private (tests and demos only).
The JSON report says so; every other artifact says so where its reader sees it:

- Spark-written folders (the items Parquet of set-union, top-k, count-release): every column carries the
  metadata ``{"dp_spark.not_for_publication": NOTICE}`` (``df.schema[col].metadata``; in the Parquet
  footer's ``org.apache.spark.sql.parquet.row.metadata``), and the folder holds a file
  ``_NOT_FOR_PUBLICATION`` (readers skip ``_`` files; a listing shows it);
- pandas tables written as Parquet or CSV (the continual series): a last column ``not_for_publication``
  (True on every row), and for Parquet also ``DataFrame.attrs``;
- JSON records (the streaming sink): a field ``not_for_publication`` with the notice;
- catalog tables (:func:`dp_spark.tables.write_table`): the last column ``not_for_publication`` (a catalog
  keeps no column metadata), and the notice as the table property ``dp_spark.not_for_publication`` and the
  table comment.

Unseeded runs are written unchanged. So that ``--overwrite`` replaces only what an earlier run wrote
(:mod:`dp_spark.commands.outputs`), every output also says that dp_spark wrote it: an output folder holds
``_DP_SPARK_OUTPUT`` (:func:`mark_output_folder`); a catalog table carries :data:`TABLE_PROPERTY`; an HTML
report carries :data:`HTML_MARKER`; a JSON report is recognised by its ``release``/``version`` keys and a
series file by its columns.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlparse

from dp_spark import __version__

__all__ = ["KEY", "COLUMN", "MARKER_FILE", "NOTICE", "OUTPUT_MARKER", "HTML_MARKER", "TABLE_PROPERTY", "mark_spark",
           "mark_folder", "mark_output_folder", "mark_pandas", "mark_record", "mark_table_frame", "table_properties",
           "table_not_ours"]

KEY = "dp_spark.not_for_publication"
COLUMN = "not_for_publication"
MARKER_FILE = "_NOT_FOR_PUBLICATION"
#: The file in every local output folder dp_spark writes: ``--overwrite`` may replace a folder holding it.
OUTPUT_MARKER = "_DP_SPARK_OUTPUT"
#: In the <head> of every HTML report: ``--overwrite`` may replace a file that holds it.
HTML_MARKER = '<meta name="generator" content="dp_spark">'
#: The table property of every catalog table dp_spark writes: ``--overwrite`` replaces only such tables.
TABLE_PROPERTY = "dp_spark.output"
NOTICE = ("NOT FOR PUBLICATION: written by a seeded dp_spark run (tests and demos only); "
          "its noise is reproducible, so these values are NOT differentially private.")


def mark_spark(df, seeded: bool):
    """``df`` with the notice in every column's metadata when ``seeded`` (a projection: no data read); else
    ``df``."""
    if not seeded:
        return df
    from pyspark.sql import functions as F

    return df.select([
        F.col(f"`{field.name}`").alias(field.name, metadata={**field.metadata, KEY: NOTICE})
        for field in df.schema.fields
    ])


def mark_folder(path: str | os.PathLike, seeded: bool) -> None:
    """Write ``_NOT_FOR_PUBLICATION`` into the local output folder ``path`` when ``seeded``."""
    if not seeded:
        return
    text = str(path)
    if urlparse(text).scheme not in ("", "file"):
        return  # remote stores: the column metadata carries the mark
    folder = Path(urlparse(text).path if text.startswith("file:") else text)
    if folder.is_dir():
        (folder / MARKER_FILE).write_text(NOTICE + "\n", encoding="utf-8")


def mark_output_folder(path: str | os.PathLike) -> None:
    """Write ``_DP_SPARK_OUTPUT`` (the mark that dp_spark wrote it) into the local output folder ``path``."""
    folder = Path(path)
    if folder.is_dir():
        (folder / OUTPUT_MARKER).write_text(
            f"written by dp_spark {__version__}; dp-spark --overwrite may replace this folder\n", encoding="utf-8")


def mark_pandas(frame, seeded: bool):
    """A copy of ``frame`` with a last column ``not_for_publication`` (True) and ``attrs[KEY]`` = the notice
    when ``seeded``; else ``frame``."""
    if not seeded:
        return frame
    marked = frame.copy()
    marked[COLUMN] = True
    marked.attrs[KEY] = NOTICE
    return marked


def mark_record(record: dict, seeded: bool) -> dict:
    """``record`` with the field ``not_for_publication`` = the notice when ``seeded``."""
    return {**record, COLUMN: NOTICE} if seeded else record


def mark_table_frame(df, seeded: bool):
    """``df`` to save as a catalog table: when ``seeded``, the notice in every column's metadata (kept in
    the data files' footers) and a last column ``not_for_publication`` unless present (a catalog's schema
    drops column metadata); else ``df``. A projection: no data read."""
    if not seeded:
        return df
    from pyspark.sql import functions as F

    if COLUMN not in df.columns:
        df = df.withColumn(COLUMN, F.lit(True))
    return mark_spark(df, True)


def table_properties(seeded: bool) -> dict[str, str]:
    """The table properties of a catalog table dp_spark writes: :data:`TABLE_PROPERTY`, and when ``seeded``
    the notice under :data:`KEY` and as the comment."""
    props = {TABLE_PROPERTY: f"written by dp_spark {__version__}; dp-spark --overwrite may replace this table"}
    if seeded:
        props[KEY] = NOTICE
        props["comment"] = NOTICE
    return props


def table_not_ours(spark, name: str) -> str | None:
    """None when the catalog table ``name`` (qualified, validated) does not exist or carries
    :data:`TABLE_PROPERTY`; otherwise what it is, in words (its kind, never its contents). Catalog metadata
    only."""
    if not spark.catalog.tableExists(name):
        return None
    kind = str(getattr(spark.catalog.getTable(name), "tableType", "") or "").upper()
    if kind in ("VIEW", "TEMPORARY"):
        return "a view" if kind == "VIEW" else "a temporary view"
    rows = spark.sql(f"SHOW TBLPROPERTIES {name}").collect()  # metadata: the table's properties
    if any(row[0] == TABLE_PROPERTY for row in rows):
        return None
    return f"a table ({kind.lower() or 'of unknown type'}) without the property {TABLE_PROPERTY!r}"


# What dp_spark wrote: ``--overwrite`` and ``Release.write(overwrite=True)`` replace nothing else.
_SERIES_COLUMNS = ("step", "estimate", "std", "error_bound", "flippancy_bound")


def not_ours(path: Path) -> str | None:
    """None when ``path`` is an empty folder or was written by dp_spark (its
    markers); otherwise what it is, in words (names shown, contents never)."""
    if path.is_symlink():
        return "a symbolic link"
    if path.is_dir():
        try:
            entries = sorted(os.listdir(path))
        except OSError as exc:
            return f"a folder that cannot be listed ({exc.strerror})"
        if not entries or OUTPUT_MARKER in entries:
            return None
        shown = ", ".join(repr(e[:60]) for e in entries[:3]) + (", ..." if len(entries) > 3 else "")
        return f"a folder holding {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} ({shown})"
    if not path.is_file():
        return "a special file (not a regular file or folder)"
    if _our_file(path):
        return None
    return f"a file of {path.stat().st_size:,} bytes"


def _our_file(path: Path) -> bool:
    """A JSON report, an HTML report or a series file written by dp_spark."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
        if HTML_MARKER.encode() in head:
            return True
        first = head.split(b"\n", 1)[0].strip().decode("utf-8", "replace").split(",")
        if tuple(c for c in first if c != COLUMN) == _SERIES_COLUMNS:
            return True
        if head.startswith(b"PAR1"):
            import pyarrow.parquet as pq

            return tuple(n for n in pq.read_schema(path).names if n != COLUMN) == _SERIES_COLUMNS
        if head.lstrip().startswith(b"{") and path.stat().st_size < 512 * 1024 * 1024:
            with open(path, encoding="utf-8") as fh:
                report = json.load(fh)
            return isinstance(report, dict) and isinstance(report.get("release"), str) and "version" in report
    except (OSError, ValueError, ImportError):
        return False
    except Exception:  # noqa: BLE001 - an unreadable Parquet file is not ours
        return False
    return False
