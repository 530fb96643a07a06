"""Group keys chosen privately (issue 24, ``group_by=`` without ``groups=``):
the key step's contribution bound on random add/remove-one-person
neighbours (the set-union histogram of the group column), seeded API and CLI
runs of the grouped distinct-count with ``groups`` omitted, a run that
releases no key, and the plan's composition."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from pyspark.sql import functions as F

import dp_spark
from dp_spark import cli
from dp_spark.accounting import ApproxDP, PrivacyFilter, PureDP
from dp_spark.errors import BudgetExceededError, ParameterError
from dp_spark.mechanisms.set_union import SEQUENTIAL, grid_statistic
from dp_spark.plan import KEYS_DELTA, KEYS_EPSILON_SHARE
from dp_spark.releases.group_keys import KEY_STEP_POLICY, key_edges, key_step_plan, keys_per_person
from dp_spark.summaries.set_union import UNIT_BITS, person_units
from tests.unit.test_set_union_discrete import NoFloatDraws
from dp_spark.stages.edges import edges
from dp_spark.stages.set_union import set_union_histogram

SCHEMA = "person_id long, item string, country string"


def rows_of(rng, persons, groups=6, items=30):
    rows = []
    for p in persons:
        for _ in range(int(rng.integers(1, 9))):
            rows.append((int(p), f"i{rng.integers(items)}", f"g{min(int(rng.zipf(1.5)), groups)}"))
    return rows


def key_histogram(df, max_per_person):
    """The key step's NON-PRIVATE histogram as the release builds it: the
    edge table's group column as set-union's item, the policy's histogram."""
    keyed = key_edges(edges(df, "person_id", "item", "country"))
    return set_union_histogram(keyed, "person", "item", KEY_STEP_POLICY, max_per_person, 1)


@pytest.mark.parametrize("seed", range(3))
def test_the_key_step_keeps_set_unions_bound_on_random_neighbours(spark, seed):
    """Add or remove one random person (many rows, several of them in one
    group, some in groups nobody else has): the key histograms differ by
    ℓ2 <= 1 exactly (whole units of 2^-30), the support only grows with the
    added person, the added person brings at most Δ0 new keys, each
    weighing <= 1/√(new keys); a person's many rows in one group count
    once. On the exact step's grid (issue 35): ‖X − X'‖² <= the plan's Δ²
    and a new key's grid weight <= ⌊a_j/2^(30−g)⌋, j the new keys."""
    assert KEY_STEP_POLICY not in SEQUENTIAL  # additive: an exact integer histogram
    rng = np.random.default_rng(100 + seed)
    base = rows_of(rng, range(120))
    m = int(rng.integers(1, 4))
    plan = key_step_plan(ApproxDP(1.0, 1e-6), m)
    extra = [(999, f"i{j}", "g1") for j in range(int(rng.integers(5, 30)))]  # many rows, one group
    extra += [(999, "x", f"only{j}") for j in range(int(rng.integers(1, 6)))]  # keys nobody else holds
    removed = int(rng.integers(0, 120))
    variants = {
        "base": base,
        "add": base + extra,
        "remove": [r for r in base if r[0] != removed],
    }
    frames = None
    for name, rows in variants.items():
        h = key_histogram(spark.createDataFrame(rows, SCHEMA), m).withColumn("side", F.lit(name))
        frames = h if frames is None else frames.union(h)
    hist: dict[str, dict] = {}
    for r in frames.collect():  # one Spark job for every pair
        hist.setdefault(r["side"], {})[r["item"]] = r["weight"]
    for with_, without in (("add", "base"), ("base", "remove")):
        h1, h2 = hist[with_], hist.get(without, {})
        assert set(h2) <= set(h1), (with_, without)
        keys = sorted(h1)
        units = np.array([int(h1[k] * 2**UNIT_BITS) - int(h2.get(k, 0.0) * 2**UNIT_BITS) for k in keys])
        assert int(units @ units) <= 2 ** (2 * UNIT_BITS), (with_, without)  # ℓ2 <= 1, exactly
        assert (units >= 0).all()  # adding a person never lowers a weight
        new = set(h1) - set(h2)
        assert len(new) <= m
        assert all(h1[k] <= 1 / math.sqrt(len(new)) for k in new)
        grid = [grid_statistic(np.array([h.get(k, 0.0) for k in keys]), plan.grid_bits) for h in (h1, h2)]
        assert int(((grid[0] - grid[1]) ** 2).sum()) <= plan.l2_squared
        cell = 2 ** (UNIT_BITS - plan.grid_bits)
        assert all(int(grid[0][keys.index(k)]) <= person_units(KEY_STEP_POLICY, len(new)) // cell for k in new)
    assert hist["add"] != hist["base"]


def test_the_key_step_draws_its_noise_from_the_exact_sampler_only(spark, big, monkeypatch):
    """Issue 35: the key step's threshold noise was rng.normal (float, via
    set-union's release_mask). The step as choose_keys builds it, run in the
    driver on a generator whose float samplers raise: it releases by the
    exact discrete Gaussian and an integer threshold."""
    import dp_spark.stages.set_union as stage
    from dp_spark.mechanisms.set_union import DiscreteSetUnionPlan
    from dp_spark.noise.rng import StreamRoot

    captured = {}

    class Stop(Exception):
        pass

    def capture(edge_df, **kwargs):
        captured.update(kwargs)
        raise Stop  # before any Spark job

    monkeypatch.setattr(stage, "set_union_items_of_edges", capture)
    with pytest.raises(Stop):
        dp_spark.distinct_count(big, epsilon=2.0, group_by="country", max_groups=2, seed=5)
    step = captured["threshold"]
    assert isinstance(step.plan, DiscreteSetUnionPlan) and captured["method"] == KEY_STEP_POLICY
    assert step.plan == key_step_plan(ApproxDP(2.0 * KEYS_EPSILON_SHARE, KEYS_DELTA), 2)
    monkeypatch.setattr(StreamRoot, "stream", lambda self, p: NoFloatDraws(np.random.PCG64([7, p])))
    weights = np.array([0.0, 0.5, step.plan.rho, 2 * step.plan.rho, 1e6])
    mask = step(0)(np.tile(weights, 400)).reshape(400, -1)
    assert not mask[:, 0].any() and mask[:, -1].all()  # outside the support never; far above, always
    assert 0 < mask[:, 2].sum() < 400  # at the threshold: the noise decides


@pytest.fixture(scope="module")
def big(spark):
    """3,000 persons in three large groups (each person in one or two) and
    five keys held by one person each."""
    rng = np.random.default_rng(3)
    rows = []
    for p in range(3000):
        for g in rng.choice(3, size=int(rng.integers(1, 3)), replace=False):
            rows += [(p, f"i{rng.integers(200)}", f"g{g}") for _ in range(int(rng.integers(1, 4)))]
    rows += [(10_000 + j, "x", f"rare{j}") for j in range(5)]
    return spark.createDataFrame(rows, SCHEMA)


def test_seeded_api_run_chooses_the_keys_privately_and_states_them(spark, big):
    first = dp_spark.distinct_count(big, epsilon=2.0, group_by="country", max_groups=2, seed=5)
    again = dp_spark.distinct_count(big, epsilon=2.0, group_by="country", max_groups=2, seed=5)
    assert first.result == again.result
    released = sorted(first.groups.toPandas()["country"])
    assert released == ["g0", "g1", "g2"]  # the large groups; a key of one person is released w.p. <= δ
    assert first.result["group_keys_released"] == 3 and first.result["group_keys_truncated"] is False
    assert first.guarantee == ApproxDP(2.0, KEYS_DELTA)
    keys_step = first.budget_split[0]
    assert keys_step["step"].startswith("group keys") and "at most 2 keys" in keys_step["step"]
    assert keys_step["epsilon"] == pytest.approx(2.0 * KEYS_EPSILON_SHARE) and keys_step["delta"] == KEYS_DELTA
    assert sum(s["epsilon"] for s in first.budget_split) <= 2.0
    assert first.noise[0].step == keys_step["step"] and first.noise[0].kind == "discrete-gaussian"
    assert "chosen privately" in first.statement and "(ε, δ)-differential privacy" in first.statement
    assert first.parameters["groups"].startswith("chosen privately")
    assert "group_keys_released" in first.errors
    from dp_spark.report import report_schema
    import jsonschema

    jsonschema.validate(json.loads(first.to_json()), report_schema())


def test_the_released_keys_then_act_as_public(spark, big):
    """The rest of the release runs exactly as with groups= those keys: the
    same greedy, the same cap, the same per-group mechanism on the rest of ε."""
    private = dp_spark.distinct_count(big, epsilon=2.0, group_by="country", max_groups=2, seed=5)
    keys = [g["group"] for g in private.result["groups"]]
    rest = private.budget_split[1:]
    assert sum(s["epsilon"] for s in rest) <= 2.0 * (1 - KEYS_EPSILON_SHARE) + 1e-12
    public = dp_spark.distinct_count(big, epsilon=2.0, group_by="country", groups=keys, max_groups=2, seed=5)
    assert [g["group"] for g in public.result["groups"]] == keys
    assert [s["step"] for s in public.budget_split] == [s["step"] for s in rest]


NO_KEY_RUNS = {  # (release, the whole δ charged) — with and without a public cap m (the cap step and the cap skip)
    # a pure-ε release: the keys' KEYS_DELTA on top; a release with a δ: the keys' δ comes out of it
    "distinct-count": (lambda df, **kw: dp_spark.distinct_count(df, epsilon=1.0, **kw), KEYS_DELTA),
    "set-union": (lambda df, **kw: dp_spark.set_union(df, epsilon=1.0, delta=1e-5, **kw), 1e-5),
    "top-k": (lambda df, **kw: dp_spark.top_k(df, k=2, epsilon=1.0, delta=1e-5, **kw), 1e-5),
}


@pytest.mark.parametrize("max_groups", [None, 2])
@pytest.mark.parametrize("name", sorted(NO_KEY_RUNS))
def test_a_run_that_releases_no_key_returns_empty_groups(spark, name, max_groups):
    """No key released: an empty release.groups, never an error after the
    budget was spent (the cap, its private choice and every per-group step
    must accept zero groups)."""
    df = spark.createDataFrame([(j, "x", f"rare{j}") for j in range(5)], SCHEMA)
    budget = PrivacyFilter(ApproxDP(5.0, 1e-3))
    run, delta = NO_KEY_RUNS[name]
    release = run(df, group_by="country", max_groups=max_groups, seed=2, budget=budget)
    assert release.groups.count() == 0 and release.result["groups_released"] == 0
    assert release.result["group_keys_released"] == 0
    assert release.result["groups"] == []
    # charged in full: whether keys appear is the DP decision
    assert budget.spent.epsilon == pytest.approx(1.0) and budget.spent.delta == pytest.approx(delta)


def test_a_pure_budget_refuses_the_keys_step_before_reading(spark, unreadable_events):
    df = unreadable_events.withColumn("country", F.lit("x"))
    with pytest.raises(ParameterError, match="approx-dp cost from a pure-dp budget"):
        dp_spark.distinct_count(df, epsilon=1.0, group_by="country", budget=PrivacyFilter(PureDP(5.0)))
    with pytest.raises(BudgetExceededError):
        dp_spark.distinct_count(df, epsilon=1.0, group_by="country", budget=PrivacyFilter(ApproxDP(5.0, 1e-7)))


def test_cli_run_without_groups_chooses_the_keys(spark, big, tmp_path):
    data, report, out = tmp_path / "t.parquet", tmp_path / "r.json", tmp_path / "g.csv"
    big.write.parquet(str(data))
    code = cli.main(["distinct-count", "--input", str(data), "--epsilon", "2", "--group-by", "country",
                     "--max-groups", "2", "--groups-output", str(out), "--output", str(report), "--seed", "5",
                     "--quiet"])
    assert code == 0
    doc = json.loads(report.read_text())
    assert doc["privacy"]["kind"] == "approx-dp" and doc["result"]["group_keys_released"] == 3
    assert doc["budget_split"][0]["step"].startswith("group keys")
    assert doc["noise"][0]["step"] == doc["budget_split"][0]["step"]
    assert sorted(g["group"] for g in doc["result"]["groups"]) == ["g0", "g1", "g2"]


def test_keys_per_person_is_m_or_set_unions_default():
    from dp_spark.plan import KEYS_MAX_PER_PERSON

    assert keys_per_person(3) == 3 and keys_per_person(None) == KEYS_MAX_PER_PERSON
