"""Continual distinct counts by one privately chosen counter: method "select" (batch).

A batch release sees the finished stream, so instead of switching counters along the way (the
sparse vector of "auto", Jain, Kalemaj, Raskhodnikova, Sivakumar, Smith, NeurIPS 2023,
Algorithm 3), it can choose *once*, privately, which single counter to run over all T steps and
give that counter almost the whole budget. The candidates (public, from T, ρ, β, relation):

- level j (flippancy bound w_j = 2^j): Algorithm 1 on the w_j-truncated stream with the counter
  of :func:`.auto.level_counter` (the factorized counter of :mod:`.factorized` or the binary tree,
  whichever has the smaller noise bound a_j). Its error at step t is its noise plus the truncation
  error |D(t) − D_{w_j}(t)| ≤ over_j := over_counts[j, T] (items whose flippancy exceeds w_j;
  a frozen item differs from its true presence only after its (w_j + 1)-th flip, and over_counts
  is non-decreasing in t). Levels whose a_j alone is not below the block-1 baseline's noise bound
  are dominated and left out;
- block B (powers of 4 up to T^(2/3)): the recompute baseline releasing D(t) every B steps (σ_B²
  = ⌈T/B⌉/(2ρ_c)). Its error at t is its noise plus the staleness
  s_B := max_t |D(t) − D(r_B(t))| (r_B(t) the last release step), measured, not assumed.

Steps and budget (ρ-zCDP in all, item level under ``relation``; every draw an exact discrete
Gaussian, CKS 2020):
1. Choice (ρ_sel = ``select_fraction``·ρ). The integer vector v = (over_j for each candidate level,
   s_B for each candidate block) plus N_Z(0, σ_sel²) per coordinate, σ_sel² = Δ_sel²/(2ρ_sel).
   One item changes each over_j by at most 1 (its indicator 1[f_u > w_j] is in {0, 1} in either
   input; other items are untouched) and each s_B by at most κ_B (D(t) − D(r) moves by
   e_u(t) − e_u(r) − (e'_u(t) − e'_u(r)): 1 under "item-removal" (e' ≡ 0), 2 under "subset"),
   so ‖Δv‖₂² ≤ Δ_sel² = #levels + κ_B²·#blocks and the noisy vector is ρ_sel-zCDP. The chosen
   candidate minimises its public noise bound (a_j, or σ_B·q) plus its noisy private term:
   post-processing.
2. Statement (ρ_est = ``estimate_fraction``·ρ). The chosen candidate's private term (over_ĵ or
   s_B̂, sensitivity 1 or κ_B) plus N_Z(0, σ_est²), σ_est² = sensitivity²/(2ρ_est): ρ_est-zCDP
   whichever was chosen (adaptive composition, Bun–Steinke 2016, Lemma 2.3). Its upper confidence
   bound u = max(0, value + σ_est·q₁) enters the error statement.
3. Counter (ρ_c = the rest). The chosen counter is ρ_c-zCDP on its input (a level's counter on
   the w-truncated stream: :mod:`.factorized` / :mod:`.tree`; a block's releases: one count of
   sensitivity 1 per release, ℓ2 √⌈T/B⌉).
The three compose to ρ_sel + ρ_est + ρ_c ≤ ρ. Releasing the choice, the estimates and the
statement is post-processing.

Error (probability ≥ 1 − β: β/2 to the counter's noise, union over T steps, q = sqrt(2 ln(2T/(β/2)));
β/2 to the one-sided statement, q₁ = sqrt(2 ln(2/β))): |err_t| ≤ std_t·q + u, plus 1/2 for the
factorized counter (its estimates are rounded); for a block, q is over its ⌈T/B⌉ releases (every
step reuses its release's draw). Discrete Gaussian noise is σ-subgaussian (CKS 2020), so the
Gaussian tail applies. Batch only: the choice reads the whole stream, which a streaming counter has
not seen yet (streams use "auto").
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dp_spark import checks as _checks
from dp_spark.accounting.exact import exact, float_down, remainder
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.continual_distinct.auto import baseline_record, level_counter, union_quantile
from dp_spark.mechanisms.continual_distinct.factorized import factorized_counts
from dp_spark.mechanisms.continual_distinct.relations import check_relation
from dp_spark.mechanisms.continual_distinct.tree import BinaryTreeMechanism
from dp_spark.noise.discrete_batch import discrete_gaussian_batch, rational_sigma2
from dp_spark.noise.records import NoiseDraw

__all__ = ["SelectPlan", "select_plan", "select_run", "staleness"]

#: ℓ∞ change of a block's staleness s_B under one item's neighbour (module docstring, step 1).
_STALENESS_SENSITIVITY = {"subset": 2, "item-removal": 1}


@dataclass(frozen=True)
class SelectPlan:
    """Public parameters of "select" (module docstring)."""

    horizon: int
    rho: float
    beta: float
    relation: str
    rho_select: float
    rho_estimate: float
    rho_counter: float
    levels: tuple[int, ...]  # candidate levels j (w = 2^j)
    level_counters: tuple[str, ...]
    level_sigma2: tuple[Fraction, ...]
    level_bounds: tuple[float, ...]  # a_j: largest noise std × q
    blocks: tuple[int, ...]
    block_sigma2: tuple[Fraction, ...]
    block_bounds: tuple[float, ...]  # σ_B × q_B, q_B over the block's ⌈T/B⌉ releases
    select_sigma2: Fraction
    quantile: float
    quantile_one: float

    @property
    def max_level(self) -> int:
        return max(self.levels, default=0)

    @property
    def staleness_sensitivity(self) -> int:
        return _STALENESS_SENSITIVITY[self.relation]

    @property
    def select_sensitivity2(self) -> int:
        return len(self.levels) + self.staleness_sensitivity**2 * len(self.blocks)

    def estimate_sigma2(self, kind: str) -> Fraction:
        sens = 1 if kind == "level" else self.staleness_sensitivity
        return rational_sigma2(Fraction(sens * sens) / (2 * Fraction(self.rho_estimate)))

    def budget_split(self) -> list[tuple[str, float]]:
        """The data-independent ledger (sums to ρ)."""
        return [
            (f"private choice among {len(self.levels)} flippancy bounds and {len(self.blocks)} recompute blocks "
             "(noisy truncation and staleness counts)", self.rho_select),
            ("noisy truncation or staleness count of the chosen counter (its error statement)", self.rho_estimate),
            ("the chosen counter (a truncated counter or the recompute baseline) over all steps", self.rho_counter),
        ]

    def to_dict(self) -> dict:
        return {
            "relation": self.relation,
            "rho_choice": self.rho_select,
            "rho_statement": self.rho_estimate,
            "rho_counter": self.rho_counter,
            "candidate_flippancy_bounds": [1 << j for j in self.levels],
            "candidate_counters": list(self.level_counters),
            "candidate_blocks": list(self.blocks),
            "sigma_choice": math.sqrt(self.select_sigma2),
            "quantile": self.quantile,
        }


def _blocks(horizon: int) -> tuple[int, ...]:
    """Powers of 4 up to T^(2/3) (the recompute baseline's best block grows like T^(1/3)..T^(2/3))."""
    top = horizon ** (2.0 / 3.0)
    return tuple(4**i for i in range(0, 64) if 4**i <= top)


def select_plan(horizon: int, rho: float, beta: float = 0.05, relation: str = "subset",
                select_fraction: float = 0.05, estimate_fraction: float = 0.05) -> SelectPlan:
    """Candidates, budget split and noise scales of "select" (public inputs only)."""
    T = _checks.horizon(horizon)
    rho = _checks.positive(rho, "rho")
    beta = _checks.open_unit(beta, "beta")
    relation = check_relation(relation)
    fs = _checks.open_unit(select_fraction, "select_fraction")
    fe = _checks.open_unit(estimate_fraction, "estimate_fraction")
    if fs + fe >= 1:
        raise ParameterError("select_fraction + estimate_fraction must be below 1")
    rho_sel = float_down(exact(fs) * exact(rho))
    rho_est = float_down(exact(fe) * exact(rho))
    rho_c = remainder(remainder(rho, rho_sel), rho_est)
    q = union_quantile(T, beta / 2.0)
    blocks = _blocks(T)
    block_sigma2 = tuple(rational_sigma2(Fraction(-(-T // b)) / (2 * Fraction(rho_c))) for b in blocks)
    block_bounds = tuple(math.sqrt(s) * union_quantile(-(-T // b), beta / 2.0) for s, b in zip(block_sigma2, blocks))
    levels, counters, sigma2, bounds = [], [], [], []
    for j in range(_checks.log2_exact(T) + 1):
        name, s2, a = level_counter(T, rho_c, 1 << j, relation, q)
        if a >= block_bounds[0]:  # dominated by the block-1 baseline (no truncation, no staleness)
            break
        levels.append(j)
        counters.append(name)
        sigma2.append(s2)
        bounds.append(a)
    plan = SelectPlan(T, rho, beta, relation, rho_sel, rho_est, rho_c, tuple(levels), tuple(counters),
                      tuple(sigma2), tuple(bounds), blocks, block_sigma2, block_bounds, Fraction(0), q,
                      math.sqrt(2.0 * math.log(2.0 / beta)))
    sel2 = rational_sigma2(Fraction(plan.select_sensitivity2) / (2 * Fraction(rho_sel)))
    return dataclasses.replace(plan, select_sigma2=sel2)


def staleness(counts: np.ndarray, block: int) -> int:
    """s_B = max_t |D(t) − D(r_B(t))|, r_B(t) = the last release step ≤ t (releases at 1, 1+B, …)."""
    T = counts.shape[0]
    released = np.arange(T) // block * block
    return int(np.max(np.abs(counts - counts[released])))


def select_run(summaries, plan: SelectPlan, rng: np.random.Generator) -> dict:
    """Run "select" on exact ``StreamSummaries``: estimates (int64), std, error_bound, the choice,
    its stated truncation/staleness bound, and ``noise`` (records charged to ``budget_split``)."""
    if plan.max_level > summaries.max_level:
        raise ParameterError(f"method 'select' needs summaries up to max_level {plan.max_level}; recompute them "
                             "with a larger max_level")
    T = plan.horizon
    steps = [label for label, _ in plan.budget_split()]
    counts = np.cumsum(np.asarray(summaries.z, dtype=np.int64))
    private = [int(summaries.over_counts[j, T - 1]) for j in plan.levels]
    private += [staleness(counts, b) for b in plan.blocks]
    noisy = np.asarray(private, dtype=np.int64) + discrete_gaussian_batch(plan.select_sigma2, len(private), rng)
    public = np.asarray(plan.level_bounds + plan.block_bounds, dtype=np.float64)
    choice = int(np.argmin(public + noisy))  # post-processing of the noisy vector; ties: the first
    noise = [NoiseDraw(steps[0], "discrete-gaussian", scale=math.sqrt(plan.select_sigma2),
                       std=math.sqrt(plan.select_sigma2), sensitivity=math.sqrt(plan.select_sensitivity2),
                       draws=len(private), target="truncation counts per flippancy bound and staleness per block",
                       parameters={"norm": 2, "role": "choice"})]
    is_level = choice < len(plan.levels)
    kind = "level" if is_level else "block"
    est_sigma2 = plan.estimate_sigma2(kind)
    value = private[choice] + int(discrete_gaussian_batch(est_sigma2, 1, rng)[0])
    est_sigma = math.sqrt(est_sigma2)
    noise.append(NoiseDraw(steps[1], "discrete-gaussian", scale=est_sigma, std=est_sigma,
                           sensitivity=float(1 if is_level else plan.staleness_sensitivity), draws=1,
                           target="the chosen counter's truncation or staleness count",
                           parameters={"norm": 2, "role": "statement"}))
    stated = max(0.0, value + est_sigma * plan.quantile_one)
    if is_level:
        j = plan.levels[choice]
        w = 1 << j
        if plan.level_counters[choice] == "factorized":
            release = factorized_counts(summaries.z_truncated[j], None, rng, flippancy_bound=w,
                                        relation=plan.relation, step=steps[2], sigma2=plan.level_sigma2[choice])
            noise += release.noise
        else:
            tree = BinaryTreeMechanism(T, sigma2=plan.level_sigma2[choice])
            release = tree.batch(summaries.z_truncated[j], rng)
            noise.append(tree.noise_record(steps[2], w, plan.relation))
        estimates, std, q = release.estimates, release.std, plan.quantile
        rounding = 0.5 if plan.level_counters[choice] == "factorized" else 0.0  # its estimates are rounded
        chosen = {"flippancy_bound": w, "counter": plan.level_counters[choice], "truncation_bound": stated}
    else:
        index = choice - len(plan.levels)
        block, sigma2 = plan.blocks[index], plan.block_sigma2[index]
        release_steps = np.arange(1, T + 1, block)
        drawn = counts[release_steps - 1] + discrete_gaussian_batch(sigma2, release_steps.shape[0], rng)
        noise.append(baseline_record(steps[2], math.sqrt(sigma2), int(release_steps.shape[0]),
                                     f"the distinct count every {block} steps"))
        estimates = drawn[np.arange(T) // block]
        std = np.full(T, math.sqrt(sigma2))
        q = union_quantile(int(release_steps.shape[0]), plan.beta / 2.0)  # one draw per release, reused until the next
        rounding = 0.0
        chosen = {"block": block, "counter": "recompute baseline", "staleness_bound": stated}
    return {"estimates": np.asarray(estimates, dtype=np.int64), "std": np.asarray(std, dtype=np.float64),
            "error_bound": np.asarray(std, dtype=np.float64) * q + stated + rounding, "choice": chosen,
            "noise": tuple(noise)}
