"""A relative local path names the file Python sees, whatever folder the JVM
started in (issue 42 §1: after ``os.chdir`` or a notebook's ``%cd`` the
checks and Spark's read named different files): the input, a glob input and
the public keys file are read from the process's current folder."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from dp_spark import cli
from dp_spark.errors import InputError
from dp_spark.io import read_input


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A folder that is not the JVM's working folder, made the process's current folder."""
    rows = [(p, f"i{(p * 3 + j) % 7}", ["x", "y"][p % 2]) for p in range(60) for j in range(1 + p % 3)]
    pd.DataFrame(rows, columns=["person_id", "item", "country"]).to_csv(tmp_path / "events.csv", index=False)
    (tmp_path / "keys.csv").write_text("country\nx\ny\n")
    assert os.getcwd() != str(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_relative_input_is_read_from_the_current_folder(spark, elsewhere):
    assert read_input(spark, "events.csv").count() == sum(1 + p % 3 for p in range(60))
    assert read_input(spark, "event?.csv").count() == sum(1 + p % 3 for p in range(60))


def test_the_cli_reads_relative_input_and_keys_from_the_current_folder(spark, elsewhere, capsys):
    code = cli.main(["distinct-count", "--input", "events.csv", "--group-by", "country", "--groups", "keys.csv",
                     "--max-groups", "1", "--epsilon", "1", "--seed", "3", "--output", "r.json", "--quiet"])
    assert code == 0, capsys.readouterr().err
    report = json.loads((elsewhere / "r.json").read_text())
    assert report["result"]["groups_released"] == 2


def test_a_file_named_like_a_glob_is_read_as_that_file(spark, elsewhere):
    """``data[1].json`` / ``.parquet`` (issue 42 §5) is that file, not the pattern Spark would read
    (``data1.json``), named relatively, absolutely or as a file: URI; a pattern that names no file stays a
    pattern. A CSV file of such a name is refused: Spark's multi-line CSV reader lists the pattern again."""
    pd.DataFrame({"person_id": ["1"], "item": ["a"]}).to_parquet(elsewhere / "data[1].parquet", index=False)
    pd.DataFrame({"person_id": ["9"], "item": ["z"]}).to_parquet(elsewhere / "data1.parquet", index=False)
    (elsewhere / "data[1].json").write_text('{"person_id": "1", "item": "a"}\n')
    (elsewhere / "data1.json").write_text('{"person_id": "9", "item": "z"}\n')
    for ext in ("parquet", "json"):
        for name in (f"data[1].{ext}", str(elsewhere / f"data[1].{ext}"), f"file://{elsewhere}/data[1].{ext}"):
            rows = read_input(spark, name, columns=["person_id", "item"]).collect()
            assert [tuple(r) for r in rows] == [("1", "a")], name
        rows = read_input(spark, f"data[0-9].{ext}", columns=["person_id", "item"]).collect()
        assert [tuple(r) for r in rows] == [("9", "z")]
    (elsewhere / "data[1].csv").write_text("person_id,item\n1,a\n")
    with pytest.raises(InputError, match="is a CSV file whose name holds glob characters"):
        read_input(spark, "data[1].csv")


def test_the_cli_reads_files_named_like_globs(spark, elsewhere, capsys):
    """The CLI refused data[1].json before Spark (Spark read the pattern); it reads the file and its keys."""
    events = pd.read_csv(elsewhere / "events.csv", dtype=str)
    events.to_json(elsewhere / "data[1].json", orient="records", lines=True)
    (elsewhere / "data1.json").write_text('{"person_id": "9", "item": "z", "country": "q"}\n')  # the pattern's
    (elsewhere / "keys[1].json").write_text('{"country": "x"}\n{"country": "y"}\n')
    code = cli.main(["distinct-count", "--input", "data[1].json", "--group-by", "country", "--groups",
                     "keys[1].json", "--max-groups", "1", "--epsilon", "1", "--seed", "3", "--output", "g.json",
                     "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert [g["group"] for g in json.loads((elsewhere / "g.json").read_text())["result"]["groups"]] == ["x", "y"]


def test_a_relative_stream_source_and_checkpoint_are_python_s(spark, elsewhere, capsys):
    """A streamed continual-distinct with relative --input, --checkpoint and --sink reads and keeps its state in
    the process's current folder, not the JVM's."""
    (elsewhere / "in").mkdir()
    pd.DataFrame({"time": [1, 2, 3, 4], "item": ["a", "b", "a", "c"], "op": [1, 1, -1, 1]}).to_parquet(
        elsewhere / "in" / "events-0.parquet", index=False)
    code = cli.main(["continual-distinct", "--stream", "--input", "in", "--format", "parquet", "--horizon", "8",
                     "--rho", "1", "--seed", "1", "--checkpoint", "ck", "--sink", "sink", "--trigger",
                     "available-now", "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert (elsewhere / "ck" / "spark").is_dir() and any((elsewhere / "sink").iterdir())
