"""The per-group distinct-count mechanism under ρ-zCDP (issue 24), numpy only.

Input: for one group g, the NON-PRIVATE per-group greedy counts c_{g,l},
l = 1..L, of a release whose persons are capped to at most m groups. Between
add/remove-one-person neighbours each c_{g,l} moves by 0..l, all in the same
direction, and only in the ≤ m groups the person keeps
(tests/spark/test_grouped_distinct.py). So for every bound l the vector
(c_{g,l})_g has ℓ2 sensitivity ≤ √m·l and ℓ1 ≤ m·l.

:func:`release_group_zcdp` runs, per group:

1. the choice of l̂ among the public candidates by
   :func:`~dp_spark.mechanisms.distinct_count.bound.select_bound` with the
   **exponential-mechanism** sampler (GEM's normalised scores, max(l, l')
   denominators, sensitivity 1) at ε_g =
   :func:`~dp_spark.mechanisms.groups.group_selection_epsilon` (m, ρ_select)
   = √(8ρ_select/m). The exponential mechanism with parameter ε_g is
   ε_g-bounded-range (Durfee & Rogers, NeurIPS 2019, "Practical
   Differentially Private Top-k Selection with Pay-what-you-get
   Composition": with Pr[i] ∝ exp(ε_g·s_i/2) and every s_i moving by at
   most 1, ln(Pr[i|D]/Pr[i|D']) − ln(Pr[j|D]/Pr[j|D']) =
   (ε_g/2)·(Δs_i − Δs_j) ∈ [−ε_g, ε_g] for any two outcomes), and an
   ε-bounded-range mechanism is ε²/8-zCDP (Cesar & Rogers, ALT 2021,
   "Bounding, Concentrating, and Truncating: Unifying Privacy Loss
   Composition for Data Analytics"). So each group's choice is
   ε_g²/8 = ρ_select/m-zCDP, and a person's ≤ m groups compose to ρ_select.
   Permute-and-flip (the pure release's sampler) is ε-DP but no
   bounded-range result is known for it, so it is not used here;
2. the count c_{g,l̂} plus discrete Gaussian noise N_Z(0, σ_l̂²),
   σ_l = :func:`~dp_spark.mechanisms.groups.group_noise_scale` (m, l,
   ρ_count).scale = √m·l/√(2ρ_count), rounded up. For a fixed l the vector
   over groups has ℓ2 sensitivity √m·l, so the counts are ρ_count-zCDP
   (Canonne, Kamath & Steinke 2020: the discrete Gaussian on a
   statistic of ℓ2 sensitivity Δ is Δ²/(2σ²)-zCDP); with l̂ chosen adaptively per group, group g's count is
   l̂_g²/(2σ_l̂²) = ρ_count/m-zCDP and a person's ≤ m groups compose to
   ρ_count (adaptive composition, Bun & Steinke 2016; the other
   groups' outputs do not change).

In all ρ_select + ρ_count-zCDP over every group. ``lower_bound`` subtracts
m_l̂ = :func:`~dp_spark.noise.tails.discrete_gaussian_upper_quantile`
(σ_l̂, β), a public constant, so each group's lower bound holds with
probability >= 1 − β (the release states G·β for all at once). The
selection scores use the same margins (q_l = c_l − m_l, as the pure
release).
"""

from __future__ import annotations

import numpy as np

from dp_spark.accounting.exact import ratio_down
from dp_spark.mechanisms.distinct_count.bound import release_at_candidates, select_among, selection_parameters
from dp_spark.mechanisms.groups import group_noise_scale, group_selection_epsilon
from dp_spark.noise import discrete_gaussian
from dp_spark.noise.records import NoiseDraw
from dp_spark.noise.tails import discrete_gaussian_upper_quantile

#: The sampler of the zCDP per-group choice (bounded range: module docstring).
ZCDP_SAMPLER = "exponential"


def gaussian_margins(sigmas: dict[int, float], beta: float, max_bound: int) -> np.ndarray:
    """m_l for the candidate bounds l (keys of ``sigmas``, σ_l their discrete
    Gaussian σ): the (1 − β) upper quantile of N_Z(0, σ_l²), an array of
    length L indexed l − 1 (0 at non-candidates, never read). Public."""
    out = np.zeros(max_bound, dtype=np.int64)
    for bound, sigma in sigmas.items():
        out[bound - 1] = discrete_gaussian_upper_quantile(sigma, beta)
    return out


def release_group_zcdp(counts: np.ndarray, epsilon_select: float, sigmas: dict[int, float], margins: np.ndarray,
                       beta: float, rng: np.random.Generator, *, gem_beta: float | None = None) -> dict:
    """:func:`release_group_zcdp_at` given the whole vector c_1..c_L and
    the margins indexed l − 1 (:func:`gaussian_margins`); reads the
    candidates' entries only."""
    cands = np.asarray(sorted(sigmas), dtype=np.int64)
    return release_group_zcdp_at(np.asarray(counts, dtype=np.int64)[cands - 1], epsilon_select, sigmas,
                                 np.asarray(margins)[cands - 1], beta, rng, gem_beta=gem_beta)


def release_group_zcdp_at(values, epsilon_select: float, sigmas: dict[int, float], margins, beta: float,
                          rng: np.random.Generator, *, gem_beta: float | None = None) -> dict:
    """One group's release from its NON-PRIVATE counts at the candidates
    (the keys of ``sigmas``, increasing; ``values[j]`` = c_l and
    ``margins[j]`` = m_l at the j-th): l̂ chosen by the
    exponential-mechanism GEM at ``epsilon_select``, then c_l̂ + N_Z(0,
    σ_l̂²) (module docstring). ``sigmas`` and ``margins`` are public
    constants of the run. Returns only released values and the records of
    the two draws."""
    cands = np.asarray(sorted(sigmas), dtype=np.int64)
    values = np.asarray(values, dtype=np.int64)
    margins = np.asarray(margins, dtype=np.int64)
    bound = select_among(values, cands, margins, epsilon_select, rng, gem_beta, sampler=ZCDP_SAMPLER, monotone=True)
    j = int(np.flatnonzero(cands == bound)[0])
    sigma = sigmas[bound]
    noisy = int(values[j]) + int(discrete_gaussian(sigma, rng))
    margin = int(margins[j])
    noise = (
        NoiseDraw("select", "gem", scale=2.0 / epsilon_select, std=None, sensitivity=1.0,
                  target="the per-person bound (scores c_l − m_l of sensitivity l)",
                  parameters=selection_parameters(cands, gem_beta)),
        NoiseDraw("count", "discrete-gaussian", scale=sigma, std=sigma, sensitivity=float(bound),
                  target=f"the count with at most {bound} items per person"),
    )
    return {"bound": bound, "estimate": max(noisy, 0), "lower_bound": max(noisy - margin, 0), "noise_scale": sigma,
            "noise_std": sigma, "margin": margin, "bound_is_top": bound == int(cands.max()), "noise": noise}


def release_groups(at_candidates: np.ndarray, candidates, max_bound: int, max_groups: int, beta: float,
                   rng: np.random.Generator, *, noise: str, select: float, count: float) -> tuple[list[dict], dict]:
    """Every group's release from the NON-PRIVATE per-group counts at the
    candidates (``at_candidates[g, j]``, groups × candidates; the candidates
    lie in 1..``max_bound``), for a cap of m = ``max_groups`` groups per
    person; the driver half of the grouped release, shared with its
    benchmark. Returns the released dicts (one per group, as
    :func:`~dp_spark.mechanisms.distinct_count.bound.release_at_candidates`)
    and the public per-group budget parameters. Nothing of size
    ``max_bound`` is built: every step reads the candidates only.

    ``noise="laplace"``: ``select`` and ``count`` are the pure ε of the two
    steps; per group :func:`release_at_candidates` at (select + count)/m
    (rounded down): ε-DP in all (basic composition over a person's ≤ m
    groups). ``noise="gaussian"``: they are the ρ of the two steps; per
    group :func:`release_group_zcdp_at` at ε_g = √(8·select/m) and
    σ_l = √m·l/√(2·count): (select + count)-zCDP (module docstring).

    One bound for all groups (a joint ℓ chosen from the summed counts) was
    measured and left out: no better on MovieLens by genre
    (benchmarks/README.md, "Grouped distinct-count (issue 24)")."""
    if noise not in ("laplace", "gaussian"):
        raise ValueError("noise must be 'laplace' or 'gaussian'")
    cands = [int(c) for c in candidates]
    if cands != sorted(set(cands)) or cands[0] < 1 or cands[-1] > int(max_bound):
        raise ValueError("candidates must increase within 1..max_bound")
    if len(at_candidates) == 0:  # no group (a private key step released none): nothing drawn
        return [], {}
    m = int(max_groups)
    rows = np.asarray(at_candidates, dtype=np.int64)
    if noise == "gaussian":
        sigmas = {c: group_noise_scale(m, c, rho=count).scale for c in cands}  # √m·l/√(2ρ), rounded up
        margins = [discrete_gaussian_upper_quantile(sigmas[c], beta) for c in cands]
        epsilon_select = group_selection_epsilon(m, rho=select)  # √(8ρ/m), rounded down
        released = [release_group_zcdp_at(v, epsilon_select, sigmas, margins, beta, rng) for v in rows]
        return released, {"epsilon_select_per_group": epsilon_select, "rho_per_group": ratio_down(select + count, m)}
    epsilon_group = ratio_down(select + count, m)  # m groups' shares never sum above ε' (basic composition)
    return [release_at_candidates(v, cands, epsilon_group, beta, rng) for v in rows], {"epsilon_per_group": epsilon_group}
