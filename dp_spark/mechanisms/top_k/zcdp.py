"""Top-k per group under ρ-zCDP (issue 36 §3): the grouped top-k's
``noise="gaussian"`` form, √m scaling across a person's groups (driver side,
numpy only).

Input: per group g = 0..G−1 the NON-PRIVATE distinct-person counts of a
public domain's d items in that group (a G × d matrix), computed after every
person was capped to at most m groups. Neighbouring relation: add or remove
one person y; then each (group, item) count moves by at most 1, all in the
same direction, and only in the ≤ m groups y keeps (the Spark stage's
property, tests/spark/test_grouped_top_k.py).

Released: per group the indices of k items, in rank order; never a count.

Guarantee. A mechanism M is ε-bounded-range (ε-BR) if for all neighbours
D, D' and outcomes o, o': ln(P[M(D)=o]/P[M(D')=o]) −
ln(P[M(D)=o']/P[M(D')=o']) ≤ ε. An ε-BR mechanism is ε²/8-zCDP (Cesar &
Rogers, ALT 2021, "Bounding, Concentrating, and Truncating: Unifying
Privacy Loss Composition for Data Analytics"), and
zCDP composes additively, adaptively (Bun & Steinke, TCC 2016).
Each group runs one of two ε-BR mechanisms:

- ``joint``: the joint exponential mechanism (Gillenwater et al., ICML 2022,
  Algorithm 1), P[s] ∝ exp(ε_g·u(s)/2) with u(s) = −max_i (c_(i) − c_{s_i});
  u moves by at most 1 between neighbours (paper Lemma 3.1), so for any two
  sequences s, t the log-ratio difference is (ε_g/2)(Δu(s) − Δu(t)) ∈
  [−ε_g, ε_g]: ε_g-BR (the exponential mechanism is ε-BR: Durfee & Rogers,
  NeurIPS 2019, "Practical Differentially Private Top-k Selection with
  Pay-what-you-get Composition", where bounded range is defined). Run at
  ε_g = √(8ρ/m), rounded down: ε_g²/8 ≤ ρ/m-zCDP per group.
- ``cdp-peel``: one-shot Gumbel top-k, Gumbel noise of scale 1/ε' on every
  count and the k largest, which is distributed as k rounds of peeling with
  the exponential mechanism P[j] ∝ exp(ε'·c_j) over the items not yet
  chosen (Durfee & Rogers 2019, Lemma 4.2). The counts move in the same
  direction by at most 1, so each round's log-ratio difference for two
  items is ε'(Δc_i − Δc_j) ∈ [−ε', ε']: each round is ε'-BR (Durfee &
  Rogers 2019; the same argument as the project's CDP-Peel accounting,
  :func:`~dp_spark.mechanisms.top_k.peeling.cdp_peel_epsilon_per_step`), so ε'²/8-zCDP, and the
  k rounds compose adaptively to k·ε'²/8. Run at ε' = √(8ρ/(m·k)), rounded
  down: ≤ ρ/m-zCDP per group.

Permute-and-flip (``pnf-joint``, ``pnf-peel``) is ε-DP but has no
bounded-range result, so it is not offered here: its ε-DP would give only
ε²/2-zCDP (Bun & Steinke 2016, Proposition 1.4), four times the cost.
Unknown Domain Gumbel is only δ-approximately zCDP (Rogers 2024, Theorem 4)
and is not offered either (the plan refuses both before any data is read).

Composition over groups: one person changes the input of at most m groups,
each ρ/m-zCDP; the other groups' outputs have the same distribution on both
neighbours; so all groups' outputs together are ρ-zCDP (m = 1: every group
at the full ρ, parallel composition). With the group cap m chosen privately
before (the plan's ``max_groups`` step, GEM's exponential mechanism at
√(8ρ_cap), ε-BR, so ρ_cap-zCDP) the release runs conditioned on the
released m: ρ_cap + ρ in all (adaptive composition). Tested in
tests/unit/test_grouped_top_k_zcdp.py (ε_g, the composition) and audited in
tests/audit/test_topk_audit.py (the measured privacy loss of one group's
selection on neighbouring counts against its bounded-range bound).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from numpy.typing import ArrayLike

from dp_spark.accounting.exact import exact, ratio_up, sqrt_down
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.top_k._common import as_counts, check_int, check_positive, check_rng, top_k_indices
from dp_spark.mechanisms.top_k.error import selection_noise
from dp_spark.mechanisms.top_k.joint import joint_top_k
from dp_spark.noise.records import NoiseDraw

__all__ = ["ZCDP_METHODS", "gumbel_peel_top_k", "group_rho_spent", "grouped_zcdp_top_k", "zcdp_group_epsilon",
           "zcdp_selection_noise"]

#: The per-group mechanisms of the zCDP form: both bounded-range (module docstring).
ZCDP_METHODS = ("joint", "cdp-peel")

_GUMBEL_STD = math.pi / math.sqrt(6.0)


def _method(method: str) -> str:
    if method not in ZCDP_METHODS:
        raise ParameterError(f"method {method!r} has no bounded-range guarantee; under zCDP each group runs "
                             f"one of {', '.join(ZCDP_METHODS)}")
    return method


def zcdp_group_epsilon(method: str, rho: float, max_groups: int, k: int) -> float:
    """The ε each group's selection runs with, for a selection budget of
    ``rho`` (ρ-zCDP over all groups) and a cap of m = ``max_groups`` groups
    per person: ``joint``: ε_g = √(8ρ/m) (the whole sequence at once);
    ``cdp-peel``: the per-round ε' = √(8ρ/(m·k)). Rounded down, so
    :func:`group_rho_spent` never exceeds ρ/m."""
    m = check_int(max_groups, "max_groups", 1)
    k = check_int(k, "k", 1)
    budget = exact(check_positive(rho, "rho"))
    rounds = k if _method(method) == "cdp-peel" else 1
    return sqrt_down(8 * budget / (m * rounds))


def group_rho_spent(method: str, epsilon: float, k: int) -> float:
    """The zCDP level of one group's selection run at ``epsilon`` (what
    :func:`zcdp_group_epsilon` returns): ε²/8 for the joint mechanism (one
    ε-BR draw), k·ε'²/8 for the peel (k ε'-BR rounds). Exact up to the
    float rounding of the result; for tests and the report."""
    rounds = k if _method(method) == "cdp-peel" else 1
    return float(rounds * exact(epsilon) ** 2 / 8)


def gumbel_peel_top_k(counts: ArrayLike, k: int, epsilon_step: float, rng: np.random.Generator) -> np.ndarray:
    """The k largest of counts + Gumbel(scale 1/ε') noise (scale rounded up),
    largest first: k rounds of the exponential mechanism exp(ε'·c) (Durfee &
    Rogers 2019, Lemma 4.2), each ε'-bounded-range for same-direction
    counts of sensitivity 1 (module docstring)."""
    c = as_counts(counts, integral=False)
    k = check_int(k, "k", 1, c.shape[0], " (the number of items in counts)")
    eps = check_positive(epsilon_step, "epsilon_step")
    rng = check_rng(rng)
    return top_k_indices(c + rng.gumbel(scale=ratio_up(1.0, eps), size=c.shape[0]), k)


def zcdp_selection_noise(method: str, k: int, epsilon: float, size: int) -> NoiseDraw:
    """The record of one group's draws at ``epsilon`` (ε_g of the joint
    mechanism, or the peel's per-round ε') on ``size`` domain items; the
    joint one is sampled by the exponential mechanism: ε-bounded range."""
    if _method(method) == "joint":
        record = selection_noise("joint", k, epsilon, 0.0, size)
        return dataclasses.replace(record, parameters={**record.parameters, "bounded_range": True})
    scale = ratio_up(1.0, epsilon)
    return NoiseDraw("selection", "gumbel", scale=scale, std=scale * _GUMBEL_STD, sensitivity=1.0, draws=size,
                     target=f"each of the {size} domain counts (one-shot top-{k}, per-round ε' = {epsilon:.6g})",
                     parameters={"spread": size})


def grouped_zcdp_top_k(method: str, counts, k: int, rho: float, max_groups: int,
                       rng: np.random.Generator) -> tuple[list[np.ndarray], float]:
    """Per row g of the G × d matrix ``counts`` (a public domain's counts in
    group g, persons capped to m = ``max_groups`` groups), the indices
    ``method`` (``joint`` or ``cdp-peel``) picks at
    :func:`zcdp_group_epsilon` (ρ, m, k); ρ-zCDP over all groups (module
    docstring). Returns the indices per group and the ε the groups ran with."""
    epsilon = zcdp_group_epsilon(method, rho, max_groups, k)
    matrix = np.asarray(counts)
    if method == "joint":
        picked = [joint_top_k(matrix[g], k, epsilon, rng) for g in range(matrix.shape[0])]
    else:
        picked = [gumbel_peel_top_k(matrix[g], k, epsilon, rng) for g in range(matrix.shape[0])]
    return picked, epsilon
