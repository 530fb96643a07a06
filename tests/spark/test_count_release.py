"""The count-release (Private Count Release and the bounded baseline) on
local[2]: the contribution-bounding stage, the Python API and the CLI."""

from __future__ import annotations

import dataclasses
import json
import re
from functools import partial

import jsonschema
import numpy as np
import pandas as pd
import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from scipy.stats import chisquare

import dp_spark
from dp_spark.accounting import ZCDP, PrivacyFilter
from dp_spark.plans.count_release import plan as count_release_plan
from dp_spark.mechanisms.count_release import (
    gaussian_threshold_select,
    keyed_noisy_counts,
    noise_key,
    within_relative_error_probability,
)
from dp_spark.errors import ParameterError, SchemaError
from dp_spark.stages import item_counts as stage
from tests.unit import helpers
from tests.spark.seeded import PERSONS
from tests.unit.helpers import assert_refused_keeping_outputs

# Item "c<j>" is held by HOLDERS[j] distinct persons; persons 0..2999 hold
# items by rank, so a person holds at most 4 of them. (Not 2000: that is
# 1/ε* of pcr's first selection, a public noise scale its report records.)
HOLDERS = [3000, 2011, 1200, 777, 3]
RESULT_KEYS = {"items", "released_count", "method", "rho_spent", "delta_spent"}


@pytest.fixture(scope="module")
def counts_table(spark):
    rows = [(p, f"c{j}") for j, n in enumerate(HOLDERS) for p in range(n)]
    return spark.createDataFrame(rows, "person_id long, item string").cache()


# -------------------------------------------------------- bounding stage

def test_bounding_is_per_person_and_keeps_at_most_m(spark):
    """kept(D + p) = kept(D) ∪ (p's rows), and p keeps min(m, its distinct
    items): the choice of one person never depends on anyone else, so the
    bounded counts have L2 sensitivity sqrt(m). A random table and a
    neighbour; rows are repeated to catch a missing dedup."""
    rng = np.random.default_rng(11)
    m = 3
    for _ in range(1):
        base = pd.DataFrame({"person_id": rng.integers(0, 30, 400), "item": rng.integers(0, 40, 400).astype(str)})
        newcomer = pd.DataFrame({"person_id": 777, "item": rng.integers(0, 40, 9).astype(str)})
        both = pd.concat([base, base.head(50), newcomer, newcomer])
        kept = {}
        for name, table in (("base", base), ("added", both)):
            edge_df = stage.edge_table(spark.createDataFrame(table), "person_id", "item")
            kept[name] = set(map(tuple, stage.bound_contributions(edge_df, m, salt=5).toPandas().to_numpy().tolist()))
        mine = {row for row in kept["added"] if row[0] == 777}
        assert kept["added"] - mine == kept["base"]
        assert len(mine) == min(m, newcomer["item"].nunique())
        per_person = pd.Series([p for p, _ in kept["base"]]).value_counts()
        distinct = base.drop_duplicates().groupby("person_id").size()
        assert (per_person == np.minimum(distinct[per_person.index], m)).all()


def test_bounding_choice_looks_uniform(spark):
    """2,000 persons each hold the same 10 items; with m = 1 each item should
    be kept by about 200 persons. Chi-square goodness of fit at the 0.001
    level (fixed salt, so the result is reproducible)."""
    df = spark.range(2000).select(F.col("id").alias("person_id"), F.explode(F.array(*[F.lit(f"t{i}") for i in range(10)])).alias("item"))
    counts = stage.bounded_item_counts(stage.edge_table(df, "person_id", "item"), 1, salt=123).toPandas()
    assert counts["count"].sum() == 2000 and len(counts) == 10
    assert chisquare(counts["count"].to_numpy()).pvalue > 0.001


def test_noisy_selection_and_counts_inside_spark(spark, counts_table):
    """The mechanism layer's Gaussian threshold runs in mapInPandas: counts
    far above the threshold are kept, far below dropped; the noise is keyed
    per item, so another partitioning of the same counts selects the same
    items. The count noise too: every listed item gets its count (0 when
    absent) plus exactly keyed_noisy_counts' draw, whatever the partitioning."""
    edge_df = stage.edge_table(counts_table, "person_id", "item")
    select = partial(gaussian_threshold_select, sigma=2.0, threshold=500.0, key=noise_key(np.random.default_rng(1)))
    counts_df = stage.item_counts(edge_df)
    selected = stage.select_items(counts_df, select)
    first = sorted(r["item"] for r in selected.collect())
    assert first == ["c0", "c1", "c2", "c3"]
    again = stage.select_items(counts_df.repartition(3, "count"), select)
    assert sorted(r["item"] for r in again.collect()) == first

    key = noise_key(np.random.default_rng(2))
    add_noise = partial(keyed_noisy_counts, sigma=3.0, key=key)
    wanted = spark.createDataFrame([("c1",), ("c4",), ("absent",)], "item string")
    total, rows = stage.collect_item_counts(stage.noisy_counts_of_items(counts_df, wanted, add_noise))
    names = np.array(["c1", "c4", "absent"], dtype=object)
    expected = keyed_noisy_counts(names, np.array([HOLDERS[1], HOLDERS[4], 0]), sigma=3.0, key=key)
    assert total == 3 and dict(rows) == dict(zip(names, expected.tolist()))
    assert [c for _, c in rows] == sorted(expected.tolist(), reverse=True)
    total, rows = stage.collect_item_counts(
        stage.noisy_counts_of_items(counts_df.coalesce(1), wanted.repartition(2), add_noise), minimum=100)
    assert total == 3 and rows == [("c1", int(expected[0]))]


# ------------------------------------------------------------------ release

def test_public_name_is_the_release_function():
    """The mechanism package (dp_spark.mechanisms.count_release, imported above) must not shadow
    the lazily exported function dp_spark.count_release."""
    from dp_spark.releases.count_release import count_release

    assert dp_spark.count_release is count_release and dp_spark.top_k.__name__ == "top_k"


def test_pcr_release_report(counts_table, report_schema):
    release = dp_spark.count_release(counts_table, rho=0.5, delta=1e-6, seed=1)
    report = release.to_dict()
    jsonschema.validate(json.loads(json.dumps(report)), report_schema)
    result, privacy = report["result"], report["privacy"]
    assert RESULT_KEYS <= set(result)
    assert result["method"] == "pcr" and report["parameters"]["method"] == "pcr"
    assert privacy["kind"] == "zcdp" and privacy["rho"] == 0.5 and privacy["delta"] == 1e-6
    # the (ε, δ) equivalent of the zCDP guarantee, δ' = conversion_delta = δ by default
    assert privacy["approx_dp_equivalent"]["delta"] == pytest.approx(2e-6)
    assert privacy["approx_dp_equivalent"]["epsilon"] == pytest.approx(0.5 + 2 * np.sqrt(0.5 * np.log(1e6)))
    assert release.privacy == privacy
    assert result["rho_spent"] <= 0.5 and result["delta_spent"] <= 1e-6
    items = [r["item"] for r in result["items"]]
    assert result["released_count"] == len(items) == release.released_count
    assert items[:4] == ["c0", "c1", "c2", "c3"] and "c3" in items and "c4" not in items
    for row in result["items"]:
        true = HOLDERS[int(row["item"][1:])]
        assert abs(row["count"] - true) < 6 * row["sigma"]
    # the split reconciles with what is claimed and charged: the filter's unused part is listed
    assert sum(s["rho"] for s in report["budget_split"]) == pytest.approx(privacy["rho"], rel=1e-12)
    assert sum(s["delta"] for s in report["budget_split"]) == pytest.approx(privacy["delta"], rel=1e-9)
    unused = report["budget_split"][-1]
    assert unused["step"].startswith("held by the privacy filter, unused")
    assert unused["rho"] == pytest.approx(0.5 - result["rho_spent"], abs=1e-15)
    # every count carries its own accuracy statement, from public values only
    for row in result["items"]:
        assert row["p_within_r"] == within_relative_error_probability(row["sigma"], 0.1, row["threshold"])
    worst = min(row["p_within_r"] for row in result["items"])
    assert f"worst case {worst:.3g}" in report["errors"]["items"]
    # the `items` artifact is the same rows as a Spark DataFrame; the list stays in the result
    expected = pd.DataFrame({"rank": np.arange(1, len(items) + 1, dtype="int32"), "item": items,
                             "count": [r["count"] for r in result["items"]],
                             "sigma": [r["sigma"] for r in result["items"]]})
    assert release.items is release.artifacts["items"] and release.result["items"] == result["items"]
    assert_df_equality(release.items, release.items.sparkSession.createDataFrame(
        expected, release.items.schema), ignore_nullable=True)
    # no true count in the report, unless it happens to equal a released noisy count
    text = json.dumps(report)
    noisy = {str(r["count"]) for r in result["items"]}
    assert not ({str(h) for h in HOLDERS[:4]} - noisy) & set(re.findall(r"\d+", text))


def test_bounded_release_with_and_without_threshold(counts_table, report_schema):
    plain = dp_spark.count_release(counts_table, rho=0.5, delta=1e-6, method="bounded", max_items=4, seed=2)
    report = plain.to_dict()
    jsonschema.validate(json.loads(json.dumps(report)), report_schema)
    result = report["result"]
    assert result["method"] == "bounded" and report["parameters"]["max_items"] == 4
    assert [r["item"] for r in result["items"]] == ["c0", "c1", "c2", "c3"]  # c4 (3 persons) is not selected
    sigma = result["items"][0]["sigma"]
    assert sigma == pytest.approx(np.sqrt(4 / (2 * 0.25)))
    for row in result["items"]:
        assert abs(row["count"] - HOLDERS[int(row["item"][1:])]) < 6 * sigma
    assert [s["rho"] for s in report["budget_split"]] == pytest.approx([0.25, 0.25])
    # bounded's split is fixed by its parameters: the plan's split, entry for entry
    plan = count_release_plan(rho=0.5, delta=1e-6, method="bounded", max_items=4)
    assert report["budget_split"] == plan.budget_split()
    assert result["selected"] == 4 and result["released_count"] == 4
    # the threshold (2 + r)σ/r ≈ 1134 is post-processing: same seed, same noise, a subset
    cut = dp_spark.count_release(counts_table, rho=0.5, delta=1e-6, method="bounded", max_items=4, seed=2,
                                 count_threshold=True, relative_error=0.005)
    assert cut.count_threshold == pytest.approx(401 * sigma)
    kept = [r for r in result["items"] if r["count"] >= cut.count_threshold]
    assert cut.result["items"] == kept and 0 < len(kept) < len(result["items"])
    assert cut.selected == 4 and cut.released_count == len(kept) == cut.items.count()


def test_pcr_statement_does_not_overstate_accuracy_when_the_floor_binds(counts_table):
    """r = 0.02: σ = 2/ε (the floor) for every count, so the probability of
    being within r at the threshold is far below the paper's 87%; the report
    must say so per count and overall."""
    report = dp_spark.count_release(counts_table, rho=0.5, delta=1e-6, relative_error=0.02, seed=4).to_dict()
    items = report["result"]["items"]
    assert items
    for row in items:
        assert row["sigma"] > 0.02 / 1.5 * row["threshold"]  # the floor binds
        assert row["p_within_r"] < 0.8
    text = report["errors"]["items"]
    assert f"(a lower probability) for {len(items)} of them" in text
    assert f"{max(r['p_within_r'] for r in items):.0%}" in text


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        ({"rho": 0.0}, ParameterError, "rho"),
        ({"rho": -1.0}, ParameterError, "rho"),
        ({"delta": 0.0}, ParameterError, "delta"),
        ({"delta": 1.0}, ParameterError, "delta"),
        ({"relative_error": 0.0}, ParameterError, "relative_error"),
        ({"kbar": 0}, ParameterError, "kbar"),
        ({"kbar": 1_000_001}, ParameterError, "kbar must be a whole number from 1 to 1,000,000"),
        ({"method": "bounded", "max_items": 100_001}, ParameterError,
         "max_items must be a whole number from 1 to 100,000"),
        ({"method": "magic"}, ParameterError, "method must be"),
        ({"method": "bounded"}, ParameterError, "needs max_items"),
        ({"method": "bounded", "max_items": 0}, ParameterError, "max_items"),
        ({"method": "bounded", "max_items": 3, "alpha": 1.0}, ParameterError, "alpha"),
        ({"rho": 1e-9}, ParameterError, "epsilon_min"),
        ({"item_col": "nothing"}, SchemaError, "not in the input"),
    ],
)
def test_bad_parameters(counts_table, kwargs, error, fragment):
    args = {"rho": 0.5, "delta": 1e-6, **kwargs}
    with pytest.raises(error, match=fragment):
        dp_spark.count_release(counts_table, **args)


@pytest.mark.parametrize("kwargs", [{"kbar": 10**7}, {"method": "bounded", "max_items": 10**6}])
def test_sizing_limits_are_checked_before_reading(unreadable_events, kwargs):
    budget = PrivacyFilter(ZCDP(1.0, 1e-5))
    with pytest.raises(ParameterError, match="must be a whole number from 1 to"):
        dp_spark.count_release(unreadable_events, rho=0.5, delta=1e-6, budget=budget, **kwargs)
    assert budget.ledger == []  # nothing spent


# ---------------------------------------------------------------------- CLI

def run_cli(capsys, *argv):
    return helpers.run_cli(capsys, "count-release", *argv)


@pytest.fixture(scope="module")
def counts_path(counts_table, tmp_path_factory):
    path = tmp_path_factory.mktemp("pcr") / "events.parquet"
    counts_table.write.parquet(str(path))
    return path


def test_cli_writes_report_and_items(capsys, tmp_path, spark, counts_path):
    report_path, items_path = tmp_path / "r.json", tmp_path / "items.parquet"
    code, out, err = run_cli(capsys, "--input", str(counts_path), "--rho", "0.5", "--kbar", "50",
                             "--seed", "3", "--output", str(report_path), "--items-output", str(items_path))
    assert code == 0, err
    report = json.loads(report_path.read_text())
    assert report["result"]["method"] == "pcr" and report["parameters"]["kbar"] == 50
    table = spark.read.parquet(str(items_path)).orderBy("rank").toPandas()
    assert table["item"].tolist() == [r["item"] for r in report["result"]["items"]]
    assert table["count"].tolist() == [r["count"] for r in report["result"]["items"]]
    assert "NOT private" in out


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--rho", "0"], "rho must be"),
        (["--delta", "1.5"], "delta must be"),
        (["--relative-error", "0"], "relative_error must be"),
        (["--kbar", "0"], "kbar must be"),
        (["--kbar", "2000000"], "kbar must be a whole number from 1 to 1,000,000"),
        (["--method", "bounded", "--max-items", "1000000"], "max_items must be a whole number from 1 to 100,000"),
        (["--method", "bounded"], "needs max_items"),
        (["--budget-rho", "0.1", "--budget-delta", "1e-6"], "budget"),
        (["--item-col", "nothing"], "'nothing' is not in the input"),
    ],
)
def test_cli_bad_input_one_line_exit_2_and_outputs_kept(capsys, tmp_path, spark, counts_path, argv, fragment):
    assert_refused_keeping_outputs(capsys, tmp_path, "count-release", ["--input", str(counts_path), *argv], fragment)


def test_session_built_by_dp_spark_has_no_ui_and_no_event_log(spark):
    """The tests' session comes from dp_spark.session.get_session: Spark's UI
    (SQL tab: exact row counts) and event log are off (finding 7)."""
    assert spark.conf.get("spark.ui.enabled") == "false"
    assert spark.conf.get("spark.eventLog.enabled", "false") == "false"
    assert spark.sparkContext.uiWebUrl is None


# -- seeded cases (tests/spark/seeded.py: test_seeded_values, test_noise_records) --

#: case -> (parameters, input kind, the kinds of Release.noise in the order drawn, or None:
#: checked by check_noise_records); every method
#: The values only a grouped report has (issue 24): the per-key table and its size.
GROUPED_ONLY = {"groups", "groups_released", "groups_in_report", "group_sizes"}


def bare(record):
    """A noise record up to its target's wording (the grouped one says pairs)."""
    return dataclasses.replace(record, target="")


@pytest.mark.parametrize("kwargs", [dict(method="pcr", kbar=10), dict(method="bounded", max_items=3),
                                    dict(method="bounded", max_items=3, count_threshold=True)],
                         ids=["pcr", "bounded", "bounded-threshold"])
def test_an_ungrouped_release_is_the_one_key_grouped_release(spark, kwargs):
    """Issue 37 (one body): seeded, the ungrouped release equals the grouped
    release with one public key and m = 1 on the same rows, all in that key:
    the same released items and counts (noisy: a different noise key, salt
    or order on either path changes them), values, budget split and noise
    records."""
    df = spark.createDataFrame([(p, i, "k") for p, i in PERSONS], "person_id long, item string, g string")
    plain = dp_spark.count_release(df, rho=2.0, delta=1e-6, **kwargs, seed=5)
    grouped = dp_spark.count_release(df, rho=2.0, delta=1e-6, **kwargs, seed=5, group_by="g", groups=["k"],
                                     max_groups=1)
    rows = plain.result["items"]
    assert rows and len({r["count"] for r in rows}) > 1
    assert grouped.result["items"] == [{"group": "k", **r} for r in rows]
    assert {k: v for k, v in grouped.result.items() if k not in GROUPED_ONLY | {"items"}} == {
        k: v for k, v in plain.result.items() if k != "items"}
    assert grouped.result["groups"] == [{"group": "k", "released_count": len(rows)}]
    # release.groups holds the same rows (a DataFrame of released pairs, in no promised order)
    frame = grouped.groups.toPandas().drop(columns="error").sort_values("item", ignore_index=True)
    expected = (plain.items.toPandas().drop(columns="rank").assign(g="k")[list(frame.columns)]
                .sort_values("item", ignore_index=True))
    assert frame.equals(expected)
    assert grouped.budget_split == plain.budget_split
    assert [bare(r) for r in grouped.noise] == [bare(r) for r in plain.noise]


SEEDED_CASES = {
    # one Gumbel record per selection, one discrete Gaussian per count
    "count_release/pcr": (dict(rho=2.0, delta=1e-6, method="pcr", kbar=10), "persons", None),
    "count_release/bounded": (dict(rho=2.0, delta=1e-6, method="bounded", max_items=3), "persons",
                              ["gaussian", "discrete-gaussian"]),
    "count_release/bounded-threshold": (dict(rho=2.0, delta=1e-6, method="bounded", max_items=3,
                                             count_threshold=True), "persons", ["gaussian", "discrete-gaussian"]),
}


def check_noise_records(case, release):
    """pcr: one Gumbel record per selection call, one discrete Gaussian per released count, at its sigma."""
    if case == "count_release/pcr":
        kinds, v = [r.kind for r in release.noise], release.values
        assert kinds.count("gumbel") == v["selection_calls"] and kinds.count("discrete-gaussian") == v["released_count"]
        assert [r.scale for r in release.noise if r.kind == "discrete-gaussian"] == [x["sigma"] for x in v["items"]]


SEEDED_VALUES = {
    'count_release/bounded': {
        'values': {
            'count_threshold': None,
            'delta_spent': 1e-06,
            'items': [
                {'count': 205, 'item': 'item0', 'sigma': 1.2247448713915892},
                {'count': 115, 'item': 'item1', 'sigma': 1.2247448713915892},
                {'count': 79, 'item': 'item2', 'sigma': 1.2247448713915892},
                {'count': 77, 'item': 'item4', 'sigma': 1.2247448713915892},
                {'count': 74, 'item': 'item3', 'sigma': 1.2247448713915892},
                {'count': 58, 'item': 'item5', 'sigma': 1.2247448713915892},
                {'count': 58, 'item': 'item7', 'sigma': 1.2247448713915892},
                {'count': 46, 'item': 'item16', 'sigma': 1.2247448713915892},
                {'count': 43, 'item': 'item12', 'sigma': 1.2247448713915892},
                {'count': 42, 'item': 'item6', 'sigma': 1.2247448713915892},
                {'count': 41, 'item': 'item9', 'sigma': 1.2247448713915892},
                {'count': 38, 'item': 'item10', 'sigma': 1.2247448713915892},
                {'count': 36, 'item': 'item14', 'sigma': 1.2247448713915892},
                {'count': 34, 'item': 'item8', 'sigma': 1.2247448713915892},
                {'count': 33, 'item': 'item17', 'sigma': 1.2247448713915892},
                {'count': 33, 'item': 'item19', 'sigma': 1.2247448713915892},
                {'count': 33, 'item': 'item25', 'sigma': 1.2247448713915892},
                {'count': 32, 'item': 'item18', 'sigma': 1.2247448713915892},
                {'count': 32, 'item': 'item20', 'sigma': 1.2247448713915892},
                {'count': 31, 'item': 'item15', 'sigma': 1.2247448713915892},
                {'count': 30, 'item': 'item23', 'sigma': 1.2247448713915892},
                {'count': 30, 'item': 'item27', 'sigma': 1.2247448713915892},
                {'count': 29, 'item': 'item11', 'sigma': 1.2247448713915892},
                {'count': 29, 'item': 'item21', 'sigma': 1.2247448713915892},
                {'count': 29, 'item': 'item24', 'sigma': 1.2247448713915892},
                {'count': 28, 'item': 'item22', 'sigma': 1.2247448713915892},
                {'count': 27, 'item': 'item13', 'sigma': 1.2247448713915892},
                {'count': 27, 'item': 'item28', 'sigma': 1.2247448713915892},
                {'count': 16, 'item': 'item29', 'sigma': 1.2247448713915892},
                {'count': 13, 'item': 'item26', 'sigma': 1.2247448713915892},
            ],
            'max_items': 3,
            'method': 'bounded',
            'released_count': 30,
            'rho_spent': 2.0,
            'selected': 30,
            'selection_threshold': 7.087999328880498,
        },
    },
    'count_release/bounded-threshold': {
        'values': {
            'count_threshold': 25.719642299223374,
            'delta_spent': 1e-06,
            'items': [
                {'count': 205, 'item': 'item0', 'sigma': 1.2247448713915892},
                {'count': 115, 'item': 'item1', 'sigma': 1.2247448713915892},
                {'count': 79, 'item': 'item2', 'sigma': 1.2247448713915892},
                {'count': 77, 'item': 'item4', 'sigma': 1.2247448713915892},
                {'count': 74, 'item': 'item3', 'sigma': 1.2247448713915892},
                {'count': 58, 'item': 'item5', 'sigma': 1.2247448713915892},
                {'count': 58, 'item': 'item7', 'sigma': 1.2247448713915892},
                {'count': 46, 'item': 'item16', 'sigma': 1.2247448713915892},
                {'count': 43, 'item': 'item12', 'sigma': 1.2247448713915892},
                {'count': 42, 'item': 'item6', 'sigma': 1.2247448713915892},
                {'count': 41, 'item': 'item9', 'sigma': 1.2247448713915892},
                {'count': 38, 'item': 'item10', 'sigma': 1.2247448713915892},
                {'count': 36, 'item': 'item14', 'sigma': 1.2247448713915892},
                {'count': 34, 'item': 'item8', 'sigma': 1.2247448713915892},
                {'count': 33, 'item': 'item17', 'sigma': 1.2247448713915892},
                {'count': 33, 'item': 'item19', 'sigma': 1.2247448713915892},
                {'count': 33, 'item': 'item25', 'sigma': 1.2247448713915892},
                {'count': 32, 'item': 'item18', 'sigma': 1.2247448713915892},
                {'count': 32, 'item': 'item20', 'sigma': 1.2247448713915892},
                {'count': 31, 'item': 'item15', 'sigma': 1.2247448713915892},
                {'count': 30, 'item': 'item23', 'sigma': 1.2247448713915892},
                {'count': 30, 'item': 'item27', 'sigma': 1.2247448713915892},
                {'count': 29, 'item': 'item11', 'sigma': 1.2247448713915892},
                {'count': 29, 'item': 'item21', 'sigma': 1.2247448713915892},
                {'count': 29, 'item': 'item24', 'sigma': 1.2247448713915892},
                {'count': 28, 'item': 'item22', 'sigma': 1.2247448713915892},
                {'count': 27, 'item': 'item13', 'sigma': 1.2247448713915892},
                {'count': 27, 'item': 'item28', 'sigma': 1.2247448713915892},
            ],
            'max_items': 3,
            'method': 'bounded',
            'released_count': 28,
            'rho_spent': 2.0,
            'selected': 30,
            'selection_threshold': 7.087999328880498,
        },
    },
    'count_release/pcr': {
        'values': {
            'bottoms': 24,
            'delta_spent': 2.9000000000000003e-10,
            'final_epsilon': 2.048000000000002,
            'items': [
                {
                    'count': 248,
                    'item': 'item0',
                    'p_within_r': 0.8254236496438185,
                    'sigma': 11.048543456039797,
                    'threshold': 153.64126876704492,
                },
                {
                    'count': 133,
                    'item': 'item1',
                    'p_within_r': 0.7948931031657014,
                    'sigma': 5.524271728019898,
                    'threshold': 77.02961432457339,
                },
                {
                    'count': 91,
                    'item': 'item4',
                    'p_within_r': 0.6941647250917076,
                    'sigma': 1.9531249999999984,
                    'threshold': 27.76550543419367,
                },
                {
                    'count': 88,
                    'item': 'item2',
                    'p_within_r': 0.6941647250917076,
                    'sigma': 1.9531249999999984,
                    'threshold': 27.635103683583786,
                },
                {
                    'count': 90,
                    'item': 'item3',
                    'p_within_r': 0.6941647250917076,
                    'sigma': 1.9531249999999984,
                    'threshold': 27.484565910314977,
                },
            ],
            'method': 'pcr',
            'released_count': 5,
            'rho_spent': 1.3516799687500025,
            'selection_calls': 29,
            'stopped': 'rho',
        },
    },
}
