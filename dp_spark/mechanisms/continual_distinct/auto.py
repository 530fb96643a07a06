"""The streaming default continual-distinct mechanism "auto": lazy counters, then the recompute baseline.

Jain, Kalemaj, Raskhodnikova, Sivakumar, Smith (NeurIPS 2023), Algorithm 3
with the "best of both worlds" modification of their Section 3.3 (Algorithm 1
for small flippancy bounds, the recompute mechanism for the rest), spending
budget only where it is used.

Phases j = 0..j* run Algorithm 1's counter for w_j = 2^j: the binary tree
(σ_j² = κ·w_j·L/(2ρ_j)) or the factorized counter of :mod:`.factorized`
(σ_j² = B(w_j)/(2ρ_j)), whichever has the smaller noise bound a_j at the
public (T, ρ_j, w_j, relation) (:func:`level_counter`; ``counter="tree"``
forces trees; ``online``: the factorized counter is the streaming BLT counter);
the last phase is the periodic-recompute baseline over the remaining steps. A
sparse vector (ρ_svt = f·ρ, cutoff j* + 1) asks at each step whether
over_counts[j, t] (items with flippancy > w_j so far) reaches τ_j; on "above"
the phase advances (several times in one step if need be). The output at t is
the current phase's estimate.

Budget (all public): ρ_rest = ρ − ρ_svt. Tree j, when first used, gets
ρ_j = g·(1 − g)^j·ρ_rest (g = ``tree_fraction``); the baseline gets what the
started trees left (a zCDP ``PrivacyFilter`` over ρ_rest enforces it). j* is
the largest level whose *tree's* bound a_j(ρ_j) plus truncation term
s·a_j + α is at most the baseline's bound with the budget it would get
instead, ρ_rest·(1 − g)^j (j* = −1: the baseline alone gets all of ρ; no
sparse vector), whichever counter then runs the level: a started level the
data leaves wastes its budget, and the factorized counter's smaller bound
in this rule started levels that streams of flippancy ≥ 2 left at once
(T = 2^20, ρ = 0.5: largest error 428 against the trees' 314). τ_j = s·a_j
(s = ``threshold_scale``), a_j = the running counter's largest per-step
noise std × q (a tree's σ_j·sqrt(L)).

Privacy (item-level ρ-zCDP under ``relation``; sensitivities in
:mod:`.relations`). (1) The sparse vector reads only over_counts and its own
answers, so its transcript — the level path, including the baseline's start
s — is ρ_svt-zCDP (:mod:`.svt`). (2) Given the path, the trees (ρ_j-zCDP;
lazy node draws have the joint distribution of drawing all 2T − 1) and the
baseline (m counts from s on, σ_b² = m/(2ρ_b): ρ_b-zCDP) are fixed
mechanisms (a level's counter is ρ_j-zCDP whichever it is, and like the
trees' lazy draws its noise is drawn for all steps), and the filter admits a
phase only if the total stays ≤ ρ_rest,
so for *every* path they compose to ≤ ρ_rest-zCDP (Bun–Steinke 2016, Lemma
2.3). (3) Adaptive composition of (1) with the path-indexed mechanism of (2),
bounded by ρ_rest uniformly over paths (Bun–Steinke Lemma 2.3; the fully
adaptive filter of Whitehouse et al. 2023 covers it too), gives
ρ_svt + ρ_rest = ρ. Releasing the current phase's estimate and the path is
post-processing. Property-tested in ``tests/unit/test_continual.py``.

Error (probability ≥ 1 − β: β/2 to the noise, union over T steps; β/2 to the
sparse vector): at a tree step |err_t| ≤ std_t·q + τ_j + α (α the sparse
vector's accuracy; the truncation term is 0 when 2^j ≥ T); at a baseline step
|err_t| ≤ σ_b·q + (t − r(t))·Δ, r(t) the last recompute step and Δ the public
``max_step_change`` (default 1, the paper's one-update-per-step model; with
several events per step the bound does not hold); Δ = None recomputes every
step (B = 1), and the bound σ_b·q rests on no assumption about the data.
Discrete Gaussian noise is σ-subgaussian (CKS 2020), so the Gaussian tail
bound applies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dp_spark.accounting import ZCDP, PrivacyFilter
from dp_spark.accounting.exact import exact, float_down, remainder
from dp_spark import checks as _checks
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.continual_distinct.blt import BLTCounter
from dp_spark.mechanisms.continual_distinct.factorized import factorized_counts, max_variance_factor
from dp_spark.mechanisms.continual_distinct.factorized import sigma2_for_flippancy as factorized_sigma2
from dp_spark.mechanisms.continual_distinct.relations import check_relation, sensitivity_factor
from dp_spark.mechanisms.continual_distinct.svt import SparseVector
from dp_spark.mechanisms.continual_distinct.tree import BinaryTreeMechanism, num_levels
from dp_spark.noise.discrete_batch import discrete_gaussian_batch, rational_sigma2
from dp_spark.noise.records import NoiseDraw

__all__ = ["AutoPlan", "auto_plan", "auto_run", "baseline_record", "best_block", "BaselinePhase", "level_counter",
           "union_quantile"]


def baseline_record(step: str, sigma: float, draws: int, target: str) -> NoiseDraw:
    """The record of ``draws`` recompute counts with N_Z(0, σ²) each: the
    vector of counts, each moving by at most 1 under either neighbouring
    relation, has ℓ2 sensitivity √draws (so its cost is draws/(2σ²) of ρ)."""
    return NoiseDraw(step, "discrete-gaussian", scale=sigma, std=sigma, sensitivity=math.sqrt(draws), draws=draws,
                     target=target, parameters={"norm": 2})


def best_block(length: int, rho: float, quantile: float, step_change: int | None = 1) -> int:
    """Block B minimising (B − 1)·Δ + sqrt(⌈n/B⌉/(2ρ))·q over n = ``length``
    steps (public); Δ = ``step_change`` None bounds no staleness: B = 1."""
    if step_change is None:
        return 1
    blocks = np.arange(1, length + 1, dtype=np.float64)
    releases = np.ceil(length / blocks)
    bound = (blocks - 1) * step_change + np.sqrt(releases / (2 * rho)) * quantile
    return int(blocks[int(np.argmin(bound))])


@dataclass(frozen=True)
class BaselinePhase:
    """The recompute phase started at step ``start`` with budget ``rho``."""

    start: int
    rho: float
    block: int
    releases: int
    sigma2: Fraction

    @classmethod
    def plan(
        cls, horizon: int, start: int, rho: float, quantile: float, step_change: int | None = None
    ) -> BaselinePhase:
        length = horizon - start + 1
        block = best_block(length, rho, quantile, step_change)
        releases = -(-length // block)
        return cls(start, rho, block, releases, rational_sigma2(Fraction(releases) / (2 * Fraction(rho))))

    @property
    def sigma(self) -> float:
        return math.sqrt(self.sigma2)

    def bound(self, quantile: float, step_change: int | None = None) -> float:
        return self.sigma * quantile + (self.block - 1) * (step_change or 0)


@dataclass(frozen=True)
class AutoPlan:
    """Public parameters of "auto" (see module doc)."""

    horizon: int
    rho: float
    beta: float
    relation: str
    rho_svt: float
    rho_rest: float
    tree_fraction: float
    top_level: int  # j*: −1 means baseline only
    tree_rho: tuple[float, ...]
    sigma2: tuple[Fraction, ...]
    thresholds: np.ndarray
    quantile: float
    svt_alpha: float
    max_step_change: int | None = None
    counters: tuple[str, ...] = ()  # per level: "tree" or "factorized"
    bounds: tuple[float, ...] = ()  # per level: the counter's noise bound a_j (largest std × q)

    @property
    def cutoff(self) -> int:
        return self.top_level + 1

    def tree_bound(self, level: int) -> float:
        """a_j: the level's counter's noise bound (largest per-step std × q)."""
        return self.bounds[level]

    def to_dict(self) -> dict:
        return {
            "relation": self.relation,
            "rho_sparse_vector": self.rho_svt,
            "rho_trees_and_baseline": self.rho_rest,
            "tree_fraction": self.tree_fraction,
            "top_tree_level": self.top_level,
            "tree_flippancy_bounds": [1 << j for j in range(self.top_level + 1)],
            "rho_per_tree_if_used": list(self.tree_rho),
            "sigma_per_tree": [math.sqrt(s) for s in self.sigma2],
            "counter_per_tree": list(self.counters),
            "thresholds": [float(t) for t in self.thresholds],
            "quantile": self.quantile,
            "sparse_vector_alpha": self.svt_alpha,
            "max_step_change": self.max_step_change,
        }

    def budget_split(self) -> list[tuple[str, float]]:
        """The data-independent ledger: what each part may spend (sums to ρ)."""
        if self.top_level < 0:
            return [("periodic recompute baseline (no tree can beat it at these parameters)", self.rho)]
        trees = ", ".join(f"w={1 << j}: {r:.4g}" for j, r in enumerate(self.tree_rho))
        return [
            (f"sparse vector (Algorithm 2), cutoff {self.cutoff}", self.rho_svt),
            (
                "counters (Algorithm 1) started lazily when the sparse vector reaches them "
                f"({trees}), then the recompute baseline with all that is left; zCDP filter",
                self.rho_rest,
            ),
        ]


def union_quantile(horizon: int, beta_noise: float) -> float:
    """sqrt(2 ln(2n/β)): a two-sided Gaussian tail at β/n each, union over n values (σ-subgaussian noise)."""
    return math.sqrt(2.0 * math.log(2.0 * horizon / beta_noise))


#: The counters "auto" may run per level: "best" takes the one with the smaller noise bound.
AUTO_COUNTERS = ("best", "tree", "factorized")


def level_counter(horizon: int, rho: float, flippancy_bound: int, relation: str, quantile: float,
                  counter: str = "best", online: bool = False) -> tuple[str, Fraction, float]:
    """(counter, σ², a) for one level from public inputs: the binary tree (σ² = κ·w·L/(2ρ), largest
    std σ·√L) or the factorized counter (σ² from :func:`.factorized.sigma2_for_flippancy`, largest
    std σ·√(4^k S_ℓ̌(T)); ``online``: the streaming BLT counter of :mod:`.blt`, σ² = σ̌²/4^K in count
    units, largest std :meth:`.blt.BLTCounter.std` (T)); a = largest std × ``quantile``. "best": the
    smaller a (tree on a tie)."""
    L = num_levels(horizon)
    options = []
    if counter in ("best", "tree"):
        s2 = rational_sigma2(Fraction(sensitivity_factor(relation) * flippancy_bound * L) / (2 * Fraction(rho)))
        options.append((math.sqrt(s2) * math.sqrt(L) * quantile, 0, "tree", s2))
    if counter in ("best", "factorized") and online:
        blt = BLTCounter.for_flippancy(horizon, rho, flippancy_bound, relation)
        s2 = blt.sigma2 / 4 ** blt.params.bits
        options.append((blt.std(horizon) * quantile, 1, "factorized", s2))
    elif counter in ("best", "factorized"):
        s2 = factorized_sigma2(horizon, rho, flippancy_bound, relation)
        options.append((math.sqrt(float(s2) * max_variance_factor(horizon)) * quantile, 1, "factorized", s2))
    bound, _, name, s2 = min(options)
    return name, s2, bound


def auto_plan(
    horizon: int,
    rho: float,
    beta: float = 0.05,
    relation: str = "subset",
    svt_fraction: float = 0.2,
    tree_fraction: float = 0.5,
    threshold_scale: float = 0.5,
    tree_levels: int | None = None,
    max_step_change: int | None = 1,
    counter: str = "best",
    online: bool = False,
) -> AutoPlan:
    """Budget split, crossover level j*, each level's counter, σ_j and τ_j of "auto" (public inputs only).

    ``tree_levels``: None picks j* by the crossover rule; n forces counters for
    w = 1..2^(n−1) before the baseline (n = 0: the baseline alone).
    ``max_step_change``: the public bound Δ on the count's change per step
    that the baseline's error bound rests on (privacy never does); None: the
    baseline recomputes every step (noisier, no assumption).
    ``counter``: each level's counter, "best" (default: the smaller noise
    bound, :func:`level_counter`), "tree" or "factorized"; ``online``: the
    factorized counter is the streaming BLT counter (:mod:`.blt`), as the
    online counter runs it.
    """
    T = _checks.horizon(horizon)
    rho = _checks.positive(rho, "rho")
    beta = _checks.open_unit(beta, "beta")
    relation = check_relation(relation)
    f = _checks.open_unit(svt_fraction, "svt_fraction")
    g = _checks.open_unit(tree_fraction, "tree_fraction")
    s = _checks.positive(threshold_scale, "threshold_scale")
    if counter not in AUTO_COUNTERS:
        raise ParameterError(f"counter must be one of {', '.join(AUTO_COUNTERS)}, got {counter!r}")
    if tree_levels is not None:
        tree_levels = _checks.integer(tree_levels, "tree_levels", 0, _checks.log2_exact(T) + 1)
    if max_step_change is not None:
        max_step_change = _checks.integer(max_step_change, "max_step_change", 1)
    J = _checks.log2_exact(T)
    q = union_quantile(T, beta / 2.0)
    rest = remainder(rho, f * rho)  # ρ_svt + ρ_rest ≤ ρ exactly
    tree_rho, sigma2, counters, bounds = [], [], [], []
    for j in range(J + 1):
        rho_j = float_down(exact(g) * (1 - exact(g)) ** j * exact(rest))  # Σ_j ρ_j < ρ_rest exactly
        name, s2, a = level_counter(T, rho_j, 1 << j, relation, q, counter, online)
        # the crossover is the tree's rule whatever the level runs: a level the data leaves wastes
        # its budget, and a smaller bound would start levels the trees' rule does not
        a_rule = a if name == "tree" else level_counter(T, rho_j, 1 << j, relation, q, "tree")[2]
        total = a_rule
        if (1 << j) < T:  # truncation: threshold + the sparse vector's accuracy with cutoff j + 1
            total += s * a_rule + SparseVector(f * rho, j + 1).alpha(T + j + 1, beta / 2.0)
        instead = BaselinePhase.plan(T, 1, (1.0 - g) ** j * rest, q, max_step_change).bound(q, max_step_change)
        if (total > instead) if tree_levels is None else j >= tree_levels:
            break
        tree_rho.append(rho_j)
        sigma2.append(s2)
        counters.append(name)
        bounds.append(a)
    top = len(tree_rho) - 1
    if top < 0:
        return AutoPlan(T, rho, beta, relation, 0.0, rho, g, -1, (), (), np.zeros(0), union_quantile(T, beta), 0.0,
                        max_step_change)
    svt = SparseVector(f * rho, top + 1)
    alpha = svt.alpha(T + top + 1, beta / 2.0)
    return AutoPlan(T, rho, beta, relation, f * rho, rest, g, top, tuple(tree_rho), tuple(sigma2),
                    s * np.asarray(bounds), q, alpha, max_step_change, tuple(counters), tuple(bounds))


def _phase_path(over_counts: np.ndarray, plan: AutoPlan, rng) -> tuple[np.ndarray, int | None, tuple]:
    """Sparse vector over the steps: the tree level per step (−1 = baseline),
    the baseline start and the sparse vector's record (none if it does not run)."""
    T = plan.horizon
    path = np.full(T, -1, dtype=np.int64)
    if plan.top_level < 0:
        return path, 1, ()
    svt = SparseVector(plan.rho_svt, plan.cutoff)
    noise = (svt.noise_record(plan.budget_split()[0][0]),)
    level, start = 0, 0
    while start < T:
        index = svt.first_above(over_counts[level, start:], float(plan.thresholds[level]), rng)
        if index is None:
            path[start:] = level
            return path, None, noise
        path[start : start + index] = level
        start += index  # re-ask at the same step with the next phase
        level += 1
        if level > plan.top_level:
            return path, start + 1, noise
    return path, None, noise


def auto_run(summaries, plan: AutoPlan, rng: np.random.Generator) -> dict:
    """Run "auto" on exact ``StreamSummaries``: estimates (int64), std,
    error_bound, path, baseline, ledger and ``noise`` (the records of its
    draws, charged to its ``budget_split`` labels)."""
    T = plan.horizon
    path, start, noise = _phase_path(summaries.over_counts, plan, rng)
    rest_step = plan.budget_split()[-1][0]  # trees and baseline share the filter's step
    ledger = PrivacyFilter(ZCDP(plan.rho_rest), as_written=False)  # binary values, as used
    estimates = np.zeros(T, dtype=np.int64)
    std = np.zeros(T, dtype=np.float64)
    bound = np.zeros(T, dtype=np.float64)
    for level in np.unique(path[path >= 0]).tolist():
        ledger.spend(ZCDP(plan.tree_rho[level]), label=f"{plan.counters[level]} w={1 << level}")
        chosen = path == level
        if plan.counters[level] == "factorized":
            release = factorized_counts(summaries.z_truncated[level], None, rng, flippancy_bound=1 << level,
                                        relation=plan.relation, step=rest_step, sigma2=plan.sigma2[level])
            noise += release.noise
        else:
            tree = BinaryTreeMechanism(T, sigma2=plan.sigma2[level])
            release = tree.batch(summaries.z_truncated[level], rng)
            noise += (tree.noise_record(rest_step, 1 << level, plan.relation),)
        estimates[chosen] = release.estimates[chosen]
        std[chosen] = release.std[chosen]
        truncation = 0.0 if (1 << level) >= T else float(plan.thresholds[level]) + plan.svt_alpha
        rounding = 0.5 if plan.counters[level] == "factorized" else 0.0  # its estimates are rounded
        bound[chosen] = release.std[chosen] * plan.quantile + truncation + rounding
    baseline = None
    if start is not None:
        baseline = BaselinePhase.plan(T, start, ledger.remaining.rho, plan.quantile, plan.max_step_change)
        ledger.spend(ZCDP(baseline.rho), label="recompute baseline")
        counts = np.cumsum(np.asarray(summaries.z, dtype=np.int64))
        steps = np.arange(start, T + 1, baseline.block)
        noisy = counts[steps - 1] + discrete_gaussian_batch(baseline.sigma2, steps.shape[0], rng)
        noise += (baseline_record(rest_step, baseline.sigma, int(steps.shape[0]),
                                  f"the distinct count every {baseline.block} steps from step {start}"),)
        which = (np.arange(start, T + 1) - start) // baseline.block
        estimates[start - 1 :] = noisy[which]
        std[start - 1 :] = baseline.sigma
        staleness = (np.arange(start, T + 1) - steps[which]) * (plan.max_step_change or 0)  # 0 when B = 1
        bound[start - 1 :] = baseline.sigma * plan.quantile + staleness
    return {"estimates": estimates, "std": std, "error_bound": bound, "path": path, "baseline": baseline,
            "ledger": ledger, "noise": noise}
