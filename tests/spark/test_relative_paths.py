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
    """``data[1].csv`` (issue 42 §5) is that file, not the pattern Spark would read (``data1.csv``), whether
    named relatively, absolutely or as a file: URI; a pattern that names no file stays a pattern."""
    (elsewhere / "data[1].csv").write_text("person_id,item\n1,a\n")
    (elsewhere / "data1.csv").write_text("person_id,item\n9,z\n")  # what the pattern would read
    for name in ("data[1].csv", str(elsewhere / "data[1].csv"), f"file://{elsewhere}/data[1].csv"):
        assert [tuple(r) for r in read_input(spark, name).collect()] == [("1", "a")], name
    assert sorted(tuple(r) for r in read_input(spark, "data[0-9].csv").collect()) == [("9", "z")]
