"""Audit tier: the exact selection samplers (dp_spark.noise.selection) on their worst-case
neighbours, one (G, k) call per input (each row an independent run).

Scores s = 0 for k = 50 candidates; the neighbour s' raises candidate 0 by the sensitivity 1 and
lowers every other by 1. Event S = {candidate 0 released}.
- Permute-and-flip at c = ε/2: P[S | s] = 1/k, P[S | s'] = (1 − (1 − q)^k)/(k·q) with q = e^{−ε}:
  the ratio is e^ε·(1 − (1 − q)^k) ≈ e^ε (tight for large k).
- The exponential mechanism at c = ε/2: P[S | s'] = e^{c}/(e^{c} + (k − 1)·e^{−c}), the ratio
  k·e^{ε}/(e^{ε} + k − 1) = e^{0.966ε} at ε = 1.
The broken variants use 2c (about 2ε): the same event and trial count must prove ε exceeded.
"""

from __future__ import annotations

import numpy as np
import pytest

from dp_spark.accounting.exact import ratio_down
from dp_spark.noise.selection import exponential_mechanism_rows, permute_and_flip_rows
from tests.audit.stats import assert_detects, two_sided_lower_bound

EPSILON = 1.0
K = 50
N = 200_000


def _lower_bound(sampler, coefficient: float, seed: int) -> float:
    s = np.zeros((N, K))
    s_prime = np.full((N, K), -1.0)
    s_prime[:, 0] = 1.0
    on_s = int((sampler(s, coefficient, np.random.default_rng(seed)) == 0).sum())
    on_prime = int((sampler(s_prime, coefficient, np.random.default_rng(seed + 1)) == 0).sum())
    return two_sided_lower_bound(on_prime, N, on_s, N)


@pytest.mark.parametrize("name, sampler", [("permute-and-flip (exact sampler)", permute_and_flip_rows),
                                           ("exponential mechanism (exact rejection sampler)",
                                            exponential_mechanism_rows)])
def test_exact_selection_on_worst_case_neighbouring_scores(audit_record, name, sampler):
    c = ratio_down(EPSILON, 2.0)
    audit_record(name, EPSILON, _lower_bound(sampler, c, seed=1101), N)
    assert_detects(name, EPSILON, _lower_bound(sampler, 2.0 * c, seed=1201))
