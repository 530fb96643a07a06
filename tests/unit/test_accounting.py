"""Tests of dp_spark.accounting: cost types, composition, conversions, filter."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dp_spark.accounting import (
    ZCDP,
    ApproxDP,
    PrivacyFilter,
    PureDP,
    bounded_range_to_zcdp,
    compose,
    convert_cost,
    gaussian_zcdp,
    pure_to_zcdp,
    zcdp_to_approx_epsilon,
)
from dp_spark.accounting import float_down, float_up, ratio_up, remainder
from dp_spark.accounting.exact import calibrate, cost_up, decimal_text, written, written_down, written_up
from dp_spark.errors import BudgetExceededError, ParameterError

# --------------------------------------------------------------------------- cost types


def test_to_dict_and_describe():
    assert PureDP(1).to_dict() == {"kind": "pure-dp", "epsilon": 1.0}
    assert ApproxDP(0.5, 1e-6).to_dict() == {"kind": "approx-dp", "epsilon": 0.5, "delta": 1e-6}
    assert ZCDP(0.1).to_dict() == {"kind": "zcdp", "rho": 0.1, "delta": 0.0}
    assert PureDP(1).describe() == "ε = 1 (pure differential privacy)"
    assert ApproxDP(0.5, 1e-6).describe() == "ε = 0.5, δ = 1e-06 ((ε, δ)-differential privacy)"
    assert "ρ = 0.1" in ZCDP(0.1).describe() and "δ" not in ZCDP(0.1).describe()
    assert ZCDP(0.1, 1e-6).describe() == "ρ = 0.1, δ = 1e-06 (δ-approximate ρ-zCDP)"
    for cost in (PureDP(1), ApproxDP(1, 0.1), ZCDP(1, 0.1)):
        assert "\n" not in cost.describe()


def test_costs_are_frozen_and_floats():
    cost = PureDP(1)
    assert isinstance(cost.epsilon, float)
    with pytest.raises(AttributeError):
        cost.epsilon = 2.0  # type: ignore[misc]
    assert PureDP(1) == PureDP(1.0)
    assert hash(ZCDP(0.5)) == hash(ZCDP(0.5, 0.0))


@pytest.mark.parametrize(
    "make",
    [
        lambda: PureDP(-0.1),
        lambda: PureDP(float("nan")),
        lambda: PureDP(float("inf")),
        lambda: PureDP("1"),
        lambda: PureDP(True),
        lambda: ApproxDP(1.0, 1.0),
        lambda: ApproxDP(1.0, -1e-9),
        lambda: ApproxDP(-1.0, 0.1),
        lambda: ApproxDP(1.0, float("nan")),
        lambda: ZCDP(-0.5),
        lambda: ZCDP(float("inf")),
        lambda: ZCDP(0.5, 1.5),
    ],
)
def test_invalid_values_refused(make):
    with pytest.raises(ParameterError):
        make()


def test_zero_costs_allowed():
    assert PureDP(0).epsilon == 0.0
    assert ApproxDP(0, 0).delta == 0.0
    assert ZCDP(0).rho == 0.0


def test_same_kind_addition():
    assert PureDP(0.5) + PureDP(0.25) == PureDP(0.75)
    total = ApproxDP(1, 1e-6) + ApproxDP(0.5, 2e-6)
    assert total.epsilon == 1.5 and total.delta == pytest.approx(3e-6)
    # costs add as the decimals written (the filter's rule): 0.1 + 0.2 is 0.3
    assert ZCDP(0.1, 1e-7) + ZCDP(0.2) == ZCDP(0.3, 1e-7)
    assert sum([PureDP(1), PureDP(2)]) == PureDP(3)


def test_mixed_kind_addition_refused():
    with pytest.raises(ParameterError):
        PureDP(1) + ZCDP(0.5)
    with pytest.raises(TypeError):
        PureDP(1) + 1.0


def test_delta_sum_reaching_one_refused():
    with pytest.raises(ParameterError):
        ApproxDP(1, 0.6) + ApproxDP(1, 0.5)


# --------------------------------------------------------------------------- composition


def test_compose_kinds():
    assert compose([PureDP(1), PureDP(0.5)]) == PureDP(1.5)
    assert compose([PureDP(1), ApproxDP(0.5, 1e-6)]) == ApproxDP(1.5, 1e-6)
    assert compose([PureDP(1), ZCDP(0.25, 1e-9)]) == ZCDP(0.5 + 0.25, 1e-9)
    assert compose([]) == PureDP(0)
    assert compose(iter([ZCDP(0.1), ZCDP(0.2)])).rho == pytest.approx(0.3)


def test_compose_refuses_approx_with_zcdp_and_non_costs():
    with pytest.raises(ParameterError):
        compose([ApproxDP(1, 1e-6), ZCDP(0.1)])
    with pytest.raises(ParameterError):
        compose([PureDP(1), 0.5])


@given(st.lists(st.floats(min_value=0, max_value=10), max_size=20))
def test_compose_pure_is_sum(epsilons):
    total = compose([PureDP(e) for e in epsilons])
    assert total.epsilon == pytest.approx(math.fsum(epsilons), rel=1e-12, abs=1e-12)


def test_convert_cost():
    assert convert_cost(PureDP(2), "approx-dp") == ApproxDP(2, 0)
    assert convert_cost(PureDP(2), "zcdp") == ZCDP(2.0)
    assert convert_cost(ZCDP(0.3), "zcdp") == ZCDP(0.3)
    for cost, kind in [(ZCDP(0.1), "pure-dp"), (ApproxDP(1, 0), "zcdp"), (ZCDP(0.1), "approx-dp")]:
        with pytest.raises(ParameterError):
            convert_cost(cost, kind)
    with pytest.raises(ParameterError):
        convert_cost(PureDP(1), "renyi")


# --------------------------------------------------------------------------- conversions


def test_known_conversion_numbers():
    assert pure_to_zcdp(1.0) == 0.5
    assert bounded_range_to_zcdp(1.0) == 0.125
    assert bounded_range_to_zcdp(2.0) == 0.5
    assert gaussian_zcdp(1.0, 1.0) == 0.5
    assert gaussian_zcdp(2.0, 4.0) == 0.125
    # ρ = 0.5, δ = 1e-6: 0.5 + 2·sqrt(0.5·ln 1e6) = 0.5 + 2·sqrt(6.907755...) = 5.7565217...
    assert zcdp_to_approx_epsilon(0.5, 1e-6) == pytest.approx(5.756521769756932, rel=1e-12)
    assert zcdp_to_approx_epsilon(0.0, 1e-6) == 0.0
    assert zcdp_to_approx_epsilon(1.0, math.exp(-1)) == pytest.approx(3.0)


def test_zcdp_to_approx_adds_deltas():
    approx = ZCDP(0.5, 1e-7).to_approx(1e-6)
    assert approx.epsilon == pytest.approx(5.756521769756932)
    assert approx.delta == pytest.approx(1.1e-6)


@pytest.mark.parametrize("delta", [0.0, 1.0, -0.1, float("nan")])
def test_conversion_refuses_bad_delta(delta):
    with pytest.raises(ParameterError):
        zcdp_to_approx_epsilon(0.5, delta)
    with pytest.raises(ParameterError):
        ZCDP(0.5).to_approx(delta)


def test_conversions_refuse_bad_inputs():
    for call in (lambda: pure_to_zcdp(-1), lambda: bounded_range_to_zcdp(float("nan")),
                 lambda: gaussian_zcdp(1.0, 0.0), lambda: zcdp_to_approx_epsilon(-0.1, 1e-6)):
        with pytest.raises(ParameterError):
            call()


# --------------------------------------------------------------------------- filter


def test_filter_accepts_exact_budget_in_pieces():
    epsilon = 0.7
    pf = PrivacyFilter(PureDP(epsilon))
    pf.spend(PureDP(epsilon / 2), "first")
    pf.spend(PureDP(epsilon / 2), "second")
    assert pf.spent.epsilon == pytest.approx(epsilon)
    assert pf.remaining == PureDP(0)
    assert [label for label, _ in pf.ledger] == ["first", "second"]


def test_filter_compares_exactly_point_one_three_times():
    """The rule (filter module docstring): amounts are the decimals written,
    compared exactly. 3 × 0.1 is exactly 0.3, so it fits a budget of 0.3 (its
    binary value 0.2999999999999999888… is not what counts), and then not
    even the smallest float fits; the remaining budget always fits."""
    pf = PrivacyFilter(PureDP(0.3))
    pf.spend(PureDP(0.1))
    pf.spend(PureDP(0.1))
    last = pf.remaining
    # 0.3 - 0.2 = 1/10, stated as the largest float whose binary value and decimal are both <= 1/10
    assert last == PureDP(math.nextafter(0.1, 0.0)) and Fraction(last.epsilon) < Fraction(1, 10)
    assert pf.can_spend(PureDP(0.1))
    pf.spend(last)
    assert not pf.can_spend(PureDP(0.1))  # after spending remaining, the literal 0.1 no longer fits
    pf = PrivacyFilter(PureDP(0.3))
    for _ in range(3):
        pf.spend(PureDP(0.1))
    assert pf.remaining == PureDP(0.0)
    assert pf.spent == PureDP(0.3)
    assert not pf.can_spend(PureDP(5e-324))  # not even the smallest float fits now
    with pytest.raises(BudgetExceededError, match="compared exactly"):
        pf.spend(PureDP(5e-324))


def test_filter_issue_22_point_nine_then_point_one():
    """Issue 22: 0.9 then 0.1 from a budget of 1 is accepted, then any further
    spend (one ulp of anything) is refused; in every kind and component."""
    for budget, first, second, more in [
        (PureDP(1.0), PureDP(0.9), PureDP(0.1), PureDP(5e-324)),
        (ApproxDP(1.0, 1e-6), ApproxDP(0.9, 9e-7), ApproxDP(0.1, 1e-7), ApproxDP(0.0, 5e-324)),
        (ApproxDP(1.0, 1e-6), ApproxDP(0.9, 9e-7), ApproxDP(0.1, 1e-7), ApproxDP(5e-324, 0.0)),
        (ZCDP(1.0, 1e-6), ZCDP(0.9, 9e-7), ZCDP(0.1, 1e-7), ZCDP(5e-324)),
        (ZCDP(1.0, 1e-6), ZCDP(0.9, 9e-7), ZCDP(0.1, 1e-7), ZCDP(0.0, 5e-324)),
    ]:
        pf = PrivacyFilter(budget)
        pf.spend(first)
        assert pf.can_spend(second), (budget, pf.remaining)
        pf.spend(second)
        assert pf.spent == budget
        assert not pf.can_spend(more)
        with pytest.raises(BudgetExceededError):
            pf.spend(more)


def test_filter_binary_mode_counts_exact_floats():
    """``as_written=False`` (a mechanism's own filter over the floats it
    computed): amounts are the binary values, so 3 × 0.1 exceeds 0.3
    (0.3000000000000000166… > 0.2999999999999999888…) and the remaining
    budget, rounded down in binary, fits."""
    pf = PrivacyFilter(PureDP(0.3), as_written=False)
    pf.spend(PureDP(0.1))
    pf.spend(PureDP(0.1))
    assert not pf.can_spend(PureDP(0.1))
    last = pf.remaining
    assert 0.1 - 1e-16 < last.epsilon < 0.1
    pf.spend(last)
    assert not pf.can_spend(PureDP(5e-324))
    assert Fraction(pf.spent.epsilon) >= Fraction(0.1) * 2 + Fraction(last.epsilon)


@pytest.mark.parametrize("kind", ["pure", "approx-eps", "approx-delta", "rho", "zcdp-delta"])
def test_filter_refuses_a_one_ulp_overspend(kind):
    up = math.nextafter(0.5, math.inf)
    budget, fits, over = {
        "pure": (PureDP(1.0), PureDP(0.5), PureDP(up)),
        "approx-eps": (ApproxDP(1.0, 1e-6), ApproxDP(0.5, 5e-7), ApproxDP(up, 5e-7)),
        "approx-delta": (ApproxDP(1.0, 1e-6), ApproxDP(0.5, 5e-7),
                         ApproxDP(0.5, math.nextafter(5e-7, 1.0))),
        "rho": (ZCDP(1.0, 1e-6), ZCDP(0.5, 5e-7), ZCDP(up, 5e-7)),
        "zcdp-delta": (ZCDP(1.0, 1e-6), ZCDP(0.5, 5e-7), ZCDP(0.5, math.nextafter(5e-7, 1.0))),
    }[kind]
    pf = PrivacyFilter(budget)
    pf.spend(fits)
    assert not pf.can_spend(over)
    with pytest.raises(BudgetExceededError):
        pf.spend(over)
    pf.spend(fits)  # exactly the budget fits
    assert pf.spent == budget


def test_pure_into_zcdp_counts_exact_square():
    """ε = 0.1 counts as ρ = ε²/2 of the decimal written, 0.005 exactly: a
    zCDP budget of 0.005 holds it, the float just below does not (its
    decimal is below 0.005). In binary mode the square of the exact float
    counts (0.005000000000000000555…), so 0.005 does not hold it there."""
    eps = 0.1
    below = math.nextafter(0.005, 0.0)
    assert PrivacyFilter(ZCDP(0.005)).can_spend(PureDP(eps))
    assert not PrivacyFilter(ZCDP(below)).can_spend(PureDP(eps))
    # ε²/2 never understated under either reading of ε or of the result:
    # the binary 0.1 squared over 2 is ~4.5e-19 above 0.005
    assert pure_to_zcdp(eps) == math.nextafter(0.005, 1.0)
    assert Fraction(pure_to_zcdp(eps)) >= Fraction(eps) ** 2 / 2
    rho = Fraction(eps) ** 2 / 2
    assert not PrivacyFilter(ZCDP(0.005), as_written=False).can_spend(PureDP(eps))
    assert PrivacyFilter(ZCDP(float_up(rho)), as_written=False).can_spend(PureDP(eps))
    assert Fraction(float_down(rho)) < rho


@given(st.floats(min_value=1e-300, max_value=1e6), st.floats(min_value=0.0, max_value=1.0))
def test_remainder_split_never_exceeds_total(total, share):
    first = total * share
    last = remainder(total, first)
    assert Fraction(first) + Fraction(last) <= Fraction(total)
    pf = PrivacyFilter(PureDP(total), as_written=False)  # remainder is exact on binary values
    pf.spend(PureDP(first))
    pf.spend(PureDP(last))


@given(st.floats(min_value=1e-150, max_value=1e150), st.floats(min_value=1e-150, max_value=1e150))
def test_directed_rounding(a, b):
    q = Fraction(a) / Fraction(b)
    assert Fraction(float_down(q)) <= q <= Fraction(float_up(q))
    assert float_up(q) <= math.nextafter(float_down(q), math.inf)
    assert ratio_up(a, b) == float_up(q)


def test_filter_refuses_overspend_without_state_change():
    pf = PrivacyFilter(ApproxDP(1.0, 1e-6))
    pf.spend(ApproxDP(0.6, 5e-7), "a")
    before = (pf.spent, pf.remaining, pf.ledger)
    assert not pf.can_spend(ApproxDP(0.5, 0))
    with pytest.raises(BudgetExceededError) as info:
        pf.spend(ApproxDP(0.5, 0), "b")
    assert (pf.spent, pf.remaining, pf.ledger) == before
    message = str(info.value)
    assert "ε = 0.5" in message and "remaining" in message and "'b'" in message
    # delta overspend alone is refused as well
    with pytest.raises(BudgetExceededError):
        pf.spend(ApproxDP(0.1, 6e-7))
    assert pf.can_spend(ApproxDP(0.4, 5e-7))


def test_zcdp_filter_adds_rho_and_delta_separately():
    pf = PrivacyFilter(ZCDP(1.0, 1e-6))
    assert pf.spend(PureDP(1.0), "pure") == ZCDP(0.5)  # converted ε²/2
    pf.spend(ZCDP(0.25, 4e-7), "gumbel")
    assert pf.spent == ZCDP(0.75, 4e-7)
    assert pf.remaining.rho == pytest.approx(0.25) and pf.remaining.delta == pytest.approx(6e-7)
    with pytest.raises(BudgetExceededError):
        pf.spend(ZCDP(0.1, 7e-7))  # rho fits, delta does not
    with pytest.raises(BudgetExceededError):
        pf.spend(ZCDP(0.3, 0.0))  # delta fits, rho does not
    pf.spend(ZCDP(0.25, 6e-7))
    assert pf.remaining.rho == pytest.approx(0.0, abs=1e-15)
    assert pf.ledger[0] == ("pure", PureDP(1.0))


def test_filter_pure_into_approx_budget():
    pf = PrivacyFilter(ApproxDP(1.0, 1e-6))
    assert pf.spend(PureDP(0.5)) == ApproxDP(0.5, 0)
    assert pf.spent == ApproxDP(0.5, 0)


@pytest.mark.parametrize(
    "budget,cost",
    [
        (PureDP(1), ApproxDP(0.1, 0)),
        (PureDP(1), ZCDP(0.1)),
        (ApproxDP(1, 1e-6), ZCDP(0.1)),
        (ZCDP(1), ApproxDP(0.1, 1e-9)),
    ],
)
def test_filter_refuses_incompatible_kinds(budget, cost):
    pf = PrivacyFilter(budget)
    with pytest.raises(ParameterError):
        pf.spend(cost)
    with pytest.raises(ParameterError):
        pf.can_spend(cost)
    assert pf.ledger == []


def test_filter_refuses_bad_arguments():
    with pytest.raises(ParameterError):
        PrivacyFilter(1.0)  # type: ignore[arg-type]
    pf = PrivacyFilter(PureDP(1))
    with pytest.raises(ParameterError):
        pf.spend(0.5)  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        pf.spend(PureDP(0.1), label=3)  # type: ignore[arg-type]


def test_zero_budget_allows_only_zero_spends():
    pf = PrivacyFilter(ZCDP(0))
    pf.spend(ZCDP(0))
    with pytest.raises(BudgetExceededError):
        pf.spend(ZCDP(1e-12))


@given(st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=30))
def test_filter_never_exceeds_budget(requests):
    pf = PrivacyFilter(ZCDP(2.0, 1e-6))
    for rho in requests:
        if pf.can_spend(ZCDP(rho, 1e-8)):
            pf.spend(ZCDP(rho, 1e-8))
        else:
            with pytest.raises(BudgetExceededError):
                pf.spend(ZCDP(rho, 1e-8))
    exact_rho = sum((written(cost.rho) for _, cost in pf.ledger), Fraction(0))
    exact_delta = sum((written(cost.delta) for _, cost in pf.ledger), Fraction(0))
    assert exact_rho <= 2 and exact_delta <= Fraction("1e-6")  # no overspend at all (decimals written)
    assert written(pf.spent.rho) >= exact_rho and written(pf.spent.delta) >= exact_delta
    assert pf.can_spend(pf.remaining)
