"""``dp-spark sample-data DIR`` (issue 42 §1): the sample inputs the README's
recipes read, written without Spark, the same bytes every run, never over a
file it did not write; and the built-in data's public ``country`` column."""

from __future__ import annotations

import csv
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.helpers import assert_one_line_error, run_cli

REPO = Path(__file__).resolve().parents[2]
SAMPLES = ("ratings.parquet", "movies.txt", "genres.csv", "events.parquet", "keys.csv", "words.parquet",
           "stream.parquet")


def _write(capsys, folder) -> tuple[int, str, str]:
    return run_cli(capsys, "sample-data", str(folder))


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> Path:
    from dp_spark.sample_data import write_samples

    folder = tmp_path_factory.mktemp("s") / "samples"
    write_samples(str(folder))
    return folder


def test_writes_every_file_one_line_each_without_spark(tmp_path):
    """In a fresh interpreter where pyspark cannot be imported: exit 0, one
    line per sample file naming it, the files and nothing else."""
    script = ("import sys\nfrom tests.unit.helpers import block_pyspark, pyspark_loaded\nblock_pyspark()\n"
              "from dp_spark.cli import main\ncode = main(['sample-data', sys.argv[1]])\n"
              "assert not pyspark_loaded(), 'pyspark was imported'\nsys.exit(code)\n")
    folder = tmp_path / "new" / "samples"  # parents created
    proc = subprocess.run([sys.executable, "-c", script, str(folder)], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == [str(folder / name) for name in SAMPLES]
    assert sorted(p.name for p in folder.iterdir()) == sorted([*SAMPLES, ".gitignore", ".dp_spark_sample_data.json"])
    assert (folder / ".gitignore").read_text().splitlines()[-1] == "*"  # the folder stays out of git


def test_the_same_bytes_every_run(tmp_path, capsys, samples):
    assert _write(capsys, tmp_path / "a")[0] == 0
    assert _digests(tmp_path / "a") == _digests(samples)
    assert _write(capsys, tmp_path / "a")[0] == 0  # its own earlier output: rewritten, the same
    assert _digests(tmp_path / "a") == _digests(samples)
    record = json.loads((samples / ".dp_spark_sample_data.json").read_text())
    assert record["files"] == {k: v for k, v in _digests(samples).items() if k in SAMPLES}


def test_a_file_it_did_not_write_is_refused_and_nothing_is_written(tmp_path, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "keys.csv").write_text("country\nUS\n")  # the user's own keys
    code, out, err = _write(capsys, folder)
    assert code == 2 and out == ""
    assert_one_line_error(err, f"{folder / 'keys.csv'} already exists and was not written by dp-spark sample-data")
    assert (folder / "keys.csv").read_text() == "country\nUS\n"
    assert [p.name for p in folder.iterdir()] == ["keys.csv"]  # refused before anything was written


def test_a_changed_sample_file_or_a_folder_of_its_name_is_refused(tmp_path, capsys, samples):
    assert _write(capsys, tmp_path / "s")[0] == 0
    with open(tmp_path / "s" / "movies.txt", "a") as fh:
        fh.write("9999\n")  # edited by the user since
    (tmp_path / "s" / "words.parquet").unlink()
    (tmp_path / "s" / "words.parquet").mkdir()  # e.g. a Spark output of that name
    code, out, err = _write(capsys, tmp_path / "s")
    assert code == 2 and out == ""
    assert_one_line_error(err, "movies.txt, ")
    assert "words.parquet already exist" in err and "move them away or give another folder" in err
    assert (tmp_path / "s" / "movies.txt").read_text().endswith("9999\n")


def test_an_earlier_version_of_its_own_output_is_replaced(tmp_path, capsys):
    """A file whose bytes its record names (written by sample-data, e.g. by an
    earlier version or another pyarrow) is replaced; other files are kept."""
    folder = tmp_path / "s"
    folder.mkdir()
    old = b"an earlier version's ratings"
    (folder / "ratings.parquet").write_bytes(old)
    (folder / "report.json").write_text("{}")  # a recipe's output: not a sample name, left alone
    (folder / ".dp_spark_sample_data.json").write_text(json.dumps(
        {"written_by": "dp-spark sample-data", "files": {"ratings.parquet": hashlib.sha256(old).hexdigest()}}))
    code, out, err = _write(capsys, folder)
    assert code == 0, err
    assert (folder / "ratings.parquet").read_bytes() != old and (folder / "report.json").read_text() == "{}"


def test_a_foreign_record_file_is_refused(tmp_path, capsys):
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / ".dp_spark_sample_data.json").write_text("my notes")
    code, _, err = _write(capsys, folder)
    assert code == 2
    assert_one_line_error(err, ".dp_spark_sample_data.json already exists")


@pytest.mark.parametrize("target, fragment", [
    ("file", "is not a folder"),
    ("", "sample-data needs a folder name (DIR)"),
    ("file/below", "cannot write into"),
])
def test_bad_folder_one_line_exit_2(tmp_path, capsys, target, fragment):
    (tmp_path / "file").write_text("x")
    code, out, err = _write(capsys, tmp_path / target if target else "")
    assert code == 2 and out == ""
    assert_one_line_error(err, fragment)
    assert (tmp_path / "file").read_text() == "x"


def test_help_says_the_data_is_synthetic_and_public(capsys):
    import dp_spark.sample_data as module

    code, out, _ = run_cli(capsys, "sample-data", "--help")
    assert code == 0
    text = " ".join(out.split())
    assert "synthetic and public" in text and "without Spark" in text
    assert "synthetic and public" in " ".join(module.__doc__.split())
    code, out, _ = run_cli(capsys, "--help")
    assert "sample-data" in out and "synthetic, public sample inputs" in " ".join(out.split())


def _table(path: Path):
    import pyarrow.parquet as pq

    return pq.read_table(path)


def test_ratings_movies_and_genres(samples):
    import numpy as np

    from dp_spark.sample_data import GENRES, MOVIES, USERS

    table = _table(samples / "ratings.parquet")
    assert str(table.schema) == "user: int32\nmovie: int32\nrating: int8\ngenre: string"
    user, movie = table["user"].to_numpy(), table["movie"].to_numpy()
    assert len(np.unique(user)) == USERS == 943 and np.bincount(user)[1:].min() >= 20
    assert len(set(zip(user.tolist(), movie.tolist()))) == len(user)  # one rating per (user, movie)
    assert set(table["rating"].to_numpy().tolist()) == {1, 2, 3, 4, 5}
    genre_of = {}
    for m, g in zip(movie.tolist(), table["genre"].to_pylist()):
        assert genre_of.setdefault(m, g) == g  # a movie has one genre
    assert set(genre_of.values()) == set(GENRES)
    domain = (samples / "movies.txt").read_text().splitlines()
    assert domain == [str(m) for m in range(1, MOVIES + 1)] and set(movie.tolist()) <= set(range(1, MOVIES + 1))
    assert list(csv.reader(open(samples / "genres.csv"))) == [["genre"], *[[g] for g in GENRES]]


def test_events_and_keys(samples):
    from dp_spark.datasets import COUNTRIES

    table = _table(samples / "events.parquet")
    assert str(table.schema) == "user_id: int64\nurl: string\ncountry: string"
    country_of = {}
    for u, c in zip(table["user_id"].to_pylist(), table["country"].to_pylist()):
        assert country_of.setdefault(u, c) == c  # a user has one country
    assert set(country_of.values()) == set(COUNTRIES)
    assert all(u.startswith("https://shop.example.com/") for u in table["url"].to_pylist())
    assert list(csv.reader(open(samples / "keys.csv"))) == [["country"], *[[c] for c in COUNTRIES]]


def test_words(samples):
    table = _table(samples / "words.parquet")
    assert str(table.schema) == "person_id: int64\nitem: string"
    words = table["item"].to_pylist()
    assert all(w.isalpha() and w.islower() for w in words) and 1_000 < len(set(words)) < len(words)


def test_stream_alternates_insert_and_delete_per_item(samples):
    from dp_spark.sample_data import HORIZON

    table = _table(samples / "stream.parquet")
    assert str(table.schema) == "time: int32\nitem: string\nop: int32"
    events: dict[str, list] = {}
    for t, item, op in zip(*(table[c].to_pylist() for c in ("time", "item", "op"))):
        events.setdefault(item, []).append((t, op))
    for item, seq in events.items():
        times = [t for t, _ in seq]
        assert times == sorted(set(times)) and 1 <= times[0] and times[-1] <= HORIZON == 4096
        assert [op for _, op in seq] == [1 if i % 2 == 0 else -1 for i in range(len(seq))], item
    assert any(len(seq) > 2 for seq in events.values())  # items come back after a delete


def test_the_built_in_data_has_one_public_country_per_person(spark):
    from pyspark.sql import functions as F

    from dp_spark.datasets import COUNTRIES, synthetic_events

    df = synthetic_events(spark, rows=20_000)
    assert df.columns == ["person_id", "item", "country"]
    per_person = df.groupBy("person_id").agg(F.countDistinct("country").alias("n")).where("n != 1").count()
    assert per_person == 0
    assert sorted(r[0] for r in df.select("country").distinct().collect()) == sorted(COUNTRIES)
    # the country is a function of the person id alone (not of the row)
    again = synthetic_events(spark, rows=5_000).select("person_id", "country").distinct()
    joined = again.join(df.select("person_id", F.col("country").alias("c")).distinct(), "person_id")
    assert joined.where("country != c").count() == 0 and joined.count() > 0


def test_an_existing_folder_gets_no_gitignore(tmp_path, capsys):
    """The review's finding: written into a repository's folder, '*' hid every file of the user's from git."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "mine.py").write_text("x = 1\n")
    assert _write(capsys, repo)[0] == 0
    assert not (repo / ".gitignore").exists() and (repo / "mine.py").read_text() == "x = 1\n"
    assert _write(capsys, repo)[0] == 0  # its own earlier output, again: still none
    assert not (repo / ".gitignore").exists()
    assert _write(capsys, tmp_path / "fresh")[0] == 0 and (tmp_path / "fresh" / ".gitignore").exists()
    assert _write(capsys, tmp_path / "fresh")[0] == 0 and (tmp_path / "fresh" / ".gitignore").exists()
