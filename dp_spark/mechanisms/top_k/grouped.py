"""Top-k per group (issue 24): the ungrouped mechanisms run once per group at
the group's share of the budget (driver side, numpy only).

Input: per group g = 0..G−1 the NON-PRIVATE distinct-person counts of that
group's items (a G × d matrix over a public domain, or per group the k̄
largest counts and the (k̄+1)-th), computed after every person was capped to
at most m groups. Neighbouring relation: add or remove one person y; then
each (group, item) count moves by at most 1, all in the same direction, and
only in the ≤ m groups y keeps (the Spark stage's property,
tests/spark/test_grouped_top_k.py).

Guarantee: :func:`group_share` gives every group ε/m and δ/m (rounded down,
so m shares never exceed (ε, δ)). Within a group the counts are the
histogram the ungrouped mechanism assumes, so that group's output is
ε/m-DP (joint, pnf-joint, pnf-peel) or (ε/m, δ/m)-DP (cdp-peel,
unknown-domain). One person changes the input of at most m groups; the other
groups' outputs have the same distribution on both neighbours (parallel
composition), and basic composition over the ≤ m that change gives
(ε, δ)-DP for all groups' outputs together (ε-DP for the pure mechanisms).
m = 1 (disjoint groups): every group gets the full (ε, δ). Audited in
tests/audit/test_topk_audit.py (a person in two groups, m = 2).
Only indices are returned, never counts.
"""

from __future__ import annotations

import numpy as np

from dp_spark.accounting.exact import ratio_down
from dp_spark.mechanisms.top_k._common import check_int
from dp_spark.mechanisms.top_k.error import domain_top_k
from dp_spark.mechanisms.top_k.unknown_domain import (
    UnknownDomainResult,
    unknown_domain_calibration,
    unknown_domain_gumbel,
)

__all__ = ["group_share", "grouped_domain_top_k", "grouped_unknown_domain"]


def group_share(epsilon: float, delta: float, max_groups: int) -> tuple[float, float]:
    """(ε/m, δ/m), each rounded down: the budget of one group's selection
    when a person's rows are in at most m groups (module docstring)."""
    m = check_int(max_groups, "max_groups", 1)
    return ratio_down(epsilon, m), (ratio_down(delta, m) if delta > 0 else 0.0)


def grouped_domain_top_k(method: str, counts, k: int, epsilon: float, delta: float, max_groups: int,
                         rng: np.random.Generator) -> list[np.ndarray]:
    """Per row g of the G × d matrix ``counts`` (a public domain's counts in
    group g), the indices ``method`` (joint, pnf-joint, pnf-peel, cdp-peel)
    picks at the group's share :func:`group_share`; (ε, δ)-DP in all
    (ε-DP for the pure ones)."""
    eps_g, delta_g = group_share(epsilon, delta, max_groups)
    matrix = np.asarray(counts)
    return [domain_top_k(method, matrix[g], k, eps_g, delta_g, rng)[0] for g in range(matrix.shape[0])]


def grouped_unknown_domain(tops, k: int, epsilon: float, delta: float, kbar: int, max_groups: int,
                           rng: np.random.Generator) -> list[UnknownDomainResult]:
    """Per group, Unknown Domain Gumbel on its k̄ largest counts (``tops``: a
    sequence of objects with ``counts`` and ``next_count``, e.g.
    :class:`dp_spark.stages.item_counts.TopCounts`) calibrated to be
    (ε/m, δ/m)-DP; (ε, δ)-DP in all."""
    eps_g, delta_g = group_share(epsilon, delta, max_groups)
    eps_item, delta_threshold, _ = unknown_domain_calibration(eps_g, delta_g, k)
    return [unknown_domain_gumbel(top.counts, k, eps_item, delta_threshold, kbar, rng, top.next_count)
            for top in tops]
