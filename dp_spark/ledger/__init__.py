"""A persisted privacy-budget ledger shared across runs and processes.

    from dp_spark.ledger import open_ledger
    ledger = open_ledger("budgets.db")                     # or "postgresql://…"
    ledger.create_budget("team-a", ZCDP(1.0))
    dp_spark.count_release(df, rho=0.25, delta=1e-6, ledger=ledger.budget("team-a"))
    # (budget= takes the same object, or a per-run PrivacyFilter)

Composition rules, run keys and the stream key: :mod:`dp_spark.ledger.ledger`. Pure Python (sqlite3; psycopg
for PostgreSQL), no pyspark.
"""

from dp_spark.ledger.budget import LedgerBudget, budget_or_ledger
from dp_spark.ledger.ledger import RULES, BudgetState, Ledger, open_ledger

__all__ = ["budget_or_ledger", "open_ledger", "Ledger", "LedgerBudget", "BudgetState", "RULES"]
