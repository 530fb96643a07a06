"""Refusals every release makes the same way, before it reads or spends:
an item column holding only nulls, and a budget too small for the release."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

import dp_spark
from dp_spark import ApproxDP, PrivacyFilter, ZCDP
from dp_spark.errors import BudgetExceededError, SchemaError

#: release -> (its call with its own parameters, a budget with 0.8 of 1 already spent)
CASES = {
    "count-release": (lambda df, **kw: dp_spark.count_release(df, rho=0.5, delta=1e-7, **kw),
                      lambda: PrivacyFilter(ZCDP(1.0, 1e-6)), lambda: ZCDP(0.8, 0.0), "rho"),
    "top-k": (lambda df, **kw: dp_spark.top_k(df, k=1, epsilon=0.5, delta=1e-7, **kw),
              lambda: PrivacyFilter(ApproxDP(1.0, 1e-6)), lambda: ApproxDP(0.8, 0.0), "epsilon"),
}


@pytest.mark.parametrize("release", list(CASES))
def test_item_column_of_nulls_is_refused(spark, release):
    df = spark.createDataFrame([(1,), (2,)], "person_id long").withColumn("item", F.lit(None))
    with pytest.raises(SchemaError, match="only nulls"):
        CASES[release][0](df)


@pytest.mark.parametrize("release", list(CASES))
def test_budget_is_checked_before_data_is_read(unreadable_events, release):
    call, make_budget, earlier, amount = CASES[release]
    budget = make_budget()
    budget.spend(earlier())
    with pytest.raises(BudgetExceededError):
        call(unreadable_events, budget=budget)
    assert getattr(budget.spent, amount) == pytest.approx(0.8)
