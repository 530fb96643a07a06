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


def assert_detects(mechanism: str, claimed: float, lower_bound_of_broken: float) -> None:
    """The audit's power check: on a deliberately broken variant (about 2ε),
    the same event and trial count must prove a leak above the claim."""
    assert lower_bound_of_broken > claimed, (
        f"{mechanism}: the audit cannot detect a factor-2 mistake "
        f"(broken variant's bound {lower_bound_of_broken:.3f} <= claimed {claimed:g}); "
        "use a sharper event or more trials"
    )


def pytest_terminal_summary(terminalreporter):
    if RESULTS:
        terminalreporter.section("audit: empirical ε lower bounds (must not exceed the claim)")
        for result in RESULTS:
            terminalreporter.write_line(result.line())
