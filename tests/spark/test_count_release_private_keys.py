"""count-release with privately chosen keys (``groups=None``, issue 40): the key step is the exact
set-union of dp_spark.releases.group_keys paid as a δ_k-approximate ρ_k-zCDP share of the release's
(ρ, δ) (dp_spark.mechanisms.set_union.discrete, (4)); the release runs on the rest. What the run
spends, which Spark jobs it runs and what reaches the driver depend on public values only."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

import dp_spark
from dp_spark.accounting import ZCDP, PrivacyFilter
from dp_spark.errors import ParameterError
from dp_spark.plan import KEYS_RHO_SHARE
from dp_spark.stages.session_shape import check_session
from tests.spark.test_count_release_many_groups import driver_calls, job_descriptions  # noqa: F401 (fixtures)

BOUNDED = dict(method="bounded", max_items=3, rho=1.0, delta=1e-5)
PCR = dict(method="pcr", kbar=40, rho=1.0, delta=1e-5)
COMMON = dict(person_col="person", item_col="item", group_by="g")
#: The keys holding many persons (released whatever the draw) and the rare ones (1 or 2 persons each).
BIG, RARE = [f"big{j}" for j in range(6)], [f"rare{j}" for j in range(30)]


@pytest.fixture(scope="module")
def events(spark):
    """3,000 persons in the six big keys (500 each, 3 items), and 45 persons in 30 rare keys."""
    big = spark.range(3_000).select(F.col("id").alias("person"), (F.col("id") % 3).cast("string").alias("item"),
                                    F.concat(F.lit("big"), (F.col("id") % 6).cast("string")).alias("g"))
    rare = spark.createDataFrame([(10_000 + i, "0", RARE[i % 30]) for i in range(45)], "person long, item string, g string")
    return big.unionByName(rare).cache()


@pytest.mark.parametrize("kwargs", [BOUNDED, PCR], ids=["bounded", "pcr"])
def test_keys_chosen_privately_spend_a_zcdp_share_and_release_the_big_keys(events, kwargs):
    budget = PrivacyFilter(ZCDP(3.0, 1e-4))
    release = dp_spark.count_release(events, **COMMON, **kwargs, seed=4, budget=budget)
    assert budget.spent == ZCDP(1.0, 1e-5)  # the (ρ, δ) given, the key step's share included
    keys_step = release.budget_split[0]
    assert keys_step["step"].startswith("group keys") and keys_step["kind"] == "zcdp"
    assert keys_step["rho"] == pytest.approx(KEYS_RHO_SHARE) and keys_step["delta"] == pytest.approx(1e-6)
    r = release.result
    assert r["group_keys_released"] == r["groups_released"] == len(BIG)  # the rare keys are never released
    assert sorted(g["group"] for g in r["groups"]) == BIG
    assert set(release.groups.select("g").distinct().toPandas()["g"]) <= set(BIG)
    assert "approximate ρ = 0.1-zCDP" in release.statement and "δ = 1e-05 (δ-approximate ρ-zCDP)" in release.statement
    assert "approximate" in release.errors["group_keys_released"]
    assert release.noise[0].step == keys_step["step"]  # the key step's noise is charged to its step


def test_continual_distinct_still_needs_public_keys():
    with pytest.raises(ParameterError, match="privacy unit is the item"):
        dp_spark.plans.continual_distinct.plan(rho=0.5, horizon=16, group_by="g", max_groups=1)


def _neighbours(spark, events):
    """D, D + y (a person holding a key nobody else holds and rows in two big keys) and D - x (a person of a
    rare key removed)."""
    y = spark.createDataFrame([(99_999, "0", "only-y"), (99_999, "1", "big0"), (99_999, "2", "big1")],
                              "person long, item string, g string")
    return {"D": events, "D+y": events.unionByName(y), "D-x": events.where(F.col("person") != 10_000)}


@pytest.mark.parametrize("kwargs", [BOUNDED, PCR], ids=["bounded", "pcr"])
def test_neighbours_run_the_same_jobs_with_private_keys(spark, events, driver_calls, job_descriptions,  # noqa: F811
                                                        kwargs):
    """On neighbouring inputs, each with two draws: the same Spark job descriptions, the same kinds of
    results reaching the driver in the same order, the same report keys and split; y's own key is never
    released."""
    check_session(spark)  # its one probe per session (a collect) is not part of any run here
    shapes = {}
    for name, df in _neighbours(spark, events).items():
        for seed in (6, 9):
            del driver_calls[:], job_descriptions[:]
            release = dp_spark.count_release(df, **COMMON, **kwargs, seed=seed)
            shapes[name, seed] = {
                "jobs": list(job_descriptions), "driver": [call for call, _ in driver_calls],
                "result keys": sorted(release.result), "errors keys": sorted(release.errors),
                "split": [s["step"] for s in release.budget_split][:1],
            }
            assert "only-y" not in {g["group"] for g in release.result["groups"]}
    first = shapes["D", 6]
    assert first["jobs"] and any("group keys" in job for job in first["jobs"])
    for key, shape in shapes.items():
        assert shape == first, key


def test_the_cap_with_private_keys_never_reads_how_many_were_released(events, monkeypatch):
    """Review RV13: capping persons at m skips its window when m >= the public keys; with keys a private step
    released, their number must not decide that (it would show in the physical plan): the cap is told no
    public key count, and caps alike whatever was released."""
    from dp_spark.releases import groups as groups_module

    seen = []
    real = groups_module.cap_groups

    def recording(df, m, public_keys=None):
        seen.append(public_keys)
        return real(df, m, public_keys=public_keys)

    monkeypatch.setattr(groups_module, "cap_groups", recording)
    dp_spark.count_release(events, **COMMON, **BOUNDED, max_groups=50, seed=2)  # m above the released count
    dp_spark.count_release(events, **COMMON, **BOUNDED, max_groups=50, groups=BIG, seed=2)  # public: counted
    assert seen == [None, len(BIG)]
