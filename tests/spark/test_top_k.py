"""The item-count stage and the top-k release (Python API and CLI), local[2]."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from chispa import assert_df_equality

import dp_spark
from dp_spark.accounting import ApproxDP, PrivacyFilter, PureDP
from dp_spark.errors import ParameterError, SchemaError
from dp_spark.plans.top_k import plan as top_k_plan
from dp_spark.stages import item_counts as stage
from tests.unit import helpers
from tests.unit.helpers import assert_refused_keeping_outputs

# Item "i<j>" is held by 40·(8 − j) persons (j = 0..7): gaps of 40 persons,
# far above the noise at ε = 4, so every mechanism finds the true order.
GAPS = {f"i{j}": 40 * (8 - j) for j in range(8)}
DOMAIN = [f"i{j}" for j in range(8)] + ["never_seen"]
PURE = ("joint", "pnf-joint", "pnf-peel")  # what auto may run when δ = 0


@pytest.fixture(scope="module")
def gaps(spark):
    rows = []
    for item, holders in GAPS.items():
        rows += [(p, item) for p in range(holders)]
        rows += [(p, item) for p in range(0, holders, 3)]  # repeated rows do not count twice
    rows += [(p, "outside") for p in range(500)]  # not in DOMAIN: never released with a domain
    return spark.createDataFrame(rows, "person_id long, item string").cache()


def random_table(rng, persons=40, items=15, rows=300):
    return pd.DataFrame({"person_id": rng.integers(0, persons, rows).astype("int64"),
                         "item": [f"x{v}" for v in rng.integers(0, items, rows)]})


# ---------------------------------------------------------------------- stage

def test_item_counts_match_pandas(spark):
    pdf = random_table(np.random.default_rng(0))
    expected = pdf.drop_duplicates().groupby("item").size().rename("count").reset_index()
    got = stage.item_counts(stage.edge_table(spark.createDataFrame(pdf), "person_id", "item"))
    assert_df_equality(got, spark.createDataFrame(expected, "item string, count long"),
                       ignore_row_order=True, ignore_nullable=True)


def test_item_counts_sensitivity_on_random_neighbours(spark):
    """Add or remove one person (with repeated rows) from random tables: every
    count moves by at most 1, all in the same direction. One Spark job: each
    data set's persons and items are prefixed with its tag. A COUNT(*) stage
    would fail here (the added person repeats rows)."""
    rng = np.random.default_rng(1)
    frames = []
    cases = []
    for case in range(4):
        base = random_table(rng)
        removed = base[base.person_id != rng.choice(base.person_id.unique())]
        newcomer = pd.DataFrame({"person_id": 999, "item": [f"x{v}" for v in rng.integers(0, 20, 12)] * 2})
        added = pd.concat([base, newcomer])
        for name, table in (("base", base), ("removed", removed), ("added", added)):
            tag = f"{case}-{name}|"
            frames.append(pd.DataFrame({"person_id": tag + table.person_id.astype(str),
                                        "item": tag + table.item}))
        cases.append(case)
    both = spark.createDataFrame(pd.concat(frames, ignore_index=True))
    counts = stage.item_counts(stage.edge_table(both, "person_id", "item")).toPandas()
    counts[["tag", "x"]] = counts["item"].str.split("|", expand=True)
    table = counts.pivot_table(index="x", columns="tag", values="count", fill_value=0)
    for case in cases:
        base = table.get(f"{case}-base", 0)
        down = base - table.get(f"{case}-removed", 0)
        up = table.get(f"{case}-added", 0) - base
        assert down.between(0, 1).all() and up.between(0, 1).all()
        assert up.sum() > 1 and down.sum() > 1  # the neighbours really differ in several counts


def test_top_counts_tie_break_and_next_count(spark):
    holders = {"b": 3, "a": 3, "c": 2, "d": 2, "e": 1}
    df = spark.createDataFrame([(p, x) for x, n in holders.items() for p in range(n)], "person_id long, item string")
    edge_df = stage.edge_table(df, "person_id", "item")
    top = stage.top_item_counts(edge_df, 3)
    assert top.items == ["a", "b", "c"] and top.counts.tolist() == [3, 3, 2] and top.next_count == 2
    everything = stage.top_item_counts(edge_df, 10)
    assert everything.items == ["a", "b", "c", "d", "e"] and everything.next_count == 0
    dom = stage.top_of_domain(["z", "e", "a"], np.array([0, 1, 3]), 2)
    assert dom.items == ["a", "e"] and dom.next_count == 0


def test_domain_counts_absent_items_count_zero_and_others_are_ignored(spark, gaps):
    counts = stage.domain_item_counts(stage.edge_table(gaps, "person_id", "item"), DOMAIN)
    assert counts.tolist() == [GAPS[x] for x in DOMAIN[:-1]] + [0]
    ints = spark.createDataFrame([(1, 7), (2, 7), (2, 9), (3, 11)], "person_id long, movie int")
    edge_df = stage.edge_table(ints, "person_id", "movie")
    domain = stage.normalise_domain(["9", 7, 8.0], stage.integral_items(edge_df))
    assert domain == [9, 7, 8]
    assert stage.domain_item_counts(edge_df, domain).tolist() == [1, 2, 0]


@pytest.mark.parametrize(
    "domain, integral, fragment",
    [([], False, "empty"), (["a", "b", "a"], False, "'a' more than once"), (["1", " 1"], True, "more than once"),
     (["x1"], True, "not a whole number"), ([None], False, "null"), ("abc", False, "list of the possible")],
)
def test_normalise_domain_rejects(domain, integral, fragment):
    with pytest.raises(ParameterError, match=fragment):
        stage.normalise_domain(domain, integral)


def test_read_domain_formats(spark, tmp_path):
    (tmp_path / "d.txt").write_text("a\n\n b \nc\n")
    assert stage.read_domain(spark, str(tmp_path / "d.txt"), "item") == ["a", "b", "c"]
    pd.DataFrame({"item": ["x", "y"], "other": [1, 2]}).to_parquet(tmp_path / "d.parquet")
    assert sorted(stage.read_domain(spark, str(tmp_path / "d.parquet"), "item")) == ["x", "y"]
    (tmp_path / "d.csv").write_text("movie\n5\n6\n")
    raw = stage.read_domain(spark, str(tmp_path / "d.csv"), "item")  # the only column, as strings
    assert raw == ["5", "6"] and stage.normalise_domain(raw, True) == [5, 6]
    with pytest.raises(dp_spark.errors.InputError, match="does not exist"):
        stage.read_domain(spark, str(tmp_path / "missing.txt"), "item")


def test_csv_domain_of_a_string_item_column_keeps_leading_zeros(spark, tmp_path):
    """A CSV domain is read without type inference: "007" stays "007" and
    matches the string item "007" (inferred, it became 7 and never matched)."""
    df = spark.createDataFrame([(1, "007"), (2, "007"), (2, "010"), (3, "7")], "person_id long, item string")
    edge_df = stage.edge_table(df, "person_id", "item")
    (tmp_path / "codes.csv").write_text("item,label\n007,a\n010,b\n8,c\n")
    domain = stage.normalise_domain(stage.read_domain(spark, str(tmp_path / "codes.csv"), "item"),
                                    stage.integral_items(edge_df))
    assert domain == ["007", "010", "8"]
    assert stage.domain_item_counts(edge_df, domain).tolist() == [2, 1, 0]
    (tmp_path / "gap.csv").write_text("item,x\n007,1\n,2\n")  # an empty cell is a null item
    with pytest.raises(ParameterError, match="null"):
        stage.normalise_domain(stage.read_domain(spark, str(tmp_path / "gap.csv"), "item"), False)


# -------------------------------------------------------------------- release

def test_joint_release_report(gaps, report_schema):
    import jsonschema

    release = dp_spark.top_k(gaps, k=5, epsilon=4.0, domain=DOMAIN, seed=1)
    report = release.to_dict()
    result = report["result"]
    assert [r["item"] for r in result["items"]] == ["i0", "i1", "i2", "i3", "i4"]
    assert [r["rank"] for r in result["items"]] == [1, 2, 3, 4, 5]
    # auto with δ = 0 may only run a pure mechanism (which one is auto.py's choice)
    assert result["method"] in PURE and report["parameters"]["method"] == "auto"
    assert result["released_count"] == 5 and result["k"] == 5
    assert report["privacy"]["epsilon"] == 4.0 and report["privacy"]["delta"] == 0.0
    assert report["privacy"]["kind"] == "pure-dp" and result["domain_size"] == 9
    assert report["parameters"]["domain"] == "9 public items"
    assert report["seeded"] is True and "warning" in report and "items" in report["errors"]
    assert sum(s["epsilon"] for s in report["budget_split"]) == pytest.approx(4.0)
    jsonschema.validate(json.loads(json.dumps(report)), report_schema)
    assert release.items.columns == ["rank", "item"]  # the artifact: a Spark DataFrame
    assert [tuple(r) for r in release.items.collect()] == [(i + 1, f"i{i}") for i in range(5)]
    assert release.result["items"] == result["items"]


@pytest.mark.parametrize("mechanism, delta, guarantee", [("pnf-joint", 0.0, PureDP(4.0)), ("pnf-peel", 0.0, PureDP(4.0)),
                                                         ("cdp-peel", 1e-6, ApproxDP(4.0, 1e-6))])
def test_other_domain_mechanisms(gaps, mechanism, delta, guarantee):
    release = dp_spark.top_k(gaps, k=4, epsilon=4.0, delta=delta, method=mechanism, domain=DOMAIN, seed=2)
    assert [r["item"] for r in release.result["items"]] == ["i0", "i1", "i2", "i3"]
    assert release.guarantee == guarantee and release.result["method"] == mechanism


def test_method_names_the_mechanism_and_mechanism_is_gone(gaps):
    release = dp_spark.top_k(gaps, k=3, epsilon=4.0, method="pnf-peel", domain=DOMAIN, seed=2)
    assert release.result["method"] == "pnf-peel" and release.parameters["method"] == "pnf-peel"
    assert [r["item"] for r in release.result["items"]] == ["i0", "i1", "i2"]
    with pytest.raises(TypeError):
        dp_spark.top_k(gaps, k=3, epsilon=4.0, mechanism="pnf-peel", domain=DOMAIN, seed=2)
    with pytest.raises(TypeError):
        dp_spark.top_k(gaps, 3, 4.0, domain=DOMAIN, seed=2)  # df is the only positional parameter


def test_auto_with_delta_spends_a_stated_share_on_the_choice(gaps):
    release = dp_spark.top_k(gaps, k=3, epsilon=0.25, delta=1e-6, domain=DOMAIN, seed=4)
    report = release.to_dict()
    result = report["result"]
    assert result["method"] in PURE + ("cdp-peel",) and report["parameters"]["method"] == "auto"
    assert result["released_count"] == 3
    split = report["budget_split"]
    assert [s["epsilon"] for s in split] == [pytest.approx(0.0125), pytest.approx(0.2375)]
    assert [s.get("delta", 0.0) for s in split] == [0.0, 1e-6]
    assert report["privacy"]["epsilon"] == 0.25 and report["privacy"]["delta"] == 1e-6
    assert release.guarantee == ApproxDP(0.25, 1e-6)
    assert set(result["auto_predicted_error"]) == {"joint", "cdp-peel"}
    # the split is the plan's, whatever auto picked
    plan = top_k_plan(epsilon=0.25, k=3, delta=1e-6, domain=DOMAIN, domain_size=len(DOMAIN))
    assert split == plan.budget_split()


def test_auto_with_delta_finds_the_clear_top_k(gaps):
    release = dp_spark.top_k(gaps, k=3, epsilon=4.0, delta=1e-6, domain=DOMAIN, seed=4)
    assert [r["item"] for r in release.result["items"]] == ["i0", "i1", "i2"]
    assert release.guarantee == ApproxDP(4.0, 1e-6) and release.result["method"] in PURE + ("cdp-peel",)
    plan = top_k_plan(epsilon=4.0, k=3, delta=1e-6, domain=DOMAIN, domain_size=len(DOMAIN))
    assert release.budget_split == plan.budget_split()


def test_a_public_domain_dataframe_is_read_like_its_list(spark, gaps):
    """domain= may be a Spark DataFrame of public items (its item column, or
    its only column); its size is known before anything is spent."""
    table = spark.createDataFrame([(x, 1) for x in DOMAIN], "item string, other int")
    from_frame = dp_spark.top_k(gaps, k=3, epsilon=4.0, domain=table, seed=9)
    from_list = dp_spark.top_k(gaps, k=3, epsilon=4.0, domain=DOMAIN, seed=9)
    assert from_frame.result["items"] == from_list.result["items"] == [
        {"rank": i + 1, "item": f"i{i}"} for i in range(3)]
    assert from_frame.parameters["domain"] == "9 public items" and from_frame.result["domain_size"] == 9
    budget = PrivacyFilter(PureDP(10.0))
    with pytest.raises(ParameterError, match="larger than the domain"):
        dp_spark.top_k(gaps, k=3, epsilon=1.0, domain=table.limit(2).select("item"), budget=budget)
    with pytest.raises(ParameterError, match="select the item column"):
        dp_spark.top_k(gaps, k=3, epsilon=1.0, domain=table.withColumnRenamed("item", "x"), budget=budget)
    assert budget.spent.epsilon == 0.0


def test_error_bound_is_stated_and_warned_about(gaps):
    release = dp_spark.top_k(gaps, k=5, epsilon=0.5, domain=DOMAIN, persons=320, seed=5)
    assert "each released item's true count is within" in release.errors["items"]
    assert release.error_bound > 0.1 * 320
    assert "more than 10% of the 320 persons" in release.error_warning
    assert release.error_warning in release.summary() and "is within" in release.summary()
    quiet = dp_spark.top_k(gaps, k=2, epsilon=50.0, domain=DOMAIN, persons=320, seed=5)
    assert quiet.error_warning is None and quiet.error_bound < 32


def test_unknown_domain_release_and_bottom(spark, gaps, report_schema):
    import jsonschema

    release = dp_spark.top_k(gaps, k=3, epsilon=4.0, delta=1e-6, seed=3, kbar=20)
    report = release.to_dict()
    result = report["result"]
    assert result["method"] == "unknown-domain" and result["bottom"] is False
    assert report["parameters"]["method"] == "auto" and report["parameters"]["kbar"] == 20
    assert [r["item"] for r in result["items"]] == ["outside", "i0", "i1"]  # no domain: any item
    assert report["privacy"]["epsilon"] == 4.0 and report["privacy"]["delta"] == 1e-6
    assert report["budget_split"][0]["zcdp"]["delta"] == pytest.approx(5e-7)
    jsonschema.validate(json.loads(json.dumps(report)), report_schema)
    few = spark.createDataFrame([(p, "rare") for p in range(3)], "person_id long, item string")
    tiny = dp_spark.top_k(few, k=2, epsilon=1.0, delta=1e-6, seed=3)
    assert tiny.bottom is True and tiny.result["items"] == [] and tiny.released_count == 0
    assert tiny.items.count() == 0


def test_domain_mechanisms_refuse_without_a_domain(gaps):
    budget = PrivacyFilter(PureDP(10.0))
    for mechanism in ("joint", "pnf-joint", "pnf-peel", "cdp-peel"):
        with pytest.raises(ParameterError, match="not differentially private.*'unknown-domain'"):
            dp_spark.top_k(gaps, k=3, epsilon=1.0, delta=1e-6, method=mechanism, budget=budget)
    with pytest.raises(ParameterError, match="needs delta > 0"):
        dp_spark.top_k(gaps, k=3, epsilon=1.0)  # auto without a domain is unknown-domain
    assert budget.spent.epsilon == 0.0


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        ({"k": 0}, ParameterError, "k must be"),
        ({"k": 10}, ParameterError, "larger than the domain"),
        ({"epsilon": 0.0}, ParameterError, "epsilon"),
        ({"delta": 1.0}, ParameterError, "delta"),
        ({"method": "magic"}, ParameterError, "method must be one of auto, joint"),
        ({"domain": []}, ParameterError, "empty"),
        ({"domain": ["a", "a"]}, ParameterError, "more than once"),
        ({"kbar": 0, "domain": None, "delta": 1e-6}, ParameterError, "kbar"),
        ({"k": 5, "kbar": 3, "domain": None, "delta": 1e-6}, ParameterError, "larger than kbar"),
        ({"item_col": "nothing"}, SchemaError, "not in the input"),
        ({"seed": -1}, ParameterError, "seed"),
        ({"k": 1001}, ParameterError, "above the limit of 1,000"),
        ({"kbar": 100_001, "domain": None, "delta": 1e-6}, ParameterError, "kbar=100,001 is above the limit"),
        ({"persons": 0}, ParameterError, "persons"),
    ],
)
def test_bad_parameters(gaps, kwargs, error, fragment):
    budget = PrivacyFilter(ApproxDP(10.0, 1e-3))
    args = {"k": 3, "epsilon": 1.0, "domain": DOMAIN, **kwargs}
    with pytest.raises(error, match=fragment):
        dp_spark.top_k(gaps, **args, budget=budget)
    assert budget.spent.epsilon == 0.0  # refused before anything was charged


# ------------------------------------------------------------------------ CLI

def run_cli(capsys, *argv):
    return helpers.run_cli(capsys, "top-k", *argv)


@pytest.fixture(scope="module")
def gaps_path(gaps, tmp_path_factory):
    path = tmp_path_factory.mktemp("topk") / "events.parquet"
    gaps.write.parquet(str(path))
    return path


def test_cli_writes_report_and_items(capsys, tmp_path, spark, gaps_path):
    (tmp_path / "domain.txt").write_text("\n".join(DOMAIN) + "\n")
    report_path, items_path = tmp_path / "r.json", tmp_path / "items.parquet"
    code, out, err = run_cli(capsys, "--input", str(gaps_path), "--domain", str(tmp_path / "domain.txt"),
                             "--k", "3", "--epsilon", "4", "--seed", "1", "--output", str(report_path),
                             "--items-output", str(items_path))
    assert code == 0, err
    report = json.loads(report_path.read_text())
    assert [r["item"] for r in report["result"]["items"]] == ["i0", "i1", "i2"]
    assert report["result"]["method"] in PURE  # auto with δ = 0
    items = spark.read.parquet(str(items_path)).orderBy("rank")
    assert [tuple(r) for r in items.collect()] == [(1, "i0"), (2, "i1"), (3, "i2")]


def test_cli_method_flag_and_error_warning_on_screen(capsys, tmp_path, gaps_path):
    (tmp_path / "domain.txt").write_text("\n".join(DOMAIN) + "\n")
    report_path = tmp_path / "r.json"
    code, out, err = run_cli(capsys, "--input", str(gaps_path), "--domain", str(tmp_path / "domain.txt"),
                             "--k", "3", "--epsilon", "0.5", "--method", "pnf-peel", "--persons", "320",
                             "--seed", "1", "--output", str(report_path))
    assert code == 0, err
    report = json.loads(report_path.read_text())
    assert report["result"]["method"] == "pnf-peel" and report["parameters"]["method"] == "pnf-peel"
    assert "is within" in out and "more than 10% of the 320 persons" in out


def test_cli_dry_run_prints_the_plan_and_reads_nothing(capsys, tmp_path):
    """--dry-run builds the release's plan (the same function the API calls)
    with no Spark: the domain file is not even opened."""
    code, out, err = run_cli(capsys, "--domain", str(tmp_path / "never_read.txt"), "--k", "3", "--epsilon", "0.25",
                             "--delta", "1e-6", "--dry-run", "--quiet")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["plan"] is True and doc["release"] == "top-k" and doc["parameters"]["method"] == "auto"
    assert doc["privacy"]["kind"] == "approx-dp" and doc["privacy"]["epsilon"] == 0.25
    assert [s["epsilon"] for s in doc["budget_split"]] == [pytest.approx(0.0125), pytest.approx(0.2375)]
    assert doc["budget_split"] == top_k_plan(epsilon=0.25, k=3, delta=1e-6, domain="x").budget_split()
    code, out, err = run_cli(capsys, "--method", "cdp-peel", "--dry-run")
    assert code == 2 and "needs a public domain" in err


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--k", "0"], "k must be a whole number >= 1"),
        (["--domain", "{tmp}/domain.txt", "--k", "20"], "larger than the domain"),
        (["--domain", "{tmp}/empty.txt"], "domain is empty"),
        (["--domain", "{tmp}/dups.txt"], "more than once"),
        (["--domain", "{tmp}/missing.txt"], "does not exist"),
        (["--method", "joint"], "'unknown-domain'"),
        (["--delta", "0"], "needs delta > 0"),
        (["--epsilon", "-1"], "epsilon must be"),
        (["--kbar", "0", "--delta", "1e-6"], "kbar must be"),
        (["--budget-epsilon", "0.5", "--delta", "1e-6", "--budget-delta", "1e-6"], "budget"),
    ],
)
def test_cli_bad_input_one_line_exit_2_and_outputs_kept(capsys, tmp_path, spark, gaps_path, argv, fragment):
    (tmp_path / "domain.txt").write_text("\n".join(DOMAIN))
    (tmp_path / "empty.txt").write_text("\n \n")
    (tmp_path / "dups.txt").write_text("a\nb\na\n")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert_refused_keeping_outputs(capsys, tmp_path, "top-k", ["--input", str(gaps_path), *argv], fragment)


# -- seeded cases (tests/spark/seeded.py: test_seeded_values, test_noise_records) --

SEEDED_DOMAIN = [f"item{i}" for i in range(32)]

#: case -> (parameters, input kind, the kinds of Release.noise in the order drawn, or None:
#: checked by check_noise_records); every method
SEEDED_CASES = {
    "top_k/auto-no-domain": (dict(epsilon=2.0, delta=1e-6, k=3, method="auto", kbar=10), "persons", ["gumbel"]),
    # k <= 10ε: chosen from public parameters, nothing drawn
    "top_k/auto-domain": (dict(epsilon=2.0, delta=1e-6, k=3, method="auto", domain=SEEDED_DOMAIN), "persons",
                          ["exponential-mechanism"]),
    "top_k/auto-domain-pure": (dict(epsilon=2.0, k=3, method="auto", domain=SEEDED_DOMAIN), "persons",
                               ["exponential-mechanism"]),
    # a Laplace choice, then the chosen mechanism's record
    "top_k/auto-domain-choice": (dict(epsilon=0.2, delta=1e-6, k=3, method="auto", domain=SEEDED_DOMAIN), "persons",
                                 None),
    "top_k/joint": (dict(epsilon=2.0, k=3, method="joint", domain=SEEDED_DOMAIN), "persons",
                    ["exponential-mechanism"]),
    "top_k/pnf-joint": (dict(epsilon=2.0, k=3, method="pnf-joint", domain=SEEDED_DOMAIN), "persons",
                        ["exponential-mechanism"]),
    "top_k/pnf-peel": (dict(epsilon=2.0, k=3, method="pnf-peel", domain=SEEDED_DOMAIN), "persons", ["exponential"]),
    "top_k/cdp-peel": (dict(epsilon=2.0, delta=1e-6, k=3, method="cdp-peel", domain=SEEDED_DOMAIN), "persons",
                       ["gumbel"]),
    "top_k/unknown-domain": (dict(epsilon=2.0, delta=1e-6, k=3, method="unknown-domain", kbar=10), "persons",
                             ["gumbel"]),
}


def check_noise_records(case, release):
    """auto's private choice: a discrete Laplace record charged to the first step, then the chosen mechanism's."""
    if case == "top_k/auto-domain-choice":
        kinds = [r.kind for r in release.noise]
        labels = [part["step"] for part in release.budget_split]
        assert kinds[0] == "discrete-laplace" and len(kinds) == 2 and release.noise[0].step == labels[0]


SEEDED_VALUES = {
    'top_k/auto-domain': {
        'values': {
            'auto_predicted_error': {'cdp-peel': None, 'joint': None},
            'domain_size': 32,
            'error_bound': 13.3,
            'error_warning': None,
            'items': [
                {'item': 'item0', 'rank': 1},
                {'item': 'item1', 'rank': 2},
                {'item': 'item2', 'rank': 3},
            ],
            'k': 3,
            'method': 'pnf-joint',
            'released_count': 3,
        },
    },
    'top_k/auto-domain-choice': {
        'values': {
            'auto_predicted_error': {'cdp-peel': 54.72214583367991, 'joint': 109.4442916673598},
            'domain_size': 32,
            'error_bound': 144.0,
            'error_warning': "the error bound 144.0 is more than 10% of a noisy estimate (286) of the largest count, from auto's share of ε: the released ranking may hold items far from the true top k; raise epsilon or lower k",
            'items': [
                {'item': 'item0', 'rank': 1},
                {'item': 'item1', 'rank': 2},
                {'item': 'item4', 'rank': 3},
            ],
            'k': 3,
            'method': 'cdp-peel',
            'released_count': 3,
        },
    },
    'top_k/auto-domain-pure': {
        'values': {
            'auto_predicted_error': {'cdp-peel': None, 'joint': None},
            'domain_size': 32,
            'error_bound': 13.3,
            'error_warning': None,
            'items': [
                {'item': 'item0', 'rank': 1},
                {'item': 'item1', 'rank': 2},
                {'item': 'item2', 'rank': 3},
            ],
            'k': 3,
            'method': 'pnf-joint',
            'released_count': 3,
        },
    },
    'top_k/auto-no-domain': {
        'values': {
            'bottom': False,
            'error_bound': 18.8,
            'error_warning': None,
            'items': [
                {'item': 'item0', 'rank': 1},
                {'item': 'item1', 'rank': 2},
                {'item': 'item3', 'rank': 3},
            ],
            'k': 3,
            'method': 'unknown-domain',
            'released_count': 3,
        },
    },
    'top_k/cdp-peel': {
        'values': {
            'domain_size': 32,
            'error_bound': 13.7,
            'error_warning': None,
            'items': [
                {'item': 'item0', 'rank': 1},
                {'item': 'item1', 'rank': 2},
                {'item': 'item4', 'rank': 3},
            ],
            'k': 3,
            'method': 'cdp-peel',
            'released_count': 3,
        },
    },
    'top_k/joint': {
        'values': {
            'domain_size': 32,
            'error_bound': 13.3,
            'error_warning': None,
            'items': [
                {'item': 'item0', 'rank': 1},
                {'item': 'item1', 'rank': 2},
                {'item': 'item2', 'rank': 3},
            ],
            'k': 3,
            'method': 'joint',
            'released_count': 3,
        },
    },
    'top_k/pnf-joint': {
        'values': {
            'domain_size': 32,
            'error_bound': 13.3,
            'error_warning': None,
            'items': [
                {'item': 'item0', 'rank': 1},
                {'item': 'item1', 'rank': 2},
                {'item': 'item2', 'rank': 3},
            ],
            'k': 3,
            'method': 'pnf-joint',
            'released_count': 3,
        },
    },
    'top_k/pnf-peel': {
        'values': {
            'domain_size': 32,
            'error_bound': 11.3,
            'error_warning': None,
            'items': [
                {'item': 'item0', 'rank': 1},
                {'item': 'item1', 'rank': 2},
                {'item': 'item4', 'rank': 3},
            ],
            'k': 3,
            'method': 'pnf-peel',
            'released_count': 3,
        },
    },
    'top_k/unknown-domain': {
        'values': {
            'bottom': False,
            'error_bound': 18.8,
            'error_warning': None,
            'items': [
                {'item': 'item0', 'rank': 1},
                {'item': 'item1', 'rank': 2},
                {'item': 'item3', 'rank': 3},
            ],
            'k': 3,
            'method': 'unknown-domain',
            'released_count': 3,
        },
    },
}
