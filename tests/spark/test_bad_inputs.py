"""Fault and input tier: bad inputs to the five ``dp-spark`` releases.

Every case runs ``dp_spark.cli.main`` in process on the shared session and
asserts: the exit code; exactly one error line naming the problem (no stack
trace, no data values); that no file under the case's folder or the data
folder changed (outputs, inputs); and that the ledger the run was pointed at
recorded no charge. A few cases test the process itself (a subprocess)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dp_spark.accounting import ZCDP, ApproxDP, PureDP
from dp_spark.cli import main
from dp_spark.ledger import open_ledger
from dp_spark.releases import RELEASES

PROGRESS = ("dp-spark: reading ", "dp-spark: no --input")
ZCDP_RELEASES = ("count-release", "continual-distinct")


@pytest.fixture(scope="module")
def data(spark, tmp_path_factory) -> Path:
    """Input files, good and bad, shared by every case (never modified)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path_factory.mktemp("bad_inputs_data")
    events = spark.createDataFrame([(p, f"i{p % 5}") for p in range(30)], "person_id long, item string")
    events.coalesce(1).write.parquet(str(root / "events.parquet"))
    events.coalesce(1).write.option("header", "true").csv(str(root / "events.csv"))
    spark.createDataFrame([(t, f"x{t % 3}", 1) for t in range(1, 9)], "time long, item string, op int") \
        .coalesce(1).write.parquet(str(root / "stream_events.parquet"))
    (root / "ragged.csv").write_text("person_id,item\n1,a\n2,b,EXTRA\n3\n4,d\n")
    (root / "tab.tsv").write_text("user\titem\n1\tCafé\n2\t東京\n")
    (root / "tab_named.csv").write_text("user\titem\n1\tCafé\n2\t東京\n")
    (root / "garbage.csv").write_bytes(bytes(range(256)) * 8)
    (root / "data.xyz").write_text("x")
    (root / "domain.txt").write_text("i0\ni1\ni2\n")
    table = pa.table({"person_id": [1, 2], "item": ["a", "b"],
                      "ts": pa.array(np.array(["2024-01-01", "2024-01-02"], dtype="datetime64[ns]"))})
    pq.write_table(table, root / "nanos.parquet")
    good = root / "good.parquet"
    pq.write_table(table.drop(["ts"]), good)
    (root / "truncated.parquet").write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    (root / "mixed").mkdir()
    pq.write_table(table.drop(["ts"]), root / "mixed" / "part-1.parquet")
    (root / "mixed" / "part-2.csv").write_text("person_id,item\n1,x\n")
    (root / "latin1.csv").write_bytes("person_id,item\n1,café\n2,cafè\n3,cafê\n4,cafe\n".encode("latin-1"))
    (root / "mixed_types").mkdir()  # person_id int64 in one file, string in the other
    pq.write_table(pa.table({"person_id": pa.array([1, 2], pa.int64()), "item": ["a", "b"]}),
                   root / "mixed_types" / "part-1.parquet")
    pq.write_table(pa.table({"person_id": ["3", "4"], "item": ["c", "d"]}), root / "mixed_types" / "part-2.parquet")
    (root / "stream_in").mkdir()
    (root / "stream_in" / "events-1.json").write_text('{"time": 1, "item": "a", "op": 1}\n')
    (root / "bad.yaml").write_text("max_bound: lots\n")
    (root / "ok.yaml").write_text("epsilon: 1\n")
    (root / "unknown_key.yaml").write_text("epsilonn: 1\n")
    return root


def _snapshot(*roots: Path, skip: tuple = ()) -> dict[str, tuple]:
    out = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.name in skip or path.is_dir():
                out[str(path)] = ("dir",) if path.is_dir() else ()
                continue
            out[str(path)] = (path.stat().st_size, hashlib.sha256(path.read_bytes()).hexdigest())
    return {k: v for k, v in out.items() if v != ()}


# (id, release, argv, exit code, fragment of the one error line, ledger budget or None)
# {d} is the data folder, {t} the case's own folder (holding earlier.json, a
# file dp_spark did not write, old_report.json, an earlier dp_spark report, a
# folder earlier_items/ dp_spark did not write, and the ledger l.db).
CASES = [
    # ---------------------------------------------------------------- distinct-count
    ("dc-epsilon-zero", "distinct-count", ["--epsilon", "0"], 2, "epsilon must be a positive finite number (> 0)", "approx"),
    ("dc-epsilon-nan", "distinct-count", ["--epsilon", "nan"], 2, "epsilon must be a positive finite number (> 0)", "approx"),
    ("dc-epsilon-negative", "distinct-count", ["--epsilon", "-1e-3"], 2, "epsilon must be a positive finite number (> 0)",
     "approx"),
    ("dc-epsilon-text", "distinct-count", ["--epsilon", "one"], 2, "argument --epsilon: expected a number; got 'one'", None),
    ("dc-beta", "distinct-count", ["--beta", "1.5"], 2, "beta must be strictly between 0 and 1", "approx"),
    ("dc-max-bound", "distinct-count", ["--max-bound", "0"], 2, "max_bound must be a whole number from 1 to 1,000,000",
     "approx"),
    ("dc-method", "distinct-count", ["--method", "magic"], 2, "invalid choice: 'magic'", None),
    ("dc-rows-zero", "distinct-count", ["--rows", "0"], 2, "argument --rows: expected whole number from 1 to "
     "1,000,000,000 (the built-in data's size limit); got '0'", None),
    ("dc-rows-float", "distinct-count", ["--rows", "2.5"], 2, "argument --rows: expected whole number from 1", None),
    ("dc-rows-beyond-limit", "distinct-count", ["--rows", "2000000000"], 2,
     "expected whole number from 1 to 1,000,000,000", None),
    ("cd-rows-beyond-limit", "continual-distinct", ["--rows", "2000000000"], 2,
     "expected whole number from 1 to 1,000,000,000", None),
    ("dc-missing-input", "distinct-count", ["--input", "{d}/nope.parquet"], 2, "does not exist", "approx"),
    ("dc-unknown-format", "distinct-count", ["--input", "{d}/data.xyz"], 2, "cannot tell the format", "approx"),
    ("dc-format-choice", "distinct-count", ["--input", "{d}/events.csv", "--format", "xls"], 2, "invalid choice", None),
    ("dc-missing-column", "distinct-count", ["--input", "{d}/events.parquet", "--person-col", "who"], 2,
     "'who' is not in the input", "approx"),
    ("dc-truncated-parquet", "distinct-count", ["--input", "{d}/truncated.parquet"], 2,
     "is not a readable Parquet file (truncated or corrupt)", "approx"),
    ("dc-nanosecond-parquet", "distinct-count", ["--input", "{d}/nanos.parquet"], 2,
     "coerce_timestamps='us'", "approx"),
    ("dc-garbage-csv", "distinct-count", ["--input", "{d}/garbage.csv"], 2,
     "is not readable text", "approx"),
    ("dc-mixed-folder", "distinct-count", ["--input", "{d}/mixed", "--format", "parquet"], 2,
     "holds csv files", "approx"),
    ("dc-ragged-fail", "distinct-count", ["--input", "{d}/ragged.csv", "--bad-rows", "fail"], 2,
     "some rows do not parse", "approx"),
    ("dc-latin1-as-utf8-fail", "distinct-count", ["--input", "{d}/latin1.csv", "--bad-rows", "fail"], 2,
     "are not valid text in the given --encoding", "approx"),
    ("dc-parquet-types-differ", "distinct-count", ["--input", "{d}/mixed_types"], 2,
     "disagree on column 'person_id': int64 in 'part-1.parquet', string in 'part-2.parquet'", "approx"),
    ("dc-parquet-types-differ-glob", "distinct-count", ["--input", "{d}/mixed_types/part-*.parquet"], 2,
     "disagree on column 'person_id'", "approx"),
    ("dc-glob-no-match", "distinct-count", ["--input", "{d}/nothing-*.csv"], 2, "matches no files", "approx"),
    ("dc-dotted-column", "distinct-count", ["--input", "{d}/events.csv", "--item-col", "item.name"], 2,
     "column name 'item.name' holds a dot", "approx"),
    ("dc-bad-rows-choice", "distinct-count", ["--input", "{d}/ragged.csv", "--bad-rows", "skip"], 2,
     "invalid choice: 'skip'", None),
    ("dc-delimiter-two-chars", "distinct-count", ["--input", "{d}/events.csv", "--delimiter", ";;"], 2,
     "--delimiter must be one character", "approx"),
    ("dc-encoding", "distinct-count", ["--input", "{d}/events.csv", "--encoding", "klingon-8"], 2,
     "unknown --encoding 'klingon-8'", "approx"),
    ("dc-schema-ddl", "distinct-count", ["--input", "{d}/events.csv", "--schema", "person_id LONG,, item"], 2,
     "is not a Spark DDL schema", "approx"),
    ("dc-schema-parquet", "distinct-count", ["--input", "{d}/events.parquet", "--schema", "person_id LONG"], 2,
     "--schema is for CSV and JSON", "approx"),
    ("dc-tabs-in-a-csv", "distinct-count", ["--input", "{d}/tab_named.csv", "--person-col", "user"], 2,
     "reads as a single column that holds separators; pass the file's --delimiter", "approx"),
    ("dc-output-exists", "distinct-count", ["--output", "{t}/old_report.json"], 2,
     "--output '{t}/old_report.json' already exists; pass --overwrite", "approx"),
    ("dc-output-is-input", "distinct-count", ["--input", "{d}/events.csv", "--output", "{d}/events.csv",
                                              "--overwrite"], 2, "would destroy that input", "approx"),
    ("dc-output-inside-input", "distinct-count", ["--input", "{d}/events.parquet", "--output",
                                                  "{d}/events.parquet/report.json"], 2, "lies inside --input", "approx"),
    ("dc-output-is-config", "distinct-count", ["--config", "{d}/ok.yaml", "--output", "{d}/ok.yaml",
                                               "--overwrite"], 2, "would destroy that input", "approx"),
    ("dc-output-under-file", "distinct-count", ["--output", "{t}/earlier.json/sub/report.json"], 2,
     "is a file", "approx"),
    ("dc-output-unwritable", "distinct-count", ["--output", "/proc/dp_spark_report.json"], 2,
     "cannot be written", "approx"),
    ("dc-output-is-directory", "distinct-count", ["--output", "{t}/earlier_items", "--overwrite"], 2,
     "is a folder; give a file path for the JSON report", "approx"),
    ("dc-config-missing", "distinct-count", ["--config", "{d}/missing.yaml"], 2, "does not exist", "approx"),
    ("dc-config-bad-value", "distinct-count", ["--config", "{d}/bad.yaml"], 2, "unusable value", "approx"),
    ("dc-config-unknown-key", "distinct-count", ["--config", "{d}/unknown_key.yaml"], 2,
     "unknown option 'epsilonn'", "approx"),
    ("dc-budget-flag", "distinct-count", ["--budget-epsilon", "0.5", "--epsilon", "1"], 2,
     "the budget has only ε = 0.5", None),
    ("dc-ledger-exhausted", "distinct-count", ["--epsilon", "0.5"], 2, "ledger budget 'tiny' has only ε = 0.1", "tiny"),
    ("dc-ledger-missing", "distinct-count", ["--ledger", "{t}/none.db", "--ledger-budget", "approx"], 2,
     "does not exist; create it", None),
    ("dc-ledger-unknown-budget", "distinct-count", ["--ledger", "{t}/l.db", "--ledger-budget", "nobody"], 2,
     "no budget 'nobody'", None),
    ("dc-ledger-without-budget", "distinct-count", ["--ledger", "{t}/l.db"], 2, "give both --ledger and", None),
    ("dc-run-key-alone", "distinct-count", ["--run-key", "r1"], 2, "--run-key needs --ledger", None),
    ("dc-seed-with-ledger", "distinct-count", ["--seed", "1"], 2, "drop --seed for a release to publish", "approx"),
    ("dc-ledger-and-budget-flag", "distinct-count", ["--budget-epsilon", "5", "--ledger", "{t}/l.db",
                                                     "--ledger-budget", "approx"], 2, "not both", None),
    ("dc-ledger-and-run-key-wrong-budget", "distinct-count", ["--ledger", "{t}/l.db", "--ledger-budget", "approx",
                                                              "--run-key", " "], 2, "run_key must be", None),
    # ---------------------------------------------------------------- top-k
    ("tk-k-zero", "top-k", ["--k", "0"], 2, "k must be", "approx"),
    ("tk-epsilon-inf", "top-k", ["--epsilon", "inf", "--delta", "1e-6"], 2, "epsilon must be", "approx"),
    ("tk-no-delta", "top-k", ["--delta", "0"], 2, "needs delta > 0", "approx"),
    ("tk-person-is-item", "top-k", ["--item-col", "person_id"], 2,
     "person_col and item_col both name the column 'person_id'", "approx"),
    ("tk-delta-negative", "top-k", ["--delta", "-1e-6"], 2, "delta", "approx"),
    ("tk-joint-without-domain", "top-k", ["--method", "joint"], 2, "domain", "approx"),
    ("tk-domain-missing", "top-k", ["--domain", "{d}/nope.txt"], 2, "does not exist", "approx"),
    ("tk-items-output-exists", "top-k", ["--delta", "1e-6", "--items-output", "{t}/earlier_items"], 2,
     "--items-output '{t}/earlier_items' already exists", "approx"),
    ("tk-items-output-is-output", "top-k", ["--delta", "1e-6", "--items-output", "{t}/new.json", "--output",
                                            "{t}/new.json"], 2, "--output and --items-output point to the same place", "approx"),
    ("tk-items-output-is-domain", "top-k", ["--domain", "{d}/domain.txt", "--items-output", "{d}/domain.txt",
                                            "--overwrite"], 2, "would destroy that input", "approx"),
    ("tk-budget-delta-alone", "top-k", ["--delta", "1e-6", "--budget-delta", "1e-6"], 2,
     "budget_delta needs budget_epsilon", None),
    ("tk-missing-item-col", "top-k", ["--delta", "1e-6", "--input", "{d}/events.parquet", "--item-col", "url"], 2,
     "'url' is not in the input", "approx"),
    # ---------------------------------------------------------------- set-union
    ("su-delta-zero", "set-union", ["--delta", "0"], 2, "delta", "approx"),
    ("su-delta-negative", "set-union", ["--delta", "-1e-6"], 2, "delta", "approx"),
    ("su-delta-one", "set-union", ["--delta", "1"], 2, "delta", "approx"),
    ("su-epsilon-negative", "set-union", ["--epsilon", "-2"], 2, "epsilon", "approx"),
    ("su-method", "set-union", ["--method", "greedy"], 2, "invalid choice: 'greedy'", None),
    ("su-policy-flag-gone", "set-union", ["--policy", "count"], 2, "unrecognized arguments: --policy", None),
    ("su-max-items", "set-union", ["--max-items", "0"], 2, "max_items", "approx"),
    ("su-budget-epsilon-alone", "set-union", ["--budget-epsilon", "3"], 2,
     "cannot spend a approx-dp cost from a pure-dp budget", None),
    ("su-items-output-json-file", "set-union", ["--items-output", "{t}/earlier.json"], 2,
     "--items-output '{t}/earlier.json' already exists", "approx"),
    ("su-items-output-is-input", "set-union", ["--input", "{d}/events.parquet", "--items-output",
                                               "{d}/events.parquet", "--overwrite"], 2, "would destroy that input", "approx"),
    ("su-items-output-contains-input", "set-union", ["--input", "{d}/events.parquet", "--items-output", "{d}",
                                                     "--overwrite"], 2, "contains or lies inside", "approx"),
    ("su-missing-person-col", "set-union", ["--input", "{d}/events.csv", "--person-col", "nope"], 2,
     "'nope' is not in the input", "approx"),
    ("su-over-ledger", "set-union", ["--epsilon", "0.5"], 2, "ledger budget 'tiny_approx' has only", "tiny_approx"),
    ("su-ledger-kind", "set-union", [], 2, "cannot be counted in the pure-dp budget 'tiny'", "tiny"),
    # ---------------------------------------------------------------- count-release
    ("cr-rho-zero", "count-release", ["--rho", "0"], 2, "rho", "zcdp"),
    ("cr-relative-error", "count-release", ["--relative-error", "0"], 2, "relative_error", "zcdp"),
    ("cr-bounded-without-max-items", "count-release", ["--method", "bounded"], 2, "max_items", "zcdp"),
    ("cr-kbar-zero", "count-release", ["--kbar", "0"], 2, "kbar", "zcdp"),
    ("cr-items-output-unwritable", "count-release", ["--items-output", "/proc/dp_spark_counts.parquet"], 2,
     "cannot be written", "zcdp"),
    ("cr-budget-rho", "count-release", ["--budget-rho", "0.1", "--rho", "0.5"], 2, "the budget has only ρ = 0.1", None),
    ("cr-ledger-approx-kind", "count-release", ["--ledger", "{t}/l.db", "--ledger-budget", "approx"], 2,
     "cannot be counted in the approx-dp budget", None),
    ("cr-ragged-fail", "count-release", ["--input", "{d}/ragged.csv", "--bad-rows", "fail"], 2,
     "some rows do not parse", "zcdp"),
    ("cr-output-exists", "count-release", ["--output", "{t}/earlier.json"], 2, "already exists", "zcdp"),
    # ---------------------------------------------------------------- continual-distinct
    ("cd-rho-zero", "continual-distinct", ["--rho", "0"], 2, "rho", "zcdp"),
    ("cd-horizon-zero", "continual-distinct", ["--horizon", "0"], 2, "horizon", "zcdp"),
    ("cd-bounded-without-flippancy", "continual-distinct", ["--method", "bounded", "--horizon", "8"], 2,
     "max_flippancy", "zcdp"),
    ("cd-series-extension", "continual-distinct", ["--series", "{t}/series.txt"], 2,
     "--series must end in .parquet or .csv", "zcdp"),
    ("cd-series-exists", "continual-distinct", ["--series", "{t}/old_series.csv"], 2,
     "--series '{t}/old_series.csv' already exists", "zcdp"),
    ("cd-derived-series-exists", "continual-distinct", ["--output", "{t}/new.json"], 2,
     "--series '{t}/new_series.parquet' already exists", "zcdp"),
    ("cd-stream-without-horizon", "continual-distinct", ["--stream", "--input", "{d}/stream_in"], 2,
     "horizon is required", "zcdp"),
    ("cd-stream-sink-is-input", "continual-distinct", ["--stream", "--input", "{d}/stream_in", "--horizon", "4",
                                                       "--sink", "{d}/stream_in", "--checkpoint", "{t}/ckpt"], 2,
     "--sink '{d}/stream_in' overlaps --input", "zcdp"),
    ("cd-output-inside-checkpoint", "continual-distinct", ["--stream", "--input", "{d}/stream_in", "--horizon", "4",
                                                           "--checkpoint", "{t}/ckpt", "--sink", "{t}/sink",
                                                           "--output", "{t}/ckpt/report.json"], 2,
     "lies inside --checkpoint", "zcdp"),
    ("cd-stream-table", "continual-distinct", ["--stream", "--input", "table:events", "--format", "table",
                                               "--horizon", "4"], 2, "--stream reads a directory of files", "zcdp"),
    ("cd-missing-op-col", "continual-distinct", ["--input", "{d}/stream_events.parquet", "--op-col", "kind",
                                                 "--horizon", "8"], 2, "'kind'", "zcdp"),
    ("cd-over-ledger", "continual-distinct", ["--rho", "0.5", "--horizon", "8"], 2,
     "ledger budget 'tiny_zcdp' has only ρ = 0.01", "tiny_zcdp"),
    ("cd-budget-rho", "continual-distinct", ["--budget-rho", "0.1", "--rho", "0.5"], 2, "the budget has only ρ = 0.1",
     None),
    # ---------------------------------------------------------------- outputs (issue 22)
    ("dc-output-is-ledger", "distinct-count", ["--output", "{t}/l.db", "--overwrite"], 2,
     "--output '{t}/l.db' is, contains or lies inside --ledger '{t}/l.db'; writing it would destroy that budget "
     "ledger", "approx"),
    ("dc-html-is-ledger", "distinct-count", ["--report-html", "{t}/l.db", "--overwrite"], 2,
     "would destroy that budget ledger", "approx"),
    ("su-items-output-ledger-folder", "set-union", ["--items-output", "{t}", "--overwrite"], 2,
     "--items-output '{t}' is, contains or lies inside --ledger", "approx"),
    ("su-items-output-foreign-folder", "set-union", ["--items-output", "{t}/earlier_items", "--overwrite"], 2,
     "--items-output '{t}/earlier_items' already exists and is a folder holding 1 entry ('part-0.parquet'), not "
     "an output of an earlier dp_spark run", "approx"),
    ("dc-output-foreign-file", "distinct-count", ["--output", "{t}/earlier.json", "--overwrite"], 2,
     "--output '{t}/earlier.json' already exists and is a file of 18 bytes", "approx"),
    ("cd-series-in-batch-sink", "continual-distinct", ["--input", "{d}/stream_events.parquet", "--horizon", "8",
                                                       "--sink", "{t}/earlier_items",
                                                       "--series", "{t}/earlier_items/s.parquet"], 2,
     "lies inside --sink '{t}/earlier_items'", "zcdp"),
    ("dc-output-name-too-long", "distinct-count", ["--output", "{t}/" + "r" * 260 + ".json"], 2,
     "is 265 bytes long; this file system takes at most 255 bytes per file or folder name", "approx"),
    ("tk-html-is-a-folder", "top-k", ["--delta", "1e-6", "--report-html", "{t}/earlier_items", "--overwrite"], 2,
     "--report-html '{t}/earlier_items' is a folder; give a file path for the HTML report", "approx"),
]


#: The demo input file of each kind of registry example (``ReleaseSpec.example.input``).
_EXAMPLE_INPUTS = {"persons": "{d}/events.parquet", "events": "{d}/stream_events.parquet"}


def _registry_cases() -> list:
    """Cases every release gets from its registry entry (so a new release
    needs no entry above): its example's flags with a missing item column
    (refused by the release's one edge-table check, before any data is read
    or the ledger charged), and with --seed and --ledger."""
    cases = []
    for name, spec in RELEASES.items():
        flags = ["--input", _EXAMPLE_INPUTS[spec.example.input], *spec.example.argv()]
        budget = "zcdp" if spec.example.zcdp else "approx"
        cases.append((f"{spec.python_name}-registry-missing-item-column", name, [*flags, "--item-col", "nope"], 2,
                      "column 'nope' is not in the input", budget))
        cases.append((f"{spec.python_name}-registry-seed-with-ledger", name, [*flags, "--seed", "1"], 2,
                      "--seed makes the output reproducible and so not private", budget))
    return cases


CASES += _registry_cases()


def test_the_table_covers_every_release_with_enough_cases():
    releases = {case[1] for case in CASES}
    assert releases == set(RELEASES)
    assert len(CASES) >= 60 and len({case[0] for case in CASES}) == len(CASES)


def _case_folder(tmp_path: Path) -> Path:
    (tmp_path / "earlier.json").write_text('{"earlier": true}\n')
    (tmp_path / "old.json").write_text('{"earlier": true}\n')
    (tmp_path / "old_report.json").write_text('{"release": "distinct-count", "version": "2.0"}\n')  # a dp_spark report
    (tmp_path / "old_series.csv").write_text("step,estimate\n1,3.0\n")
    (tmp_path / "new_series.parquet").write_text("not really parquet, but it exists\n")
    (tmp_path / "earlier_items").mkdir()
    (tmp_path / "earlier_items" / "part-0.parquet").write_bytes(b"earlier items")
    with open_ledger(tmp_path / "l.db", create=True) as ledger:
        ledger.create_budget("approx", ApproxDP(10.0, 1e-3))
        ledger.create_budget("zcdp", ZCDP(10.0, 1e-3))
        ledger.create_budget("tiny", PureDP(0.1))
        ledger.create_budget("tiny_approx", ApproxDP(0.1, 1e-9))
        ledger.create_budget("tiny_zcdp", ZCDP(0.01))
    return tmp_path


@pytest.mark.parametrize("case_id, release, argv, code, fragment, budget", CASES, ids=[c[0] for c in CASES])
def test_bad_input(capsys, spark, data, tmp_path, case_id, release, argv, code, fragment, budget):
    folder = _case_folder(tmp_path)
    fill = lambda s: s.replace("{d}", str(data)).replace("{t}", str(folder))  # noqa: E731
    argv = [fill(a) for a in argv]
    if budget is not None:
        argv += ["--ledger", str(folder / "l.db"), "--ledger-budget", budget]
    before = _snapshot(folder, data, skip=("l.db", "l.db-journal"))
    try:
        got = main([release, *argv])
    except SystemExit as exc:  # argparse's own errors
        got = exc.code
    out, err = capsys.readouterr()
    assert got == code, err
    lines = [line for line in err.strip().splitlines() if not line.startswith(PROGRESS)]
    assert len(lines) == 1 and ": error: " in lines[0], err
    assert fill(fragment) in lines[0], lines[0]
    assert "Traceback" not in err and "at org.apache" not in err and "Py4J" not in err, err
    assert out == ""
    assert _snapshot(folder, data, skip=("l.db", "l.db-journal")) == before
    with open_ledger(folder / "l.db") as ledger:
        assert ledger.history() == []


def test_tokenize_words_keeps_accents_and_scripts_without_spaces(spark, data):
    from dp_spark.commands.base import tokenize_words

    df = spark.createDataFrame([(1, "Café über naïve résumé 東京"), (2, "ＣＡＦÉ, Straße! x2")], "p long, t string")
    words = sorted(r.t for r in tokenize_words(df, "p", "t").collect())
    assert words == sorted(["café", "über", "naïve", "résumé", "東京", "café", "strasse", "x2"])


def test_tab_separated_input_with_delimiter_option(capsys, spark, data):
    code = main(["distinct-count", "--input", str(data / "tab_named.csv"), "--delimiter", "\\t", "--person-col", "user",
                 "--tokenize", "words", "--max-bound", "2", "--seed", "1", "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["parameters"]["person_col"] == "user"
    code = main(["distinct-count", "--input", str(data / "tab.tsv"), "--person-col", "user",  # .tsv: tab
                 "--max-bound", "2", "--seed", "1", "--quiet"])
    assert code == 0, capsys.readouterr().err


def test_headerless_csv_with_schema_and_dropped_bad_rows(capsys, spark, data):
    code = main(["distinct-count", "--input", str(data / "ragged.csv"), "--no-header", "--schema",
                 "person_id STRING, item STRING", "--max-bound", "2", "--seed", "1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "(rows that do not parse are dropped, --bad-rows drop; how many is not reported)" in err


def test_overwrite_replaces_what_an_earlier_run_wrote(capsys, spark, tmp_path):
    """--overwrite replaces every output an earlier run wrote (the report, the
    HTML page, the items folder: recognised by their markers) and an empty folder."""
    report, page, items = tmp_path / "r.json", tmp_path / "r.html", tmp_path / "items"
    items.mkdir()  # empty: may be replaced
    argv = ["set-union", "--rows", "500", "--max-items", "2", "--seed", "1", "--quiet", "--output", str(report),
            "--report-html", str(page), "--items-output", str(items), "--overwrite"]
    assert main(argv) == 0, capsys.readouterr().err
    assert (items / "_DP_SPARK_OUTPUT").is_file()
    first = json.loads(report.read_text())["created"]
    assert main(argv) == 0, capsys.readouterr().err
    assert json.loads(report.read_text())["created"] >= first and (items / "_DP_SPARK_OUTPUT").is_file()
    assert '<meta name="generator" content="dp_spark">' in page.read_text()


def test_a_long_output_name_the_file_system_takes_is_written(capsys, spark, tmp_path):
    report = tmp_path / ("r" * 250 + ".json")  # 255 bytes: the atomic write's temporary name is shorter
    assert main(["distinct-count", "--rows", "500", "--max-bound", "2", "--seed", "1", "--quiet",
                 "--output", str(report), "--report-html", str(tmp_path / ("h" * 250 + ".html"))]) == 0, \
        capsys.readouterr().err
    assert "lower_bound" in json.loads(report.read_text())["result"]


def test_a_full_disk_after_the_charge_says_what_was_written_and_that_the_budget_was_spent(
        capsys, spark, tmp_path, monkeypatch):
    import errno

    from dp_spark import io

    folder = _case_folder(tmp_path)
    real = io.write_text_atomic

    def full(path, text):
        if str(path).endswith(".html"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real(path, text)

    monkeypatch.setattr(io, "write_text_atomic", full)
    items, page, report = folder / "items", folder / "r.html", folder / "r.json"
    code = main(["set-union", "--rows", "500", "--max-items", "2", "--items-output", str(items),
                 "--report-html", str(page), "--output", str(report), "--ledger", str(folder / "l.db"),
                 "--ledger-budget", "approx"])
    out, err = capsys.readouterr()
    assert code == 1, err
    lines = [line for line in err.strip().splitlines() if not line.startswith(PROGRESS)]
    assert lines == [
        f"dp-spark: error: cannot write --report-html {str(page)!r} (No space left on device). The release was "
        "computed and its privacy spent: ε = 1, δ = 1e-06 ((ε, δ)-differential privacy), charged to ledger budget "
        f"'approx' in {str(folder / 'l.db')!r}. Written: --items-output {str(items)!r}. Not written: --report-html "
        f"{str(page)!r}, --output {str(report)!r}."], err
    assert items.is_dir() and not page.exists() and not report.exists()
    with open_ledger(folder / "l.db") as ledger:
        assert len(ledger.history()) == 1


def test_ctrl_c_while_writing_says_what_was_written_and_that_the_budget_was_spent(capsys, spark, tmp_path,
                                                                                 monkeypatch):
    from dp_spark import io

    def interrupted(path, payload):
        raise KeyboardInterrupt

    monkeypatch.setattr(io, "write_json_atomic", interrupted)
    page, report = tmp_path / "r.html", tmp_path / "r.json"
    code = main(["distinct-count", "--rows", "500", "--max-bound", "2", "--seed", "1", "--report-html", str(page),
                 "--output", str(report)])
    err = capsys.readouterr().err
    assert code == 130
    lines = [line for line in err.strip().splitlines() if not line.startswith(PROGRESS)]
    assert lines == [f"dp-spark: interrupted; while writing --output {str(report)!r}. The release was computed and "
                     "its privacy spent: ε = 1 (pure differential privacy). Written: --report-html "
                     f"{str(page)!r}. Not written: --output {str(report)!r}."], err
    assert page.is_file() and not report.exists()


def test_set_union_and_continual_defaults_say_where_their_result_can_go(capsys, spark):
    assert main(["set-union", "--rows", "500", "--max-items", "2", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "the released items were not written" in out and "--items-output PATH" in out
    assert main(["continual-distinct", "--rows", "200", "--horizon", "8", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "the released series was not written; pass --series PATH" in out


def test_bad_rows_drop_is_the_same_decision_on_neighbouring_inputs(capsys, spark, tmp_path):
    """Adding one person whose row does not parse changes neither the exit code
    nor the messages (the drop is per row, never reported with a count)."""
    base = "person_id,item\n" + "".join(f"{p},i{p % 3}\n" for p in range(20))
    outputs = []
    for name, text in (("d.csv", base), ("d_plus.csv", base + "99,bad,row,EXTRA\n")):
        (tmp_path / name).write_text(text)
        code = main(["distinct-count", "--input", str(tmp_path / name), "--max-bound", "2", "--seed", "3",
                     "--quiet"])
        out, err = capsys.readouterr()
        doc = json.loads(out)
        outputs.append((code, err.replace(name, "X"), sorted(doc), sorted(doc["result"])))
    assert outputs[0] == outputs[1]


def _cli(*argv, timeout=120):
    exe = Path(sys.executable).parent / "dp-spark"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    return subprocess.run([str(exe), *argv], capture_output=True, text=True, env=env, timeout=timeout)


def test_unreachable_master_fails_fast_in_one_line(tmp_path):
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    result = _cli("distinct-count", "--master", f"spark://127.0.0.1:{port}", "--output", str(tmp_path / "r.json"))
    assert result.returncode == 2, result.stderr
    assert time.monotonic() - started < 60
    assert result.stderr.count("\n") == 1 and "cannot reach the Spark master" in result.stderr
    assert not (tmp_path / "r.json").exists()


def test_console_script_refuses_negative_exponent_delta_by_value():
    result = _cli("set-union", "--delta", "-1e-6")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "delta must be strictly between 0 and 1; got -1e-06" in result.stderr


def test_help_has_no_doubled_defaults():
    result = _cli("top-k", "--help")
    assert result.returncode == 0
    assert "(default: None)" not in result.stdout and "_positive_int" not in result.stdout


@pytest.mark.parametrize("signal_name, code, said", [("SIGINT", 130, "interrupted"),
                                                   # issue 42 §3: a scheduler's timeout ended the run silently (−15)
                                                   ("SIGTERM", 143, "terminated (SIGTERM)")])
def test_ctrl_c_exits_130_in_one_line_and_writes_nothing(tmp_path, signal_name, code, said):
    """Ctrl-C, and SIGTERM (what a scheduler sends on a timeout) the same way."""
    import signal
    import time

    exe = Path(sys.executable).parent / "dp-spark"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    report = tmp_path / "r.json"
    # stderr is a terminal (a pty), as for a person pressing Ctrl-C: progress lines show there
    import pty

    master, terminal = pty.openpty()
    proc = subprocess.Popen([str(exe), "distinct-count", "--rows", "50000000", "--master", "local[1]",
                             "--output", str(report)], stderr=terminal, text=True, env=env)
    os.close(terminal)
    stderr = os.fdopen(master, "r", errors="replace")

    def read_line() -> str:
        try:
            return stderr.readline()
        except OSError:  # EIO: the other side closed
            return ""

    line = ""
    while "no --input" not in line:  # once the session is up and the run starts (skips JVM notices)
        line = read_line()
        assert line, "the command ended before it started the run"
    time.sleep(3)
    proc.send_signal(getattr(signal, signal_name))
    rest = "".join(iter(read_line, "")).replace("\r\n", "\n")
    assert proc.wait(timeout=120) == code, rest
    progress = ("WARNING: Using incubator", "dp-spark: distinct-count: ", "dp-spark [")  # JVM notice, progress
    lines = [line for line in rest.strip().splitlines() if not line.startswith(progress)]
    assert lines == [f"dp-spark: {said}; no output was written"], rest
    assert not report.exists()


def test_a_closed_stdout_loses_no_output(tmp_path):
    """Issue 42 §3: stdout closed early (``| head -c 1``, a log collector
    that died) after the charge lost the JSON report and blamed the HTML,
    which was written. Now the outputs are written before the result is
    printed, and the closed stdout is named in one line (exit 1)."""
    exe = Path(sys.executable).parent / "dp-spark"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    report, html = tmp_path / "r.json", tmp_path / "r.html"
    proc = subprocess.Popen([str(exe), "distinct-count", "--rows", "2000", "--master", "local[1]", "--epsilon", "1",
                             "--output", str(report), "--report-html", str(html)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    proc.stdout.close()  # the reader is gone before anything is printed
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 1, err
    assert json.loads(report.read_text())["release"] == "distinct-count" and html.exists()
    lines = [line for line in err.strip().splitlines() if line.startswith("dp-spark: error")]
    assert lines == ["dp-spark: error: stdout was closed before the result was printed (the reader of a pipe "
                     "ended); the outputs were written (--output, --report-html)."], err
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_a_spark_error_after_ctrl_c_is_the_interrupt():
    """Ctrl-C can land inside a py4j call and break its connection; the
    Py4J error that follows is the user's interrupt (exit 130), not a Spark
    failure (exit 1). Without the interrupt it stays a Spark failure."""
    from py4j.protocol import Py4JNetworkError

    from dp_spark import sparkjobs
    from dp_spark.errors import SparkJobError

    def failing_job():
        with sparkjobs.spark_job("counting persons"):
            raise Py4JNetworkError("Answer from Java side is empty")

    sparkjobs.INTERRUPTED.clear()
    with pytest.raises(SparkJobError, match="Spark failed while counting persons"):
        failing_job()
    sparkjobs.INTERRUPTED.set()
    try:
        with pytest.raises(KeyboardInterrupt):
            failing_job()
    finally:
        sparkjobs.INTERRUPTED.clear()
