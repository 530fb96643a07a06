"""Issue 21 §2: no decision about column names or types depends on the rows.

CSV and JSON inputs are read without type inference (CSV: every column a
string, names from the header; JSON: exactly the columns the release needs,
as strings), and continual-distinct parses its time and op per row. Each test
runs a release on NEIGHBOURING inputs (one person or item added) whose added
row would have changed an inferred type, and checks that the outcome (runs or
refuses, the released items' type, the estimate up to that one person) is the
same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.helpers import run_cli


def _report(capsys, command: str, *argv) -> dict:
    code, out, err = run_cli(capsys, command, *argv, "--seed", "1", "--quiet")
    assert code == 0, err
    return json.loads(out)


def _items(report: dict) -> list:
    return [entry["item"] for entry in report["result"]["items"]]


def _csv(path: Path, header: str, rows) -> str:
    path.write_text(header + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return str(path)


def test_distinct_count_ids_as_written_on_neighbours(capsys, spark, tmp_path):
    """Items "7" and "007" are two items whatever the other rows hold; the
    old reader merged them (integers) unless one person's item was text."""
    rows = [(p, str(p)) for p in range(1, 101)] + [(p + 100, f"{p:03d}") for p in range(1, 101)]
    base = _csv(tmp_path / "d.csv", "person_id,item", rows)
    neighbour = _csv(tmp_path / "d2.csv", "person_id,item", rows + [(999, "x")])
    args = ("--epsilon", "50")
    a = _report(capsys, "distinct-count", "--input", base, *args)["result"]["estimate"]
    b = _report(capsys, "distinct-count", "--input", neighbour, *args)["result"]["estimate"]
    assert a > 150 and b > 150  # 200 distinct items, not 100
    assert abs(a - b) <= 5


def test_top_k_items_are_strings_on_neighbours(capsys, spark, tmp_path):
    rows = [(p, "7") for p in range(120)] + [(p + 200, "8") for p in range(80)]
    base = _csv(tmp_path / "t.csv", "person_id,item", rows)
    neighbour = _csv(tmp_path / "t2.csv", "person_id,item", rows + [(999, "x")])
    args = ("--k", "2", "--epsilon", "20", "--delta", "1e-6")
    a = _report(capsys, "top-k", "--input", base, *args)
    b = _report(capsys, "top-k", "--input", neighbour, *args)
    assert _items(a) == _items(b) == ["7", "8"]


def test_top_k_json_items_are_strings_on_neighbours(capsys, spark, tmp_path):
    """JSON numbers keep their text: item 7 and item "7" are one item, and
    one person's text item does not turn the others into numbers."""
    lines = [{"person_id": p, "item": 7} for p in range(120)] + [{"person_id": p + 200, "item": 8} for p in range(80)]
    base, neighbour = tmp_path / "t.json", tmp_path / "t2.json"
    base.write_text("".join(json.dumps(r) + "\n" for r in lines))
    neighbour.write_text(base.read_text() + json.dumps({"person_id": 999, "item": "x", "extra": 1}) + "\n")
    args = ("--k", "2", "--epsilon", "20", "--delta", "1e-6")
    a = _report(capsys, "top-k", "--input", str(base), *args)
    b = _report(capsys, "top-k", "--input", str(neighbour), *args)
    assert _items(a) == _items(b) == ["7", "8"]


def _events(path: Path, extra=()) -> str:
    rows = [(t, f"i{t % 7}", 1 if (t // 7) % 2 == 0 else -1) for t in range(1, 65)]
    return _csv(path, "time,item,op", rows + list(extra))


@pytest.mark.parametrize("extra", [("2.5", "new", "1"), ("3", "new", "+"), ("soon", "new", "1")],
                         ids=["time-2.5", "op-plus", "time-text"])
def test_continual_distinct_releases_on_neighbours(capsys, spark, tmp_path, extra):
    """One item's bad time or op drops that event; the release runs (64
    steps) on both neighbours instead of refusing on one of them."""
    args = ("--horizon", "64", "--rho", "1")
    a = _report(capsys, "continual-distinct", "--input", _events(tmp_path / "e.csv"), *args)
    b = _report(capsys, "continual-distinct", "--input", _events(tmp_path / "e2.csv", [extra]), *args)
    assert a["result"]["released_count"] == b["result"]["released_count"] == 64
    assert a["result"]["final_estimate"] == b["result"]["final_estimate"]  # the bad event is dropped


def test_continual_distinct_bad_value_fail_refuses_before_spending(capsys, spark, tmp_path):
    code, out, err = run_cli(capsys, "continual-distinct", "--input",
                             _events(tmp_path / "e.csv", [("2.5", "new", "1")]), "--horizon", "64",
                             "--bad-rows", "fail", "--seed", "1", "--quiet")
    assert code == 2
    assert "does not parse" in err and "2.5" not in err
    code, _, err = run_cli(capsys, "continual-distinct", "--input", _events(tmp_path / "ok.csv"),
                           "--horizon", "64", "--bad-rows", "fail", "--seed", "1", "--quiet")
    assert code == 0, err


def test_read_input_refuses_inference_and_unnamed_json(spark, tmp_path):
    from dp_spark.errors import InputError
    from dp_spark.io import read_input

    path = tmp_path / "e.json"
    path.write_text('{"person_id": 1, "item": 7, "other": 2.5}\n')
    with pytest.raises(InputError, match="never inferred"):
        read_input(spark, str(path))
    df = read_input(spark, str(path), columns=["person_id", "item"])
    assert df.columns == ["person_id", "item"]
    assert [f.dataType.simpleString() for f in df.schema] == ["string", "string"]
    assert df.collect()[0]["item"] == "7"
    with pytest.raises(InputError, match="type inference"):
        read_input(spark, str(path), infer_schema=True)


def test_undecodable_values_are_dropped_never_merged(spark, tmp_path):
    """Issue 22: Latin-1 café/cafè/cafê read as UTF-8 all became "caf\ufffd"
    (one item for three). A value that does not decode is a bad value: its
    row is dropped (--bad-rows drop); with the right --encoding all four read."""
    from dp_spark.io import read_input

    path = tmp_path / "latin1.csv"
    path.write_bytes("person_id,item\n1,café\n2,cafè\n3,cafê\n4,cafe\n".encode("latin-1"))
    rows = read_input(spark, str(path), bad_rows="drop").collect()
    assert [r["item"] for r in rows] == ["cafe"]
    rows = read_input(spark, str(path), bad_rows="drop", encoding="ISO-8859-1").collect()
    assert sorted(r["item"] for r in rows) == sorted(["café", "cafè", "cafê", "cafe"])


def test_glob_input_reads_every_match(capsys, spark, tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    _csv(folder / "a.csv", "person_id,item", [(p, f"i{p}") for p in range(100)])
    _csv(folder / "b.csv", "person_id,item", [(p + 100, f"j{p}") for p in range(100)])
    (folder / "notes.txt").write_text("not data\n")
    report = _report(capsys, "distinct-count", "--input", str(folder / "*.csv"), "--epsilon", "50")
    assert report["result"]["estimate"] > 150  # both files: 200 distinct items


@pytest.mark.parametrize("argv, fragment", [
    (["--input", "{t}/missing.csv"], "does not exist"),
    (["--input", "{t}/none-*.csv"], "matches no files"),
    (["--input", "{t}/e.csv", "--item-col", "item.name"], "holds a dot"),
])
def test_input_options_checked_before_spark_starts(capsys, monkeypatch, tmp_path, argv, fragment):
    """Issue 22: these were found only after the JVM started (~10 s)."""
    import dp_spark.session

    def no_spark(*args, **kwargs):
        raise AssertionError("Spark was started")

    monkeypatch.setattr(dp_spark.session, "get_session", no_spark)
    _csv(tmp_path / "e.csv", "person_id,item", [(1, "a")])
    code, out, err = run_cli(capsys, "distinct-count", *[a.replace("{t}", str(tmp_path)) for a in argv])
    assert code == 2 and fragment in err, err


def test_continual_distinct_iso_times_parse_with_an_iso_origin(capsys, spark, tmp_path):
    """An ISO --origin (a public parameter) makes a string time column parse
    as dates/times, per row; a value that is not one drops its event."""
    rows = [(f"2024-01-01T0{h}:30:00", f"i{h}", 1) for h in range(4)] + [("2024-01-01", "j", 1)]
    base = _csv(tmp_path / "e.csv", "time,item,op", rows)
    neighbour = _csv(tmp_path / "e2.csv", "time,item,op", rows + [("3", "k", 1)])
    args = ("--horizon", "4", "--rho", "1", "--origin", "2024-01-01T00:00:00", "--step-size", "3600")
    a = _report(capsys, "continual-distinct", "--input", base, *args)
    b = _report(capsys, "continual-distinct", "--input", neighbour, *args)
    assert a["result"]["released_count"] == b["result"]["released_count"] == 4
    assert a["result"]["final_estimate"] == b["result"]["final_estimate"]
