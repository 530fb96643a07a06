"""A ``--checkpoint`` folder holding another query's files (issue 42 §5) is
refused before anything is read or spent, naming the folder and the fix;
it was used without a word (a new mechanism state written beside another
Spark query's offsets). An empty or new folder and the folder this query
wrote (a resume) stay accepted; a dp_spark checkpoint of another
configuration is still refused as before."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dp_spark.accounting import ZCDP, PrivacyFilter
from dp_spark.cli import main
from dp_spark.errors import InputError, ParameterError
from dp_spark.ledger import open_ledger
from dp_spark.streaming import MechanismCheckpoint, StepSink, continual_distinct_stream
from tests.unit.helpers import assert_one_line_error

HORIZON = 2
FIX = ("Give an empty or new folder for a new stream, or the folder an earlier run of this query used, to resume. "
       "Nothing was read or spent.")


def _source(directory: Path) -> Path:
    directory.mkdir(parents=True)
    for step in (1, 2):
        path = directory / f"events-{step:04d}.json"
        path.write_text(json.dumps({"time": float(step), "item": f"x{step}", "op": 1}) + "\n")
        os.utime(path, (1_700_000_000 + step, 1_700_000_000 + step))
    return directory


def _listing(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob("*"))}


def _other_query_checkpoint(spark, tmp_path) -> Path:
    """The checkpoint of a Spark streaming query that is not dp_spark's:
    offsets/, commits/, sources/ and metadata at its top."""
    source = tmp_path / "other-input"
    source.mkdir()
    (source / "part-0.json").write_text('{"x": 1}\n')
    folder = tmp_path / "other-checkpoint"
    query = (spark.readStream.schema("x LONG").json(str(source)).writeStream.format("noop")
             .option("checkpointLocation", str(folder)).trigger(availableNow=True).start())
    query.awaitTermination()
    assert {"offsets", "commits", "metadata"} <= {p.name for p in folder.iterdir()}
    return folder


def test_cli_refuses_another_spark_querys_checkpoint_before_charging(capsys, spark, tmp_path):
    foreign = _other_query_checkpoint(spark, tmp_path)
    before = _listing(foreign)
    ledger = tmp_path / "budgets.db"
    with open_ledger(ledger, create=True) as led:
        led.create_budget("team", ZCDP(1.0))
    code = main(["continual-distinct", "--stream", "--input", str(_source(tmp_path / "in")), "--horizon",
                 str(HORIZON), "--rho", "0.5", "--checkpoint", str(foreign), "--sink", str(tmp_path / "out"),
                 "--ledger", str(ledger), "--ledger-budget", "team", "--output", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert code == 2, err  # before: exit 0, mechanism.json and spark/ written beside the other query's offsets
    assert_one_line_error(err, f"the checkpoint folder {str(foreign)!r} holds another streaming query's Spark "
                               "checkpoint (commits/, metadata, offsets/, sources/)")
    assert err.strip().endswith(FIX), err
    assert _listing(foreign) == before
    assert not (tmp_path / "out").exists() and not (tmp_path / "r.json").exists()
    with open_ledger(ledger, read_only=True) as led:
        assert led.state("team").charges == 0


@pytest.mark.parametrize("files", [["notes.txt"], ["data/part-0.parquet", "report.json", "a", "b", "c"]])
def test_a_new_stream_refuses_a_folder_of_other_files(spark, tmp_path, files):
    folder = tmp_path / "ckpt"
    for name in files:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("not ours\n")
    (folder / ".DS_Store").write_text("")  # hidden names are not looked at
    before = _listing(folder)
    budget = PrivacyFilter(ZCDP(1.0))
    with pytest.raises(InputError) as refused:
        continual_distinct_stream(spark, str(_source(tmp_path / "in")), checkpoint=str(folder),
                                  sink=str(tmp_path / "out"), rho=0.5, horizon=HORIZON, budget=budget)
    message = str(refused.value)
    assert message.startswith(f"the checkpoint folder {str(folder)!r} holds files that are not a "
                              "continual-distinct checkpoint's (") and message.endswith(FIX), message
    assert ("(notes.txt)" in message if len(files) == 1 else "(a, b, c, data/ and 1 more)" in message), message
    assert budget.spent.rho == 0 and _listing(folder) == before and not (tmp_path / "out").exists()


def test_this_querys_folder_resumes_and_another_querys_files_in_it_are_refused(spark, tmp_path):
    """Empty folder: accepted (a new stream), with its source inside it and
    the sink the folder itself; the folder it wrote: resumed, also with a
    file of the user's beside the state; another configuration: refused as
    before; another query's Spark checkpoint files at its top: refused."""
    folder = tmp_path / "ckpt"
    folder.mkdir()
    source = _source(folder / "events")
    budget = PrivacyFilter(ZCDP(1.0))
    run = dict(checkpoint=str(folder), sink=str(folder), rho=0.5, horizon=HORIZON, seed=3, state_partitions=1)
    first = continual_distinct_stream(spark, str(source), budget=budget, **run)
    assert first.released_count == HORIZON and first.parameters["resumed"] is False
    assert [r["step"] for r in StepSink(folder).read()] == [1, 2]
    (folder / "my-notes.txt").write_text("the user's own file, beside this query's state\n")
    again = continual_distinct_stream(spark, str(source), budget=budget, **run)
    assert again.parameters["resumed"] is True and budget.spent.rho == 0.5  # spent once
    with pytest.raises(ParameterError, match="the checkpoint was created with"):
        continual_distinct_stream(spark, str(source), **{**run, "rho": 0.25})
    (folder / "commits").mkdir()  # another query's Spark checkpoint, given the same folder
    state = MechanismCheckpoint(folder).path.read_bytes()
    with pytest.raises(InputError, match=r"holds another streaming query's Spark checkpoint \(commits/\)"):
        continual_distinct_stream(spark, str(source), budget=budget, **run)
    assert MechanismCheckpoint(folder).path.read_bytes() == state and budget.spent.rho == 0.5
