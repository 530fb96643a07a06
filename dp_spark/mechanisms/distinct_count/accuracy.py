"""The exact output distribution of the distinct-count mechanism (numpy only).

Not a release: a NON-PRIVATE analysis of what
:func:`~dp_spark.mechanisms.distinct_count.bound.release_at_candidates` would
release from given counts: the mixture over l̂ (permute-and-flip on GEM's
scores, exact) of c_l̂ plus discrete Laplace noise (exact pmf). The accuracy
tier and benchmarks/distinct_count_grid.py read medians and tails from it
instead of from seeded runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dp_spark.accounting import ratio_up
from dp_spark.mechanisms.distinct_count.bound import count_split, margins_at, selection_scores
from dp_spark.mechanisms.distinct_count.gem import generalized_permute_and_flip_probabilities

__all__ = ["ReleaseDistribution", "release_distribution"]

@dataclass(frozen=True)
class ReleaseDistribution:
    """The exact distribution of one release: P[l̂ = l] per candidate and the
    quantiles of ``estimate`` = max(c_l̂ + X, 0) and ``lower_bound`` =
    max(c_l̂ + X − m_l̂, 0), X discrete Laplace of scale s_l̂, from the
    closed-form CDF (no support is enumerated)."""

    bound_probabilities: dict[int, float]
    values: np.ndarray
    margins: np.ndarray
    scales: np.ndarray

    def _cdf(self, v: int, shift: np.ndarray) -> float:
        """P[max(c + X − shift, 0) <= v] over the mixture (v >= 0)."""
        p = np.fromiter(self.bound_probabilities.values(), dtype=np.float64)
        k = v - (self.values - shift)  # X <= k
        a = np.exp(-1.0 / self.scales)
        with np.errstate(over="ignore", under="ignore"):
            below = np.where(k >= 0, 1.0 - np.power(a, k + 1.0) / (1.0 + a), np.power(a, -k * 1.0) / (1.0 + a))
        return float(np.dot(p, below))

    def _quantile(self, q: float, shift: np.ndarray) -> int:
        lo, hi = -1, int(self.values.max()) + 1
        while self._cdf(hi, shift) < q:
            hi *= 2
        while hi - lo > 1:  # the smallest v >= 0 with CDF(v) >= q
            mid = (lo + hi) // 2
            if self._cdf(mid, shift) >= q:
                hi = mid
            else:
                lo = mid
        return hi

    def estimate_quantile(self, q: float) -> int:
        return self._quantile(q, np.zeros_like(self.margins))

    def lower_bound_quantile(self, q: float) -> int:
        return self._quantile(q, self.margins)

    def likeliest_bound(self) -> tuple[int, float]:
        return max(self.bound_probabilities.items(), key=lambda t: t[1])

    def bound_at_least(self, bound: int) -> float:
        """P[l̂ >= bound]."""
        return float(sum(p for b, p in self.bound_probabilities.items() if b >= bound))


def release_distribution(values, candidates, epsilon: float, beta: float, *,
                         gem_beta: float | None = None) -> ReleaseDistribution:
    """The exact distribution of the release at ε = ``epsilon`` from the
    NON-PRIVATE counts ``values[j]`` = c_l at l = ``candidates[j]``, with the
    release's split, margins and sampler."""
    values = np.asarray(values, dtype=np.int64)
    cands = np.asarray(candidates, dtype=np.int64)
    eps_select, eps_count = count_split(epsilon)
    margins = margins_at(2.0 * eps_count, beta, cands)
    scores, gem_beta = selection_scores(values, cands, margins, eps_select, gem_beta)
    probs = generalized_permute_and_flip_probabilities(scores, cands.astype(np.float64), eps_select, gem_beta,
                                                       monotone=True)
    scales = np.array([ratio_up(2 * int(b), 2.0 * eps_count) for b in cands])
    return ReleaseDistribution({int(b): float(p) for b, p in zip(cands, probs)}, values.astype(np.float64),
                               margins.astype(np.float64), scales)
