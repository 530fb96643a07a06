"""The group parameters (issue 24), declared once in dp_spark.plan.GroupParams:
their checks (public values only, before anything is read), the CLI flags
they give distinct-count, and the grouped plan's budget split (each step per
group at ε/m; m = 1 the full ε by parallel composition). No Spark."""

from __future__ import annotations

import dataclasses

import pytest

from dp_spark.commands import distinct_count as command
from dp_spark.commands.base import options_of
from dp_spark.errors import ParameterError
from dp_spark.plan import MAX_PUBLIC_GROUPS, GroupParams, params_fields, public_keys
from dp_spark.plans import distinct_count as plans


def grouped(**kw):
    # the pure ε split (noise="laplace"); the default zCDP split: tests/unit/test_grouped_zcdp.py
    return plans.plan(**{"epsilon": 1.0, "group_by": "country", "groups": ["a", "b"], "max_groups": 2,
                         "noise": "laplace", **kw})


def test_the_group_fields_are_declared_once_and_distinct_count_takes_them():
    names = [f.name for f in dataclasses.fields(GroupParams)]
    assert names == ["group_by", "groups", "max_groups"]
    assert issubclass(plans.Params, GroupParams)
    assert {"group_by", "groups", "max_groups"} <= {f.name for f in params_fields(plans.Params, cli=True)}
    flags = {o.flag_name for o in options_of(command.COMMAND)}
    assert {"--group-by", "--groups", "--max-groups", "--groups-output"} <= flags


def test_an_ungrouped_plan_has_no_group_parameters():
    plan = plans.plan(epsilon=1.0)
    assert not {"group_by", "groups", "max_groups", "group_keys"} & set(plan.parameters)
    assert "per group" not in " ".join(label for label, _ in plan.steps)


@pytest.mark.parametrize("kw, match", [
    (dict(group_by=None), "give group_by"),
    (dict(max_groups=0), "max_groups"),
    (dict(max_groups=2.5), "max_groups"),
    (dict(groups=[]), "at least one"),
    (dict(groups=["a", 1]), "not a mix"),
    (dict(groups=[1.5]), "whole number or a string"),
    (dict(groups=[None]), "whole number or a string"),
    (dict(groups=7), "list of public keys"),
    (dict(groups=[str(i) for i in range(plans.Params.MAX_KEYS + 1)]), "at most 100,000 for this release"),
    (dict(method="matching"), "greedy"),
    (dict(group_by="person_id"), "both name the column"),
    (dict(group_by=" "), "column name"),
])
def test_bad_group_parameters_are_refused(kw, match):
    with pytest.raises(ParameterError, match=match):
        grouped(**kw)


def test_groups_without_group_by_are_refused():
    with pytest.raises(ParameterError, match="give group_by"):
        plans.plan(epsilon=1.0, max_groups=1)


def test_public_keys_are_deduplicated_in_order():
    assert public_keys(["b", "a", "b"]) == ("b", "a")
    assert public_keys(range(3)) == (0, 1, 2)
    assert public_keys("keys.csv") is None
    assert grouped(groups=("x", "x", "y")).params.groups == ("x", "y")
    assert len(public_keys(list(range(MAX_PUBLIC_GROUPS)))) == MAX_PUBLIC_GROUPS


@pytest.mark.parametrize("m", [1, 2, 5])
def test_the_grouped_split_states_eps_over_m_and_sums_to_eps(m):
    plan = grouped(max_groups=m, shards=4)
    labels = [label for label, _ in plan.steps]
    assert sum(cost.epsilon for _, cost in plan.steps) == pytest.approx(1.0)
    assert plan.guarantee.epsilon == 1.0
    if m == 1:
        assert all("full ε" in label and "parallel composition" in label for label in labels)
    else:
        assert all(f"ε/{m}" in label and "basic composition" in label for label in labels)
    assert plan.parameters["max_groups"] == m and plan.parameters["group_by"] == "country"
    assert plan.parameters["groups"] == "public: a list of 2 keys"


def test_groups_output_without_group_by_is_refused_before_spark():
    with pytest.raises(ParameterError, match="--group-by"):
        command.plan_options({"groups_output": "g.parquet", "group_by": None})
    assert command.plan_options({"groups_output": "g.parquet", "group_by": "c"})["group_by"] == "c"


def test_a_private_cap_is_a_charged_step_of_the_split():
    """max_groups=None: the joint choice of m and l is a charged step (ε/4),
    the counts get the rest, no per-group selection step."""
    plan = grouped(max_groups=None, shards=4)
    assert [s.name for s in plan.split] == ["max_groups", "count"]
    assert plan.split.epsilon("max_groups") == pytest.approx(plans.JOINT_CAP_EPSILON_SHARE)
    assert plan.split.epsilon("count") == pytest.approx(1.0 - plans.JOINT_CAP_EPSILON_SHARE)
    assert sum(cost.epsilon for _, cost in plan.steps) == pytest.approx(1.0)
    assert plan.parameters["max_groups"] == "chosen privately"
    labels = {s.name: s.label for s in plan.split}
    assert labels["max_groups"].startswith("group cap m and bound l, jointly")
    assert "permute-and-flip" in labels["max_groups"]
    assert "sensitivity m·l" in labels["max_groups"] and "/m" in labels["count"]
    assert "max_groups" not in grouped(max_groups=3).split
    # zCDP: the same shares of ρ, the choice by the exponential mechanism (bounded range)
    z = grouped(max_groups=None, shards=4, noise="gaussian")
    assert [s.name for s in z.split] == ["max_groups", "count"]
    assert z.split.cost("max_groups").rho == pytest.approx(plans.JOINT_CAP_EPSILON_SHARE * 0.5)
    assert "exponential mechanism" in {s.name: s.label for s in z.split}["max_groups"]
    # the grouped top-k's cap step is unchanged (GEM over the rows kept, ε/20)
    from dp_spark.plans import top_k

    t = top_k.plan(epsilon=1.0, delta=1e-6, k=3, group_by="country", groups=["a", "b"], max_groups=None)
    assert t.split.epsilon("max_groups") == pytest.approx(plans.MAX_GROUPS_EPSILON_SHARE)


# -- keys chosen privately (groups=None): generic, in GroupParams and builds ---------


def test_keys_chosen_privately_are_a_charged_step_first_and_the_whole_is_eps_delta():
    from fractions import Fraction

    from dp_spark.accounting import ApproxDP
    from dp_spark.accounting.exact import exact
    from dp_spark.plan import KEYS_DELTA, KEYS_EPSILON_SHARE

    plan = grouped(groups=None, max_groups=3, shards=4, epsilon=0.3)
    assert plan.guarantee == ApproxDP(0.3, KEYS_DELTA)
    first = plan.split.steps[0]
    assert first.name == "group_keys" and "at most 3 keys" in first.label
    assert first.cost == ApproxDP(0.3 * KEYS_EPSILON_SHARE, KEYS_DELTA)
    assert sum((exact(s.cost.epsilon) for s in plan.split), Fraction(0)) <= exact(0.3)
    # the release runs with the rest of ε; what was given is kept (and reported)
    assert plan.params.epsilon == pytest.approx(0.3 * (1 - KEYS_EPSILON_SHARE)) and plan.given.epsilon == 0.3
    assert plan.parameters["epsilon"] == 0.3 and plan.parameters["group_keys_delta"] == KEYS_DELTA
    assert plan.parameters["groups"].startswith("chosen privately")
    assert any("basic composition" in n for n in plan.notes)
    assert plan.params.groups is None and plan.params.keys_chosen_privately()
    assert "at most 100 keys" in grouped(groups=None, max_groups=None).split.steps[0].label


def test_public_keys_have_no_keys_step():
    assert "group_keys" not in grouped().split and not grouped().params.keys_chosen_privately()


def test_a_zcdp_release_refuses_private_keys_before_reading():
    """An (ε, δ) step has no sound ρ-zCDP conversion: a release whose
    guarantee is ρ-zCDP, or whose Params have no ε, refuses groups=None
    when its plan is built (no data read)."""
    from dataclasses import dataclass

    from dp_spark.accounting import ZCDP
    from dp_spark.plan import GroupParams, Plan, builds, param

    @dataclass(frozen=True, kw_only=True)
    class RhoParams(GroupParams):
        rho: float = param(0.5, "ρ")

        def __post_init__(self):
            self.check_groups()

    with pytest.raises(ParameterError, match="ρ-zCDP"):
        RhoParams(group_by="c")

    @dataclass(frozen=True, kw_only=True)
    class EpsParams(GroupParams):
        epsilon: float = param(1.0, "ε")
        seed: int | None = param(None, "seed")

        def __post_init__(self):
            self.check_groups()

    @builds(EpsParams)
    def zcdp_plan(p):
        return Plan(release="x", guarantee=ZCDP(p.epsilon ** 2 / 2), steps=[], parameters={}, privacy_unit="person",
                    neighbouring="add or remove one person", releases="x")

    assert zcdp_plan(group_by="c", groups=["a"]).guarantee.kind == "zcdp"
    with pytest.raises(ParameterError, match="ρ-zCDP"):
        zcdp_plan(group_by="c")


def test_a_rho_delta_release_pays_private_keys_as_an_approximate_zcdp_share():
    """count-release (KEYS_BUDGET "rho"): the key step costs ZCDP(ρ·KEYS_RHO_SHARE, δ_k) and the release
    runs on the rest, the parts summing to at most (ρ, δ) exactly; the key step's constants are built
    from ρ_k and δ_k with no conversion (s² >= Δ²/(2ρ_k), the threshold's tail at δ_k). continual-distinct
    (the item is its unit) refuses groups=None, naming why."""
    from fractions import Fraction

    from dp_spark.accounting import ZCDP
    from dp_spark.accounting.exact import exact
    from dp_spark.plan import KEYS_DELTA, key_mechanism
    from dp_spark.plans import continual_distinct, count_release

    for method, extra in (("bounded", {"max_items": 4}), ("pcr", {})):
        plan = count_release.plan(rho=0.8, delta=1e-5, method=method, group_by="c", max_groups=2, **extra)
        first = plan.split.steps[0]
        assert plan.guarantee == ZCDP(0.8, 1e-5) and first.name == "group_keys"
        assert first.cost.rho == pytest.approx(0.08) and first.cost.delta == KEYS_DELTA and "at most 2 keys" in first.label
        assert sum((exact(st.cost.rho) for st in plan.split), Fraction(0)) <= exact(0.8)
        assert sum((exact(st.cost.delta) for st in plan.split), Fraction(0)) <= exact(1e-5)
        assert plan.params.rho == pytest.approx(0.72) and plan.params.delta == pytest.approx(9e-6)
        assert plan.equivalent == ZCDP(0.8, 1e-5).to_approx(1e-5)  # the whole's (ε, δ + δ'), δ' = δ given
        assert plan.parameters["group_keys_rho"] == pytest.approx(0.08) and plan.params.keys_chosen_privately()
    keys = key_mechanism(first.cost, 2)
    assert keys.sigma ** 2 >= Fraction(keys.l2_squared) / (2 * exact(first.cost.rho)) > (keys.sigma - 1) ** 2
    assert keys.noise_rho == first.cost.rho and keys.threshold_delta == KEYS_DELTA
    with pytest.raises(ParameterError, match="privacy unit is the item"):
        continual_distinct.plan(rho=0.5, horizon=16, group_by="c", max_groups=1)
    # review RV13: the rest is checked as given (pcr's one round must fit in δ − δ_k), before spending
    with pytest.raises(ParameterError, match="keys chosen privately.*below delta_min"):
        count_release.plan(rho=0.5, delta=1e-6, delta_min=1e-6, group_by="c")


@pytest.mark.parametrize("release, column", [("distinct_count", "estimate"), ("distinct_count", "lower_bound"),
                                             ("distinct_count", "bound"), ("distinct_count", "error"),
                                             ("top_k", "rank"), ("top_k", "error")])
def test_a_group_column_named_like_a_groups_output_column_is_refused_by_the_plan(release, column):
    """release.groups has these columns: a group column of the same name
    failed when the groups frame was built, after spending (found by review)."""
    import importlib

    from dp_spark.errors import ParameterError

    plans = importlib.import_module(f"dp_spark.plans.{release}")
    extra = {"delta": 1e-6, "k": 3} if release == "top_k" else {}
    with pytest.raises(ParameterError, match="column name of release.groups"):
        plans.plan(epsilon=1.0, group_by=column, groups=["a"], max_groups=1, **extra)


# -- keys chosen privately in a release with a δ: the keys' δ comes out of it --------


@pytest.mark.parametrize("delta, keys_delta", [(1e-5, 1e-6), (1e-6, 1e-7), (0.3, 1e-6)])
def test_keys_chosen_privately_take_their_delta_out_of_the_release_delta(delta, keys_delta):
    """set-union (always a δ): δ_k = min(KEYS_DELTA, δ/10), the release runs
    on δ − δ_k; the whole charged is the (ε, δ) given, the steps' parts sum
    to at most it exactly."""
    from fractions import Fraction

    from dp_spark.accounting import ApproxDP
    from dp_spark.accounting.exact import exact
    from dp_spark.plan import keys_delta as keys_delta_of
    from dp_spark.plans import set_union

    plan = set_union.plan(epsilon=2.0, delta=delta, group_by="country", max_items=4)
    assert plan.guarantee == ApproxDP(2.0, delta)
    assert keys_delta_of(delta) == pytest.approx(keys_delta)
    first = plan.split.steps[0]
    assert first.name == "group_keys" and first.cost.delta == keys_delta_of(delta)
    assert sum((exact(s.cost.delta) for s in plan.split), Fraction(0)) <= exact(delta)
    assert sum((exact(s.cost.epsilon) for s in plan.split), Fraction(0)) <= exact(2.0)
    assert exact(plan.params.delta) + exact(first.cost.delta) <= exact(delta)
    assert plan.params.delta == pytest.approx(delta - keys_delta)
    assert plan.parameters["delta"] == delta and plan.parameters["group_keys_delta"] == first.cost.delta
    assert any("as given" in n for n in plan.notes)
    assert plan.budget_split()[0]["step"].startswith("group keys")  # both steps shown: the keys' first
    assert len(plan.budget_split()) == 1 + len(set_union.plan(epsilon=2.0, delta=delta).split)


def test_keys_chosen_privately_for_top_k_with_and_without_a_delta():
    """top-k with δ > 0: the whole is (ε, δ) as given; with δ = 0 (a pure
    mechanism) it is (ε, KEYS_DELTA), stated so."""
    from dp_spark.accounting import ApproxDP
    from dp_spark.plan import KEYS_DELTA
    from dp_spark.plans import top_k

    with_delta = top_k.plan(k=2, epsilon=1.0, delta=1e-5, group_by="country", max_groups=2)
    assert with_delta.guarantee == ApproxDP(1.0, 1e-5)
    assert with_delta.split.steps[0].cost == ApproxDP(0.1, 1e-6)
    assert with_delta.params.delta == pytest.approx(9e-6) and with_delta.params.delta + 1e-6 <= 1e-5
    pure = top_k.plan(k=2, epsilon=1.0, delta=0.0, method="joint", domain_size=10, group_by="country",
                      max_groups=2)
    assert pure.guarantee == ApproxDP(1.0, KEYS_DELTA)
    assert pure.params.delta == 0.0 and pure.split.steps[0].cost == ApproxDP(0.1, KEYS_DELTA)
    assert any("no δ of its own" in n for n in pure.notes)


def test_keys_delta_of_a_pure_release_is_keys_delta():
    from dp_spark.plan import KEYS_DELTA, keys_delta

    assert keys_delta(None) == keys_delta(0.0) == KEYS_DELTA
    assert keys_delta(1e-3) == KEYS_DELTA and keys_delta(2e-6) == pytest.approx(2e-7)


@pytest.mark.parametrize("release", ["set_union", "top_k"])
def test_a_delta_too_small_for_the_key_step_is_refused_by_the_plan(release):
    """δ = 5e-323 leaves the key step δ_k = 5e-324, too small for its analytic Gaussian: refused when the
    plan is built (nothing read, nothing spent), never by the key step after spending (review finding)."""
    from dp_spark.plans import set_union, top_k

    build = {"set_union": lambda d: set_union.plan(epsilon=1.0, delta=d, group_by="c"),
             "top_k": lambda d: top_k.plan(epsilon=1.0, delta=d, group_by="c", k=3)}[release]
    with pytest.raises(ParameterError):
        build(5e-323)
    assert build(1e-300).split.cost("group_keys").delta > 0.0


@pytest.mark.parametrize("release", ["distinct_count", "set_union", "top_k"])
def test_the_rest_after_the_keys_share_is_checked_as_given(release):
    """A release given ε whose keys are chosen privately runs on ε − ε_k: that rest obeys every rule a
    given ε does (here the floor of checks.EPSILON_RANGE), refused when the plan is built, naming the key
    step, never run below the floor (review leftover: the ε path stored the rest unchecked)."""
    from dp_spark.accounting.exact import calibrate, remainder
    from dp_spark.plan import KEYS_EPSILON_SHARE
    from dp_spark.plans import distinct_count, set_union, top_k

    build = {"distinct_count": lambda e: distinct_count.plan(epsilon=e, group_by="c", max_groups=2),
             "set_union": lambda e: set_union.plan(epsilon=e, delta=1e-6, group_by="c", max_groups=2),
             "top_k": lambda e: top_k.plan(epsilon=e, delta=1e-6, group_by="c", k=3, max_groups=2)}[release]
    with pytest.raises(ParameterError, match=r"keys chosen privately \(ε·0\.1 .*epsilon must lie in"):
        build(1.05e-6)
    plan = build(1.2e-6)  # the rest above the floor runs: the given Params but for ε and δ, ε exactly the rest
    assert plan.params.epsilon == remainder(calibrate(1.2e-6), calibrate(1.2e-6) * KEYS_EPSILON_SHARE) >= 1e-6
    budget = {name: getattr(plan.given, name) for name in ("epsilon", "delta") if hasattr(plan.given, name)}
    assert dataclasses.replace(plan.params, **budget) == plan.given
    if release == "distinct_count":  # a zCDP form never takes private keys: told so, not the floor
        with pytest.raises(ParameterError, match="ρ-zCDP"):
            distinct_count.plan(epsilon=1.05e-6, group_by="c", max_groups=2, noise="gaussian")
