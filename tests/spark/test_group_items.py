"""Grouped set-union and grouped count-release (issue 24): one mechanism on
the composite key (group, item).

The composite-key transformation keeps each release's per-person bound on
random add/remove-one-person neighbours (set-union: the added person's
restricted set has at most Δ0 pairs over all groups and no other person's set
changes, so the additive histograms move by at most 1 in ℓ1 / ℓ2;
count-release: every (group, item) count of distinct persons moves by 0 or 1
upwards, only on the added person's pairs); the split back to (group, item)
is exact; seeded API and CLI runs; a public key without rows; the refusals
(before anything is spent); an ungrouped call unchanged."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pyspark.sql import types as T

import dp_spark
from dp_spark import cli
from dp_spark.accounting import ApproxDP, PrivacyFilter, ZCDP
from dp_spark.errors import ParameterError, SchemaError
from dp_spark.keys import GroupKeys
from dp_spark.stages.edges import GROUP, ITEM, PERSON, UNGROUPED
from dp_spark.stages.edges import edges as edge_table
from dp_spark.stages.group_items import GROUP_INDEX, Composite
from dp_spark.stages.groups import cap_groups
from dp_spark.stages.item_counts import item_counts
from dp_spark.stages.set_union import restricted_sets, weight_histogram

KEYS = ("g0", "g1", "g2", "g3")
#: The composite key of a run with the public keys KEYS and string items.
KEYED = Composite(GroupKeys.of(KEYS, whole=False), T.StringType(), False)


def random_rows(rng, persons, groups=4, items=9):
    rows = []
    for p in persons:
        for _ in range(int(rng.integers(1, 12))):
            rows.append((int(p), f"i{rng.integers(items)}", f"g{rng.integers(groups)}"))
    return rows


def composite(spark, rows, m=None):
    """The grouped edge table as the release builds it: public keys (index
    added), an optional cap m, the composite key."""
    edges = spark.createDataFrame(rows, f"{PERSON} long, {ITEM} string, {GROUP} string")
    keys = spark.createDataFrame([(k, i) for i, k in enumerate(KEYS)], f"{GROUP} string, {GROUP_INDEX} int")
    restricted = edges.join(keys, on=GROUP)
    return KEYED.edges(restricted if m is None else cap_groups(restricted, m))


def person_sets(spark, rows, max_items, salt, m=None):
    return {r[PERSON]: sorted(r["items"]) for r in restricted_sets(composite(spark, rows, m), max_items, salt).collect()}


@pytest.mark.parametrize("seed", range(4))
def test_set_union_composite_keys_keep_the_per_person_bound(spark, seed):
    rng = np.random.default_rng(300 + seed)
    max_items, salt, m = int(rng.integers(1, 6)), int(rng.integers(1, 2**40)), [None, 1, 2][seed % 3]
    persons = rng.choice(5_000, size=int(rng.integers(6, 20)), replace=False)
    y, others = int(persons[0]), persons[1:]
    base, added = random_rows(rng, others), random_rows(rng, [y])
    without = person_sets(spark, base, max_items, salt, m)
    with_y = person_sets(spark, base + added, max_items, salt, m)
    assert {p: s for p, s in with_y.items() if p != y} == without  # no other person's set moves
    mine = with_y.get(y, [])
    assert len(mine) <= max_items  # Δ0 pairs over ALL groups
    pairs = {(KEYS.index(g), i) for _, i, g in added}
    assert {KEYED.parse(c) for c in mine} <= pairs
    if m is not None:
        assert len({KEYED.parse(c)[0] for c in mine}) <= m
    for method, norm in (("weighted-laplace", 1), ("weighted-gaussian", 2)):
        h0 = {r[ITEM]: r["weight"] for r in weight_histogram(restricted_sets(composite(spark, base, m), max_items,
                                                                            salt), method).collect()}
        h1 = {r[ITEM]: r["weight"] for r in weight_histogram(restricted_sets(composite(spark, base + added, m),
                                                                            max_items, salt), method).collect()}
        diff = np.array([h1.get(k, 0.0) - h0.get(k, 0.0) for k in set(h0) | set(h1)])
        assert (diff >= 0).all() and np.linalg.norm(diff, ord=norm) <= 1.0 + 1e-9


@pytest.mark.parametrize("seed", range(4))
def test_count_release_composite_counts_move_by_at_most_one_on_the_added_pairs(spark, seed):
    rng = np.random.default_rng(400 + seed)
    persons = rng.choice(5_000, size=int(rng.integers(6, 25)), replace=False)
    y, others = int(persons[0]), persons[1:]
    base, added = random_rows(rng, others), random_rows(rng, [y])
    m = [None, 1, 3][seed % 3]

    def counts(rows):
        return {r[ITEM]: r["count"] for r in item_counts(composite(spark, rows, m)).collect()}

    without, with_y = counts(base), counts(base + added)
    moved = {k for k in set(without) | set(with_y) if with_y.get(k, 0) != without.get(k, 0)}
    assert all(with_y.get(k, 0) - without.get(k, 0) == 1 for k in moved)  # +1 only, never more
    assert {KEYED.parse(k) for k in moved} <= {(KEYS.index(g), i) for _, i, g in added}
    if m is not None:
        assert len({KEYED.parse(k)[0] for k in moved}) <= m


def test_the_split_is_the_inverse_of_the_composite_key(spark):
    rows = [(1, "a:b", "g1"), (2, "", "g0"), (3, "x", "g3")]
    edges = composite(spark, rows)
    split = KEYED.split(edges.select(ITEM), "country")
    got = sorted((r["country"], r[ITEM]) for r in split.collect())
    assert got == sorted((g, i) for _, i, g in rows)
    assert KEYED.per_group(edges.select(ITEM)).tolist() == [1, 1, 0, 1]
    longs = spark.createDataFrame([(1, -(2**63), 0), (2, 2**63 - 1, 1)], f"{PERSON} long, {ITEM} long, {GROUP_INDEX} int")
    two = Composite(GroupKeys.of(("a", "b"), whole=False), T.StringType(), True)
    back = two.split(two.edges(longs).select(ITEM), "g")
    assert sorted((r["g"], r[ITEM]) for r in back.collect()) == [("a", -(2**63)), ("b", 2**63 - 1)]
    assert Composite(GroupKeys.of(range(13), whole=True), T.IntegerType(), True).parse("12:-5") == (12, -5)
    assert KEYED.parse("0:a:b") == (0, "a:b")


def test_with_one_key_the_composite_key_is_the_item(spark):
    """One key (an ungrouped run: the constant group; or one public key): the
    composite key is the item itself, of its own type, and splits back to
    (the key, the item)."""
    longs = spark.createDataFrame([(1, 7, 0), (2, -3, 0), (2, 7, 0)], f"{PERSON} long, {ITEM} long, {GROUP_INDEX} int")
    one = Composite(GroupKeys.of((5,), whole=True), T.IntegerType(), True, identity=True)
    edges = one.edges(longs)
    assert edges.columns == [PERSON, ITEM] and str(edges.schema[ITEM].dataType) == "LongType()"
    assert sorted(r[ITEM] for r in edges.collect()) == [-3, 7, 7]
    back = one.split(edges.select(ITEM), "g")
    assert sorted((r["g"], r[ITEM]) for r in back.collect()) == [(5, -3), (5, 7), (5, 7)]
    assert str(back.schema["g"].dataType) == "IntegerType()"
    assert one.per_group(edges.select(ITEM)).tolist() == [3]
    assert one.parse(-3) == (0, -3) and Composite(GroupKeys.of(("k",), whole=False), T.StringType(), False, True).parse("0:a") == (0, "0:a")


def test_an_ungrouped_run_is_the_one_key_run(spark):
    """Composite.of: an ungrouped run's keys are the one constant group."""
    edges = edge_table(spark.createDataFrame([(1, 2)], "person_id long, item long"), "person_id", "item")
    assert Composite.of(edges, None) == Composite(GroupKeys.of((UNGROUPED,), whole=True), T.LongType(), True,
                                                  identity=True, bound=1)
    assert list(Composite.of(edges, (3, 1)).keys) == [1, 3]  # canonical order, in the group column's type
    assert Composite.of(edges, (3,)).identity  # one public key: the item is its own key
    # one key released by the private key step: the composite path, as for two or more, so the
    # Spark work before the record does not show that exactly one key was released
    assert not Composite.of(edges, (3,), private=True).identity
    assert not Composite.of(edges, (3, 1)).identity


@pytest.fixture(scope="module")
def table(spark):
    rng = np.random.default_rng(21)
    rows = [(p, f"i{rng.integers(12)}", f"g{rng.integers(3)}") for p in range(2500)
            for _ in range(int(rng.integers(1, 5)))]
    rows += [(7, "only-null-group", None)]
    return spark.createDataFrame(rows, "person_id long, item string, country string")


RUNS = {
    "set-union": (dp_spark.set_union, dict(epsilon=1.0, delta=1e-6, max_items=4), ["item", "error"]),
    "count-release": (dp_spark.count_release, dict(rho=0.5, delta=1e-6, kbar=60),
                      ["item", "count", "sigma", "error"]),
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_seeded_api_run_releases_pairs_of_the_public_keys(spark, table, name):
    function, kwargs, columns = RUNS[name]
    keys = ["g0", "g1", "g2", "empty"]
    first = function(table, **kwargs, group_by="country", groups=keys, seed=4)
    again = function(table, **kwargs, group_by="country", groups=keys, seed=4)
    assert first.result == again.result
    frame = first.groups.toPandas()
    assert sorted(map(tuple, frame.values.tolist())) == sorted(map(tuple, again.groups.toPandas().values.tolist()))
    assert list(frame.columns) == ["country", *columns]
    assert len(frame) > 0 and set(frame["country"]) <= {"g0", "g1", "g2"}  # "empty" has no rows
    assert set(frame["item"]) <= {f"i{j}" for j in range(12)}
    assert [g["group"] for g in first.result["groups"]] == sorted(keys)  # the keys' canonical order
    assert first.result["groups_released"] == 4 and first.result["groups_in_report"] == 4
    per_group = {g["group"]: g["released_count"] for g in first.result["groups"]}
    assert per_group["empty"] == 0
    assert per_group == {k: int((frame["country"] == k).sum()) for k in keys}
    assert first.result["released_count"] == len(frame)
    assert frame["error"].str.len().min() > 50
    assert first.parameters["group_by"] == "country" and first.parameters["max_groups"] == "none"
    assert "not split between groups" in first.statement
    from dp_spark.report import report_schema
    import jsonschema

    jsonschema.validate(json.loads(first.to_json()), report_schema())
    if name == "count-release":
        assert all({"group", "item", "count", "sigma"} <= set(r) for r in first.result["items"])
        assert len(first.result["items"]) == len(frame)
        assert frame["error"].str.contains("relative error").all()


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_seeded_output_depends_on_the_key_set_not_its_order(spark, table, name):
    """The composite key holds the group's index in the keys' canonical
    order, so the salted hashes and the noise see the same keys whatever
    order the list gave them in: the same seeded release."""
    function, kwargs, _ = RUNS[name]
    runs = [function(table, **kwargs, group_by="country", groups=keys, max_groups=2, seed=8)
            for keys in (["g0", "g1", "g2", "empty"], ["g2", "empty", "g0", "g1"])]
    assert runs[0].result == runs[1].result
    assert runs[0].groups.toPandas().equals(runs[1].groups.toPandas())


def test_a_public_cap_keeps_each_person_in_m_groups(spark, table):
    release = dp_spark.count_release(table, rho=0.5, delta=1e-6, kbar=60, group_by="country",
                                     groups=["g0", "g1", "g2"], max_groups=1, seed=4)
    assert release.parameters["max_groups"] == 1
    assert "at most 1 of their country groups" in release.statement
    bounded = dp_spark.count_release(table, rho=0.5, delta=1e-6, method="bounded", max_items=2,
                                     group_by="country", groups=["g0", "g1", "g2"], seed=4)
    frame = bounded.groups.toPandas()
    assert list(frame.columns) == ["country", "item", "count", "sigma", "error"]
    assert frame["error"].str.contains("keeps at most 2 pairs").all()


def test_an_ungrouped_call_is_unchanged(spark, table):
    for function, kwargs, _ in RUNS.values():
        plain = function(table, **kwargs, seed=3)
        explicit = function(table, **kwargs, seed=3, group_by=None, groups=None, max_groups=None)
        assert plain.result == explicit.result
        assert "groups" not in plain.result and "group_by" not in plain.parameters
        assert "groups" not in plain.artifacts and "items" in plain.artifacts


@pytest.mark.parametrize("name", sorted(RUNS))
def test_refusals_come_before_anything_is_spent(spark, table, name):
    function, kwargs, _ = RUNS[name]
    budget = PrivacyFilter(ApproxDP(5.0, 1e-3) if name == "set-union" else ZCDP(5.0, 1e-3))
    with pytest.raises(SchemaError):
        function(table, **kwargs, group_by="nope", groups=["a"], budget=budget)
    # both take 1,000,000 keys (refused above: tests/spark/test_many_groups.py, test_count_release_many_groups.py)
    with pytest.raises(ParameterError, match="give group_by"):
        function(table, **kwargs, groups=["g0"], budget=budget)
    with pytest.raises(ParameterError, match="column name of release.groups"):
        function(table.withColumnRenamed("country", "error"), **kwargs, group_by="error", groups=["g0"],
                 budget=budget)
    with pytest.raises(ParameterError, match="max_groups"):
        function(table, **kwargs, group_by="country", groups=["g0"], max_groups=0, budget=budget)
    spent = budget.spent
    assert (spent.epsilon if name == "set-union" else spent.rho) == 0.0


@pytest.mark.parametrize("name", sorted(RUNS))
def test_cli_writes_the_groups_output(spark, table, tmp_path, name):
    data, keys, report = tmp_path / "t.parquet", tmp_path / "keys.csv", tmp_path / "r.json"
    table.write.parquet(str(data))
    keys.write_text("country\ng0\ng1\ng2\nnone\n")
    out = tmp_path / "groups.csv"
    flags = (["--epsilon", "1", "--delta", "1e-6", "--max-items", "4"] if name == "set-union"
             else ["--rho", "0.5", "--delta", "1e-6", "--kbar", "60"])
    code = cli.main([name, "--input", str(data), *flags, "--group-by", "country", "--groups", str(keys),
                     "--max-groups", "2", "--groups-output", str(out), "--output", str(report), "--seed", "1",
                     "--quiet"])
    assert code == 0
    written = spark.read.option("header", True).csv(str(out)).toPandas()
    assert list(written.columns)[:2] == ["country", "item"] and len(written) > 0
    doc = json.loads(report.read_text())
    assert doc["result"]["groups_released"] == 4 and doc["parameters"]["max_groups"] == 2
    assert doc["result"]["released_count"] == len(written)
    base = [name, "--input", str(data), *flags, "--seed", "1", "--quiet"]
    assert cli.main([*base, "--groups-output", str(tmp_path / "x.parquet")]) == 2  # without --group-by
    assert cli.main([*base, "--group-by", "country", "--groups", str(keys),
                     "--items-output", str(tmp_path / "y.parquet")]) == 2  # grouped rows go to --groups-output


def test_integer_group_keys_and_items(spark):
    df = spark.createDataFrame([(p, p % 5, p % 3) for p in range(3000)], "person_id long, item long, g int")
    release = dp_spark.count_release(df, rho=1.0, delta=1e-6, kbar=30, group_by="g", groups=[0, 1, 2, 7], seed=2)
    frame = release.groups.toPandas()
    assert set(frame["g"]) <= {0, 1, 2} and set(frame["item"]) <= set(range(5))
    assert str(release.groups.schema["item"].dataType) == "LongType()"
    union = dp_spark.set_union(df, epsilon=1.0, delta=1e-6, group_by="g", groups=[0, 1, 2, 7], seed=2)
    pairs = {(r["g"], r["item"]) for r in union.groups.collect()}
    assert pairs and pairs <= {(p % 3, p % 5) for p in range(3000)}


def test_set_union_with_keys_chosen_privately(spark, table):
    """groups omitted: the "group keys" set-union step comes first (ε/10,
    δ_k = min(KEYS_DELTA, δ/10) out of the release's δ, so the whole is the
    (ε, δ) given), then the one composite-key mechanism on the released
    keys; only keys present in the data can be released (never the null
    group)."""
    from dp_spark.plan import KEYS_EPSILON_SHARE

    budget = PrivacyFilter(ApproxDP(5.0, 1e-3))
    release = dp_spark.set_union(table, epsilon=2.0, delta=1e-6, max_items=4, group_by="country", seed=6,
                                 budget=budget)
    assert release.budget_split[0]["step"].startswith("group keys")
    assert release.budget_split[0]["epsilon"] == pytest.approx(2.0 * KEYS_EPSILON_SHARE)
    assert budget.spent.epsilon == pytest.approx(2.0)
    assert release.budget_split[0]["delta"] == pytest.approx(1e-7)  # a tenth of δ (below KEYS_DELTA)
    assert sum(s["delta"] for s in release.budget_split) <= 1e-6
    assert budget.spent.delta == 1e-6
    assert release.privacy["kind"] == "approx-dp" and release.privacy["delta"] == 1e-6
    assert release.statement.startswith("Person-level (2, 1e-06)-differential privacy over all groups (the private "
                                        "choice of the keys included)")
    assert set(release.groups.toPandas()["country"]) <= {"g0", "g1", "g2"}
    assert release.result["group_keys_released"] == release.result["groups_released"]
