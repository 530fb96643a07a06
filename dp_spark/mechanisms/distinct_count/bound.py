"""The distinct-count mechanism (numpy only): Knop & Steinke, "Counting
Distinct Elements Under Person-Level Differential Privacy" (NeurIPS 2023).

Given the NON-PRIVATE bounded counts c_l = DC(D; l), l = 1..L, each of
sensitivity l, :func:`release_from_counts` spends ε: ε/2 on the Generalized
Exponential Mechanism (Algorithm 3) choosing l̂ with scores c_l − m_l, ε/2 on
exact discrete Laplace noise of scale 2l̂/ε on c_l̂. ``lower_bound`` subtracts
m_l̂, the (1 − β) quantile of that noise (a public constant), so with
probability >= 1 − β, lower_bound <= c_l̂ <= DC(D). The paper adds continuous
Laplace noise; the count is an integer, so we add exact discrete Laplace
noise and use its exact quantile as the margin.

The size decisions before the counts (:func:`choose_shards`,
:func:`matching_fits`) are post-processing of noisy counts the release
charges (see :mod:`dp_spark.plans.distinct_count`).
"""

from __future__ import annotations

import functools

import numpy as np

from dp_spark.accounting import ratio_up
from dp_spark.mechanisms.distinct_count.gem import generalized_exponential
from dp_spark.noise import discrete_laplace, discrete_laplace_std, discrete_laplace_upper_quantile
from dp_spark.plans.distinct_count import MAX_SHARDS

#: Persons per greedy shard when the release picks the shard count. Fewer,
#: larger shards are both more accurate (each shard is one greedy sequence;
#: splitting persons lowers every g_l) and cheaper to combine (an item is
#: emitted once per shard that matched it). Measured at 20M synthetic rows
#: (2M persons, 2 cores): 39 shards (50,000 persons) 18.6 s, g_1 = 486,651;
#: 10 shards 15.6 s, g_1 = 557,939 (benchmarks/README.md, Performance). A
#: shard of 200,000 persons is about 2M rows at 10 rows per person: one Python
#: task of a few seconds and a few hundred MB, still one task per shard.
PERSONS_PER_SHARD = 200_000
#: Probability that the pairs collected for exact matching exceed edge_limit.
MATCHING_OVERFLOW_PROBABILITY = 1e-6


def choose_shards(noisy_persons: int, persons_per_shard: int = PERSONS_PER_SHARD) -> int:
    """Greedy shard count from a noisy estimate of the number of persons
    (post-processing; the release scales a noisy sampled count up)."""
    return int(min(MAX_SHARDS, max(1, noisy_persons // persons_per_shard)))


def noise_margins(epsilon: float, beta: float, max_bound: int) -> np.ndarray:
    """m_l, l = 1..L: the smallest integer with P[DLap(2l/ε) > m_l] <= β.
    Public constants (they depend on parameters only)."""
    return _noise_margins(float(epsilon), float(beta), int(max_bound)).copy()


@functools.lru_cache(maxsize=32)
def _noise_margins(epsilon: float, beta: float, max_bound: int) -> np.ndarray:
    return np.array(
        [discrete_laplace_upper_quantile(ratio_up(2 * l, epsilon), beta) for l in range(1, max_bound + 1)],
        dtype=np.int64,
    )


def release_from_counts(
    counts: np.ndarray, epsilon: float, beta: float, rng: np.random.Generator
) -> dict:
    """Mechanism half of the release (numpy only), given the NON-PRIVATE
    counts c_1..c_L: GEM at ε/2 picks l̂, discrete Laplace at ε/2 releases the
    count. Returns only released values: l̂, estimate, lower_bound, noise
    scale. Total: ε-DP if each c_l has sensitivity l."""
    counts = np.asarray(counts, dtype=np.int64)
    max_bound = len(counts)
    bounds = np.arange(1, max_bound + 1, dtype=np.float64)
    margins = noise_margins(epsilon, beta, max_bound)
    scores = counts.astype(np.float64) - margins
    chosen = generalized_exponential(scores, bounds, epsilon / 2.0, beta, rng)
    bound = int(chosen) + 1
    scale = ratio_up(2 * bound, epsilon)  # 2l/ε rounded up: never less noise
    noisy = int(counts[chosen]) + int(discrete_laplace(scale, rng))
    return {
        "bound": bound,
        "estimate": max(noisy, 0),
        "lower_bound": max(noisy - int(margins[chosen]), 0),
        "noise_scale": scale,
        "noise_std": discrete_laplace_std(scale),
        "margin": int(margins[chosen]),
    }


def noisy_size(true_size: int, sensitivity: int, epsilon: float, rng: np.random.Generator) -> int:
    """ε-DP count of a size of sensitivity ``sensitivity``: the true size plus
    discrete Laplace noise of scale sensitivity/ε (rounded up)."""
    return int(true_size) + int(discrete_laplace(ratio_up(sensitivity, epsilon), rng))


def matching_fits(noisy_pairs: int, scale: float, edge_limit: int,
                  failure: float = MATCHING_OVERFLOW_PROBABILITY) -> bool:
    """Post-processing of the noisy pair count Ñ = N + DLap(scale): run exact
    matching iff Ñ + m <= edge_limit, m the (1 − failure) noise quantile.
    Then P[N > edge_limit and matching chosen] <= P[DLap < −m] <= failure."""
    margin = discrete_laplace_upper_quantile(scale, failure)
    return noisy_pairs + margin <= edge_limit
