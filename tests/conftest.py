"""Shared fixtures: one local[2] SparkSession per test run, data locations."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("DP_SPARK_SHARED_DATA", REPO.parent / "shared" / "data"))
AMAZON = SHARED_DATA / "amazon-fashion-5core" / "AMAZON_FASHION_5.json.gz"
MOVIELENS = SHARED_DATA / "movielens-100k"

TEST_CONF = {
    "spark.driver.memory": "2g",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


@pytest.fixture(scope="session")
def spark():
    from dp_spark.session import get_session

    session = get_session(master="local[2]", conf=TEST_CONF, log_level="ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def report_schema() -> dict:
    """The JSON Schema of release reports shipped in the package."""
    from dp_spark.report import report_schema as load

    return load()


@pytest.fixture(scope="session")
def amazon_path() -> Path:
    if not AMAZON.is_file():
        pytest.fail(f"shared data set missing: {AMAZON} (../shared must sit beside the checkout)")
    return AMAZON


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
