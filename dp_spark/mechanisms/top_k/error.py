"""Top-k over a public domain per group (:func:`grouped_domain_top_k`; an
ungrouped release is one group at m = 1), the record of each mechanism's
draws (:func:`selection_noise`) and its public error bound at confidence
1 − β (:func:`error_bound`), which the release and the HTML report state.
"""

from __future__ import annotations

import math

import numpy as np

from dp_spark.accounting.exact import ratio_up
from dp_spark.mechanisms.top_k.joint import joint_top_k, pnf_joint_top_k
from dp_spark.mechanisms.top_k.peeling import cdp_peel_epsilon_per_step, cdp_peel_top_k, pnf_peel_top_k
from dp_spark.mechanisms.top_k._common import group_share
from dp_spark.mechanisms.top_k.unknown_domain import unknown_domain_calibration, unknown_domain_noise
from dp_spark.noise.records import NoiseDraw

CONFIDENCE = 0.95

#: Gumbel's standard deviation per unit of scale (π/√6)
_GUMBEL_STD = math.pi / math.sqrt(6.0)


def selection_noise(method: str, k: int, epsilon: float, delta: float, size: int,
                    step: str = "selection") -> NoiseDraw:
    """The record of ``method``'s draws at ``epsilon`` (and ``delta``) on
    ``size`` items (d, or k̄ for unknown-domain), counts of sensitivity 1:
    joint / pnf-joint, the exponential mechanism over d!/(d−k)! sequences
    (scale 2/ε); pnf-peel, k rounds of exponential noise of scale k/ε;
    cdp-peel, one Gumbel of scale 1/ε' per item; unknown-domain, Gumbel of
    scale 1/ε' on the k̄ counts and the threshold. Scales rounded up (at least
    the exact samplers' 1/ε': error statements are conservative)."""
    if method in ("joint", "pnf-joint"):
        log_sequences = math.lgamma(size + 1) - math.lgamma(size - k + 1)
        return NoiseDraw(step, "exponential-mechanism", scale=2.0 / epsilon, std=None, sensitivity=1.0,
                         target=f"the sequence of {k} items out of {size}",
                         parameters={"log_outcomes": log_sequences})
    if method == "pnf-peel":
        scale = ratio_up(k, epsilon)
        return NoiseDraw(step, "exponential", scale=scale, std=scale, sensitivity=1.0, draws=None,
                         target=f"the remaining counts in each of {k} rounds",
                         parameters={"spread": size * k, "rounds": k})
    if method == "cdp-peel":
        scale = ratio_up(1.0, cdp_peel_epsilon_per_step(epsilon, delta, k))
        return NoiseDraw(step, "gumbel", scale=scale, std=scale * _GUMBEL_STD, sensitivity=1.0, draws=size,
                         target=f"each of the {size} domain counts (one-shot top-{k})", parameters={"spread": size})
    return unknown_domain_noise(unknown_domain_calibration(epsilon, delta, k)[0], size, step)


def error_bound(method: str, k: int, epsilon: float, delta: float, size: int,
                beta: float = 1.0 - CONFIDENCE) -> float:
    """A public bound B with P[max_i (c_(i) − c_{s_i}) <= B] >= 1 − β:
    ``selection_noise(...).half_width(β)`` (joint: (2/ε)(ln(d!/(d−k)!) +
    ln(1/β)); pnf-peel: (k/ε)·ln(dk/β); cdp-peel, unknown-domain: the spread
    of ``size`` Gumbel draws). ``epsilon``: the ε the selection ran with."""
    return selection_noise(method, k, epsilon, delta, size).half_width(beta)


def domain_top_k(method: str, counts, k: int, epsilon: float, delta: float,
                 rng: np.random.Generator) -> tuple[np.ndarray, NoiseDraw]:
    """Indices chosen by a public-domain mechanism (``joint``, ``pnf-joint``,
    ``pnf-peel``, ``cdp-peel``; guarantees in :mod:`dp_spark.mechanisms.top_k`)
    and the record of its draws."""
    if method == "joint":
        indices = joint_top_k(counts, k, epsilon, rng)
    elif method == "pnf-joint":
        indices = pnf_joint_top_k(counts, k, epsilon, rng)
    elif method == "pnf-peel":
        indices = pnf_peel_top_k(counts, k, epsilon, rng)
    else:
        indices = cdp_peel_top_k(counts, k, epsilon, delta, rng)
    return indices, selection_noise(method, k, epsilon, delta, len(counts))


def grouped_domain_top_k(method: str, counts, k: int, epsilon: float, delta: float, max_groups: int,
                         rng: np.random.Generator) -> list[np.ndarray]:
    """Per row of the G × d matrix ``counts`` (one per group), the indices
    ``method`` picks at the group's share (ε/m, δ/m) (:func:`group_share`):
    one person moves each group's counts by at most 1, all the same way, in
    at most m groups, so (ε, δ)-DP in all (ε-DP for the pure ones). Record:
    ``selection_noise(method, k, ε/m, δ/m, d)``."""
    eps_g, delta_g = group_share(epsilon, delta, max_groups)
    return [domain_top_k(method, row, k, eps_g, delta_g, rng)[0] for row in np.asarray(counts)]
