"""Grouped distinct-count (issue 24): the per-group greedy's sensitivity on
random add/remove-one-person neighbours, seeded API and CLI runs, a public
key without rows, an ungrouped call unchanged, and the refusals (missing
group column, too many public keys) made before anything is spent."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pyspark.sql import functions as F

import dp_spark
from dp_spark import cli
from dp_spark.accounting import ApproxDP, PrivacyFilter, PureDP
from dp_spark.errors import ParameterError, SchemaError
from dp_spark.plans import distinct_count as plans
from dp_spark.releases.groups import GROUP_INDEX
from dp_spark.settings.distinct_count import bound_candidates
from dp_spark.stages.distinct import grouped_greedy_counts
from dp_spark.stages.edges import GROUP, ITEM, PERSON

SCHEMA = "person long, item string, group string"
KEYS = [f"g{j}" for j in range(6)]


def random_rows(rng, persons, groups=5, items=12):
    rows = []
    for p in persons:
        for _ in range(int(rng.integers(1, 16))):
            rows.append((int(p), f"i{rng.integers(items)}", f"g{rng.integers(groups)}"))
    return rows


def grouped_counts(spark, rows, m, max_bound, shards):
    """The stage as the release runs it: public keys (index added), cap m inside the kernel (none when
    m >= the number of keys), one pass."""
    edges = spark.createDataFrame(rows, SCHEMA)
    keys = spark.createDataFrame([(k, i) for i, k in enumerate(KEYS)], f"{GROUP} string, {GROUP_INDEX} int")
    caps = None if m >= len(KEYS) else (m,)
    out = grouped_greedy_counts(edges.join(keys, on=GROUP), max_bound, shards, len(KEYS), bound_candidates(max_bound),
                                caps=caps)
    return out if caps is None else out[0]


@pytest.mark.parametrize("seed", range(5))
def test_each_group_moves_by_0_to_l_in_one_direction_and_at_most_m_groups_move(spark, seed):
    rng = np.random.default_rng(100 + seed)
    m, max_bound, shards = int(rng.integers(1, 4)), 16, int(rng.integers(1, 4))
    persons = rng.choice(10_000, size=int(rng.integers(8, 30)), replace=False)
    y, others = persons[0], persons[1:]
    base = random_rows(rng, others)
    added = random_rows(rng, [y])
    without = grouped_counts(spark, base, m, max_bound, shards)
    with_y = grouped_counts(spark, base + added, m, max_bound, shards)  # D and D + y: neighbours
    cands = np.array(bound_candidates(max_bound))
    diff = with_y - without
    assert (diff >= 0).all(), "adding a person lowered a group's count"
    assert (diff <= cands[None, :]).all(), "a group's count moved by more than l"
    moved = np.flatnonzero(diff.any(axis=1))
    assert len(moved) <= m
    assert set(np.asarray(KEYS)[moved]) <= {g for _, _, g in added}
    # removing y (the other direction) gives back the counts without y
    assert np.array_equal(grouped_counts(spark, base, m, max_bound, shards), without)
    # the zCDP path's claim: for every l the vector over groups moves by at most √m·l in ℓ2
    assert (np.sqrt((diff.astype(float) ** 2).sum(axis=0)) <= np.sqrt(m) * cands + 1e-9).all()


def test_counts_at_a_bound_above_every_degree_are_the_groups_distinct_items(spark):
    rng = np.random.default_rng(5)
    rows = random_rows(rng, range(40), items=30)
    counts = grouped_counts(spark, rows, 5, 16, 3)  # m = 5 = every group: nothing capped
    exact = {g: len({i for _, i, gg in rows if gg == g}) for g in KEYS}
    assert counts[:, -1].tolist() == [exact[g] for g in KEYS]  # bound 16 >= any person's items (15)
    assert counts[-1].tolist() == [0] * counts.shape[1]  # g5: no rows
    assert (np.diff(counts, axis=1) >= 0).all()


@pytest.fixture(scope="module")
def table(spark):
    rng = np.random.default_rng(11)
    rows = [(p, i, g) for p, i, g in random_rows(rng, range(300), groups=3, items=40)]
    rows += [(7, "only-null-group", None)]  # a null group: dropped from every group
    return spark.createDataFrame(rows, "person_id long, item string, country string")


def test_seeded_api_run_releases_every_public_key(spark, table):
    keys = ["g0", "g1", "g2", "empty"]
    first = dp_spark.distinct_count(table, epsilon=1.0, group_by="country", groups=keys, max_groups=1, seed=4,
                                    noise="laplace")
    again = dp_spark.distinct_count(table, epsilon=1.0, group_by="country", groups=keys, max_groups=1, seed=4,
                                    noise="laplace")
    assert first.result == again.result
    frame = first.groups.orderBy("country").toPandas()
    assert list(frame.columns) == ["country", "estimate", "lower_bound", "bound", "error"]
    assert sorted(frame["country"]) == sorted(keys)  # the key without rows is released too
    assert [g["group"] for g in first.result["groups"]] == sorted(keys)  # the keys' canonical order
    assert first.result["groups_released"] == 4 and first.result["groups_in_report"] == 4
    assert first.result["simultaneous_confidence"] == pytest.approx(1 - 4 * 0.05)
    assert (frame["lower_bound"] <= frame["estimate"]).all()
    assert first.budget_split and sum(s["epsilon"] for s in first.budget_split) == pytest.approx(1.0)
    assert "parallel composition" in first.budget_split[-1]["step"]  # m = 1: the full ε per group
    assert first.parameters["group_by"] == "country" and first.parameters["max_groups"] == 1
    from dp_spark.report import report_schema
    import jsonschema

    jsonschema.validate(json.loads(first.to_json()), report_schema())


def test_public_keys_as_a_dataframe_or_a_file_give_the_list_run(spark, table, tmp_path):
    keys = ["g2", "g0", "g1"]
    as_list = dp_spark.distinct_count(table, epsilon=1.0, group_by="country", groups=sorted(keys), max_groups=2,
                                      seed=9)
    frame = spark.createDataFrame([(k,) for k in keys], "country string")
    as_frame = dp_spark.distinct_count(table, epsilon=1.0, group_by="country", groups=frame, max_groups=2, seed=9)
    path = tmp_path / "keys.csv"
    path.write_text("country\n" + "\n".join(keys) + "\n")
    as_file = dp_spark.distinct_count(table, epsilon=1.0, group_by="country", groups=str(path), max_groups=2,
                                      seed=9)
    assert as_list.result["groups"] == as_frame.result["groups"] == as_file.result["groups"]


def test_an_ungrouped_call_is_unchanged(spark, table):
    plain = dp_spark.distinct_count(table, epsilon=1.0, max_bound=8, seed=3)
    explicit = dp_spark.distinct_count(table, epsilon=1.0, max_bound=8, seed=3, group_by=None, groups=None,
                                       max_groups=None)
    assert plain.result == explicit.result
    assert "groups" not in plain.result and "group_by" not in plain.parameters
    assert "groups" not in plain.artifacts


def test_refusals_come_before_anything_is_spent(spark, table):
    budget = PrivacyFilter(PureDP(5.0))
    with pytest.raises(SchemaError):
        dp_spark.distinct_count(table, epsilon=1.0, group_by="nope", groups=["a"], max_groups=1, budget=budget)
    many = spark.range(plans.Params.MAX_KEYS + 1).select(F.col("id").cast("string").alias("country"))
    with pytest.raises(ParameterError, match="more than 100,000 public keys, this release's limit"):
        dp_spark.distinct_count(table, epsilon=1.0, group_by="country", groups=many, max_groups=1, budget=budget)
    with pytest.raises(ParameterError, match="approx-dp cost from a pure-dp budget"):  # keys chosen privately: (ε, δ)
        dp_spark.distinct_count(table, epsilon=1.0, group_by="country", groups=None, max_groups=1, budget=budget)
    assert budget.spent.epsilon == 0.0


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
@pytest.mark.parametrize("max_groups", [2, None])
def test_the_smallest_epsilon_runs_to_the_end(spark, table, noise, max_groups):
    """ε = 1e-6, the least a plan accepts: every step's share (ε/4, ε/m, …) lies below that and must
    not be refused after the budget is spent and the data read (review finding)."""
    budget = PrivacyFilter(PureDP(1.0)) if noise == "laplace" else None
    run = dp_spark.distinct_count(table, epsilon=1e-6, group_by="country", groups=["g0", "g1", "g2"],
                                  max_groups=max_groups, noise=noise, seed=3, budget=budget)
    assert run.result["groups_released"] == 3
    if budget is not None:
        assert budget.spent.epsilon == pytest.approx(1e-6)


def test_integer_group_keys(spark):
    df = spark.createDataFrame([(p, f"i{p % 9}", p % 3) for p in range(60)], "person_id long, item string, g int")
    release = dp_spark.distinct_count(df, epsilon=1.0, group_by="g", groups=[0, 1, 2, 7], max_groups=1, seed=2)
    assert sorted(release.groups.toPandas()["g"]) == [0, 1, 2, 7]
    with pytest.raises(ParameterError, match="not one"):
        dp_spark.distinct_count(df, epsilon=1.0, group_by="g", groups=spark.createDataFrame([("x",)], "g string"),
                                max_groups=1, seed=2)


def test_cli_writes_the_groups_output(spark, table, tmp_path):
    data, keys, report = tmp_path / "t.parquet", tmp_path / "keys.csv", tmp_path / "r.json"
    table.write.parquet(str(data))
    keys.write_text("country\ng0\ng1\ng2\nnone\n")
    out = tmp_path / "groups.parquet"
    code = cli.main(["distinct-count", "--input", str(data), "--group-by", "country", "--groups", str(keys),
                     "--max-groups", "2", "--groups-output", str(out), "--output", str(report), "--seed", "1",
                     "--quiet"])
    assert code == 0
    written = spark.read.parquet(str(out)).toPandas()
    assert sorted(written["country"]) == ["g0", "g1", "g2", "none"]
    doc = json.loads(report.read_text())
    assert doc["result"]["groups_released"] == 4 and doc["parameters"]["max_groups"] == 2
    assert cli.main(["distinct-count", "--input", str(data), "--groups-output", str(tmp_path / "x.parquet"),
                     "--seed", "1", "--quiet"]) == 2  # --groups-output without --group-by: refused


def test_a_private_cap_is_chosen_charged_and_stated(spark, table):
    release = dp_spark.distinct_count(table, epsilon=1.0, group_by="country", groups=["g0", "g1", "g2"], seed=6,
                                      noise="laplace")
    m = release.parameters["max_groups"]
    assert isinstance(m, int) and 1 <= m <= 3  # M = the number of public keys
    assert release.parameters["max_groups_chosen"].startswith("privately")
    steps = [s["step"] for s in release.budget_split]
    assert steps[1].startswith("group cap m") and sum(s["epsilon"] for s in release.budget_split) == pytest.approx(1)
    cap = [r for r in release.noise if r.step == steps[1]]
    assert len(cap) == 1 and cap[0].kind == "gem"
    assert f"at most {m} of their country groups" in release.statement
    # the joint choice: ε/4 for (m, l), the rest (1 − 0.01 − 0.25) to the counts at ε_count/m; no per-group choice
    assert [s["step"].split(" (")[0] for s in release.budget_split][1:] == ["group cap m and bound l, jointly",
                                                                           "count at the chosen m and l"]
    assert release.budget_split[1]["epsilon"] == pytest.approx(0.25)
    assert release.parameters["epsilon_per_group"] == pytest.approx(0.74 / m)
    bound = release.parameters["bound"]
    assert bound in bound_candidates(100) and {g["bound"] for g in release.result["groups"]} == {bound}
    assert f"one bound l = {bound} items per person for every group" in release.statement
    assert f"each group's count spends {'the full ε' if m == 1 else f'ε/{m}'}" in release.statement
    counts = [r for r in release.noise if r.kind == "discrete-laplace" and r.step == steps[2]]
    assert len(counts) == 1 and counts[0].draws == 3 and counts[0].scale >= m * bound / 0.74


def test_a_private_cap_under_zcdp_is_the_joint_choice_by_the_exponential_mechanism(spark, table):
    import math

    release = dp_spark.distinct_count(table, epsilon=1.0, group_by="country", groups=["g0", "g1", "g2"], seed=3,
                                      noise="gaussian", shards=1)
    m, bound = release.parameters["max_groups"], release.parameters["bound"]
    assert m in (1, 2, 3) and release.parameters["max_groups_candidates"] == [1, 2, 3]
    assert [s["kind"] for s in release.budget_split] == ["zcdp", "zcdp"]
    assert sum(s["rho"] for s in release.budget_split) == pytest.approx(0.5)
    assert "exponential mechanism" in release.budget_split[0]["step"]
    (count,) = [r for r in release.noise if r.kind == "discrete-gaussian"]
    assert count.draws == 3 and count.parameters == {"bound": bound, "norm": 2, "parallel": True}
    assert count.sensitivity == pytest.approx(math.sqrt(m) * bound)
    assert count.scale >= math.sqrt(m) * bound / math.sqrt(2 * release.budget_split[1]["rho"])
    assert release.parameters["rho_per_group"] == pytest.approx(release.budget_split[1]["rho"] / m)
    (choice,) = [r for r in release.noise if r.kind == "gem"]  # the exponential mechanism: ε²/8-zCDP
    assert choice.parameters["bounded_range"] is True
    assert choice.cost().epsilon ** 2 / 8 == pytest.approx(release.budget_split[0]["rho"], rel=1e-6)


def test_zcdp_per_group_is_asked_for_by_name_and_charged_as_rho(spark, table):
    """noise="gaussian" per group: discrete Gaussian, ρ = ε²/2-zCDP, charged
    as ρ to a zCDP budget; the records carry the ℓ2 sensitivity √m·l. The
    default (noise=None) stays the pure ε-DP that epsilon= states."""
    from dp_spark.accounting import ZCDP
    from dp_spark.report import report_schema
    import jsonschema

    keys = ["g0", "g1", "g2", "empty"]
    budget = PrivacyFilter(ZCDP(2.0))
    release = dp_spark.distinct_count(table, epsilon=1.0, group_by="country", groups=keys, max_groups=2, seed=4,
                                      budget=budget, noise="gaussian")
    assert budget.spent.rho == pytest.approx(0.5)
    assert release.parameters["noise"] == "discrete gaussian" and release.parameters["rho"] == 0.5
    assert all(s["kind"] == "zcdp" for s in release.budget_split)
    assert sum(s["rho"] for s in release.budget_split) == pytest.approx(0.5)
    assert "0.5-zero-concentrated" in release.statement and "not itself pure ε-DP" in release.statement
    equivalent = release.to_dict()["privacy"]["approx_dp_equivalent"]
    assert equivalent["delta"] == 1e-6 and f"({equivalent['epsilon']:.3g}, 1e-06)-differential privacy" in \
        release.statement
    counts = [r for r in release.noise if r.kind == "discrete-gaussian"]
    assert counts and sum(r.draws for r in counts) == 4
    for r in counts:
        bound = int(r.target.split("at most ")[1].split()[0])
        assert r.parameters["norm"] == 2 and r.sensitivity == pytest.approx(np.sqrt(2) * bound)
    frame = release.groups.toPandas()
    assert (frame["lower_bound"] <= frame["estimate"]).all() and "discrete Gaussian" in frame["error"][0]
    jsonschema.validate(json.loads(release.to_json()), report_schema())
    again = dp_spark.distinct_count(table, epsilon=1.0, group_by="country", groups=keys, max_groups=2, seed=4,
                                    noise="gaussian")
    assert again.result == release.result
    default = dp_spark.distinct_count(table, epsilon=1.0, group_by="country", groups=keys, max_groups=2, seed=4)
    assert default.privacy["kind"] == "pure-dp" and default.parameters["noise"] == "discrete laplace"
    one = dp_spark.distinct_count(table, epsilon=1.0, group_by="country", groups=keys, max_groups=1, seed=4,
                                  noise="gaussian")
    assert "parallel composition" in one.budget_split[-1]["step"]
    with pytest.raises(ParameterError, match="per group only"):
        dp_spark.distinct_count(table, epsilon=1.0, noise="gaussian")


@pytest.mark.parametrize("cast", ["double", "boolean", "string collate UTF8_LCASE"])
def test_a_group_column_without_byte_exact_keys_is_refused_before_spending(spark, table, cast):
    """Found by review: float and boolean keys were matched by their Python
    spelling ('True', '1e+20') against Spark's ('true', '1.0E20'), so groups
    came out empty; a case-insensitive collation could release one person's
    spelling of a key. All are refused from the schema, before the charge."""
    source = "(length(country) > 1)" if cast == "boolean" else "country"
    if cast == "double":
        source = "cast(length(country) as int)"
    typed = table.selectExpr("person_id", "item", f"cast({source} as {cast}) as country")
    budget = PrivacyFilter(PureDP(5.0))
    with pytest.raises(SchemaError, match="group column 'country'"):
        dp_spark.distinct_count(typed, epsilon=1.0, group_by="country", groups=["a"], max_groups=1, budget=budget)
    with pytest.raises(SchemaError, match="group column 'country'"):
        dp_spark.set_union(typed, epsilon=1.0, delta=1e-6, group_by="country", groups=["a"],
                           budget=PrivacyFilter(ApproxDP(5.0, 1e-3)))
    assert budget.spent.epsilon == 0.0


@pytest.mark.parametrize("kind", ["timestamp", "decimal(10,7)", "date"])
def test_keys_from_a_dataframe_are_spelled_as_the_rows_group_column(spark, kind):
    """Keys read from a DataFrame (or a file) match the rows they name: the edge builder casts a date,
    timestamp or decimal group column to Spark's string; Python's str() spelled 10:00:00.5 as
    10:00:00.500000 and a decimal 0 as 0E-7, so such a group silently matched no row (review finding)."""
    from dp_spark.keys import GroupKeys
    from dp_spark.releases.groups import resolve_keys

    values = {"timestamp": ["2024-01-01 10:00:00.5", "2024-01-02 00:00:00"],
              "decimal(10,7)": ["0", "1.25"], "date": ["2024-01-01", "2024-03-09"]}[kind]
    rows = spark.createDataFrame([(1, "a", v) for v in values], "person_id long, item string, g string") \
        .select("person_id", "item", F.col("g").cast(kind).alias("g"))
    keys = list(GroupKeys.of(resolve_keys(spark, rows.select("g"), "g", 1024), whole=False))
    spelled = {r[0] for r in rows.select(F.col("g").cast("string")).collect()}
    assert set(keys) == spelled


def test_with_privately_chosen_keys_the_greedy_pass_follows_the_public_limit():
    """Which grouped greedy pass runs (capped at m, or not capped when m >= the keys) depends on the
    number of keys only when they are public; released keys use the release's limit, so the Spark
    work does not show how many a private key step released (capping at m >= the keys keeps every
    row: the same counts)."""
    import copy
    import dataclasses

    from dp_spark.keys import GroupKeys
    from dp_spark.plan import set_checked
    from dp_spark.releases.distinct_count import _caps

    for groups, caps in ((None, (5,)), (("a", "b", "c"), None)):
        plan = plans.plan(epsilon=1.0, group_by="g", groups=groups, max_groups=5)
        params = copy.copy(plan.params)
        set_checked(params, groups=GroupKeys.of(["a", "b", "c"], whole=False))  # as grouped_edges does
        assert _caps(dataclasses.replace(plan, steps=tuple(plan.split), params=params)) == (3, caps)
