"""The grouped top-k's ρ-zCDP form (issue 36 §3, ``noise="gaussian"``): the
per-group ε of each bounded-range mechanism, the composition of the plan's
steps to ρ = ε²/2 and of a person's ≤ m groups to the selection's ρ, the
samplers, the refusals (before any data is read) and the CLI flag. numpy
only; the Spark release is tests/spark/test_grouped_top_k_zcdp.py, the
privacy audit tests/audit/test_topk_audit.py."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dp_spark.accounting import ZCDP
from dp_spark.accounting.exact import exact, sqrt_down
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.top_k import joint_top_k
from dp_spark.mechanisms.top_k.zcdp import (
    ZCDP_METHODS,
    group_rho_spent,
    grouped_zcdp_top_k,
    gumbel_peel_top_k,
    zcdp_group_epsilon,
)
from dp_spark.plans.top_k import ZCDP_AUTO, ZCDP_EQUIVALENT_DELTA, plan
from tests.unit.helpers import run_cli

DOMAIN = [f"i{j}" for j in range(8)]
KEYS = ["a", "b", "c", "d"]


def rounds(method: str, k: int) -> int:
    return k if method == "cdp-peel" else 1


@settings(max_examples=300, deadline=None)
@given(rho=st.floats(1e-6, 50.0), m=st.integers(1, 1024), k=st.integers(1, 100), method=st.sampled_from(ZCDP_METHODS))
def test_each_group_spends_at_most_rho_over_m_and_is_rounded_down_by_one_float(rho, m, k, method):
    """ε_g = √(8ρ/m) (joint) or ε' = √(8ρ/(m·k)) per round (peel): rounds·ε²/8
    ≤ ρ/m exactly (the zCDP level of an ε-bounded-range mechanism, Cesar &
    Rogers 2021), and the next float up would exceed it (no budget wasted)."""
    eps = zcdp_group_epsilon(method, rho, m, k)
    r = rounds(method, k)
    assert r * exact(eps) ** 2 / 8 <= exact(rho) / m
    assert r * exact(math.nextafter(eps, math.inf)) ** 2 / 8 > exact(rho) / m
    assert group_rho_spent(method, eps, k) == pytest.approx(rho / m, rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(rho=st.floats(1e-4, 20.0), m=st.integers(1, 64), k=st.integers(1, 20), method=st.sampled_from(ZCDP_METHODS))
def test_a_persons_m_groups_compose_to_the_selection_rho(rho, m, k, method):
    """One person changes at most m groups; each group's selection is
    rounds·ε²/8-zCDP; their sum (zCDP composition) is at most ρ exactly."""
    eps = zcdp_group_epsilon(method, rho, m, k)
    assert sum((rounds(method, k) * exact(eps) ** 2 / 8 for _ in range(m)), Fraction(0)) <= exact(rho)


def test_sqrt_m_scaling_against_the_pure_split():
    """The point of the form: ε_g shrinks as 1/√m, the pure share as 1/m."""
    rho = 0.5  # ε = 1
    for m in (1, 4, 19):
        assert zcdp_group_epsilon("joint", rho, m, 5) == pytest.approx(2.0 / math.sqrt(m))
        assert zcdp_group_epsilon("cdp-peel", rho, m, 5) == pytest.approx(2.0 / math.sqrt(5 * m))


def grouped_plan(**kw):
    base = dict(epsilon=1.0, k=2, domain=DOMAIN, group_by="g", groups=KEYS, max_groups=2, noise="gaussian")
    return plan(**{**base, **kw})


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 1.7, 3.0])
@pytest.mark.parametrize("max_groups", [None, 1, 2, 4])
@pytest.mark.parametrize("method", ["auto", "joint", "cdp-peel"])
def test_the_plan_charges_rho_epsilon_squared_over_two_and_its_steps_sum_to_it(epsilon, max_groups, method):
    p = grouped_plan(epsilon=epsilon, max_groups=max_groups, method=method)
    rho = p.guarantee.rho
    assert isinstance(p.guarantee, ZCDP) and p.guarantee.delta == 0.0
    assert exact(rho) >= exact(epsilon) ** 2 / 2  # never less than the zCDP level ε-DP implies
    assert rho == pytest.approx(epsilon**2 / 2)
    costs = [c for _, c in p.steps]
    assert all(isinstance(c, ZCDP) and c.delta == 0.0 for c in costs)
    assert sum((exact(c.rho) for c in costs), Fraction(0)) <= exact(rho)  # ρ charged = the sum of the steps
    assert [s.name for s in p.split] == (["max_groups"] if max_groups is None else []) + ["selection"]
    assert p.params.mechanism == (ZCDP_AUTO if method == "auto" else method)
    if max_groups is None:  # the cap's GEM runs at √(8ρ_cap): ε-bounded range, so ε²/8 ≤ ρ_cap
        cap = p.split.cost("max_groups").rho
        assert exact(sqrt_down(8 * exact(cap))) ** 2 / 8 <= exact(cap)
    m = 3 if max_groups is None else max_groups  # any m the cap may choose
    selection = p.split.cost("selection").rho
    eps = zcdp_group_epsilon(p.params.mechanism, selection, m, p.params.k)
    assert m * rounds(p.params.mechanism, p.params.k) * exact(eps) ** 2 / 8 <= exact(selection)


def test_the_plan_states_rho_its_equivalent_and_the_weaker_guarantee():
    p = grouped_plan()
    assert p.guarantee == ZCDP(0.5)
    assert p.equivalent == ZCDP(0.5).to_approx(ZCDP_EQUIVALENT_DELTA)
    privacy = p.privacy()
    assert privacy["rho"] == 0.5 and privacy["approx_dp_equivalent"]["delta"] == ZCDP_EQUIVALENT_DELTA
    assert p["noise"] == "gaussian" and p["rho"] == 0.5
    assert any("weaker guarantee than ε-DP" in note for note in p.notes)
    assert "√(8ρ/(m·k))" in p.steps[-1][0]


def test_the_pure_forms_are_unchanged_by_noise_laplace():
    for kw in (dict(domain=DOMAIN), dict(domain=DOMAIN, group_by="g", groups=KEYS, max_groups=2),
               dict(delta=1e-6, group_by="g", groups=KEYS)):
        assert plan(epsilon=1.0, k=2, noise="laplace", **kw).to_dict() == plan(epsilon=1.0, k=2, **kw).to_dict()


@pytest.mark.parametrize("kw, fragment", [
    (dict(group_by=None, groups=None, max_groups=None), "per group only"),
    (dict(domain=None, delta=1e-6), "needs a public domain"),
    (dict(method="pnf-joint"), "no bounded-range guarantee"),
    (dict(method="pnf-peel"), "no bounded-range guarantee"),
    (dict(method="unknown-domain"), "δ-approximately zCDP"),
    (dict(method="unknown-domain", delta=1e-6), "δ-approximately zCDP"),
    (dict(delta=1e-6), "spends no δ"),
    (dict(groups=None), "ρ-zCDP"),  # keys chosen privately: an (ε, δ) step has no sound ρ-zCDP form
    (dict(noise="uniform"), "noise"),
])
def test_refused_before_any_data_is_read(kw, fragment):
    with pytest.raises(ParameterError, match=fragment):
        grouped_plan(**kw)


def test_the_mechanisms_refuse_permute_and_flip():
    for method in ("pnf-joint", "pnf-peel", "unknown-domain"):
        with pytest.raises(ParameterError, match="bounded-range"):
            zcdp_group_epsilon(method, 0.5, 2, 3)


def test_joint_per_group_is_the_joint_mechanism_at_epsilon_g():
    counts = np.array([[9, 7, 7, 3, 1, 0], [0, 2, 2, 5, 1, 4]])
    picked, eps = grouped_zcdp_top_k("joint", counts, 2, 0.5, 2, np.random.default_rng(3))
    assert eps == zcdp_group_epsilon("joint", 0.5, 2, 2)
    rng = np.random.default_rng(3)
    assert [p.tolist() for p in picked] == [joint_top_k(counts[g], 2, eps, rng).tolist() for g in range(2)]


@pytest.mark.parametrize("method", ZCDP_METHODS)
def test_a_large_budget_finds_the_true_top_k_in_every_group(method):
    counts = np.array([[50, 400, 10, 300, 0], [700, 0, 5, 20, 600], [1, 2, 3, 4, 900]])
    picked, _ = grouped_zcdp_top_k(method, counts, 2, 1e4, 3, np.random.default_rng(0))
    assert [p.tolist() for p in picked] == [[1, 3], [0, 4], [4, 3]]


def test_the_peels_first_pick_is_the_exponential_mechanism_exp_eps_c():
    """Chi-square (fixed seed) of the first pick against P[j] ∝ exp(ε'·c_j),
    the per-round mechanism whose ε'-bounded range the guarantee uses, and
    rejection of the exp(ε'·c/2) distribution (the test can fail)."""
    counts, eps, n = np.array([0, 1, 2, 3, 3]), 0.8, 20000
    rng = np.random.default_rng(11)
    first = np.bincount([int(gumbel_peel_top_k(counts, 2, eps, rng)[0]) for _ in range(n)], minlength=5)

    def pvalue(scale):
        w = np.exp(scale * eps * counts)
        return stats.chisquare(first, n * w / w.sum()).pvalue

    assert pvalue(1.0) > 1e-3
    assert pvalue(0.5) < 1e-6


def test_cli_flag_and_dry_run(capsys, tmp_path):
    domain, groups = tmp_path / "domain.txt", tmp_path / "groups.txt"
    domain.write_text("\n".join(DOMAIN) + "\n")
    groups.write_text("\n".join(KEYS) + "\n")
    argv = ["--dry-run", "--epsilon", "1", "--k", "2", "--domain", str(domain), "--group-by", "g",
            "--groups", str(groups), "--max-groups", "2", "--noise", "gaussian"]
    code, out, err = run_cli(capsys, "top-k", *argv)
    assert code == 0, err
    expected = plan(epsilon=1.0, k=2, delta=0.0, domain=str(domain), group_by="g", groups=str(groups), max_groups=2,
                    noise="gaussian")
    assert out.strip() == expected.describe()
    assert "ρ = 0.5" in out
    code, out, err = run_cli(capsys, "top-k", *argv[:-2], "--noise", "gaussian", "--method", "pnf-joint")
    assert code == 2 and "bounded-range guarantee" in err
