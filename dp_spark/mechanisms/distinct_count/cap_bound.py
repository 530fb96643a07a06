"""The per-group distinct-count (numpy only): every group's release at a cap
of m groups per person, vectorised over the groups (:func:`release_groups_batch`:
the per-group loop of the one-group mechanism of :mod:`.bound`, as numpy
batches; a one-group batch is that mechanism draw for draw), the budget each
step runs at (:func:`budget_of`), the records of the groups' draws (one per
step, never one per group), and the joint private choice of the cap m and
bound l with every group's count at it in one batch (:func:`counts_at_bound`).
Nothing per group is a Python object: the released values are arrays
(:class:`GroupRelease`), the records O(candidates).

Input: the NON-PRIVATE per-group greedy counts ``at[k, g, j]`` = c_{g,m_k,l_j}
of the edge table capped to m_k groups per person, for every public cap
candidate m_k (:func:`cap_candidates`) and bound candidate l_j
(:func:`dp_spark.settings.distinct_count.bound_candidates`), from one Spark
pass (:func:`dp_spark.stages.distinct.grouped_greedy_counts` with ``caps``). With keys a private
key step released, that pass counts at the candidates of the release's public key limit (so it does
not depend on the released number n), and the choice scores :func:`cap_candidates` (n), read from
those counts by :func:`scored_caps`.

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
from fractions import Fraction

import numpy as np

from dp_spark.accounting import ZCDP
from dp_spark.accounting.exact import ratio_down, ratio_up
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.distinct_count.bound import count_split, margins_at, selection_parameters
from dp_spark.mechanisms.distinct_count.gem import (exponential_rows, permute_and_flip_rows,
                                                    same_direction_scores_batch)
from dp_spark.mechanisms.groups import group_noise_scale, group_selection_epsilon
from dp_spark.noise import discrete_laplace_std
from dp_spark.noise.discrete_batch import discrete_gaussian_batch_wide, discrete_laplace_batch_any
from dp_spark.noise.records import NoiseDraw
from dp_spark.noise.tails import discrete_gaussian_upper_quantile, discrete_laplace_upper_quantile
from dp_spark.settings.distinct_count import SELECTION_BETA, SELECTION_SAMPLERS, candidate_betas, gem_shifts

__all__ = ["GroupRelease", "JOINT_SAMPLERS", "budget_of", "cap_candidates", "cap_choice_record",
           "choose_cap_and_bound", "count_noise", "counts_at_bound", "joint_margins", "joint_scores", "joint_shares",
           "release_at_bound", "release_groups", "release_groups_batch", "scored_caps"]

NOISES = ("laplace", "gaussian")
#: The joint choice's sampler per noise kind: under zCDP the exponential mechanism (bounded range: module doc).
JOINT_SAMPLERS = {"laplace": "permute-and-flip", "gaussian": "exponential"}


def budget_of(cost) -> tuple[str, float]:
    """(the noise kind, the value its mechanism runs at) of a plan step's
    cost: ("gaussian", ρ) for a ρ-zCDP step, ("laplace", ε) for a pure one."""
    return ("gaussian", cost.rho) if isinstance(cost, ZCDP) else ("laplace", cost.epsilon)


@dataclasses.dataclass(frozen=True)
class GroupRelease:
    """Every group's released values as arrays in group index order, with the public tables they
    index. ``candidates`` (J,): the bounds considered (one, the chosen l̂, on the joint path);
    ``chosen`` (G,): each group's released bound as an index into them; ``estimate``,
    ``lower_bound`` (G,): released; ``scales``, ``stds``, ``margins`` (J,): the count noise's
    public scale, standard deviation and (1 − β) margin at each candidate; ``count_records`` (J,):
    the record of ONE group's count draw at each candidate (its error statement is made from it);
    ``records``: the draws as per-step records (one for the selections, one per bound released for
    the counts: O(J), never O(G))."""

    candidates: np.ndarray
    chosen: np.ndarray
    estimate: np.ndarray
    lower_bound: np.ndarray
    scales: np.ndarray
    stds: np.ndarray
    margins: np.ndarray
    count_records: tuple
    records: tuple

    @property
    def bound(self) -> np.ndarray:
        """Each group's released bound l̂ (G,)."""
        return self.candidates[self.chosen]

    def __len__(self) -> int:
        return int(self.chosen.shape[0])

    def as_dicts(self) -> list[dict]:
        """The per-group dicts of :func:`~dp_spark.mechanisms.distinct_count.bound.release_at_candidates`
        (for a few groups: tests and benchmarks; a release reads the arrays)."""
        top = int(self.candidates.max()) if len(self.candidates) else 0
        select = next((r for r in self.records if r.step == "select"), None)
        out = []
        for j, e, lb in zip(self.chosen.tolist(), self.estimate.tolist(), self.lower_bound.tolist()):
            bound = int(self.candidates[j])
            out.append({"bound": bound, "estimate": e, "lower_bound": lb, "noise_scale": float(self.scales[j]),
                        "noise_std": float(self.stds[j]), "margin": int(self.margins[j]), "bound_is_top": bound == top,
                        "noise": (() if select is None else (dataclasses.replace(select, draws=1),))
                        + (self.count_records[j],)})
        return out


def _count_draws(values: np.ndarray, chosen: np.ndarray, scales, noise: str, rng: np.random.Generator) -> np.ndarray:
    """NON-PRIVATE ``values`` (G,) plus each group's count noise at the scale of its chosen candidate:
    discrete Laplace of scale ``scales[j]`` (P[k] ∝ exp(−|k|/b), b the float's exact value) or
    discrete Gaussian of σ = ``scales[j]`` (σ² the float's exact square), exactly as the scalar
    samplers draw them (CKS 2020; :mod:`dp_spark.noise.discrete_batch`). One batch per candidate,
    candidates in order, each in group index order; which groups share a batch is a function of the
    released bounds only."""
    noisy = values.astype(np.int64, copy=True)
    for j, scale in enumerate(scales):
        at = np.flatnonzero(chosen == j)
        if not at.size:
            continue
        if noise == "laplace":
            noisy[at] += discrete_laplace_batch_any(float(scale), at.size, rng)
        else:
            noisy[at] += discrete_gaussian_batch_wide(Fraction(float(scale)) ** 2, at.size, rng)
    return noisy


def _select_record(candidates, epsilon_select: float, groups: int, bounded_range: bool) -> NoiseDraw:
    """The record of ``groups`` per-group bound choices at ``epsilon_select`` each (identical draws)."""
    parameters = selection_parameters(candidates)
    if bounded_range:
        parameters["bounded_range"] = True
    return NoiseDraw("select", "gem", scale=2.0 / epsilon_select, std=None, sensitivity=1.0, draws=groups,
                     target="each group's per-person bound (scores c_l − m_l of sensitivity l)",
                     parameters=parameters)


def _count_records(candidates, scales, stds, noise: str) -> tuple:
    kind = "discrete-laplace" if noise == "laplace" else "discrete-gaussian"
    return tuple(NoiseDraw("count", kind, scale=float(s), std=float(sd), sensitivity=float(c),
                           target=f"the count with at most {int(c)} items per person")
                 for c, s, sd in zip(candidates, scales, stds))


def _per_bound_records(candidates, chosen, count_records, noise: str, m: int, every: bool) -> list[NoiseDraw]:
    """One record per bound some group released (draws: how many groups released it, a function of
    the released bounds), marked ``parallel``."""
    out = []
    for j, n in enumerate(np.bincount(chosen, minlength=len(candidates)).tolist()):
        if n:
            bound = int(candidates[j])
            target = (f"the count with at most {bound} items per person of every group (cap {m}, bound {bound})"
                      if every else
                      f"the count with at most {bound} items per person of each group whose bound is {bound}")
            out.append(_vector_record(count_records[j], n, noise, m, bound, target))
    return out


def release_groups_batch(at_candidates: np.ndarray, candidates, max_bound: int, max_groups: int, beta: float,
                         rng: np.random.Generator, *, noise: str, select: float,
                         count: float) -> tuple[GroupRelease | None, dict]:
    """Every group's release from the NON-PRIVATE counts ``at_candidates[g, j]`` = c_{g,l_j} at the
    public candidates (in 1..``max_bound``), for a cap of m = ``max_groups`` groups per person,
    VECTORISED over the G groups: the per-group loop of
    :func:`~dp_spark.mechanisms.distinct_count.bound.release_at_candidates` (``noise="laplace"``) or
    :func:`~dp_spark.mechanisms.distinct_count.bound.release_group_zcdp_at` (``"gaussian"``), with the
    same scores, samplers and noise, in distribution (tests/unit/test_distinct_batch.py). Returns
    (:class:`GroupRelease`, the public per-group budget parameters); (None, {}) for no group.

    Guarantee. ``noise="laplace"``: ``select`` and ``count`` are the two steps' ε; each group runs at
    ε_g = (select + count)/m rounded down, split in halves: GEM's same-direction scores
    (:func:`~dp_spark.mechanisms.distinct_count.gem.same_direction_scores_batch`, the exact scores of
    the scalar path) sampled by permute-and-flip at ε_g/2, then discrete Laplace of scale l̂/(ε_g/2)
    on c_{g,l̂}: ε_g-DP per group, so ε-DP over a person's ≤ m groups (basic composition; the other
    groups' counts do not move: parallel composition). ``noise="gaussian"``: they are the two steps'
    ρ; the choice by the exponential mechanism at √(8·select/m) (ε-bounded range, so select/m-zCDP)
    and σ_l = √m·l/√(2·count) (ℓ2 sensitivity √m·l over groups): (select + count)-zCDP. Draws: the G
    choices in one exact row sampler call (``dp_spark.noise.selection``; one group's draw is the
    scalar release's from the same state), then the counts (:func:`_count_draws`), all from ``rng``."""
    if noise not in NOISES:
        raise ValueError("noise must be 'laplace' or 'gaussian'")
    cands = [int(c) for c in candidates]
    if cands != sorted(set(cands)) or cands[0] < 1 or cands[-1] > int(max_bound):
        raise ValueError("candidates must increase within 1..max_bound")
    rows = np.asarray(at_candidates, dtype=np.int64).reshape(-1, len(cands))
    if rows.shape[0] == 0:  # no group (a private key step released none): nothing drawn
        return None, {}
    m, cand = int(max_groups), np.asarray(cands, dtype=np.int64)
    if noise == "gaussian":
        scales = np.array([group_noise_scale(m, c, rho=count).scale for c in cands])  # √m·l/√(2ρ), rounded up
        stds = scales
        margins = np.array([discrete_gaussian_upper_quantile(s, beta) for s in scales], dtype=np.int64)
        epsilon_select = group_selection_epsilon(m, rho=select)  # √(8ρ/m), rounded down
        per_group = {"epsilon_select_per_group": epsilon_select, "rho_per_group": ratio_down(select + count, m)}
        sample = exponential_rows
    else:
        epsilon_group = ratio_down(select + count, m)  # m groups' shares never sum above ε' (basic composition)
        epsilon_select, eps_count = count_split(epsilon_group)
        margins = margins_at(2.0 * eps_count, beta, cands)
        scales = np.array([ratio_up(2 * c, 2.0 * eps_count) for c in cands])  # l/ε_count rounded up
        stds = np.array([discrete_laplace_std(s) for s in scales])
        per_group = {"epsilon_per_group": epsilon_group}
        sample = permute_and_flip_rows
    shifts = np.ceil(np.asarray(gem_shifts(len(cands), epsilon_select)) * cand).astype(np.int64)
    scores = same_direction_scores_batch(rows - margins[None, :] - shifts[None, :], cand, epsilon_select,
                                         SELECTION_BETA)
    chosen = sample(scores, epsilon_select, rng).astype(np.int64)
    noisy = _count_draws(rows[np.arange(rows.shape[0]), chosen], chosen, scales, noise, rng)
    count_records = _count_records(cands, scales, stds, noise)
    records = (_select_record(cands, epsilon_select, rows.shape[0], noise == "gaussian"),
               *_per_bound_records(cand, chosen, count_records, noise, m, every=False))
    released = GroupRelease(cand, chosen, np.maximum(noisy, 0), np.maximum(noisy - margins[chosen], 0), scales,
                            stds, margins, count_records, records)
    return released, per_group


def release_groups(at_candidates: np.ndarray, candidates, max_bound: int, max_groups: int, beta: float,
                   rng: np.random.Generator, *, noise: str, select: float, count: float) -> tuple[list[dict], dict]:
    """:func:`release_groups_batch` as per-group dicts (``GroupRelease.as_dicts``), for callers with a
    few groups (tests, benchmarks); the release reads the arrays."""
    released, per_group = release_groups_batch(at_candidates, candidates, max_bound, max_groups, beta, rng,
                                               noise=noise, select=select, count=count)
    return ([] if released is None else released.as_dicts()), per_group


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


def scored_caps(counted, n_keys: int) -> tuple[list[int], np.ndarray]:
    """(the cap candidates the joint choice scores, the row of each in the counts): the candidates
    are :func:`cap_candidates` (``n_keys``), ``n_keys`` the number of keys the counts cover, read
    from counts made at the caps ``counted`` (increasing) — :func:`cap_candidates` of the public key
    limit when a private key step released the keys, so the Spark pass does not depend on how many
    it released. A candidate below ``n_keys`` is a power of two, counted as itself; the candidate
    ``n_keys`` reads the first counted cap >= ``n_keys``: a person holds at most ``n_keys`` of the
    keys, so every cap >= ``n_keys`` keeps every row and has the same counts. The choice is thus
    exactly the one over :func:`cap_candidates` (``n_keys``) (the same scores, sensitivities m·l and
    draws), and its candidates, a function of the released number of keys (itself released by the
    key step, adaptive composition), are the ones it states. Public values only."""
    caps = cap_candidates(n_keys)
    counted = [int(c) for c in counted]
    if counted != sorted(set(counted)):
        raise ValueError("counted caps must increase")
    rows = np.searchsorted(np.asarray(counted, dtype=np.int64), np.asarray(caps, dtype=np.int64))
    if rows[-1] >= len(counted) or any(counted[r] != c for r, c in zip(rows[:-1].tolist(), caps[:-1])):
        raise ValueError(f"the counts must be at every power of two below {int(n_keys):,} and at a cap >= it")
    return caps, rows


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


#: The public part of the joint scores, G·margin plus the thresholds' shifts, stays below this, so the
#: int64 scores q = Σ_g c − G·margin − shift stay exact and far inside the scorer's clip
#: (:func:`~dp_spark.mechanisms.distinct_count.gem.same_direction_scores_batch`, ±2^60).
EXACT_SCORE_LIMIT = 2 ** 59


def check_exact_scores(n_keys: int, bounds, beta: float, noise: str, count: float,
                       select: float | None = None) -> None:
    """Refuse, from public parameters only (the plan calls it before anything
    is read), a joint choice whose scores' public part G·margin(M, L) (plus
    the thresholds' shifts) reaches :data:`EXACT_SCORE_LIMIT` for G = M =
    ``n_keys`` (the keys' number, or the release's key limit when it is not
    known before reading). Margins grow with m and l, so this bounds every
    candidate's public term; the scores are then exact int64 well inside the
    scorer's clip, whatever the private Σ_g c (below 2^59 for any real data)."""
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
    """NON-PRIVATE: (q, Δ) flattened over (k, j) (index k·J + j), int64:
    q_{k,j} = Σ_g at[k, g, j] − G·margins[k, j] and Δ_{k,j} = m_k·l_j
    (module docstring). ``margins[k, j]`` must be public constants."""
    at = np.asarray(at, dtype=np.int64)
    margins = np.asarray(margins, dtype=np.int64)
    caps_a = np.asarray(caps, dtype=np.int64)
    bounds_a = np.asarray(bounds, dtype=np.int64)
    if at.ndim != 3 or at.shape[0] != caps_a.size or at.shape[2] != bounds_a.size:
        raise ValueError("at must have shape (caps, groups, bounds)")
    if margins.shape != (caps_a.size, bounds_a.size):
        raise ValueError("margins must have shape (caps, bounds)")
    groups = at.shape[1]
    scores = at.sum(axis=1) - groups * margins
    return scores.ravel(), np.outer(caps_a, bounds_a).ravel()


def choose_cap_and_bound(at, caps, bounds, margins, epsilon: float, rng: np.random.Generator, *,
                         sampler: str = "permute-and-flip", gem_beta: float | None = None) -> tuple[int, int]:
    """Release (k̂, ĵ), the indices of the chosen cap and bound, by GEM's
    same-direction normalised scores of :func:`joint_scores` (sensitivity 1,
    computed exactly from the int64 scores:
    :func:`~dp_spark.mechanisms.distinct_count.gem.same_direction_scores_batch`):
    ``"permute-and-flip"`` ε-DP, ``"exponential"`` ε-DP and ε-bounded range
    (ε²/8-zCDP); requires the same-direction moves (module docstring). The
    draw is that of :func:`~dp_spark.mechanisms.distinct_count.gem.generalized_permute_and_flip`
    (``generalized_exponential``) on the same scores. ``gem_beta=None`` (the
    release): per-bound thresholds (:func:`joint_shifts`)."""
    if sampler not in SELECTION_SAMPLERS:
        raise ValueError(f"sampler must be one of {', '.join(SELECTION_SAMPLERS)}")
    scores, sensitivities = joint_scores(at, caps, bounds, margins)
    if gem_beta is None:
        scores = scores - joint_shifts(caps, bounds, epsilon)  # integers: exact (check_exact_scores)
        gem_beta = SELECTION_BETA
    normalised = same_direction_scores_batch(scores[None, :], sensitivities, epsilon, gem_beta)
    draw = permute_and_flip_rows if sampler == "permute-and-flip" else exponential_rows
    index = int(draw(normalised, epsilon, rng)[0])
    return divmod(index, len(bounds))


def counts_at_bound(counts, max_groups: int, bound: int, beta: float, rng: np.random.Generator, *, noise: str,
                    count: float) -> GroupRelease:
    """Every group's count at the released (m̂, l̂) from its NON-PRIVATE c_{g,m̂,l̂} (``counts``, G),
    in one batch: + discrete Laplace m̂·l̂/ε (ℓ1 sensitivity m̂·l̂ over groups: ε-DP) or + discrete
    Gaussian √m̂·l̂/√(2ρ) (ℓ2 √m̂·l̂: ρ-zCDP), composing adaptively with the choice. ``lower_bound``
    subtracts the public margin (holds per group with probability >= 1 − β). Returns the released
    arrays (one candidate, l̂) and ONE record for the G identical draws."""
    values = np.asarray(counts, dtype=np.int64).reshape(-1)
    scale = count_noise(max_groups, bound, noise, count)
    margin = _margin(scale, noise, beta)
    std = discrete_laplace_std(scale) if noise == "laplace" else scale
    chosen = np.zeros(values.shape[0], dtype=np.int64)
    noisy = _count_draws(values, chosen, [scale], noise, rng)
    cand = np.array([int(bound)], dtype=np.int64)
    count_records = _count_records(cand, [scale], [std], noise)
    records = tuple(_per_bound_records(cand, chosen, count_records, noise, int(max_groups), every=True))
    return GroupRelease(cand, chosen, np.maximum(noisy, 0), np.maximum(noisy - margin, 0), np.array([scale]),
                        np.array([std]), np.array([margin], dtype=np.int64), count_records, records)


def release_at_bound(counts, max_groups: int, bound: int, beta: float, rng: np.random.Generator, *, noise: str,
                     count: float) -> list[dict]:
    """:func:`counts_at_bound` as per-group dicts (tests, benchmarks): bound, estimate, lower_bound,
    noise_scale, noise_std, margin and the draw's record."""
    released = counts_at_bound(counts, max_groups, bound, beta, rng, noise=noise, count=count)
    return [{k: v for k, v in r.items() if k != "bound_is_top"} for r in released.as_dicts()]
