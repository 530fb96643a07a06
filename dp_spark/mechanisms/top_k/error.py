"""The top-k release's error bound: a public function of the parameters.

The release (:mod:`dp_spark.releases.top_k`) states it with the released
items and the HTML report (:mod:`dp_spark.html_report`) recomputes it from
a release's public parameters; both read it here, below them, so the report
does not import the release (issue 23).
"""

from __future__ import annotations

import math

from dp_spark.mechanisms.top_k.peeling import cdp_peel_epsilon_per_step
from dp_spark.mechanisms.top_k.unknown_domain import unknown_domain_calibration

CONFIDENCE = 0.95


def gumbel_gap(scale: float, n: int, beta: float) -> float:
    """With probability >= 1 − β, max − min of n Gumbel(scale) draws is at most this."""
    big = math.log(2.0 * n / beta)
    return scale * (big + math.log(big))


def error_bound(method: str, k: int, epsilon: float, delta: float, size: int,
                beta: float = 1.0 - CONFIDENCE) -> float:
    """A bound B (public: parameters only) with P[max_i (c_(i) − c_{s_i}) <= B] >= 1 − β.

    joint / pnf-joint: the exponential mechanism's (and permute-and-flip's)
    utility bound (2/ε)(ln(d!/(d−k)!) + ln(1/β)); pnf-peel: every round's
    exponential noise (scale k/ε) stays below (k/ε)·ln(dk/β); cdp-peel and
    unknown-domain: the spread of ``size`` Gumbel draws. ``size`` is d, or k̄
    for unknown-domain; ``epsilon`` is the ε the selection ran with.
    """
    if method in ("joint", "pnf-joint"):
        log_sequences = math.lgamma(size + 1) - math.lgamma(size - k + 1)
        return 2.0 / epsilon * (log_sequences + math.log(1.0 / beta))
    if method == "pnf-peel":
        return k / epsilon * math.log(size * k / beta)
    if method == "cdp-peel":
        return gumbel_gap(1.0 / cdp_peel_epsilon_per_step(epsilon, delta, k), size, beta)
    eps_item = unknown_domain_calibration(epsilon, delta, k)[0]
    return gumbel_gap(1.0 / eps_item, size, beta)
