"""``Release.write(name, path, format, overwrite)``: an artifact (a Spark
DataFrame too large for the report) written atomically, in each format, and
marked "not for publication" when the release was seeded. The release here
is built from the distinct-count plan with a made-up artifact table; the
releases' own artifacts are tested with each release."""

from __future__ import annotations

import pytest

from dp_spark.errors import InputError
from dp_spark.marking import KEY, MARKER_FILE
from dp_spark.plans.distinct_count import plan as distinct_count_plan
from dp_spark.report import Release


def _release(frame, seeded: bool) -> Release:
    plan = distinct_count_plan(epsilon=1.0)
    return Release.from_plan(plan, values={"method": "greedy"}, errors={}, statement="s", seeded=seeded,
                             budget_split=plan.budget_split(), artifacts={"items": frame})


@pytest.fixture(scope="module")
def items(spark):
    return spark.createDataFrame([(1, "a"), (2, "b"), (3, "c")], "rank int, item string")


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_write_each_format_and_read_it_back(spark, items, tmp_path, fmt):
    path = tmp_path / f"items.{fmt}"
    _release(items, seeded=False).write("items", str(path), format=fmt)
    reader = spark.read.option("header", "true") if fmt == "csv" else spark.read
    back = getattr(reader, fmt)(str(path))
    assert sorted((int(r["rank"]), r["item"]) for r in back.collect()) == [(1, "a"), (2, "b"), (3, "c")]
    assert not (path / MARKER_FILE).exists()
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary left beside it


def test_a_seeded_artifact_is_marked_and_overwrite_is_explicit(spark, items, tmp_path):
    path = tmp_path / "items.parquet"
    release = _release(items, seeded=True)
    release.write("items", str(path))
    assert (path / MARKER_FILE).is_file()
    assert all(KEY in field.metadata for field in spark.read.parquet(str(path)).schema.fields)
    with pytest.raises(InputError, match="already exists"):
        release.write("items", str(path))
    _release(items.limit(1), seeded=False).write("items", str(path), overwrite=True)
    replaced = spark.read.parquet(str(path))
    assert replaced.count() == 1 and not (path / MARKER_FILE).exists()


def test_overwrite_never_replaces_a_folder_dp_spark_did_not_write(items, tmp_path):
    mine = tmp_path / "photos"
    mine.mkdir()
    (mine / "holiday.jpg").write_bytes(b"jpeg")
    with pytest.raises(InputError, match="already exists and is a folder holding 1 entry"):
        _release(items, seeded=False).write("items", str(mine), overwrite=True)
    assert (mine / "holiday.jpg").read_bytes() == b"jpeg"
