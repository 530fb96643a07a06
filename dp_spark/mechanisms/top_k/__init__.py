"""Differentially private top-k selection (driver side, numpy only).

Every function here takes a vector of per-item counts and returns item
*indices* (never counts). The counts are assumed to be **numbers of distinct
persons per item**: adding or removing one person changes every count by at
most 1, and all counts move in the same direction (they are monotone). Each
docstring states the guarantee under that assumption (``sensitivity`` can be
raised for the joint mechanisms, e.g. 2 for swap neighbours).

Mechanisms (ALGORITHMS.md sections 3 and 5.1):

* :func:`joint_top_k` -- the joint exponential mechanism of Gillenwater,
  Joseph, Munoz Medina and Ribero, "A Joint Exponential Mechanism for
  Differentially Private Top-k" (ICML 2022), Algorithm 1, sampled exactly in
  O(d·k·log k + d·log d) time and O(d·k) space, ε-DP.
* :func:`pnf_joint_top_k` -- its permute-and-flip variant (same paper,
  Appendix D), ε-DP.
* :func:`pnf_peel_top_k` -- k rounds of permute-and-flip at ε/k, ε-DP.
* :func:`cdp_peel_top_k` -- one-shot Gumbel top-k (Durfee & Rogers 2019)
  accounted with the CDP bound, (ε, δ)-DP.
* :func:`unknown_domain_gumbel` -- Unknown Domain Gumbel (Durfee & Rogers
  2019; Rogers, "Private Count Release", Algorithm 1), δ-approximate
  (k·ε²/8)-zCDP, for when there is no public list of items.
* :mod:`dp_spark.mechanisms.top_k.auto` -- the private choice among them
  behind the release's ``method="auto"``.

Modules: ``joint`` (the joint mechanisms), ``peeling`` (PNF-Peel, CDP-Peel),
``unknown_domain``, ``auto``, ``error`` (the release's public error bound),
``zcdp`` (the grouped ρ-zCDP form); ``_common`` holds the shared argument
checks and ``group_share`` (ε/m, δ/m). Per group, ``error.grouped_domain_top_k``
and ``unknown_domain.grouped_unknown_domain`` run the mechanism once per
group at its share; an ungrouped release is the one group at m = 1.
The release (plan, Spark stage, this layer, report) is
:mod:`dp_spark.releases.top_k`.

Randomness comes only from the ``rng`` argument (a ``numpy.random.Generator``).
Sampling is done in log space: exponential-mechanism draws use the Gumbel-max
trick, permute-and-flip draws use report-noisy-max with exponential noise.
Like every floating-point sampler in dp_spark, the guarantee is that of the
idealised real-valued mechanism (no defence against floating-point side
channels). Error messages never quote a count: counts are private.
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
