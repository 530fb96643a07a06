"""The distinct-count release through its Python API, on a local session."""

from __future__ import annotations

import dataclasses
import json
import re

import jsonschema
import numpy as np
import pytest
from pyspark.sql import functions as F

import dp_spark
from dp_spark.accounting import PrivacyFilter, PureDP
from dp_spark.errors import BudgetExceededError, ParameterError, SchemaError
from tests.spark.seeded import PERSONS

REPORT_KEYS = {"release", "version", "library", "created", "privacy", "parameters", "result", "errors",
               "budget_split", "noise", "statement", "seeded", "publishable"}
RESULT_KEYS = {"estimate", "lower_bound", "bound", "bound_may_cap", "confidence", "method", "noise_scale",
               "noise_std"}


@pytest.fixture(scope="module")
def small(spark):
    rng = np.random.default_rng(0)
    rows = [(int(p), f"w{int(x)}") for p in range(300) for x in rng.integers(0, 400, rng.integers(1, 20))]
    return spark.createDataFrame(rows, "person_id long, item string").cache()


def test_release_report_shape_and_values(small, report_schema):
    release = dp_spark.distinct_count(small, epsilon=1.0, beta=0.05, max_bound=30, seed=1)
    report = release.to_dict()
    jsonschema.validate(json.loads(json.dumps(report)), report_schema)  # serialisable, and the contract
    assert set(report) == REPORT_KEYS | {"warning"}
    assert report["release"] == "distinct-count" and report["version"] == "2.0"
    result = report["result"]
    assert set(result) == RESULT_KEYS and result["method"] == "greedy"
    assert report["privacy"]["kind"] == "pure-dp"
    assert report["privacy"]["epsilon"] == 1.0 and report["privacy"]["delta"] == 0.0
    assert report["privacy"]["privacy_unit"] == "person" and "person_id" in report["privacy"]["neighbouring"]
    assert sum(step["epsilon"] for step in report["budget_split"]) == pytest.approx(1.0)
    assert release.budget_split == report["budget_split"] and release.privacy == report["privacy"]
    assert 1 <= result["bound"] <= 30 and result["confidence"] == pytest.approx(0.95)
    assert 0 <= result["lower_bound"] <= result["estimate"]
    assert report["seeded"] is True and report["publishable"] is False and "warning" in report
    assert release.estimate == result["estimate"] == release.result["estimate"]  # values are attributes too
    assert report["parameters"]["shards_chosen"] == "automatically (noisy person count of a 1-in-64 hash sample)"
    assert "1-differential privacy" in release.statement
    assert release.artifacts == {}  # a single count: nothing too large for the report
    with pytest.raises(dataclasses.FrozenInstanceError):
        release.values = {}


def test_seeded_release_is_reproducible_and_unseeded_is_not_marked(small):
    a = dp_spark.distinct_count(small, epsilon=1.0, max_bound=10, seed=3).result
    b = dp_spark.distinct_count(small, epsilon=1.0, max_bound=10, seed=3).result
    assert (a["estimate"], a["bound"]) == (b["estimate"], b["bound"])
    unseeded = dp_spark.distinct_count(small, epsilon=1.0, max_bound=10).to_dict()
    assert unseeded["seeded"] is False and unseeded["publishable"] is True and "warning" not in unseeded


def test_no_true_value_in_the_report(spark):
    # A count far from any noise: 777 distinct items, one per person.
    df = spark.createDataFrame([(p, f"x{p}") for p in range(777)], "person_id long, item string")
    release = dp_spark.distinct_count(df, epsilon=1.0, max_bound=5, seed=11)
    text = json.dumps(release.to_dict())
    true_values = {"777"}
    noisy = {str(release.estimate), str(release.lower_bound)}
    assert not (true_values - noisy) & set(re.findall(r"\d+", text)), "true count leaked"


def test_methods_all_release(small):
    for method in ("matching", "sampling"):
        report = dp_spark.distinct_count(small, epsilon=1.0, max_bound=20, method=method, seed=2).to_dict()
        assert report["result"]["method"] == method and report["parameters"]["method"] == method


def test_empty_table_is_a_valid_release(spark):
    empty = spark.createDataFrame([], "person_id long, item string")
    result = dp_spark.distinct_count(empty, epsilon=1.0, max_bound=5, seed=1).result
    assert result["estimate"] >= 0 and result["lower_bound"] >= 0


def test_null_rows_are_dropped(spark):
    from dp_spark.stages import bounded_distinct_counts

    df = spark.createDataFrame([(1, "a"), (None, "b"), (2, None), (3, "a")], "person_id long, item string")
    for method in ("greedy", "matching"):
        assert bounded_distinct_counts(df, "person_id", "item", 3, method).tolist() == [1, 1, 1]
    assert dp_spark.distinct_count(df, epsilon=1.0, max_bound=3, seed=1).lower_bound >= 0


def test_person_ids_must_compare_byte_for_byte(spark):
    df = spark.createDataFrame([(0.0, "a"), (-0.0, "b")], "person_id double, item string")
    with pytest.raises(SchemaError, match="floating-point"):
        dp_spark.distinct_count(df, epsilon=1.0, max_bound=3)
    lcase = spark.createDataFrame([("Bob", "a"), ("bob", "b")], "person_id string, item string").select(
        F.expr("collate(person_id, 'UTF8_LCASE')").alias("person_id"), "item")
    with pytest.raises(SchemaError, match="collation"):
        dp_spark.distinct_count(lcase, epsilon=1.0, max_bound=3)


@pytest.mark.parametrize("release", ["distinct-count", "set-union", "top-k", "count-release"])
def test_item_ids_of_a_non_binary_collation_are_refused_before_spending(spark, release):
    """Helper H5's finding: Spark merges 'A' and 'a' of a UTF8_LCASE item column where the Python kernels
    compare bytes, so one person's item could count twice (set-union's policy, the distinct counts); the
    schema alone refuses it, before anything is spent."""
    from dp_spark.accounting import ZCDP, ApproxDP, PrivacyFilter
    from dp_spark.releases import RELEASES

    df = spark.createDataFrame([(1, "A"), (1, "a"), (2, "b")], "person_id long, item string").select(
        "person_id", F.expr("collate(item, 'UTF8_LCASE')").alias("item"))
    spec = RELEASES[release]
    budget = PrivacyFilter(ZCDP(10.0, 1e-3) if spec.example.zcdp else ApproxDP(10.0, 1e-3))
    with pytest.raises(SchemaError, match="collation UTF8_LCASE"):
        spec.function(df, **spec.example.parameters, budget=budget)
    assert budget.ledger == []


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"epsilon": 0}, ParameterError),
        ({"epsilon": -1.0}, ParameterError),
        ({"epsilon": float("inf")}, ParameterError),
        ({"epsilon": float("nan")}, ParameterError),
        ({"beta": 0.0}, ParameterError),
        ({"beta": 1.0}, ParameterError),
        ({"max_bound": 0}, ParameterError),
        ({"max_bound": 1_000_000_000}, ParameterError),
        ({"shards": 10**6}, ParameterError),
        ({"method": "matching", "edge_limit": 10**10}, ParameterError),
        ({"method": "magic"}, ParameterError),
        ({"seed": -3}, ParameterError),
        ({"person_col": "nobody"}, SchemaError),
        ({"item_col": "nothing"}, SchemaError),
    ],
)
def test_bad_parameters(small, kwargs, error):
    with pytest.raises(error):
        dp_spark.distinct_count(small, **{"epsilon": 1.0, **kwargs})


def test_epsilon_is_required_and_df_the_only_positional_parameter(small):
    with pytest.raises(TypeError, match="epsilon"):
        dp_spark.distinct_count(small)
    with pytest.raises(TypeError):
        dp_spark.distinct_count(small, "person_id", "item", epsilon=1.0)


def test_budget_is_checked_before_data_is_read(unreadable_events):
    df = unreadable_events
    budget = PrivacyFilter(PureDP(1.0))
    budget.spend(PureDP(0.8))
    with pytest.raises(BudgetExceededError):
        dp_spark.distinct_count(df, epsilon=0.5, budget=budget)
    assert budget.spent.epsilon == pytest.approx(0.8)  # refusal changed nothing


def test_bad_column_spends_no_budget(small):
    budget = PrivacyFilter(PureDP(1.0))
    with pytest.raises(SchemaError):
        dp_spark.distinct_count(small, person_col="nobody", epsilon=0.5, budget=budget)
    assert budget.spent.epsilon == 0.0


def test_reported_epsilon_is_exactly_the_one_asked_for(small):
    report = dp_spark.distinct_count(small, epsilon=1.3, max_bound=5, seed=1).to_dict()
    assert report["privacy"]["epsilon"] == 1.3


def test_budget_is_spent_by_a_release(small):
    budget = PrivacyFilter(PureDP(1.0))
    dp_spark.distinct_count(small, epsilon=0.6, max_bound=5, budget=budget, seed=1)
    assert budget.spent.epsilon == pytest.approx(0.6)
    with pytest.raises(BudgetExceededError):
        dp_spark.distinct_count(small, epsilon=0.6, max_bound=5, budget=budget, seed=1)


def test_amazon_fashion_words(spark, amazon_path):
    """The paper's data set, tokenised as ALGORITHMS.md 1.9 says; the lower
    bound must sit below the true vocabulary (1,464) and not absurdly far."""
    reviews = spark.read.json(str(amazon_path))
    words = reviews.select(
        "reviewerID", F.explode(F.split(F.lower("reviewText"), "[^a-z]+")).alias("word")
    ).where(F.length("word") > 0)
    release = dp_spark.distinct_count(words, person_col="reviewerID", item_col="word", epsilon=2.0,
                                      max_bound=99, method="matching", seed=4)
    assert 1000 <= release.lower_bound <= 1464


def test_matching_size_check_is_private_across_the_edge_limit(spark):
    """Issue 9 finding 3: D has 20 (person, item) pairs, D + one person has
    21, edge_limit=20. The refusal used to be decided on the true pair count
    (D released, D' raised). Now both release with the same report shape."""
    rows = [(p, f"x{p}") for p in range(20)]
    schema = "person_id long, item string"
    d = spark.createDataFrame(rows, schema)
    d_plus = spark.createDataFrame(rows + [(20, "x20")], schema)
    reports = [dp_spark.distinct_count(t, epsilon=1.0, method="matching", edge_limit=20, max_bound=3,
                                       seed=5).to_dict() for t in (d, d_plus)]
    a, b = reports
    assert set(a) == set(b) and set(a["parameters"]) == set(b["parameters"])
    assert set(a["result"]) == set(b["result"]) and a["privacy"] == b["privacy"]
    assert a["budget_split"] == b["budget_split"]
    assert any("matching size check" in step["step"] for step in a["budget_split"])
    assert sum(step["epsilon"] for step in a["budget_split"]) == pytest.approx(1.0)


def test_matching_runs_exactly_when_the_noisy_size_fits(small):
    fits = dp_spark.distinct_count(small, epsilon=1.0, method="matching", max_bound=20, seed=2).to_dict()
    assert fits["parameters"]["counted_by"] == "exact matching"
    assert fits["parameters"]["items_per_person"] == 20
    # 300 persons, ~3,000 pairs: far above a limit of 100 plus any plausible noise.
    falls_back = dp_spark.distinct_count(small, method="matching", max_bound=20, edge_limit=100,
                                         epsilon=50.0, seed=2).to_dict()
    assert falls_back["parameters"]["counted_by"].startswith("greedy")
    assert falls_back["parameters"]["shards"] >= 1
    assert falls_back["budget_split"][0]["step"] == fits["budget_split"][0]["step"]


def test_parameter_limits_name_the_limit_and_the_reason(small):
    with pytest.raises(ParameterError, match=r"max_bound must be a whole number from 1 to 1,000,000 \(.*driver"):
        dp_spark.distinct_count(small, epsilon=1.0, max_bound=1_000_000_000)


def _record(r):
    """A noise record up to its wording (target, step label), the grouped count's "bound" parameter and its
    "parallel" mark (a part of its step over disjoint groups: the one group is the whole step)."""
    return (r.kind, r.scale, r.std, r.sensitivity, r.draws,
            {k: v for k, v in r.parameters.items() if k not in ("bound", "parallel")})


@pytest.mark.parametrize("seed", [11, 12])
@pytest.mark.parametrize("shards", [None, 2])
def test_an_ungrouped_release_is_the_one_key_grouped_release(spark, shards, seed):
    """Issue 37 §1: one body. Seeded, the ungrouped release equals the
    grouped release with groups=[one key], max_groups=1 on the same rows all
    in that key, for the grouped form's method (greedy, noise laplace; the
    automatic shard count and given shards): the same released numbers, the
    same chosen shards, the same noise records up to their wording, the same
    budget split."""
    df = spark.createDataFrame([(p, i, "k") for p, i in PERSONS], "person_id long, item string, g string")
    plain = dp_spark.distinct_count(df, epsilon=1.0, max_bound=8, shards=shards, seed=seed)
    one = dp_spark.distinct_count(df, epsilon=1.0, max_bound=8, shards=shards, seed=seed, group_by="g",
                                  groups=["k"], max_groups=1, noise="laplace")
    (group,) = one.result["groups"]
    assert group["group"] == "k"
    assert {k: group[k] for k in ("estimate", "lower_bound", "bound")} == \
        {k: plain.result[k] for k in ("estimate", "lower_bound", "bound")}
    assert one.parameters["shards"] == plain.parameters["shards"]
    assert one.parameters["epsilon_per_group"] == pytest.approx(1.0 if shards else 0.99)  # m = 1: all but shards'
    assert "epsilon_per_group" not in plain.parameters
    assert [_record(r) for r in one.noise] == [_record(r) for r in plain.noise]
    assert len(plain.noise) == (3 if shards is None else 2)
    assert one.noise[-1].parameters["bound"] == plain.result["bound"] == plain.noise[-1].sensitivity
    assert [s["epsilon"] for s in one.budget_split] == [s["epsilon"] for s in plain.budget_split]


# -- seeded cases (tests/spark/seeded.py: test_seeded_values, test_noise_records) --

#: case -> (parameters, input kind, the kinds of Release.noise in the order drawn); every method
SEEDED_CASES = {
    "distinct_count/greedy-auto-shards": (dict(epsilon=1.0, method="greedy", max_bound=8), "persons",
                                          ["discrete-laplace", "gem", "discrete-laplace"]),
    "distinct_count/greedy-2-shards": (dict(epsilon=1.0, method="greedy", max_bound=8, shards=2), "persons",
                                       ["gem", "discrete-laplace"]),
    "distinct_count/matching": (dict(epsilon=1.0, method="matching", max_bound=8), "persons",
                                ["discrete-laplace", "gem", "discrete-laplace"]),
    "distinct_count/sampling": (dict(epsilon=1.0, method="sampling", max_bound=8), "persons",
                                ["gem", "discrete-laplace"]),
}


def check_noise_records(case, release):
    """The last record is the estimate's noise, at the chosen bound."""
    v = release.values
    assert release.noise[-1].scale == v["noise_scale"] and release.noise[-1].std == v["noise_std"]
    assert release.noise[-1].sensitivity == v["bound"]


SEEDED_VALUES = {
    'distinct_count/greedy-2-shards': {
        'values': {
            'bound': 1,
            'bound_may_cap': False,
            'confidence': 0.95,
            'estimate': 27,
            'lower_bound': 22,
            'method': 'greedy',
            'noise_scale': 2.0,
            'noise_std': 2.799177768214361,
        },
    },
    'distinct_count/greedy-auto-shards': {
        'values': {
            'bound': 1,
            'bound_may_cap': False,
            'confidence': 0.95,
            'estimate': 20,
            'lower_bound': 15,
            'method': 'greedy',
            'noise_scale': 2.0202020202020203,
            'noise_std': 2.828036055024653,
        },
    },
    'distinct_count/matching': {
        'values': {
            'bound': 1,
            'bound_may_cap': False,
            'confidence': 0.95,
            'estimate': 20,
            'lower_bound': 15,
            'method': 'matching',
            'noise_scale': 2.0202020202020203,
            'noise_std': 2.828036055024653,
        },
    },
    'distinct_count/sampling': {
        'values': {
            'bound': 1,
            'bound_may_cap': False,
            'confidence': 0.95,
            'estimate': 24,
            'lower_bound': 19,
            'method': 'sampling',
            'noise_scale': 2.0,
            'noise_std': 2.799177768214361,
        },
    },
}


def test_the_report_says_when_the_bound_may_cap_the_estimate(spark):
    """Persons with 40 distinct items each, max_bound 16: l̂ can only be the
    top candidate, and the result, the errors and the CLI's summary say the
    estimate may be capped and how to raise the bound (issue 36). With the
    default max_bound nothing caps them: l̂ is below the top and the
    estimate is close to the truth (2,400)."""
    rows = [(p, f"x{p}-{i}") for p in range(60) for i in range(40)]
    df = spark.createDataFrame(rows, "person_id long, item string")
    capped = dp_spark.distinct_count(df, epsilon=2.0, max_bound=16, shards=1, seed=3)
    assert capped.result["bound"] == 16 and capped.result["bound_may_cap"] is True
    assert "raise max_bound (--max-bound) up to 1,000,000" in capped.errors["bound"]
    assert "may be capped" in capped.summary()
    free = dp_spark.distinct_count(df, epsilon=2.0, shards=1, seed=3)
    assert free.result["bound_may_cap"] is False and free.result["bound"] < 65_536
    assert "did not cap it" in free.errors["bound"]
    assert abs(free.result["estimate"] - 2_400) < 400
