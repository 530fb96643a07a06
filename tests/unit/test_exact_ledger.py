"""Exact arithmetic on the decimals written (issue 22): the privacy filter and
the SQLite ledger count 0.9 then 0.1 as exactly 1, agree on every spend,
keep older ledgers' charges as they were counted, and no plan hands its
mechanisms more than the decimal it charges (PostgreSQL: test_ledger_postgres)."""

from __future__ import annotations

import json
import math
import sqlite3
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dp_spark.accounting import ZCDP, ApproxDP, PrivacyFilter, PureDP
from dp_spark.accounting.exact import (
    calibrate,
    cost_up,
    decimal_text,
    exact,
    left_down,
    written,
    written_down,
    written_up,
)
from dp_spark.cli import main
from dp_spark.errors import BudgetExceededError
from dp_spark.ledger import open_ledger

TINY = 5e-324  # the smallest float: one ulp of 0

# ------------------------------------------------------------------ the helpers

finite = st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False)


@given(finite)
def test_calibrate_is_the_largest_float_at_or_below_the_decimal(x):
    c = calibrate(x)
    assert exact(c) <= written(x)
    assert c == (x if exact(x) <= written(x) else math.nextafter(x, 0.0))
    assert exact(math.nextafter(c, math.inf)) > written(x)


def test_calibrate_known_values():
    assert calibrate(0.1) == math.nextafter(0.1, 0.0)  # 0.1000000000000000055… > 1/10
    assert calibrate(0.9) == math.nextafter(0.9, 0.0)
    assert calibrate(0.3) == 0.3 and calibrate(1.0) == 1.0 and calibrate(1e-6) == 1e-6  # at or below
    assert written(0.1) == Fraction(1, 10) and written(1e-06) == Fraction(1, 10**6)


@given(st.fractions(min_value=0, max_value=10**6))
def test_written_rounding_is_tight_and_safe(q):
    up, down = written_up(q), written_down(q)
    assert written(up) >= q and written(down) <= q
    assert up == 0.0 or written(math.nextafter(up, 0.0)) < q  # the smallest such float
    assert written(math.nextafter(down, math.inf)) > q  # the largest such float
    c = cost_up(q)
    assert exact(c) >= q and written(c) >= q


@given(st.lists(st.decimals(min_value=0, max_value=1000, places=12, allow_nan=False), min_size=1, max_size=6))
def test_decimal_text_is_lossless(parts):
    q = sum((Fraction(p) for p in parts), Fraction(0)) ** 2 / 2
    assert Fraction(decimal_text(q)) == q
    assert Fraction(decimal_text(Fraction(1, 3))) == Fraction(1, 3)


# ------------------------------------------------------------------ the issue's case


@pytest.fixture
def ledger(tmp_path):
    with open_ledger(tmp_path / "budgets.db", create=True) as led:
        yield led


@pytest.mark.parametrize("budget, first, second, more", [
    (PureDP(1.0), PureDP(0.9), PureDP(0.1), PureDP(TINY)),
    (ApproxDP(1.0, 1e-6), ApproxDP(0.9, 9e-7), ApproxDP(0.1, 1e-7), ApproxDP(0.0, TINY)),
    (ApproxDP(1.0, 1e-6), ApproxDP(0.9, 1e-6), PureDP(0.1), ApproxDP(TINY, 0.0)),
    (ZCDP(1.0, 1e-6), ZCDP(0.9, 9e-7), ZCDP(0.1, 1e-7), ZCDP(TINY)),
    (ZCDP(0.01, 1e-6), ZCDP(0.005, 1e-6), PureDP(0.1), ZCDP(TINY)),  # ε = 0.1 counts as ρ = 0.005 exactly
])
def test_issue_22_point_nine_then_point_one_filter_and_ledger(ledger, budget, first, second, more):
    """0.9 then 0.1 of 1 is accepted by the in-memory filter and by the
    SQLite ledger alike; then any further spend is refused by both."""
    pf = PrivacyFilter(budget)
    ledger.create_budget("b", budget)
    lb = ledger.budget("b")
    for cost in (first, second):
        assert pf.can_spend(cost) and lb.can_spend(cost)
        pf.spend(cost, "x")
        lb.spend(cost, "x")
    zero = {k: 0.0 for k in budget.to_dict() if k != "kind"}
    assert pf.remaining.to_dict() == lb.remaining.to_dict() == {"kind": budget.kind, **zero}
    assert pf.spent == lb.spent == budget
    assert not pf.can_spend(more) and not lb.can_spend(more)
    with pytest.raises(BudgetExceededError):
        pf.spend(more)
    with pytest.raises(BudgetExceededError, match="Nothing was charged"):
        lb.spend(more, "x")
    assert ledger.state("b").charges == 2


def test_issue_22_message_no_longer_says_point_09999(ledger):
    ledger.create_budget("b", PureDP(1.0))
    ledger.budget("b").spend(PureDP(0.9), "x")
    left = ledger.state("b").left
    # the largest float whose binary value and decimal are both <= 1/10; described as 0.1
    assert left == PureDP(math.nextafter(0.1, 0.0)) and left.describe().startswith("ε = 0.1 ")
    assert Fraction(left.epsilon) <= Fraction(1, 10) and written(left.epsilon) <= Fraction(1, 10)
    ledger.budget("b").spend(left, "at what is left")  # fits; then nothing more does
    assert not ledger.budget("b").can_spend(PureDP(0.1))
    ledger.create_budget("c", PureDP(1.0))
    ledger.budget("c").spend(PureDP(0.9), "x")
    with pytest.raises(BudgetExceededError, match=r"only ε = 0\.1 \(pure"):
        ledger.budget("c").spend(PureDP(0.2), "x")
    ledger.budget("c").spend(PureDP(0.1), "the literal 0.1")  # issue 22: the decimal 0.1 fits exactly


# ------------------------------------------------------------------ random decimal splits


@st.composite
def decimal_split(draw):
    """A budget written with up to 6 decimals and parts (1 to 8, each with
    up to 6 decimals) that sum to it exactly."""
    places = draw(st.integers(0, 6))
    units = draw(st.lists(st.integers(1, 10**6), min_size=1, max_size=8))
    return float(_text(sum(units), places)), [float(_text(u, places)) for u in units]


def _text(units: int, places: int) -> str:
    """units·10^-places written as a decimal (12345, 3 -> "12.345")."""
    if places == 0:
        return str(units)
    digits = str(units).rjust(places + 1, "0")
    return f"{digits[:-places]}.{digits[-places:]}"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(split=decimal_split(), kind=st.sampled_from(["pure", "approx", "zcdp"]))
def test_random_decimal_splits_fit_exactly_and_one_ulp_more_is_refused(tmp_path_factory, split, kind):
    total, parts = split
    assert sum((written(p) for p in parts), Fraction(0)) == written(total)
    make = {"pure": lambda v: PureDP(v), "approx": lambda v: ApproxDP(v, 0.0),
            "zcdp": lambda v: ZCDP(v, 0.0)}[kind]
    path = tmp_path_factory.mktemp("split") / "l.db"
    with open_ledger(path, create=True) as led:
        led.create_budget("b", make(total))
        over = parts[:-1] + [math.nextafter(parts[-1], math.inf)]  # the last part one ulp more
        pf_over = PrivacyFilter(make(total))
        for p in over[:-1]:
            pf_over.spend(make(p))
        assert not pf_over.can_spend(make(over[-1]))
        pf = PrivacyFilter(make(total))
        for p in parts:
            pf.spend(make(p))
            led.budget("b").spend(make(p), "part")
        assert pf.spent == led.state("b").spent == make(total)
        for budget in (pf, led.budget("b")):
            assert not budget.can_spend(make(TINY))
            with pytest.raises(BudgetExceededError):
                budget.spend(make(TINY))
        assert led.state("b").charges == len(parts)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 3), st.floats(0.0, 0.6), st.sampled_from([0.0, 1e-7, 3e-7])),
                min_size=1, max_size=10))
def test_filter_and_ledger_decide_alike(tmp_path_factory, requests):
    """Random spends of random floats (pure and zCDP into a zCDP budget): the
    in-memory filter and the SQLite ledger accept and refuse the same ones
    and state the same spent and left."""
    budget = ZCDP(1.0, 1e-6)
    path = tmp_path_factory.mktemp("alike") / "l.db"
    with open_ledger(path, create=True) as led:
        led.create_budget("z", budget)
        pf, lb = PrivacyFilter(budget), led.budget("z")
        for digits, value, delta in requests:
            value = round(value, digits + 1) if digits < 3 else value
            cost = PureDP(value) if delta == 0.0 and digits % 2 else ZCDP(value, delta)
            ok = pf.can_spend(cost)
            assert lb.can_spend(cost) == ok
            if ok:
                pf.spend(cost)
                lb.spend(cost, "x")
            else:
                with pytest.raises(BudgetExceededError):
                    lb.spend(cost, "x")
            assert pf.spent == lb.spent and pf.remaining == lb.remaining


# ------------------------------------------------------------------ the stored form, older ledgers


def test_charge_rows_store_the_exact_decimals(ledger):
    ledger.create_budget("z", ZCDP(1.0, 1e-6))
    ledger.budget("z").spend(PureDP(0.1), "pure")
    ledger.budget("z").spend(ZCDP(0.25, 1e-7), "zcdp")
    first, second = ledger.history("z")
    assert first["counted"]["exact"] == {"rho": "0.005", "delta": "0"}  # ε²/2 of the decimal 0.1
    # the float beside it is the conversion's, never understated: 0.1²/2 in binary is above 0.005
    assert first["counted"]["rho"] == math.nextafter(0.005, 1.0) and first["cost"] == {"kind": "pure-dp", "epsilon": 0.1}
    assert second["counted"]["exact"] == {"rho": "0.25", "delta": "0.0000001"}
    assert ledger.state("z").exact_spent == {"rho": Fraction("0.255"), "delta": Fraction("1e-7")}


def _strip_exact(path) -> None:
    """Rewrite every charge as a version before issue 22 stored it (no "exact")."""
    con = sqlite3.connect(str(path))
    for rowid, counted in con.execute("SELECT rowid, counted FROM dp_charges").fetchall():
        doc = json.loads(counted)
        doc.pop("exact")
        con.execute("UPDATE dp_charges SET counted = ? WHERE rowid = ?", (json.dumps(doc), rowid))
    con.commit()
    con.close()


def test_older_ledger_charges_keep_counting_as_their_binary_values(tmp_path):
    """Migration: a charge recorded before exact amounts were stored ran its
    mechanism at the float itself, so it still counts at the float's binary
    value (0.9 is 0.9000000000000000222…): 0.1 more no longer fits, the
    float below the decimal left does. New charges in the same ledger count
    as decimals and store them; the file format is otherwise unchanged."""
    path = tmp_path / "old.db"
    with open_ledger(path, create=True) as led:
        led.create_budget("b", PureDP(1.0))
        led.budget("b").spend(PureDP(0.9), "old release")
    _strip_exact(path)
    with open_ledger(path) as led:
        state = led.state("b")
        assert state.exact_spent == {"epsilon": Fraction(0.9)}
        assert state.left.epsilon < 0.1 and written(state.left.epsilon) <= 1 - Fraction(0.9)
        assert not led.budget("b").can_spend(PureDP(0.1))
        with pytest.raises(BudgetExceededError):
            led.budget("b").spend(PureDP(0.1), "new release")
        led.budget("b").spend(state.left, "the rest")  # what is left always fits
        assert led.state("b").left.epsilon < 1e-16  # exact binary rest below the decimal charged
        rows = led.history("b")
        assert "exact" not in rows[0]["counted"] and "exact" in rows[1]["counted"]
        assert led.state("b").charges == 2


def test_rows_with_exact_amounts_read_as_before_by_the_cost_reader(ledger):
    """An older dp_spark reads a new row's counted floats and ignores "exact"
    (cost_from_dict ignores extra keys): it then counts the binary values,
    as it always did."""
    from dp_spark.accounting.costs import cost_from_dict

    ledger.create_budget("b", PureDP(1.0))
    ledger.budget("b").spend(PureDP(0.1), "x")
    assert cost_from_dict(ledger.history("b")[0]["counted"]) == PureDP(0.1)


# ------------------------------------------------------------------ the CLI


def test_cli_ledger_point_nine_then_point_one(tmp_path, capsys):
    """The CLI (in-process entry, dry runs: no Spark) over a ledger created
    by ``dp-spark ledger create``: after 0.9 is charged, a release of ε = 0.1
    passes the ledger's check, one of the next float above 0.1 is refused;
    once 0.1 is charged too, ε = 1e-6 is refused."""
    path = str(tmp_path / "budgets.db")
    assert main(["ledger", "create", path, "eps", "--epsilon", "1"]) == 0
    with open_ledger(path) as led:
        led.budget("eps").spend(PureDP(0.9), "distinct-count")
    run = ["distinct-count", "--ledger", path, "--ledger-budget", "eps", "--dry-run", "--quiet"]
    capsys.readouterr()
    assert main([*run, "--epsilon", "0.1"]) == 0
    assert main([*run, "--epsilon", repr(math.nextafter(0.1, 1.0))]) == 2
    assert "has only ε = 0.1 (pure differential privacy) left" in capsys.readouterr().err
    with open_ledger(path) as led:
        led.budget("eps").spend(PureDP(0.1), "distinct-count")
        assert led.state("eps").left == PureDP(0.0)
    capsys.readouterr()
    assert main([*run, "--epsilon", "1e-6"]) == 2
    assert "has only ε = 0 (pure differential privacy) left" in capsys.readouterr().err


# ------------------------------------------------------------------ plans: what mechanisms receive


@st.composite
def written_value(draw, low: int, high: int, places=(1, 8)):
    """A privacy parameter as a user writes it: a short decimal in [low, high]·10^-places."""
    p = draw(st.integers(*places))
    return float(_text(draw(st.integers(low, high)), p))


def _plans(eps: float, rho: float, delta: float):
    from dp_spark.plans import continual_distinct, count_release, distinct_count, set_union, top_k

    for method in ("greedy", "matching", "sampling"):
        yield distinct_count.plan(epsilon=eps, method=method)
    for method in ("joint", "pnf-joint", "pnf-peel", "cdp-peel", "auto"):
        yield top_k.plan(k=3, epsilon=eps, delta=delta, method=method, domain_size=50)
    yield top_k.plan(k=3, epsilon=eps, delta=delta, method="unknown-domain")
    for method in ("policy-gaussian", "count", "weighted-laplace"):
        yield set_union.plan(epsilon=eps, delta=delta, method=method)
    yield count_release.plan(rho=rho, delta=delta, method="bounded", max_items=4)
    for method in ("auto", "adaptive", "baseline"):
        yield continual_distinct.plan(rho=rho, horizon=64, method=method)
    yield continual_distinct.plan(rho=rho, horizon=64, method="bounded", max_flippancy=4)


@settings(max_examples=30, deadline=None)
@given(eps=written_value(1, 5000, (2, 4)), rho=written_value(1, 5000, (2, 5)),
       delta=written_value(1, 9, (5, 9)))
def test_plans_never_hand_mechanisms_more_than_the_decimal_charged(eps, rho, delta):
    """For every release: the guarantee charged and the parameters reported
    are the values as given; what the release hands its mechanisms
    (``plan.params``' ε, ρ, δ, and the budget split's steps) is calibrated,
    each at most the decimal charged, and the steps' exact binary values
    sum, per component, to at most the decimal charged; the run's own
    filter (``plan.spend``) accepts every step."""
    from dp_spark.plan import PRIVACY_FIELDS
    from dp_spark.plans.set_union import mechanism_plan

    for plan in _plans(eps, rho, delta):
        charged = {k: written(v) for k, v in plan.guarantee.to_dict().items() if k != "kind"}
        for name in PRIVACY_FIELDS:
            given_value = getattr(plan.given, name, None)
            if given_value is None:
                continue
            assert plan[name] == given_value  # reported as given
            assert exact(getattr(plan.params, name)) <= written(given_value)
            assert getattr(plan.params, name) == calibrate(given_value)
        for key, limit in charged.items():
            used = sum((exact(cost.to_dict().get(key, 0.0)) for _, cost in plan.steps), Fraction(0))
            assert used <= limit, (plan.release, plan.parameters, key)
        plan.spend()  # the run's own filter holds every step
        if plan.release == "set-union":
            numeric = mechanism_plan(plan)
            assert exact(numeric.epsilon) <= charged["epsilon"] and exact(numeric.delta) <= charged["delta"]


def test_point_one_plan_runs_below_its_decimal_and_reports_it_as_given():
    from dp_spark.plans import distinct_count, top_k

    plan = top_k.plan(k=3, epsilon=0.1, method="joint", domain_size=50)
    assert plan.guarantee == PureDP(0.1) and plan["epsilon"] == 0.1 and plan.given.epsilon == 0.1
    assert plan.params.epsilon == math.nextafter(0.1, 0.0) == plan.split.epsilon("selection")
    one = distinct_count.plan(epsilon=1.0)
    assert one.params is one.given  # 1.0 is its own decimal: nothing to calibrate


def test_a_calibrated_step_reads_as_the_decimal_charged_for_it():
    """0.1 runs at nextafter(0.1, 0); the budget split a person reads says
    0.1 (what is charged), never a value below it, and other floats keep
    their shortest text."""
    import math

    from dp_spark.accounting import ApproxDP, PureDP, ZCDP
    from dp_spark.accounting.exact import calibrate

    for text in ("0.1", "0.9", "0.7", "1e-05", "0.2"):
        ran = calibrate(float(text))
        assert PureDP(ran).describe() == f"ε = {text} (pure differential privacy)"
        assert ZCDP(ran).describe().startswith(f"ρ = {text} ")
    assert ApproxDP(0.30000000000000004, 1e-6).describe().startswith("ε = 0.30000000000000004,")
    below = math.nextafter(calibrate(0.1), 0)  # two floats below: not a calibration of 0.1
    assert PureDP(below).describe() == f"ε = {below!r} (pure differential privacy)"
    assert PureDP(0.1).to_dict() != PureDP(calibrate(0.1)).to_dict()  # the exact value stays in the record


# ------------------------------------------------------------------ what is left, under both readings


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 10**6), st.integers(0, 6), st.integers(0, 10**6), st.integers(0, 6))
def test_remaining_is_within_what_is_left_as_binary_and_as_decimal(total_digits, total_places, part_digits,
                                                                    part_places):
    """remaining (filter and ledger alike) is the largest float whose binary
    value and written decimal are both <= the exact amount left: a mechanism
    run at remaining never spends more than is left, and it fits."""
    total = float(Fraction(total_digits, 10**total_places))
    part = float(Fraction(part_digits, 10**part_places))
    pf = PrivacyFilter(PureDP(total))
    if not pf.can_spend(PureDP(part)):
        return
    pf.spend(PureDP(part))
    left = written(total) - written(part)
    r = pf.remaining.epsilon
    assert Fraction(r) <= left and written(r) <= left
    up = math.nextafter(r, math.inf)
    assert Fraction(up) > left or written(up) > left  # the largest such float
    assert pf.can_spend(PureDP(r))
    assert left_down(left) == r


def test_pure_to_zcdp_is_never_understated_under_either_reading():
    from dp_spark.accounting import pure_to_zcdp

    for eps in (0.1, 0.3, 0.7, 1e-6, 2.2, 1.0, 0.5):
        rho = pure_to_zcdp(eps)
        for reading in (Fraction(eps), written(eps)):
            assert Fraction(rho) >= reading**2 / 2 and written(rho) >= reading**2 / 2
