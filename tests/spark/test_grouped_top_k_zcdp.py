"""The grouped top-k's ρ-zCDP form (issue 36 §3, ``noise="gaussian"``)
end to end: the report's privacy section (ρ and its (ε, δ') equivalent),
the budget split and the ledger charge, the per-group ε, the private cap
under zCDP, the CLI flag, and the refusals before anything is spent. The
stage's neighbour shape is tests/spark/test_grouped_top_k.py's (the same
Spark pass); the arithmetic tests/unit/test_grouped_top_k_zcdp.py."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import dp_spark
from dp_spark import cli
from dp_spark.accounting import ZCDP, PrivacyFilter
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.top_k.zcdp import zcdp_group_epsilon
from dp_spark.plans.top_k import ZCDP_EQUIVALENT_DELTA

KEYS = ["g0", "g1", "g2", "empty"]
DOMAIN = [f"i{j}" for j in range(1, 31)]


@pytest.fixture(scope="module")
def table(spark):
    """300 persons, each in 1-3 of g0..g2; item i1 is held by most persons of
    every group, i2 by fewer, the rest spread thin."""
    rng = np.random.default_rng(21)
    rows = []
    for p in range(300):
        for g in rng.choice(3, size=int(rng.integers(1, 4)), replace=False):
            rows.append((p, "i1" if p % 5 else "i2", f"g{g}"))
            if p % 3 == 0:
                rows.append((p, "i2", f"g{g}"))
            rows.append((p, f"i{int(rng.integers(3, 31))}", f"g{g}"))
    return spark.createDataFrame(rows, "person_id long, item string, country string").cache()


def test_the_report_states_rho_its_equivalent_and_each_groups_epsilon(spark, table):
    ledger = PrivacyFilter(ZCDP(2.0))
    release = dp_spark.top_k(table, epsilon=1.0, k=2, domain=DOMAIN, group_by="country", groups=KEYS,
                             max_groups=3, noise="gaussian", seed=4, budget=ledger)
    again = dp_spark.top_k(table, epsilon=1.0, k=2, domain=DOMAIN, group_by="country", groups=KEYS,
                           max_groups=3, noise="gaussian", seed=4)
    assert release.result == again.result  # seeded
    privacy = release.privacy
    assert privacy["kind"] == "zcdp" and privacy["rho"] == 0.5 and privacy["delta"] == 0.0
    assert privacy["approx_dp_equivalent"] == ZCDP(0.5).to_approx(ZCDP_EQUIVALENT_DELTA).to_dict()
    assert ledger.spent.rho == pytest.approx(0.5)  # charged once, as ρ
    assert [s["kind"] for s in release.budget_split] == ["zcdp"]
    assert math.fsum(s["rho"] for s in release.budget_split) <= 0.5
    assert release.parameters["method_per_group"] == "cdp-peel"  # auto under zCDP
    assert release.parameters["epsilon_per_round_per_group"] == zcdp_group_epsilon("cdp-peel", 0.5, 3, 2)
    assert release.parameters["rho_per_group"] == pytest.approx(0.5 / 3)
    assert "ρ-zCDP, ρ = ε²/2" in release.statement and "not itself pure ε-DP" in release.statement
    assert "ρ/3" in release.statement and "√m scaling" in release.statement
    assert release.result["groups_released"] == 4 and release.result["released_count"] == 8
    assert release.noise[-1].kind == "gumbel"
    from dp_spark.report import report_schema
    import jsonschema

    jsonschema.validate(json.loads(release.to_json()), report_schema())


def test_a_large_budget_finds_each_groups_true_top(spark, table):
    release = dp_spark.top_k(table, epsilon=30.0, k=2, domain=DOMAIN, method="joint", group_by="country",
                             groups=KEYS[:3], max_groups=3, noise="gaussian", seed=1)
    frame = release.groups.toPandas()
    for g in KEYS[:3]:
        assert list(frame[frame["country"] == g].sort_values("rank")["item"]) == ["i1", "i2"]
    assert release.parameters["epsilon_per_group"] == zcdp_group_epsilon("joint", 450.0, 3, 2)


def test_a_private_cap_under_zcdp_is_a_share_of_rho(spark, table):
    release = dp_spark.top_k(table, epsilon=2.0, k=2, domain=DOMAIN, group_by="country", groups=KEYS,
                             noise="gaussian", seed=6)
    m = release.parameters["max_groups"]
    assert isinstance(m, int) and 1 <= m <= 4
    cap, selection = release.budget_split
    assert cap["step"].startswith("group cap m") and "ε²/8-zCDP" in cap["step"]
    assert cap["rho"] == pytest.approx(2.0 * 0.05) and cap["rho"] + selection["rho"] <= 2.0
    assert release.noise[0].kind == "gem" and release.noise[0].scale == pytest.approx(2 / math.sqrt(8 * 0.1))
    assert release.parameters["rho_per_group"] == pytest.approx(1.9 / m)


def test_refusals_come_before_anything_is_spent(spark, table):
    budget = PrivacyFilter(ZCDP(10.0))
    for kw, match in ((dict(domain=None), "public domain"), (dict(method="pnf-joint"), "bounded-range"),
                      (dict(groups=None), "ρ-zCDP"), (dict(group_by=None, groups=None, max_groups=None), "per group"),
                      (dict(delta=1e-6), "no δ")):
        args = dict(epsilon=1.0, k=2, domain=DOMAIN, group_by="country", groups=KEYS, max_groups=2,
                    noise="gaussian", budget=budget)
        with pytest.raises(ParameterError, match=match):
            dp_spark.top_k(table, **{**args, **kw})
    assert budget.spent.rho == 0.0


def test_cli_noise_gaussian_is_the_apis_run(spark, table, tmp_path):
    from tests.spark.test_grouped_top_k import cli_inputs

    data, keys, report, domain = cli_inputs(table, tmp_path, KEYS, DOMAIN)
    code = cli.main(["top-k", "--input", str(data), "--k", "2", "--epsilon", "1", "--domain", str(domain),
                     "--group-by", "country", "--groups", str(keys), "--max-groups", "2", "--noise", "gaussian",
                     "--seed", "3", "--quiet", "--output", str(report)])
    assert code == 0
    doc = json.loads(report.read_text())
    api = dp_spark.top_k(table, epsilon=1.0, k=2, domain=DOMAIN, group_by="country", groups=str(keys),
                         max_groups=2, noise="gaussian", seed=3)
    assert doc["result"]["items"] == api.result["items"]
    assert doc["privacy"]["kind"] == "zcdp" and doc["privacy"]["rho"] == 0.5
    assert "approx_dp_equivalent" in doc["privacy"]
