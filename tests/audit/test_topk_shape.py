"""Shape audit (Spark): top-k on D and on D + one person, fixed test seed.

Whatever the data, the release must have the same shape: report keys and
value keys, the items DataFrame's columns, the guarantee and budget split,
whether it raised and (except for Unknown Domain Gumbel, whose number of
released items is itself DP output) the number of items released. The added
person holds several items, repeats rows and has rows with a null item (those
are dropped per row, never an error).
"""

from __future__ import annotations

import pytest

import dp_spark
from dp_spark.errors import ParameterError

DOMAIN = [f"i{j}" for j in range(12)]
CASES = [  # (method, delta, epsilon)
    ("auto", 0.0, 1.0),
    ("auto", 1e-6, 1.0),  # k = 4 <= 10·ε: a public choice
    ("auto", 1e-6, 0.3),  # k = 4 > 10·ε: auto's private choice step runs
    ("joint", 0.0, 1.0),
    ("pnf-joint", 0.0, 1.0),
    ("pnf-peel", 0.0, 1.0),
    ("cdp-peel", 1e-6, 1.0),
    ("unknown-domain", 1e-6, 1.0),
]


@pytest.fixture(scope="module")
def tables(spark):
    rows = [(p, f"i{j}") for j in range(10) for p in range(3 * (10 - j))]
    newcomer = 10_000
    extra = [(newcomer, "i0"), (newcomer, "i0"), (newcomer, "i5"), (newcomer, "i11"), (newcomer, None)]
    schema = "person_id long, item string"
    return spark.createDataFrame(rows, schema), spark.createDataFrame(rows + extra, schema)


def shape(run):
    try:
        release = run()
    except ParameterError as exc:
        return {"raised": type(exc).__name__}
    report = release.to_dict()
    result = report["result"]
    return {
        "raised": None,
        "report_keys": sorted(report),
        "result_keys": sorted(result),
        "items_columns": release.items.columns,
        "privacy": report["privacy"],
        "budget_split": report["budget_split"],
        "parameters": report["parameters"],
        "released_count": result["released_count"] if result["method"] != "unknown-domain" else None,
        "error_keys": sorted(report["errors"]),
    }


@pytest.mark.parametrize("method, delta, epsilon", CASES)
def test_top_k_shape_is_the_same_with_one_more_person(tables, method, delta, epsilon):
    d, d_plus = tables
    domain = None if method == "unknown-domain" else DOMAIN

    def run(df):
        return lambda: dp_spark.top_k(df, k=4, epsilon=epsilon, delta=delta, method=method, domain=domain, seed=7,
                                      persons=100)

    before, after = shape(run(d)), shape(run(d_plus))
    assert before["raised"] is None
    assert before == after


def test_refusals_do_not_depend_on_the_data(tables):
    d, d_plus = tables
    for df in (d, d_plus):
        with pytest.raises(ParameterError, match="larger than the domain"):
            dp_spark.top_k(df, k=13, epsilon=1.0, domain=DOMAIN, seed=7)
        with pytest.raises(ParameterError, match="limit"):
            dp_spark.top_k(df, k=2000, epsilon=1.0, domain=DOMAIN, seed=7)
