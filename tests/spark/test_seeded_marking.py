"""A seeded run's artifacts all say "not for publication" (finding 6), where
a reader of the file sees it: Spark-written items Parquet (column metadata,
read back by Spark and by pyarrow, and a _NOT_FOR_PUBLICATION file), the
continual series (a not_for_publication column in Parquet and CSV, pandas
attrs in Parquet) and every streaming sink record. Unseeded runs carry no
mark."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest

from dp_spark.cli import main
from dp_spark.marking import COLUMN, KEY, MARKER_FILE, NOTICE


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def assert_marked_items(spark, folder, marked=True):
    df = spark.read.parquet(str(folder))
    assert all((KEY in f.metadata) == marked for f in df.schema.fields), df.schema
    assert (folder / MARKER_FILE).is_file() == marked
    if marked:
        assert "NOT FOR PUBLICATION" in (folder / MARKER_FILE).read_text()
    footer = pq.read_schema(next(folder.glob("*.parquet"))).metadata or {}
    assert (KEY.encode() in b"".join(footer.values())) == marked  # pyarrow sees it in the footer
    return df


ITEM_RUNS = {
    "set-union": ["set-union", "--rows", "20000", "--max-items", "20", "--epsilon", "2",
                  "--delta", "1e-5", "--method", "policy-laplace"],
    "top-k": ["top-k", "--rows", "20000", "--k", "3", "--epsilon", "2", "--delta", "1e-6"],
    "count-release": ["count-release", "--rows", "20000", "--kbar", "50", "--rho", "1", "--delta", "1e-6"],
}


@pytest.mark.parametrize("release", sorted(ITEM_RUNS))
def test_items_parquet_is_marked_when_seeded(capsys, tmp_path, spark, release):
    items = tmp_path / "items.parquet"
    run(capsys, *ITEM_RUNS[release], "--seed", "1", "--items-output", str(items),
        "--output", str(tmp_path / "r.json"))
    assert json.loads((tmp_path / "r.json").read_text())["seeded"] is True
    df = assert_marked_items(spark, items)
    assert COLUMN not in df.columns  # the table's columns are unchanged


def test_items_parquet_is_not_marked_without_seed(capsys, tmp_path, spark):
    items = tmp_path / "items.parquet"
    run(capsys, *ITEM_RUNS["count-release"], "--items-output", str(items), "--output", str(tmp_path / "r.json"))
    assert_marked_items(spark, items, marked=False)


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
def test_continual_series_is_marked_when_seeded(capsys, tmp_path, spark, suffix):
    series = tmp_path / f"series.{suffix}"
    run(capsys, "continual-distinct", "--rows", "3000", "--horizon", "16", "--mechanism", "baseline",
        "--series", str(series), "--seed", "3", "--output", str(tmp_path / "r.json"))
    frame = pd.read_csv(series) if suffix == "csv" else pd.read_parquet(series)
    assert frame[COLUMN].tolist() == [True] * 16 and frame.step.tolist() == list(range(1, 17))
    if suffix == "parquet":
        assert frame.attrs.get(KEY) == NOTICE
        assert spark.read.parquet(str(series)).select(COLUMN).distinct().collect()[0][0] is True
    unseeded = tmp_path / f"plain.{suffix}"
    run(capsys, "continual-distinct", "--rows", "3000", "--horizon", "16", "--mechanism", "baseline",
        "--series", str(unseeded), "--output", str(tmp_path / "r2.json"))
    plain = pd.read_csv(unseeded) if suffix == "csv" else pd.read_parquet(unseeded)
    assert COLUMN not in plain and KEY not in plain.attrs


def test_streaming_sink_records_are_marked_when_seeded(capsys, tmp_path, spark):
    run(capsys, "continual-distinct", "--stream", "--horizon", "2", "--demo-flippancy", "2",
        "--checkpoint", str(tmp_path / "ckpt"), "--sink", str(tmp_path / "steps"),
        "--series", str(tmp_path / "series.csv"), "--state-partitions", "1", "--seed", "5",
        "--output", str(tmp_path / "r.json"))
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "steps").glob("step-*.json"))]
    assert len(records) == 2 and all(r[COLUMN] == NOTICE for r in records)
    assert pd.read_csv(tmp_path / "series.csv")[COLUMN].tolist() == [True, True]


def test_sink_marks_every_record_and_stays_idempotent(tmp_path):
    from dp_spark.streaming.checkpoint import StepSink

    sink = StepSink(tmp_path / "s", seeded=True)
    record = {"step": 1, "estimate": 2.0, "std": 1.0, "error_bound": None, "flippancy_bound": None}
    sink.write(record)
    sink.write(record)  # the same record again: a no-op, not a conflict
    assert sink.read()[0][COLUMN] == NOTICE
    plain = StepSink(tmp_path / "p")
    plain.write(record)
    assert COLUMN not in plain.read()[0]
