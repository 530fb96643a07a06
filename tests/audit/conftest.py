"""Audit tier: statistical privacy tests (marker ``audit``, set by directory
in tests/conftest.py).

``audit_record`` records a mechanism's empirical ε lower bound against its
claim; the table is printed at the end of the run (pytest's terminal
summary)."""

from __future__ import annotations

import pytest

from tests.audit.stats import RESULTS, AuditResult


@pytest.fixture
def audit_record():
    """Call ``audit_record(mechanism, claimed, lower_bound, trials, delta=0)``:
    records the result and asserts lower_bound <= claimed."""

    def record(mechanism: str, claimed: float, lower_bound: float, trials: int, delta: float = 0.0):
        RESULTS.append(AuditResult(mechanism, claimed, lower_bound, trials, delta))
        assert lower_bound <= claimed, (
            f"{mechanism}: empirical ε lower bound {lower_bound:.3f} exceeds the claimed ε = {claimed:g}"
        )

    return record


def pytest_terminal_summary(terminalreporter):
    if RESULTS:
        terminalreporter.section("audit: empirical ε lower bounds (must not exceed the claim)")
        for result in RESULTS:
            terminalreporter.write_line(result.line())
