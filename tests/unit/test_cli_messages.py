"""Refusals the inputs alone decide, made before Spark starts and before
anything is charged (issue 42 §5): each is one line naming the problem and
its fix, exit 2. The CLI runs in process; ``no_spark`` fails a test whose
run asks for a Spark session."""

from __future__ import annotations

import os

import pytest

from tests.unit.helpers import assert_one_line_error, run_cli
from tests.unit.test_cli_plan import no_spark  # noqa: F401 - the fixture

pytestmark = pytest.mark.usefixtures("no_spark")


@pytest.fixture
def events(tmp_path):
    path = tmp_path / "events.csv"
    path.write_text("person_id,item,country\n1,a,x\n2,b,y\n")
    return path


def refused(capsys, fragment: str, *argv) -> str:
    code, out, err = run_cli(capsys, *argv)
    assert code == 2, err
    assert_one_line_error(err, fragment)
    return err


def test_a_folder_as_config_is_named_a_folder(capsys, tmp_path):
    err = refused(capsys, "is a folder; give the path of the YAML file itself", "distinct-count",
                  "--config", str(tmp_path))
    assert "does not exist" not in err


def test_stream_on_a_single_file_asks_for_a_folder(capsys, events, tmp_path):
    argv = ["continual-distinct", "--stream", "--input", str(events), "--horizon", "8", "--rho", "1",
            "--checkpoint", str(tmp_path / "ck"), "--sink", str(tmp_path / "sink")]
    refused(capsys, f"--stream reads a folder of event files (--files-per-step per step); --input {str(events)!r} "
                    "is a file: put it in a folder of its own and give the folder", *argv)
    refused(capsys, "is a file: put it in a folder", *argv, "--dry-run")  # the dry run names it too
    assert not (tmp_path / "ck").exists() and not (tmp_path / "sink").exists()


@pytest.mark.parametrize("flag", ["--checkpoint", "--sink"])
def test_a_file_as_the_streams_folder_is_refused(capsys, tmp_path, flag):
    (tmp_path / "in").mkdir()
    state = tmp_path / "state"
    state.write_text("not a folder")
    paths = {"--checkpoint": str(tmp_path / "ck"), "--sink": str(tmp_path / "sink"), flag: str(state)}
    argv = ["continual-distinct", "--stream", "--input", str(tmp_path / "in"), "--horizon", "8", "--rho", "1",
            *(x for item in paths.items() for x in item)]
    err = refused(capsys, f"{flag} {str(state)!r} is a file; --stream keeps its", *argv)
    assert "a folder" in err and "FileExistsError" not in err
    assert state.read_text() == "not a folder"


def test_a_file_named_like_a_glob_before_spark(capsys, tmp_path):
    """data[1].json is read as that file (tests/spark/test_relative_paths.py), so the checks before Spark accept
    it; a CSV file of such a name is refused naming the rename (Spark's multi-line CSV reader lists the pattern
    again: it read data1.csv's header, or failed); a pattern still matches files; a keys pattern that matches
    none is named as the keys file."""
    (tmp_path / "data[1].json").write_text('{"person_id": "1", "item": "a", "country": "x"}\n')
    (tmp_path / "keys[1].json").write_text('{"country": "x"}\n')
    data = tmp_path / "data[1].csv"
    data.write_text("person_id,item,country\n1,a,x\n")
    (tmp_path / "data1.csv").write_text("person_id,item,country\n9,z,q\n")  # what the pattern reads
    for argv in (["--input", str(tmp_path / "data[1].json")], ["--input", str(tmp_path / "data?1?.csv")],
                 ["--input", str(tmp_path / "data[1].json"), "--group-by", "country", "--groups",
                  str(tmp_path / "keys[1].json")]):
        code, _, err = run_cli(capsys, "distinct-count", *argv, "--dry-run")
        assert code == 0, err
    err = refused(capsys, "is a CSV file whose name holds glob characters", "distinct-count", "--input",
                  str(data), "--epsilon", "1")
    assert "rename the file" in err and "does not exist" not in err
    refused(capsys, "public keys file (--groups)", "distinct-count", "--input", str(tmp_path / "data[1].json"),
            "--group-by", "country", "--groups", str(data), "--dry-run")
    refused(capsys, f"public keys file (--groups) {str(tmp_path / 'nokeys[0-9].csv')!r} does not exist",
            "distinct-count", "--input", str(tmp_path / "data[1].json"), "--group-by", "country", "--groups",
            str(tmp_path / "nokeys[0-9].csv"), "--dry-run")


def test_a_missing_groups_file_is_the_public_keys_file_before_spark(capsys, events, tmp_path):
    missing = tmp_path / "keys.csv"
    err = refused(capsys, f"public keys file (--groups) {str(missing)!r} does not exist", "count-release",
                  "--input", str(events), "--rho", "0.5", "--delta", "1e-6", "--kbar", "60", "--group-by", "country",
                  "--groups", str(missing), "--max-groups", "2")
    assert "input path" not in err


def _ledger(capsys, tmp_path) -> str:
    path = str(tmp_path / "ledger.db")
    code, _, err = run_cli(capsys, "ledger", "create", path, "team", "--epsilon", "2")
    assert code == 0, err
    return path


def test_a_read_only_ledger_is_refused_before_spark(capsys, events, tmp_path, monkeypatch):
    """Found before Spark starts (it was found at the charge), in the real run and the dry run."""
    path = _ledger(capsys, tmp_path)
    os.chmod(path, 0o444)
    if os.access(path, os.W_OK):  # root writes a 0444 file: make it read-only for this process as a mount would
        access = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if (str(p) == path and mode & os.W_OK)
                            else access(p, mode, **kw))
    argv = ["distinct-count", "--input", str(events), "--epsilon", "0.5", "--ledger", path, "--ledger-budget", "team"]
    refused(capsys, f"the ledger {path!r} is read-only", *argv)
    refused(capsys, "is read-only", *argv, "--dry-run")  # the dry run names what the real run refuses
    os.chmod(path, 0o644)


def test_a_writable_ledger_passes_the_check(capsys, events, tmp_path):
    path = _ledger(capsys, tmp_path)
    code, _, err = run_cli(capsys, "distinct-count", "--input", str(events), "--epsilon", "0.5", "--ledger", path,
                           "--ledger-budget", "team", "--dry-run")
    assert code == 0, err


@pytest.mark.parametrize("dry_run", [False, True])
def test_the_input_as_its_own_public_keys_or_domain_is_refused_before_spark(capsys, events, tmp_path, dry_run):
    """G29 (issue 42 §2) from the paths alone: the --input file, its folder, or a symlink to it given as
    --groups or --domain is refused before Spark starts, in a dry run too; another file passes the check."""
    link = tmp_path / "keys_link.csv"
    link.symlink_to(events)
    extra = ["--dry-run"] if dry_run else []
    for public in (str(events), str(events.parent), str(link), f"file://{events}"):
        refused(capsys, f"groups: the public keys (groups= / --groups) {public!r} is the private input",
                "distinct-count", "--input", str(events), "--group-by", "country", "--groups", public, *extra)
        refused(capsys, f"domain: the public domain (domain= / --domain) {public!r} is the private input",
                "top-k", "--input", str(events), "--k", "2", "--domain", public, *extra)
    keys = tmp_path / "public" / "keys.csv"
    keys.parent.mkdir()
    keys.write_text("country\nx\ny\n")
    code, out, err = run_cli(capsys, "distinct-count", "--input", str(events), "--group-by", "country",
                             "--groups", str(keys), "--dry-run")
    assert code == 0, err


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_checkpoint_of_another_query_is_refused_before_spark(capsys, tmp_path, dry_run):
    """Issue 42 §5: a --checkpoint folder holding another streaming query's Spark checkpoint is refused before
    Spark starts (the stream's own check stays for the API), and nothing in it is changed."""
    (tmp_path / "in").mkdir()
    ck = tmp_path / "ck"
    for folder in ("offsets", "commits"):
        (ck / folder).mkdir(parents=True)
    (ck / "metadata").write_text('{"id":"another-query"}')
    before = sorted(p.name for p in ck.iterdir())
    argv = ["continual-distinct", "--stream", "--input", str(tmp_path / "in"), "--horizon", "8", "--rho", "1",
            "--checkpoint", str(ck), "--sink", str(tmp_path / "sink"), *(["--dry-run"] if dry_run else [])]
    refused(capsys, f"the checkpoint folder {str(ck)!r} holds another streaming query's Spark checkpoint", *argv)
    assert sorted(p.name for p in ck.iterdir()) == before and not (tmp_path / "sink").exists()


@pytest.mark.parametrize("argv", [["distinct-count", "--dry-run"], ["sample-data", "{tmp}/s"]])
def test_a_closed_stdout_is_named_in_one_line(tmp_path, argv):
    """Review finding: a dry run (or sample-data) piped into a reader that ended printed 'unexpected
    BrokenPipeError'. The reader's end is closed before the child (seconds of imports) prints."""
    import subprocess
    import sys

    script = "import sys\nfrom dp_spark.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    argv = [a.format(tmp=tmp_path) for a in argv]
    proc = subprocess.Popen([sys.executable, "-c", script, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 1, err
    assert err.splitlines() == ["dp-spark: stdout was closed before everything was printed (the reader of a pipe "
                                "ended)."], err
