"""Issue 21 §6: privacy parameters with no privacy (ε = 1e300 released exact
values) or no end (ε = 1e-300 hung the driver in a tail quantile).

Every release's plan refuses ε or ρ outside dp_spark.checks.EPSILON_RANGE /
RHO_RANGE before anything is charged (the Python API, the CLI and YAML all
build the plan first), and every tail quantile terminates quickly for any
finite scale."""

from __future__ import annotations

import json
import math
import signal
from contextlib import contextmanager

import pytest

from dp_spark import checks
from dp_spark.errors import ParameterError
from dp_spark.noise.tails import (
    discrete_laplace_std,
    discrete_laplace_upper_quantile,
    laplace_upper_quantile,
)
from dp_spark.plans import continual_distinct, count_release, distinct_count, set_union, top_k
from dp_spark.releases import RELEASES
from tests.unit.helpers import assert_one_line_error, run_cli


@contextmanager
def deadline(seconds: int):
    """Fail (instead of hanging the suite) if the block runs longer."""

    def expired(signum, frame):
        raise TimeoutError(f"did not finish within {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


EPSILON_PLANS = {
    "distinct-count": lambda e: distinct_count.plan(epsilon=e),
    "set-union": lambda e: set_union.plan(epsilon=e, delta=1e-6),
    "top-k": lambda e: top_k.plan(epsilon=e, k=5, domain_size=100),
}
RHO_PLANS = {
    "count-release": lambda r: count_release.plan(rho=r, delta=1e-6, epsilon_min=1e-6),
    "continual-distinct": lambda r: continual_distinct.plan(rho=r, horizon=64),
}


def test_the_ranges_are_stated():
    assert checks.EPSILON_RANGE == (1e-6, 50.0)
    assert checks.RHO_RANGE == (1e-12, 50.0)


@pytest.mark.parametrize("release", sorted(EPSILON_PLANS))
@pytest.mark.parametrize("epsilon", [1e300, 1e3, 50.000001, 9.9e-7, 1e-30, 1e-300, 5e-324])
def test_epsilon_outside_the_range_is_refused_by_the_plan(release, epsilon):
    with deadline(10), pytest.raises(ParameterError, match=r"epsilon must lie in \[1e-06, 50\]"):
        EPSILON_PLANS[release](epsilon)


@pytest.mark.parametrize("release", sorted(EPSILON_PLANS))
@pytest.mark.parametrize("epsilon", [1e-6, 0.01, 1.0, 50.0])
def test_epsilon_inside_the_range_plans(release, epsilon):
    with deadline(30):
        EPSILON_PLANS[release](epsilon)


@pytest.mark.parametrize("release", sorted(RHO_PLANS))
@pytest.mark.parametrize("rho", [1e300, 1e12, 50.5, 9e-13, 1e-300])
def test_rho_outside_the_range_is_refused_by_the_plan(release, rho):
    with deadline(10), pytest.raises(ParameterError, match=r"rho must lie in \[1e-12, 50\]"):
        RHO_PLANS[release](rho)


@pytest.mark.parametrize("release", sorted(RHO_PLANS))
@pytest.mark.parametrize("rho", [1e-12, 1e-3, 0.5, 50.0])
def test_rho_inside_the_range_plans(release, rho):
    with deadline(30):
        RHO_PLANS[release](rho)


@pytest.mark.parametrize("value", ["1e300", "1e-300"])
def test_the_cli_refuses_before_spark_and_before_any_charge(capsys, tmp_path, value):
    out_path = tmp_path / "report.json"
    out_path.write_text('{"earlier": true}')
    code, out, err = run_cli(capsys, "distinct-count", "--epsilon", value, "--budget-epsilon", "1e308",
                             "--rows", "100", "--output", str(out_path), "--overwrite")
    assert code == 2
    assert_one_line_error(err, "epsilon must lie in [1e-06, 50]")
    assert json.loads(out_path.read_text()) == {"earlier": True}


@pytest.mark.parametrize("scale", [1e-300, 1e-6, 0.5, 1.0, 1e6, 1e16, 1e23, 1e30, 1e100, 1e300])
@pytest.mark.parametrize("beta", [0.5, 0.05, 1e-12, 1e-300])
def test_discrete_laplace_quantile_terminates_at_any_scale(scale, beta):
    with deadline(5):
        m = discrete_laplace_upper_quantile(scale, beta)
    assert isinstance(m, int) and m >= 0
    if beta < 0.5 and scale >= 1.0:
        # the closed form scale·(ln(1/β) − ln(1 + p)), to float accuracy
        closed = scale * (-math.log(beta) - math.log1p(math.exp(-1.0 / scale)))
        assert m == pytest.approx(closed, rel=1e-9, abs=1.0)
    with deadline(5):
        assert math.isfinite(discrete_laplace_std(scale))
        assert math.isfinite(laplace_upper_quantile(scale, min(beta, 0.5)))


def test_discrete_laplace_quantile_is_the_smallest_m_at_small_scales():
    # brute force: smallest m >= 0 with P[X > m] = p^(m+1)/(1+p) <= β
    for scale in (0.3, 1.0, 2.5, 10.0):
        p = math.exp(-1.0 / scale)
        for beta in (0.4, 0.05, 1e-3, 1e-9):
            m = 0
            while p ** (m + 1) / (1 + p) > beta:
                m += 1
            assert discrete_laplace_upper_quantile(scale, beta) == m


def test_a_quantile_beyond_the_floats_is_refused_not_looped():
    with deadline(5), pytest.raises(ParameterError, match="too large"):
        discrete_laplace_upper_quantile(1.7e308, 1e-12)


@pytest.mark.parametrize("command", list(RELEASES))
def test_help_states_the_range(capsys, command):
    from dp_spark.commands import COMMANDS
    from dp_spark.commands.base import options_of

    epsilon = "epsilon" in {o.name for o in options_of(COMMANDS[command])}  # else ρ (zCDP)
    text = "from 1e-6 to 50" if epsilon else "from 1e-12 to 50"
    code, out, err = run_cli(capsys, command, "--help")
    assert code == 0 and text in " ".join(out.split())
