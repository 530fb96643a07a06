"""The per-group distinct-count (numpy only): every group's release at a cap
of m groups per person (:func:`release_groups`; an ungrouped release is one
group at m = 1), the budget each step runs at (:func:`budget_of`), the records
of the groups' draws, and the joint private choice of the cap m and bound l.

Input: the NON-PRIVATE per-group greedy counts ``at[k, g, j]`` = c_{g,m_k,l_j}
of the edge table capped to m_k groups per person, for every public cap
candidate m_k (:func:`cap_candidates`) and bound candidate l_j
(:func:`dp_spark.settings.distinct_count.bound_candidates`), from one Spark
pass (:func:`dp_spark.stages.distinct.grouped_greedy_counts` with ``caps``).

Scores: q_{m,l} = Σ_g (c_{g,m,l} − margin(m, l)), margin(m, l) the public
(1 − β) quantile of the count noise at (m, l) (discrete Laplace of scale
m·l/ε_count, or discrete Gaussian σ = √m·l/√(2ρ_count)): the summed lower
bounds the release would state.

Sensitivity (add/remove one person y): the cap is a per-person
transformation, so at cap m the capped tables differ in y's rows only, in at
most m groups; a group without y's rows keeps its counts, one with them moves
by 0..l (adding y never lowers one). So q_{m,l} moves by δ_{m,l} ∈ [0, m·l]
when y is added ([−m·l, 0] when removed): sensitivity m·l, EVERY score moving
the same way (the margins are public). That is the condition of GEM's
``monotone`` variant (:mod:`.gem`), so the normalised scores have sensitivity
1, and ``sampler="permute-and-flip"`` is ε-DP (McKenna & Sheldon 2020),
``sampler="exponential"`` ε-bounded range, so ε²/8-zCDP (Cesar & Rogers 2021).
Checked on random neighbours in tests/spark/test_grouped_cap_bound.py.

The release then counts each group at the chosen (m̂, l̂), reading
c_{g,m̂,l̂} from the same pass.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from dp_spark.accounting import ZCDP
from dp_spark.accounting.exact import ratio_down
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.distinct_count.bound import release_from_counts, release_group_zcdp_at
from dp_spark.mechanisms.distinct_count.gem import generalized_exponential, generalized_permute_and_flip
from dp_spark.mechanisms.groups import group_noise_scale, group_selection_epsilon
from dp_spark.noise import discrete_gaussian, discrete_laplace, discrete_laplace_std
from dp_spark.noise.records import NoiseDraw
from dp_spark.noise.tails import discrete_gaussian_upper_quantile, discrete_laplace_upper_quantile
from dp_spark.settings.distinct_count import SELECTION_BETA, SELECTION_SAMPLERS, candidate_betas, gem_shifts

__all__ = ["JOINT_SAMPLERS", "budget_of", "cap_candidates", "cap_choice_record", "choose_cap_and_bound",
           "count_noise", "group_records", "joint_count_records", "joint_margins", "joint_scores", "joint_shares",
           "release_at_bound", "release_groups"]

NOISES = ("laplace", "gaussian")
#: The joint choice's sampler per noise kind: under zCDP the exponential mechanism (bounded range: module doc).
JOINT_SAMPLERS = {"laplace": "permute-and-flip", "gaussian": "exponential"}


def budget_of(cost) -> tuple[str, float]:
    """(the noise kind, the value its mechanism runs at) of a plan step's
    cost: ("gaussian", ρ) for a ρ-zCDP step, ("laplace", ε) for a pure one."""
    return ("gaussian", cost.rho) if isinstance(cost, ZCDP) else ("laplace", cost.epsilon)


def release_groups(at_candidates: np.ndarray, candidates, max_bound: int, max_groups: int, beta: float,
                   rng: np.random.Generator, *, noise: str, select: float, count: float,
                   pure=release_from_counts) -> tuple[list[dict], dict]:
    """Every group's release, in index order, from the NON-PRIVATE counts
    ``at_candidates[g, j]`` at the candidates (in 1..``max_bound``), for a cap
    of m = ``max_groups``. Returns the released dicts (as
    :func:`~dp_spark.mechanisms.distinct_count.bound.release_at_candidates`)
    and the public per-group budget parameters.

    ``noise="laplace"``: ``select`` and ``count`` are the two steps' ε; each
    group runs ``pure`` (a caller may wrap it to audit each draw) at
    (select + count)/m rounded down: ε-DP in all (basic composition over a
    person's ≤ m groups). ``noise="gaussian"``: they are the two steps' ρ;
    each group runs :func:`release_group_zcdp_at` at ε_g = √(8·select/m) and
    σ_l = √m·l/√(2·count): (select + count)-zCDP (:mod:`.bound`)."""
    if noise not in NOISES:
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
    return [pure(v, epsilon_group, beta, rng, candidates=cands) for v in rows], {"epsilon_per_group": epsilon_group}


def joint_shares(m: int, noise: str, count: float) -> dict:
    """The public per-group share of the joint path's count step at the
    chosen cap m (``count``: its ε, or ρ under zCDP), rounded down."""
    return {f"{'rho' if noise == 'gaussian' else 'epsilon'}_per_group": ratio_down(count, m)}


def _vector_record(record: NoiseDraw, draws: int, noise: str, m: int, bound: int, target: str) -> NoiseDraw:
    """One record for ``draws`` identical count draws at ``bound`` (ℓ2
    sensitivity √m·l under zCDP), marked ``parallel``: records of different
    bounds cover disjoint groups of one step."""
    extra = {}
    parameters = {**record.parameters, "bound": bound, "parallel": True}  # "bound": the HTML panel's record
    if noise == "gaussian":
        extra = {"sensitivity": group_noise_scale(m, bound, rho=1.0).sensitivity}
        parameters["norm"] = 2
    return dataclasses.replace(record, draws=draws, **extra, target=target, parameters=parameters)


def group_records(released: list[dict], noise: str, m: int) -> list[NoiseDraw]:
    """The groups' draws (:func:`release_groups`) as records of identical
    draws: one for the selections (same scale in every group), one per
    bound for the counts."""
    selects = [r["noise"][0] for r in released]
    if not selects:
        return []
    out = [dataclasses.replace(selects[0], draws=len(selects),
                               target="each group's per-person bound (scores c_l − m_l of sensitivity l)")]
    by_bound: dict[int, list] = {}
    for r in released:
        by_bound.setdefault(r["bound"], []).append(r["noise"][1])
    for bound, records in sorted(by_bound.items()):
        out.append(_vector_record(records[0], len(records), noise, m, bound,
                                  f"the count with at most {bound} items per person of each group whose bound is "
                                  f"{bound}"))
    return out


def joint_count_records(released: list[dict], noise: str, m: int) -> list[NoiseDraw]:
    """The joint path's count draws (:func:`release_at_bound`) as one
    record: every group's count at the same (m̂, l̂) has the same scale."""
    if not released:
        return []
    bound = released[0]["bound"]
    return [_vector_record(released[0]["noise"][0], len(released), noise, m, bound,
                           f"the count with at most {bound} items per person of every group (cap {m}, bound {bound})")]


def cap_choice_record(caps, bounds, epsilon: float, sampler: str) -> NoiseDraw:
    """The record of :func:`choose_cap_and_bound`'s draw at ``epsilon`` with
    ``sampler`` (the exponential mechanism is ε-bounded range: ε²/8-zCDP)."""
    bounded_range = {"bounded_range": True} if sampler == "exponential" else {}
    return NoiseDraw("max_groups", "gem", scale=2.0 / epsilon, std=None, sensitivity=1.0,
                     target=f"the group cap m in {', '.join(map(str, caps))} and the bound l in "
                            f"{', '.join(map(str, bounds))}, jointly (scores: summed counts minus margins, "
                            "sensitivity m·l)",
                     parameters={"beta": SELECTION_BETA, "candidate_betas": candidate_betas(len(bounds)),
                                 **bounded_range})


def cap_candidates(n_keys: int) -> list[int]:
    """The public cap candidates for M = ``n_keys`` public keys: the powers
    of two 1, 2, 4, … ≤ M, and M (a person holds at most M keys, so m = M
    keeps every row). A function of M only."""
    top = int(n_keys)
    if top < 1:
        raise ValueError("n_keys must be >= 1")
    out, m = [], 1
    while m < top:
        out.append(m)
        m *= 2
    out.append(top)
    return out


def count_noise(max_groups: int, bound: int, noise: str, count: float) -> float:
    """The public scale of every group's count noise at cap m and bound l
    (:func:`dp_spark.mechanisms.groups.group_noise_scale`): discrete Laplace
    m·l/ε (``count`` = ε) or discrete Gaussian σ = √m·l/√(2ρ) (``count`` = ρ)."""
    if noise not in NOISES:
        raise ValueError("noise must be 'laplace' or 'gaussian'")
    if noise == "laplace":
        return group_noise_scale(max_groups, bound, epsilon=count).scale
    return group_noise_scale(max_groups, bound, rho=count).scale


def _margin(scale: float, noise: str, beta: float) -> int:
    quantile = discrete_laplace_upper_quantile if noise == "laplace" else discrete_gaussian_upper_quantile
    return int(quantile(scale, beta))


def joint_margins(caps, bounds, beta: float, noise: str, count: float) -> np.ndarray:
    """margins[k, j]: the (1 − β) upper quantile of the count noise at
    (``caps[k]``, ``bounds[j]``), what ``lower_bound`` subtracts. Public."""
    return np.array([[_margin(count_noise(m, l, noise, count), noise, beta) for l in bounds] for m in caps],
                    dtype=np.int64)


#: The scores q = Σ_g c − G·margin must be exact in float64 (GEM reads them
#: as floats, then computes exactly): below 2^52 in size, counts included.
EXACT_SCORE_LIMIT = 2 ** 52


def check_exact_scores(n_keys: int, bounds, beta: float, noise: str, count: float,
                       select: float | None = None) -> None:
    """Refuse, from public parameters only (the plan calls it before anything
    is read), a joint choice whose scores could round in float64:
    G·margin(M, L) (plus the thresholds' shifts) >= 2^52 for G = M = ``n_keys``.
    Margins grow with m and l, so this bounds every candidate's public term; a
    rounding of q could otherwise depend on the private Σ_g c."""
    top = int(n_keys)
    worst = top * _margin(count_noise(top, int(max(bounds)), noise, count), noise, beta)
    if select is not None:  # the per-bound thresholds' shifts (choose_cap_and_bound) at the choice's ε
        worst += _shift_bound(bounds, top, select)
    if worst >= EXACT_SCORE_LIMIT:
        raise ParameterError(
            f"the private choice of max_groups (up to {top:,} groups, bounds up to {int(max(bounds)):,}) at this "
            "budget has noise margins too large to score exactly; give max_groups, a larger epsilon or a smaller "
            "max_bound")


def _shift_bound(bounds, top_cap: int, epsilon: float) -> int:
    """The largest |shift| of :func:`joint_shifts` at the GEM's ε (public)."""
    e = max(abs(x) for x in gem_shifts(len(bounds), epsilon))
    return int(math.ceil(e * top_cap * int(max(bounds)))) + 1


def joint_shifts(caps, bounds, epsilon: float) -> np.ndarray:
    """Public integers ⌈e_j·m_k·l_j⌉ (e_j =
    :func:`~dp_spark.settings.distinct_count.gem_shifts` (J, ε)) lowering the
    joint scores, so that GEM with one β = SELECTION_BETA gives candidate
    (m_k, l_j) the threshold of its bound's failure share; flattened as
    :func:`joint_scores`."""
    e = np.asarray(gem_shifts(len(bounds), epsilon))
    sens = np.outer(np.asarray(caps, dtype=np.float64), np.asarray(bounds, dtype=np.float64) * e)
    return np.ceil(sens).astype(np.int64).ravel()


def joint_scores(at, caps, bounds, margins) -> tuple[np.ndarray, np.ndarray]:
    """NON-PRIVATE: (q, Δ) flattened over (k, j) (index k·J + j):
    q_{k,j} = Σ_g at[k, g, j] − G·margins[k, j] and Δ_{k,j} = m_k·l_j
    (module docstring). ``margins[k, j]`` must be public constants."""
    at = np.asarray(at, dtype=np.int64)
    margins = np.asarray(margins, dtype=np.float64)
    caps_a = np.asarray(caps, dtype=np.float64)
    bounds_a = np.asarray(bounds, dtype=np.float64)
    if at.ndim != 3 or at.shape[0] != caps_a.size or at.shape[2] != bounds_a.size:
        raise ValueError("at must have shape (caps, groups, bounds)")
    if margins.shape != (caps_a.size, bounds_a.size):
        raise ValueError("margins must have shape (caps, bounds)")
    groups = at.shape[1]
    scores = at.sum(axis=1).astype(np.float64) - groups * margins
    return scores.ravel(), np.outer(caps_a, bounds_a).ravel()


def choose_cap_and_bound(at, caps, bounds, margins, epsilon: float, rng: np.random.Generator, *,
                         sampler: str = "permute-and-flip", gem_beta: float | None = None) -> tuple[int, int]:
    """Release (k̂, ĵ), the indices of the chosen cap and bound, by GEM's
    same-direction normalised scores of :func:`joint_scores` (sensitivity 1):
    ``"permute-and-flip"`` ε-DP, ``"exponential"`` ε-DP and ε-bounded range
    (ε²/8-zCDP); requires the same-direction moves (module docstring).
    ``gem_beta=None`` (the release): per-bound thresholds (:func:`joint_shifts`)."""
    if sampler not in SELECTION_SAMPLERS:
        raise ValueError(f"sampler must be one of {', '.join(SELECTION_SAMPLERS)}")
    scores, sensitivities = joint_scores(at, caps, bounds, margins)
    if gem_beta is None:
        scores = scores - joint_shifts(caps, bounds, epsilon)  # integers: exact (check_exact_scores)
        gem_beta = SELECTION_BETA
    draw = generalized_permute_and_flip if sampler == "permute-and-flip" else generalized_exponential
    index = int(draw(scores, sensitivities, epsilon, gem_beta, rng, monotone=True))
    return divmod(index, len(bounds))


def release_at_bound(counts, max_groups: int, bound: int, beta: float, rng: np.random.Generator, *, noise: str,
                     count: float) -> list[dict]:
    """Every group's count at the released (m̂, l̂) from its NON-PRIVATE
    c_{g,m̂,l̂}: + discrete Laplace m̂·l̂/ε (ℓ1 sensitivity m̂·l̂ over groups:
    ε-DP) or + discrete Gaussian √m̂·l̂/√(2ρ) (ℓ2 √m̂·l̂: ρ-zCDP), composing
    adaptively with the choice. ``lower_bound`` subtracts the public margin
    (holds per group with probability >= 1 − β). Returns released values and
    each draw's record."""
    scale = count_noise(max_groups, bound, noise, count)
    margin = _margin(scale, noise, beta)
    laplace = noise == "laplace"
    std = discrete_laplace_std(scale) if laplace else scale
    kind = "discrete-laplace" if laplace else "discrete-gaussian"
    out = []
    for c in np.asarray(counts, dtype=np.int64):
        noisy = int(c) + int(discrete_laplace(scale, rng) if laplace else discrete_gaussian(scale, rng))
        record = NoiseDraw("count", kind, scale=scale, std=std, sensitivity=float(bound),
                           target=f"the count with at most {bound} items per person")
        out.append({"bound": int(bound), "estimate": max(noisy, 0), "lower_bound": max(noisy - margin, 0),
                    "noise_scale": scale, "noise_std": std, "margin": margin, "noise": (record,)})
    return out
