"""Issue 42 §4 (G26, G35): CSV is read and written as RFC 4180, the CSV that
Python's csv module, pandas and Excel write and read.

Read (the --input table, a --groups keys file, a --domain file): a quoted
field holding a line break is one value of one record (Spark's default
split the record and counted its first half under a key in no data), and a
doubled quote inside a quoted field is one quote (the field say ""hi"" in quotes kept its
quotes); the --quote character the user sets is the escape too. Written
(--groups-output, any Spark-written CSV): a quote inside a value is
doubled, not backslash-escaped, so Python's csv module and pandas read back
exactly the values written; a seeded run's CSV carries the last column
``not_for_publication`` (True), as the pandas CSVs do (G35)."""

from __future__ import annotations

import csv

import pandas as pd
import pytest

from dp_spark import cli
from dp_spark.io import read_input, write_dataframe_atomic
from dp_spark.marking import COLUMN
from dp_spark.releases.groups import resolve_keys
from dp_spark.stages.item_counts import read_domain

#: Values RFC 4180 quotes: a line break (an in-cell break, as Excel writes it), doubled quotes, the
#: separator, a backslash before a quote (an ordinary character in RFC 4180), a lone quote, spaces
#: kept, non-ASCII text.
TRICKY = ["a\nb", "say \"hi\"", "c,d", "C:\\dir\\", "\\\"q", "\"", "  sp  ", "café, 東京", "plain"]
#: Written and read back exactly too: a CRLF inside a value.
WRITTEN = [*TRICKY, "line1\r\nline2"]


def _write_with_csv_module(path, header, rows, **dialect) -> list[list[str]]:
    """Write ``rows`` with Python's csv module (CRLF records, as Excel) and return
    what the csv module reads back from the file: the reference reading."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh, **dialect).writerows([header, *rows])
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh, **dialect))


def _part(folder) -> str:
    """The one CSV part file of a Spark-written folder."""
    parts = [p for p in folder.iterdir() if p.name.endswith(".csv")]
    assert len(parts) == 1
    return str(parts[0])


def test_the_input_reads_as_pythons_csv_module_reads_it(spark, tmp_path):
    path = tmp_path / "events.csv"
    rows = [[f"p{i}", value, str(i)] for i, value in enumerate(TRICKY)]
    expected = _write_with_csv_module(path, ["person_id", "item", "n"], rows)
    assert len(expected) == len(TRICKY) + 1  # the reference reads one record per row written
    df = read_input(spark, str(path))
    assert df.columns == expected[0]
    got = sorted(tuple(r) for r in df.collect())
    assert got == sorted(tuple(r) for r in expected[1:])
    # the item with the line break is one value, and no half of it is a value of its own
    items = {r["item"] for r in df.collect()}
    assert "a\nb" in items and "a" not in items and "b" not in items
    assert "say \"hi\"" in items


def test_a_crlf_inside_a_value_of_a_crlf_file_is_one_value_read_with_lf(spark, tmp_path):
    """Spark's parser (univocity) normalises a line break inside quotes to LF when the file's records
    end in CRLF (Spark sets no option for it; a CRLF inside a value of an LF file is kept): the record
    is still one record, never split, and its value differs from the file's by that one character."""
    path = tmp_path / "crlf.csv"
    _write_with_csv_module(path, ["person_id", "item"], [["p1", "line1\r\nline2"], ["p2", "x"]])
    assert sorted(tuple(r) for r in read_input(spark, str(path)).collect()) == [("p1", "line1\nline2"), ("p2", "x")]
    lf = tmp_path / "lf.csv"
    _write_with_csv_module(lf, ["person_id", "item"], [["p1", "line1\r\nline2"], ["p2", "x"]], lineterminator="\n")
    assert sorted(tuple(r) for r in read_input(spark, str(lf)).collect()) == [("p1", "line1\r\nline2"), ("p2", "x")]


def test_a_quote_the_user_sets_is_its_own_escape(spark, tmp_path):
    path = tmp_path / "single.csv"
    rows = [["p1", "it's, here"], ["p2", "two\nlines"], ["p3", "say \"hi\""]]
    expected = _write_with_csv_module(path, ["person_id", "item"], rows, quotechar="'")
    assert "''" in path.read_text(encoding="utf-8")  # the file really doubles the quote it set
    df = read_input(spark, str(path), quote="'")
    assert sorted(tuple(r) for r in df.collect()) == sorted(tuple(r) for r in expected[1:])


def test_a_keys_file_and_a_domain_file_read_as_pythons_csv_module_reads_them(spark, tmp_path):
    path = tmp_path / "keys.csv"
    expected = _write_with_csv_module(path, ["country"], [[v] for v in TRICKY])
    assert sorted(resolve_keys(spark, str(path), "country", 1024).to_pylist()) == sorted(r[0] for r in expected[1:])
    assert sorted(read_domain(spark, str(path), "country")) == sorted(r[0] for r in expected[1:])


def test_written_csv_reads_back_exactly(spark, tmp_path):
    values = [(v, f"x{i}") for i, v in enumerate(WRITTEN)]
    out = tmp_path / "out.csv"
    write_dataframe_atomic(spark.createDataFrame(values, "key string, other string").coalesce(1), str(out), "csv")
    text = open(_part(out), encoding="utf-8", newline="").read()
    assert '"say ""hi"""' in text and '"a\nb"' in text  # quotes doubled, not backslash-escaped; the break quoted
    with open(_part(out), newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["key", "other"] and sorted(map(tuple, rows[1:])) == sorted(values)
    frame = pd.read_csv(_part(out), dtype=str, keep_default_na=False)
    assert sorted(frame.itertuples(index=False, name=None)) == sorted(values)
    assert COLUMN not in frame.columns  # unseeded: no mark
    assert sorted(tuple(r) for r in read_input(spark, str(out)).collect()) == sorted(values)


def test_a_seeded_csv_carries_the_not_for_publication_column(spark, tmp_path):
    out = tmp_path / "seeded.csv"
    write_dataframe_atomic(spark.createDataFrame([("a",), ("b",)], "key string").coalesce(1), str(out), "csv",
                           seeded=True)
    frame = pd.read_csv(_part(out), dtype=str, keep_default_na=False)
    assert list(frame.columns) == ["key", COLUMN] and frame[COLUMN].tolist() == ["true", "true"]


@pytest.fixture(scope="module")
def tricky_groups(tmp_path_factory):
    """A Parquet input whose group column holds the tricky values, and a keys CSV (Python's csv module) of them."""
    root = tmp_path_factory.mktemp("rfc4180")
    rows = [(f"p{p}", f"i{p % 3}", TRICKY[p % len(TRICKY)]) for p in range(400)]
    data = root / "t.parquet"
    pd.DataFrame(rows, columns=["person_id", "item", "country"]).to_parquet(data, index=False)
    keys = root / "keys.csv"
    _write_with_csv_module(keys, ["country"], [[v] for v in TRICKY])
    return data, keys


def test_a_seeded_grouped_run_writes_rfc4180_groups_output_marked(spark, tricky_groups, tmp_path):
    data, keys = tricky_groups
    out, report = tmp_path / "groups.csv", tmp_path / "r.json"
    assert cli.main(["distinct-count", "--input", str(data), "--epsilon", "1", "--group-by", "country",
                     "--groups", str(keys), "--max-groups", "1", "--groups-output", str(out), "--output",
                     str(report), "--seed", "1", "--quiet"]) == 0
    with open(_part(out), newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert sorted(r["country"] for r in rows) == sorted(TRICKY)  # every key once, none split or escaped
    assert rows and all(r[COLUMN] == "true" for r in rows)
    frame = pd.read_csv(_part(out), dtype=str, keep_default_na=False)
    assert sorted(frame["country"]) == sorted(TRICKY) and list(frame.columns)[-1] == COLUMN
