"""The distinct-count mechanism (numpy only): Knop & Steinke, "Counting
Distinct Elements Under Person-Level Differential Privacy" (NeurIPS 2023).

Given the NON-PRIVATE bounded counts c_l = DC(D; l), l = 1..L, each moving by
0..l in the same direction between neighbours (adding a person never lowers
one), :func:`release_at_candidates` spends ε: ε/2 choosing l̂ among the public
candidates 1, 4, 16, 64, … below L and L itself (:func:`bound_candidates`),
ε/2 on exact discrete Laplace noise of scale 2l̂/ε on c_l̂ (the paper's is
continuous; the count is an integer). ``lower_bound`` subtracts m_l̂, the
noise's exact (1 − β) quantile (a public constant), so with probability
>= 1 − β, lower_bound <= c_l̂ <= DC(D). Only the candidates' counts are read.

The choice (:func:`select_among`, ε/2-DP): GEM's normalised scores (the
paper's Algorithm 3) of q_l = c_l − m_l with sensitivities l, each candidate
with its own GEM threshold (:func:`selection_scores`), with two changes from
the paper: the pairwise denominator is max(l, l') instead of l + l' (valid
because every c_l moves in the same direction: q_l − q_l' moves by at most
max(l, l')), and the scores are sampled by permute-and-flip (ε-DP on
sensitivity-1 scores, never less likely to pick the best candidate). The
paper chooses among every l = 1..L with the exponential mechanism. Chosen
by measurement: the denominator and sampler in
benchmarks/results/2026-11-26-distinct-count-bound-selection.md, the candidates' thresholds in
benchmarks/results/2026-11-29-distinct-count-grid.md.

Privacy of the choice: each q_l moves by 0..l, all in the same direction (m_l
is public), so each normalised score moves by at most 1; the candidate set
depends on L only; permute-and-flip on sensitivity-1 scores at ε/2 is
ε/2-DP; the count is ε/2-DP; ε in all (basic composition).

Per group (:func:`dp_spark.mechanisms.distinct_count.cap_bound.release_groups`;
an ungrouped release is one group at m = 1): under pure ε-DP each group runs
:func:`release_at_candidates` at ε/m; under ρ-zCDP :func:`release_group_zcdp_at`,
whose choice samples GEM's scores by the exponential mechanism at
ε_g = √(8ρ_select/m): ε_g-bounded range (Durfee & Rogers, NeurIPS 2019: with
Pr[i] ∝ exp(ε_g·s_i/2) and every s_i moving by at most 1, any two outcomes'
log-ratios differ by at most ε_g), so ε_g²/8 = ρ_select/m-zCDP (Cesar &
Rogers, ALT 2021; permute-and-flip has no known bounded-range result), and
whose count adds discrete Gaussian noise σ_l = √m·l/√(2ρ_count): the vector
over groups has ℓ2 sensitivity √m·l for a fixed l (Canonne, Kamath & Steinke
2020), so each group's count is ρ_count/m-zCDP and a person's ≤ m groups
compose to ρ_count (Bun & Steinke 2016). Its lower bound subtracts the
discrete Gaussian's (1 − β) quantile.

:func:`choose_shards` and :func:`matching_fits` are post-processing of noisy
counts the release charges (:mod:`dp_spark.plans.distinct_count`).
"""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np

from dp_spark.accounting import ratio_up, remainder
from dp_spark.mechanisms.distinct_count.gem import generalized_exponential, generalized_permute_and_flip
from dp_spark.noise import discrete_laplace, discrete_laplace_std, discrete_laplace_upper_quantile
from dp_spark.noise.discrete_batch import discrete_gaussian_batch_wide, discrete_laplace_batch_any
from dp_spark.noise.records import NoiseDraw
from dp_spark.noise.tails import discrete_gaussian_upper_quantile
from dp_spark.settings.distinct_count import (
    MAX_SHARDS,
    SELECTION_BETA,
    SELECTION_SAMPLERS,
    bound_candidates,
    candidate_betas,
    gem_shifts,
)

#: Persons per greedy shard when the release picks the shard count: fewer,
#: larger shards are more accurate and cheaper to combine. Chosen by
#: measurement: benchmarks/results/2026-11-23-speed-all.md.
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
    return margins_at(epsilon, beta, range(1, int(max_bound) + 1))


def margins_at(epsilon: float, beta: float, bounds) -> np.ndarray:
    """m_l for the given bounds l (the candidates): the smallest integer with
    P[DLap(2l/ε) > m_l] <= β. Public constants."""
    return np.array([_margin(float(epsilon), float(beta), int(b)) for b in bounds], dtype=np.int64)


@functools.lru_cache(maxsize=4096)
def _margin(epsilon: float, beta: float, bound: int) -> int:
    return int(discrete_laplace_upper_quantile(ratio_up(2 * bound, epsilon), beta))


def count_split(epsilon: float, select_share: float = 0.5) -> tuple[float, float]:
    """(ε_select, ε_count) of a release at ε: the choice's share and the
    rest, summing to <= ε exactly. At the default share ε_count = ε/2, so
    2·ε_count is exactly ε."""
    if not 0.0 < select_share < 1.0:
        raise ValueError("select_share must lie strictly between 0 and 1")
    eps_select = epsilon * select_share
    return eps_select, remainder(epsilon, eps_select)


def select_bound(counts: np.ndarray, epsilon_select: float, margins: np.ndarray, rng: np.random.Generator,
                 candidates=None, gem_beta: float | None = None, *, sampler: str = "permute-and-flip",
                 monotone: bool = True) -> int:
    """:func:`select_among` given the whole vector c_1..c_L and margins
    m_1..m_L (indexed l − 1): reads the entries of ``candidates`` (default
    :func:`bound_candidates` of L = len(counts)) only."""
    counts = np.asarray(counts, dtype=np.int64)
    cands = np.asarray(bound_candidates(len(counts)) if candidates is None else candidates, dtype=np.int64)
    if cands.ndim != 1 or len(cands) == 0 or cands.min() < 1 or cands.max() > len(counts):
        raise ValueError("candidates must be bounds in 1..len(counts)")
    return select_among(counts[cands - 1], cands, np.asarray(margins)[cands - 1], epsilon_select, rng, gem_beta,
                        sampler=sampler, monotone=monotone)


def select_among(values, candidates, margins, epsilon_select: float, rng: np.random.Generator,
                 gem_beta: float | None = None, *, sampler: str = "permute-and-flip", monotone: bool = True) -> int:
    """The choice of the bound (ε_select-DP): the released l̂ among the public
    ``candidates``, from GEM's normalised scores of q_l = c_l − m_l
    (``values[j]`` = c_l, ``margins[j]`` = m_l at l = ``candidates[j]``) with
    sensitivities l and denominators max(l, l') (``monotone``), sampled by
    permute-and-flip. ``margins`` must be public (:func:`margins_at`), and
    every c_l must move by 0..l in the same direction between neighbours
    (ALGORITHMS.md 8). ``sampler="exponential"``, ``monotone=False`` is the
    paper's GEM, for the benchmark's comparison."""
    cands = np.asarray(candidates, dtype=np.int64)
    values = np.asarray(values, dtype=np.int64)
    if cands.ndim != 1 or len(cands) == 0 or cands.min() < 1 or values.shape != cands.shape:
        raise ValueError("candidates must be bounds >= 1, one per count")
    if sampler not in SELECTION_SAMPLERS:
        raise ValueError(f"sampler must be one of {', '.join(SELECTION_SAMPLERS)}")
    scores, gem_beta = selection_scores(values, cands, margins, epsilon_select, gem_beta)
    if sampler == "permute-and-flip":
        chosen = generalized_permute_and_flip(scores, cands.astype(np.float64), epsilon_select, gem_beta, rng,
                                              monotone=monotone)
    else:
        chosen = generalized_exponential(scores, cands.astype(np.float64), epsilon_select, gem_beta, rng,
                                         monotone=monotone)
    return int(cands[chosen])


def selection_scores(values, candidates, margins, epsilon_select: float,
                     gem_beta: float | None = None) -> tuple[np.ndarray, float]:
    """(utilities, β) of the choice at ``epsilon_select``: q_l = c_l − m_l,
    and with ``gem_beta=None`` (the release) each candidate's own threshold,
    q_l − ⌈e_l·l⌉ with β = SELECTION_BETA
    (:func:`~dp_spark.settings.distinct_count.gem_shifts`). The shifts are
    public integers: the utilities stay exact and move as c_l does."""
    cands = np.asarray(candidates, dtype=np.int64)
    utilities = np.asarray(values, dtype=np.int64) - np.asarray(margins, dtype=np.int64)
    if gem_beta is not None:
        return utilities.astype(np.float64), gem_beta
    shifts = np.ceil(np.asarray(gem_shifts(len(cands), epsilon_select)) * cands).astype(np.int64)
    return (utilities - shifts).astype(np.float64), SELECTION_BETA


def release_from_counts(
    counts: np.ndarray, epsilon: float, beta: float, rng: np.random.Generator,
    *, candidates=None, gem_beta: float | None = None, select_share: float = 0.5,
    sampler: str = "permute-and-flip", monotone: bool = True,
) -> dict:
    """:func:`release_at_candidates` given the NON-PRIVATE vector c_1..c_L
    (or the values at the candidates alone): the candidates are
    ``candidates`` or :func:`bound_candidates` (L = len(counts))."""
    counts = np.asarray(counts, dtype=np.int64)
    cands = np.asarray(bound_candidates(len(counts)) if candidates is None else candidates, dtype=np.int64)
    if cands.ndim != 1 or len(cands) == 0 or cands.min() < 1:
        raise ValueError("candidates must be bounds in 1..len(counts)")
    if len(counts) != len(cands):
        if cands.max() > len(counts):
            raise ValueError("candidates must be bounds in 1..len(counts)")
        counts = counts[cands - 1]
    return release_at_candidates(counts, cands, epsilon, beta, rng, gem_beta=gem_beta,
                                 select_share=select_share, sampler=sampler, monotone=monotone)


def release_at_candidates(
    values, candidates, epsilon: float, beta: float, rng: np.random.Generator,
    *, gem_beta: float | None = None, select_share: float = 0.5,
    sampler: str = "permute-and-flip", monotone: bool = True,
) -> dict:
    """The release from the NON-PRIVATE counts at the public candidates
    (``values[j]`` = c_l at l = ``candidates[j]``): :func:`select_among` at
    ε/2 picks l̂, discrete Laplace at ε/2 releases the count. Returns released
    values only: l̂, estimate, lower_bound, noise scale, ``bound_is_top`` (l̂
    is the largest candidate) and the records of its two draws ("select",
    "count"). ε-DP if each c_l moves by 0..l, all in the same direction.
    The draws are those of a one-group
    :func:`~dp_spark.mechanisms.distinct_count.cap_bound.release_groups_batch`
    (the same samplers, in the same order on ``rng``), so an ungrouped run is
    the one-key grouped run, draw for draw.
    ``gem_beta``, ``select_share``, ``sampler`` and ``monotone`` exist to
    measure alternatives; the release uses the defaults."""
    cands = np.asarray(candidates, dtype=np.int64)
    values = np.asarray(values, dtype=np.int64)
    eps_select, eps_count = count_split(epsilon, select_share)
    # 2·ε_count is exact (ε at the default share 1/2): margins and scale are those of DLap(l/ε_count)
    margins = margins_at(2.0 * eps_count, beta, cands)
    bound = select_among(values, cands, margins, eps_select, rng, gem_beta, sampler=sampler, monotone=monotone)
    j = int(np.flatnonzero(cands == bound)[0])
    scale = ratio_up(2 * bound, 2.0 * eps_count)  # l/ε_count rounded up: never less noise
    noisy = int(values[j]) + int(discrete_laplace_batch_any(scale, 1, rng)[0])  # the sampler (and stream) of a batch
    noise = (
        NoiseDraw("select", "gem", scale=2.0 / eps_select, std=None, sensitivity=1.0,
                  target="the per-person bound (scores c_l − m_l of sensitivity l)",
                  parameters=selection_parameters(cands, gem_beta)),
        NoiseDraw("count", "discrete-laplace", scale=scale, std=discrete_laplace_std(scale),
                  sensitivity=float(bound), target=f"the count with at most {bound} items per person"),
    )
    return {
        "bound": bound,
        "estimate": max(noisy, 0),
        "lower_bound": max(noisy - int(margins[j]), 0),
        "noise_scale": scale,
        "noise_std": discrete_laplace_std(scale),
        "margin": int(margins[j]),
        "bound_is_top": bound == int(cands.max()),
        "noise": noise,
    }


#: The sampler of the zCDP per-group choice (bounded range: module docstring).
ZCDP_SAMPLER = "exponential"


def gaussian_margins(sigmas: dict[int, float], beta: float, max_bound: int) -> np.ndarray:
    """m_l, the (1 − β) upper quantile of N_Z(0, σ_l²) for the candidates
    (keys of ``sigmas``), length L indexed l − 1 (0 elsewhere). Public."""
    out = np.zeros(max_bound, dtype=np.int64)
    for bound, sigma in sigmas.items():
        out[bound - 1] = discrete_gaussian_upper_quantile(sigma, beta)
    return out


def release_group_zcdp_at(values, epsilon_select: float, sigmas: dict[int, float], margins, beta: float,
                          rng: np.random.Generator, *, gem_beta: float | None = None) -> dict:
    """One group's ρ-zCDP release from its NON-PRIVATE counts at the
    candidates (the keys of ``sigmas``): l̂ by the exponential-mechanism GEM
    at ``epsilon_select``, then c_l̂ + N_Z(0, σ_l̂²) (module docstring).
    ``sigmas``, ``margins`` public. Returns as :func:`release_at_candidates`."""
    cands = np.asarray(sorted(sigmas), dtype=np.int64)
    values = np.asarray(values, dtype=np.int64)
    margins = np.asarray(margins, dtype=np.int64)
    bound = select_among(values, cands, margins, epsilon_select, rng, gem_beta, sampler=ZCDP_SAMPLER, monotone=True)
    j = int(np.flatnonzero(cands == bound)[0])
    sigma = sigmas[bound]
    noisy = int(values[j]) + int(discrete_gaussian_batch_wide(Fraction(sigma) ** 2, 1, rng)[0])  # as a batch
    margin = int(margins[j])
    noise = (
        NoiseDraw("select", "gem", scale=2.0 / epsilon_select, std=None, sensitivity=1.0,
                  target="the per-person bound (scores c_l − m_l of sensitivity l)",
                  parameters={**selection_parameters(cands, gem_beta), "bounded_range": True}),  # ZCDP_SAMPLER
        NoiseDraw("count", "discrete-gaussian", scale=sigma, std=sigma, sensitivity=float(bound),
                  target=f"the count with at most {bound} items per person"),
    )
    return {"bound": bound, "estimate": max(noisy, 0), "lower_bound": max(noisy - margin, 0), "noise_scale": sigma,
            "noise_std": sigma, "margin": margin, "bound_is_top": bound == int(cands.max()), "noise": noise}


def selection_parameters(candidates, gem_beta: float | None = None) -> dict:
    """The choice's public parameters for its noise record: the candidates
    and GEM's β (with the release's per-candidate thresholds, each
    candidate's failure share)."""
    out = {"candidates": [int(c) for c in candidates], "beta": SELECTION_BETA if gem_beta is None else gem_beta}
    if gem_beta is None:
        out["candidate_betas"] = candidate_betas(len(out["candidates"]))
    return out


def noisy_size(true_size: int, sensitivity: int, epsilon: float, rng: np.random.Generator,
               target: str = "a size") -> tuple[int, NoiseDraw]:
    """ε-DP count of a size of sensitivity ``sensitivity``: the true size plus
    discrete Laplace noise of scale sensitivity/ε (rounded up). Returns the
    noisy size and the record of its draw (step "size"; the caller names it)."""
    scale = ratio_up(sensitivity, epsilon)
    noisy = int(true_size) + int(discrete_laplace(scale, rng))
    return noisy, NoiseDraw("size", "discrete-laplace", scale=scale, std=discrete_laplace_std(scale),
                            sensitivity=float(sensitivity), target=target)


def matching_fits(noisy_pairs: int, scale: float, edge_limit: int,
                  failure: float = MATCHING_OVERFLOW_PROBABILITY) -> bool:
    """Post-processing of the noisy pair count Ñ = N + DLap(scale): run exact
    matching iff Ñ + m <= edge_limit, m the (1 − failure) noise quantile.
    Then P[N > edge_limit and matching chosen] <= P[DLap < −m] <= failure."""
    margin = discrete_laplace_upper_quantile(scale, failure)
    return noisy_pairs + margin <= edge_limit
