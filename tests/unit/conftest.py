"""Unit tier (marker ``unit``): the mechanism layer, plans, checks, the
ledger, the CLI up to the plan: pure Python and numpy, no pyspark.

While a unit test runs, pyspark cannot be imported (when a run has not
loaded it already, as ``pytest -m unit`` never does): a test that reaches
Spark code fails here and belongs in tests/spark. tests/unit/test_tiers.py
also checks every file statically. Shared helpers: tests/unit/helpers.py."""

from __future__ import annotations

import sys

import pytest

from tests.unit.helpers import block_pyspark, pyspark_loaded


@pytest.fixture(autouse=True)
def _no_pyspark():
    if pyspark_loaded():  # a mixed run (other tiers loaded it): the static check covers this tier
        yield
        return
    blocker = block_pyspark()
    try:
        yield
    finally:
        sys.meta_path.remove(blocker)
