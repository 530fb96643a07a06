"""Issue 42 §2 (G29): a "public" keys file (groups= / --groups) or top-k's
public domain (domain= / --domain) that is the private input — the input
file itself, a folder holding it, a file inside an input folder, a symlink
to it, its file: URI, a glob input's match — is refused before anything is
charged and before the data is read, through the Python API and the CLI
(in-process), for every release that takes public keys or a domain; a
different public file stays accepted. Issue 42 §4: the empty-string key is
released as a key of its own (apart from null, in release.groups, the
--groups-output CSV and the report); an empty CSV field, which Spark reads
as null, is refused naming it, never dropped silently."""

from __future__ import annotations

import csv
import json
import os

import pandas as pd
import pytest

import dp_spark
from dp_spark import cli
from dp_spark.accounting import ZCDP, ApproxDP, PrivacyFilter, PureDP
from dp_spark.errors import ParameterError
from dp_spark.io import read_input
from dp_spark.ledger import open_ledger
from dp_spark.releases import RELEASES

H = 8  # steps of the events (the examples' horizon is longer)
KEYS = ["g0", "g1", "g2"]

#: The releases that take public keys (groups=), from the registry: each runs its own example's parameters.
GROUPED = sorted(name for name, spec in RELEASES.items() if "groups" in spec.plan_parameters())


def _release(name):
    """(API function, parameters, a fresh privacy filter, CLI flags, the ledger budget to charge)."""
    spec = RELEASES[name]
    zcdp = spec.example.zcdp
    budget = lambda: PrivacyFilter(ZCDP(5.0, 1e-3) if zcdp else ApproxDP(5.0, 1e-3))  # noqa: E731
    return spec.function, dict(spec.example.parameters), budget, spec.example.argv(), "zcdp" if zcdp else "approx"


def _spent(budget) -> float:
    spent = budget.spent
    return spent.rho if isinstance(spent, ZCDP) else spent.epsilon


@pytest.fixture(scope="module")
def files(tmp_path_factory, spark):
    """One event table (person_id, item, country, time, op) as a single Parquet file in a folder, as a
    Spark-written Parquet folder and as a CSV file; a public keys file; symlinks to the inputs."""
    root = tmp_path_factory.mktemp("guard")
    rows = [(f"p{p}", f"i{(p * 7 + j) % 5}", KEYS[(p + j) % 3], 1 + (p + j) % H, 1)
            for p in range(40) for j in range(2)]
    pdf = pd.DataFrame(rows, columns=["person_id", "item", "country", "time", "op"])
    (root / "in").mkdir()
    single = root / "in" / "events.parquet"
    pdf.to_parquet(single, index=False)
    folder = root / "events_dir.parquet"
    spark.createDataFrame(pdf).coalesce(2).write.parquet(str(folder))
    (root / "csv").mkdir()
    text = root / "csv" / "events.csv"
    pdf.to_csv(text, index=False)
    keys = root / "keys.csv"
    keys.write_text("country\n" + "\n".join(KEYS) + "\n")
    os.symlink(single, root / "link.parquet")
    os.symlink(root / "in", root / "linkdir")
    os.link(single, root / "hard.parquet")  # another name, the same file
    part = sorted(p for p in folder.iterdir() if p.name.endswith(".parquet"))[0]
    return {"root": root, "single": single, "folder": folder, "part": part, "csv": text, "keys": keys}


def _cases(f):
    """(name, input path, "public" path): every form of the input as a public keys file or domain."""
    single = str(f["single"])
    return [
        ("the input file", single, single),
        ("a folder holding it", single, str(f["root"] / "in")),
        ("a folder further up", single, str(f["root"])),
        ("a file inside an input folder", str(f["folder"]), str(f["part"])),
        ("a symlink to it", single, str(f["root"] / "link.parquet")),
        ("a symlinked folder holding it", single, str(f["root"] / "linkdir")),
        ("its file: URI", single, f["single"].as_uri()),
        ("the input read through a symlink", str(f["root"] / "link.parquet"), single),
        ("a glob input's match", str(f["root"] / "in" / "*.parquet"), single),
        ("the CSV input", str(f["csv"]), str(f["csv"])),
        ("a hard link to it", single, str(f["root"] / "hard.parquet")),
    ]


def _read(spark, path):
    return read_input(spark, path, "auto", columns=["person_id", "item", "country", "time", "op"])


def _grouped(name, groups):
    return dict(group_by="country", groups=groups, max_groups=1)


@pytest.mark.parametrize("name", GROUPED)
def test_the_api_refuses_the_input_as_public_keys_before_the_charge(spark, files, name):
    function, params, budget_of, _, _ = _release(name)
    for case, source, public in _cases(files):
        budget = budget_of()
        with pytest.raises(ParameterError, match="^groups: .* is the private input.*omit groups=") as exc:
            function(_read(spark, source), **params, **_grouped(name, public), budget=budget)
        assert "\n" not in str(exc.value), case
        assert _spent(budget) == 0.0, case
    # a public DataFrame read from the input's files: compared by its files
    budget = budget_of()
    keys_frame = spark.read.parquet(str(files["single"])).select("country")
    with pytest.raises(ParameterError, match="a DataFrame read from the input's files"):
        function(_read(spark, str(files["single"])), **params, **_grouped(name, keys_frame), budget=budget)
    assert _spent(budget) == 0.0


def test_the_api_refuses_the_input_as_top_ks_domain_before_the_charge(spark, files):
    df = _read(spark, str(files["single"]))
    for domain in (spark.read.parquet(str(files["single"])).select("item"), df.select("item")):
        budget = PrivacyFilter(PureDP(5.0))
        with pytest.raises(ParameterError, match="^domain: .* is the private input.*unknown-domain"):
            dp_spark.top_k(df, epsilon=1.0, k=2, domain=domain, budget=budget)
        assert budget.spent.epsilon == 0.0


def test_read_domain_refuses_the_input_before_reading_it(spark, files):
    from dp_spark.stages.item_counts import read_domain

    df = _read(spark, str(files["folder"]))
    for public in (str(files["part"]), str(files["folder"]), files["folder"].as_uri()):
        with pytest.raises(ParameterError, match="^domain: "):
            read_domain(spark, public, "item", private=df)
    assert read_domain(spark, str(files["keys"]), "country", private=df) == KEYS  # another file: read


@pytest.mark.parametrize("name", GROUPED)
def test_other_public_keys_stay_accepted(spark, files, name):
    function, params, budget_of, _, _ = _release(name)
    df = _read(spark, str(files["single"]))
    for groups in (str(files["keys"]), KEYS, spark.createDataFrame([(k,) for k in KEYS], "country string")):
        budget = budget_of()
        release = function(df, **params, **_grouped(name, groups), budget=budget)
        assert release.result["groups_released"] == 3 and _spent(budget) > 0.0


def _ledger(root, name):
    path = root / f"{name}.db"
    with open_ledger(path, create=True) as ledger:
        ledger.create_budget("approx", ApproxDP(10.0, 1e-3))
        ledger.create_budget("zcdp", ZCDP(10.0, 1e-3))
    return path


def _charges(path, budget):
    with open_ledger(path) as ledger:
        return ledger.state(budget).charges


@pytest.mark.parametrize("name", GROUPED)
def test_the_cli_refuses_the_input_as_public_keys_before_the_charge(spark, files, name, tmp_path, capsys):
    _, _, _, flags, kind = _release(name)
    ledger = _ledger(tmp_path, name)
    base = [name, *flags, "--group-by", "country", "--max-groups", "1", "--ledger", str(ledger),
            "--ledger-budget", kind, "--quiet"]
    for case, source, public in _cases(files):
        capsys.readouterr()
        assert cli.main([*base, "--input", source, "--groups", public]) == 2, case
        err = capsys.readouterr().err
        assert "is the private input" in err and "omit groups= (--groups)" in err, case
        assert _charges(ledger, kind) == 0, case
    out = tmp_path / "r.json"
    assert cli.main([*base, "--input", str(files["single"]), "--groups", str(files["keys"]), "--output",
                     str(out)]) == 0
    assert json.loads(out.read_text())["result"]["groups_released"] == 3 and _charges(ledger, kind) == 1


def test_the_cli_refuses_the_input_as_top_ks_domain_before_the_charge(spark, files, tmp_path, capsys):
    ledger = _ledger(tmp_path, "top-k-domain")
    base = ["top-k", "--epsilon", "1", "--k", "2", "--ledger", str(ledger), "--ledger-budget", "approx", "--quiet"]
    for case, source, public in _cases(files):
        capsys.readouterr()
        assert cli.main([*base, "--input", source, "--domain", public]) == 2, case
        err = capsys.readouterr().err
        assert "domain: " in err and "is the private input" in err and "unknown-domain" in err, case
        assert _charges(ledger, "approx") == 0, case
    domain = tmp_path / "items.txt"
    domain.write_text("\n".join(f"i{j}" for j in range(5)) + "\n")
    assert cli.main([*base, "--input", str(files["single"]), "--domain", str(domain)]) == 0
    assert _charges(ledger, "approx") == 1


# ------------------------------------------------------------------ the empty-string key (issue 42 §4)


@pytest.fixture(scope="module")
def blank(spark, tmp_path_factory):
    """An input whose group column holds the empty string (a blank country) and a null."""
    root = tmp_path_factory.mktemp("blank")
    rows = [(f"p{p}", f"i{p % 3}", ["", "g0", None][p % 3], 1 + p % H, 1) for p in range(900)]
    pdf = pd.DataFrame(rows, columns=["person_id", "item", "country", "time", "op"])
    data = root / "blank.parquet"
    pdf.to_parquet(data, index=False)
    keys = root / "keys.parquet"
    pd.DataFrame({"country": ["", "g0", "g9"]}).to_parquet(keys, index=False)
    return root, data, keys


@pytest.mark.parametrize("name", GROUPED)
def test_the_empty_string_key_is_released_apart_from_null(spark, blank, name):
    function, params, _, _, _ = _release(name)
    root, data, keys = blank
    df = _read(spark, str(data))
    for groups in (str(keys), ["", "g0", "g9"]):
        release = function(df, **params, **_grouped(name, groups), seed=1)
        assert release.result["groups_released"] == 3
        released = {r["country"] for r in release.groups.select("country").distinct().collect()}
        assert "" in released and None not in released
        reported = {g["group"] for g in release.result["groups"]}
        assert reported == {"", "g0", "g9"}


def test_the_empty_string_key_in_the_groups_output_csv(spark, blank, tmp_path):
    root, data, keys = blank
    out, report = tmp_path / "groups.csv", tmp_path / "r.json"
    assert cli.main(["distinct-count", "--input", str(data), "--epsilon", "1", "--group-by", "country",
                     "--groups", str(keys), "--max-groups", "1", "--groups-output", str(out), "--output",
                     str(report), "--seed", "1", "--quiet"]) == 0
    part = next(p for p in out.iterdir() if p.name.endswith(".csv")) if out.is_dir() else out
    lines = part.read_text().splitlines()
    assert sum(1 for line in lines if line.startswith('"",')) == 1  # the blank key, quoted: not a missing value
    rows = list(csv.reader(lines))
    assert sorted(r[0] for r in rows[1:]) == ["", "g0", "g9"]
    assert {g["group"] for g in json.loads(report.read_text())["result"]["groups"]} == {"", "g0", "g9"}


def test_an_empty_csv_key_is_refused_naming_it(spark, blank, tmp_path):
    root, data, _ = blank
    df = _read(spark, str(data))
    for text in ('country\ng0\n""\n', "country,n\ng0,1\n,2\n"):
        keys = tmp_path / "keys.csv"
        keys.write_text(text)
        budget = PrivacyFilter(PureDP(5.0))
        with pytest.raises(ParameterError, match="empty or null key"):
            dp_spark.distinct_count(df, epsilon=1.0, group_by="country", groups=str(keys), max_groups=1,
                                    budget=budget)
        assert budget.spent.epsilon == 0.0
    with pytest.raises(ParameterError, match="empty or null key"):
        dp_spark.distinct_count(df, epsilon=1.0, group_by="country", max_groups=1, seed=1,
                                groups=spark.createDataFrame([("g0",), (None,)], "country string"))
