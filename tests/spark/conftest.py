"""Spark tier (marker ``spark``): releases, stages and the CLI on the shared
local[2] session (the ``spark`` fixture of tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def unreadable_events(spark, tmp_path):
    """A (person_id, item) DataFrame whose files are gone: any attempt to read
    its data fails, so a release given it proves it refused before reading."""
    import shutil

    path = tmp_path / "events.parquet"
    spark.createDataFrame([(1, "a")], "person_id long, item string").write.parquet(str(path))
    df = spark.read.parquet(str(path))
    shutil.rmtree(path)
    return df
