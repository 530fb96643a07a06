"""Refusals decided by the input's column names (its schema, no row read),
before anything is charged (issue 42 §5): one line naming the option whose
column is missing. The refusals decided by the command line alone, before
Spark starts, are in tests/unit/test_cli_messages.py."""

from __future__ import annotations

import pytest

from dp_spark import cli
from tests.unit.helpers import assert_one_line_error


@pytest.fixture
def events(tmp_path):
    path = tmp_path / "events.csv"
    path.write_text("person_id,item,country\n1,a,x\n2,b,y\n")
    keys = tmp_path / "keys.csv"
    keys.write_text("country\nx\ny\n")
    return path, keys


def test_a_missing_group_by_column_names_group_by(spark, capsys, events, tmp_path):
    data, keys = events
    report = tmp_path / "r.json"
    code = cli.main(["count-release", "--input", str(data), "--rho", "0.5", "--delta", "1e-6", "--kbar", "60",
                     "--group-by", "region", "--groups", str(keys), "--max-groups", "2", "--output", str(report)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert_one_line_error(err, "column 'region' is not in the input (named by --group-by); available columns: "
                               "person_id, item, country. Give --group-by one of them.")
    assert "--person-col" not in err and not report.exists()


def test_a_missing_item_column_names_item_col(spark, capsys, events):
    data, _ = events
    code = cli.main(["distinct-count", "--input", str(data), "--epsilon", "1", "--item-col", "product"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert_one_line_error(err, "column 'product' is not in the input (named by --item-col)")
    assert "--group-by" not in err
