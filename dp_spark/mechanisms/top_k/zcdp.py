"""Top-k per group under ρ-zCDP: the grouped top-k's ``noise="gaussian"``
form, √m scaling across a person's groups (driver side, numpy only).

Input: per group the NON-PRIVATE distinct-person counts of a public domain's d
items (a G × d matrix), after every person was capped to at most m groups.
Neighbours: add or remove one person y; each (group, item) count moves by at
most 1, all the same way, only in the ≤ m groups y keeps. Released: per group
the indices of k items in rank order.

Guarantee. M is ε-bounded-range (ε-BR) if for all neighbours D, D' and
outcomes o, o': ln(P[M(D)=o]/P[M(D')=o]) − ln(P[M(D)=o']/P[M(D')=o']) ≤ ε.
An ε-BR mechanism is ε²/8-zCDP (Cesar & Rogers, ALT 2021), and zCDP composes
additively, adaptively (Bun & Steinke, TCC 2016). Each group runs an ε-BR
mechanism:

- ``joint``: the joint exponential mechanism (Gillenwater et al., ICML 2022,
  Algorithm 1), P[s] ∝ exp(ε_g·u(s)/2), u(s) = −max_i (c_(i) − c_{s_i}),
  which moves by at most 1 (paper Lemma 3.1), so any two sequences'
  log-ratio difference is (ε_g/2)(Δu(s) − Δu(t)) ∈ [−ε_g, ε_g]: ε_g-BR
  (Durfee & Rogers, NeurIPS 2019, where bounded range is defined). At
  ε_g = √(8ρ/m) rounded down: ≤ ρ/m-zCDP per group.
- ``cdp-peel``: one-shot Gumbel top-k (scale 1/ε'), distributed as k rounds of
  peeling with P[j] ∝ exp(ε'·c_j) (Durfee & Rogers 2019, Lemma 4.2). The
  counts move the same way by at most 1, so each round's log-ratio difference
  ε'(Δc_i − Δc_j) ∈ [−ε', ε']: ε'-BR, ε'²/8-zCDP, and k rounds compose to
  k·ε'²/8. At ε' = √(8ρ/(m·k)) rounded down: ≤ ρ/m-zCDP per group.

Permute-and-flip has no bounded-range result (its ε-DP gives only
ε²/2-zCDP, Bun & Steinke 2016, Prop. 1.4: four times the cost), and Unknown
Domain Gumbel is only δ-approximately zCDP (Rogers 2024, Theorem 4): neither
is offered (the plan refuses them before any data is read).

Over groups: one person changes at most m groups' inputs, each ρ/m-zCDP, the
others' outputs keep their distribution: ρ-zCDP in all (m = 1: the full ρ,
parallel composition). With m chosen privately before (GEM's exponential
mechanism at √(8ρ_cap), ε-BR, so ρ_cap-zCDP), ρ_cap + ρ in all (adaptive
composition). Tested in tests/unit/test_grouped_top_k_zcdp.py and audited in
tests/audit/test_topk_audit.py.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from numpy.typing import ArrayLike

from dp_spark.accounting.exact import exact, ratio_up, sqrt_down
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.top_k._common import as_counts, check_int, check_positive, check_rng
from dp_spark.mechanisms.top_k.error import selection_noise
from dp_spark.mechanisms.top_k.joint import joint_top_k
from dp_spark.noise.records import NoiseDraw
from dp_spark.noise.weighted import exponential_peel

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
    """The ε of each group's selection for ρ-zCDP over all groups at a cap
    of m: ``joint`` √(8ρ/m), ``cdp-peel`` per round √(8ρ/(m·k)); rounded down,
    so :func:`group_rho_spent` never exceeds ρ/m."""
    m = check_int(max_groups, "max_groups", 1)
    k = check_int(k, "k", 1)
    budget = exact(check_positive(rho, "rho"))
    rounds = k if _method(method) == "cdp-peel" else 1
    return sqrt_down(8 * budget / (m * rounds))


def group_rho_spent(method: str, epsilon: float, k: int) -> float:
    """One group's zCDP level at ``epsilon``: ε²/8 (joint), k·ε'²/8 (cdp-peel)."""
    rounds = k if _method(method) == "cdp-peel" else 1
    return float(rounds * exact(epsilon) ** 2 / 8)


def gumbel_peel_top_k(counts: ArrayLike, k: int, epsilon_step: float, rng: np.random.Generator) -> np.ndarray:
    """The k largest of counts + Gumbel(1/ε'), largest first, sampled exactly
    as the k peeling rounds P[j] ∝ exp(ε'·c_j) it equals: k ε'-bounded-range
    rounds for same-direction counts (module docstring)."""
    c = as_counts(counts, integral=False)
    k = check_int(k, "k", 1, c.shape[0], " (the number of items in counts)")
    eps = check_positive(epsilon_step, "epsilon_step")
    rng = check_rng(rng)
    return exponential_peel(c, eps, k, rng)  # exactly the law of the one-shot Gumbel(1/ε) top k


def zcdp_selection_noise(method: str, k: int, epsilon: float, size: int) -> NoiseDraw:
    """The record of one group's draws at ``epsilon`` on ``size`` items (the
    joint one marked bounded-range)."""
    if _method(method) == "joint":
        record = selection_noise("joint", k, epsilon, 0.0, size)
        return dataclasses.replace(record, parameters={**record.parameters, "bounded_range": True})
    scale = ratio_up(1.0, epsilon)
    return NoiseDraw("selection", "gumbel", scale=scale, std=scale * _GUMBEL_STD, sensitivity=1.0, draws=size,
                     target=f"each of the {size} domain counts (one-shot top-{k}, per-round ε' = {epsilon:.6g})",
                     parameters={"spread": size})


def grouped_zcdp_top_k(method: str, counts, k: int, rho: float, max_groups: int,
                       rng: np.random.Generator) -> tuple[list[np.ndarray], float]:
    """Per row of ``counts`` (one per group), the indices ``method`` picks at
    :func:`zcdp_group_epsilon`: ρ-zCDP over all groups (module docstring).
    Returns them and the ε the groups ran with."""
    epsilon = zcdp_group_epsilon(method, rho, max_groups, k)
    matrix = np.asarray(counts)
    if method == "joint":
        picked = [joint_top_k(matrix[g], k, epsilon, rng) for g in range(matrix.shape[0])]
    else:
        picked = [gumbel_peel_top_k(matrix[g], k, epsilon, rng) for g in range(matrix.shape[0])]
    return picked, epsilon
