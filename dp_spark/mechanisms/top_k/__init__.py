"""Differentially private top-k selection (driver side, numpy only).

Every function takes per-item counts and returns item *indices*, never
counts. The counts are **numbers of distinct persons per item**: one person
moves every count by at most 1, all in the same direction. Each docstring
states its guarantee under that assumption (``sensitivity`` can be raised for
the joint mechanisms, e.g. 2 for swap neighbours). ALGORITHMS.md 3 and 5.1:

* :func:`joint_top_k`: the joint exponential mechanism of Gillenwater,
  Joseph, Munoz Medina and Ribero (ICML 2022), Algorithm 1, sampled exactly,
  ε-DP; :func:`pnf_joint_top_k`: its permute-and-flip variant (Appendix D).
* :func:`pnf_peel_top_k`: k rounds of permute-and-flip at ε/k, ε-DP.
* :func:`cdp_peel_top_k`: one-shot Gumbel top-k (Durfee & Rogers 2019),
  (ε, δ)-DP by the CDP bound.
* :func:`unknown_domain_gumbel`: Unknown Domain Gumbel (Durfee & Rogers
  2019; Rogers, "Private Count Release", Algorithm 1), δ-approximate
  (k·ε²/8)-zCDP, without a public item list.
* :mod:`.auto`: the private choice behind ``method="auto"``; :mod:`.error`:
  the public error bound and per-group runs; :mod:`.zcdp`: the grouped
  ρ-zCDP form. An ungrouped release is one group at m = 1.

Randomness comes only from ``rng``; sampling is in log space (Gumbel-max,
report-noisy-max with exponential noise), so the guarantee is that of the
idealised real-valued mechanism. Error messages never quote a count.
"""

from dp_spark.mechanisms.top_k._common import group_share
from dp_spark.mechanisms.top_k.joint import (
    JointLogWeights,
    joint_top_k,
    joint_top_k_log_weights,
    pnf_joint_top_k,
)
from dp_spark.mechanisms.top_k.peeling import cdp_peel_epsilon_per_step, cdp_peel_top_k, pnf_peel_top_k
from dp_spark.mechanisms.top_k.unknown_domain import (
    UnknownDomainResult,
    unknown_domain_calibration,
    unknown_domain_gumbel,
    unknown_domain_threshold,
)

__all__ = [
    "JointLogWeights",
    "UnknownDomainResult",
    "cdp_peel_epsilon_per_step",
    "cdp_peel_top_k",
    "group_share",
    "joint_top_k",
    "joint_top_k_log_weights",
    "pnf_joint_top_k",
    "pnf_peel_top_k",
    "unknown_domain_gumbel",
    "unknown_domain_threshold",
    "unknown_domain_calibration",
]
