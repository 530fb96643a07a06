"""Privacy audit of the sparse vector (AboveThreshold round) used by
continual-distinct's adaptive and auto methods (dp_spark.mechanisms.continual_distinct.svt).

Claim: one round with ε₀ = sqrt(2ρ/c) is ε₀-DP for sensitivity-1 queries
(Dwork–Roth Thm 3.23: threshold noise b₁ = 2/ε₀, query noise b₂ = 4/ε₀).
Worst case for a round: on D the first m queries sit at the threshold and
the last one too; on D' the first m are one higher and the last one lower.
The event "the first m answers are below and the (m+1)-th is above" needs
the threshold noise one larger (ratio e^{1/b₁}) and the last query noise two
larger (e^{2/b₂}) on D', so its ratio approaches e^{ε₀}.

Trials are vectorised: the noise scales are the real instance's
(``threshold_scale``, ``query_scale``) and the decision rule is the one of
``SparseVector.first_above`` (value + ν ≥ ⌈τ⌉ + η); a two-sample test checks
the vectorised round has the same event frequency as the real class.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from scipy import stats

from dp_spark.mechanisms.continual_distinct.svt import SparseVector
from dp_spark.noise.discrete_batch import discrete_laplace_batch
from tests.audit.stats import assert_detects
from tests.audit.stats import epsilon_lower_bound

RHO = 0.5  # with cutoff 1: ε₀ = sqrt(2ρ) = 1
M = 3
D = [0] * M + [0]
D_PRIME = [1] * M + [-1]
TRIALS = 200_000


def event_rate(b1: Fraction, b2: Fraction, values, n: int, rng) -> int:
    """How many of n independent rounds answer below M times, then above."""
    eta = discrete_laplace_batch(b1, n, rng)
    nu = discrete_laplace_batch(b2, n * len(values), rng).reshape(n, len(values))
    above = np.asarray(values)[None, :] + nu >= eta[:, None]  # threshold 0
    return int(((~above[:, :M]).all(axis=1) & above[:, M]).sum())


def real_event_count(values, n: int, rng) -> int:
    hits = 0
    for _ in range(n):
        hits += SparseVector(RHO, 1).first_above(values, 0, rng) == M
    return hits


def test_vectorised_round_matches_the_real_sparse_vector():
    svt = SparseVector(RHO, 1)
    n = 4000
    real = real_event_count(D, n, np.random.default_rng(1))
    fast = event_rate(svt.threshold_scale, svt.query_scale, D, n, np.random.default_rng(2))
    table = [[real, n - real], [fast, n - fast]]
    assert stats.fisher_exact(table)[1] > 1e-3, table


def test_sparse_vector_round_audit(audit_record):
    svt = SparseVector(RHO, 1)
    claimed = svt.epsilon_per_round
    assert abs(claimed - 1.0) < 1e-12
    rng = np.random.default_rng(7)
    b1, b2 = svt.threshold_scale, svt.query_scale
    k1, k2 = event_rate(b1, b2, D, TRIALS, rng), event_rate(b1, b2, D_PRIME, TRIALS, rng)
    audit_record("continual sparse vector (one AboveThreshold round)", claimed,
                 epsilon_lower_bound(k1, TRIALS, k2, TRIALS), TRIALS)
    # Power: both noise scales halved (about 2ε₀) is caught by the same event and trials.
    k1, k2 = event_rate(b1 / 2, b2 / 2, D, TRIALS, rng), event_rate(b1 / 2, b2 / 2, D_PRIME, TRIALS, rng)
    assert_detects("continual sparse vector", claimed, epsilon_lower_bound(k1, TRIALS, k2, TRIALS))
