"""Multi-round exact weighted Gaussian set union (DP-SIPS), mechanism layer: its constants, its proof
and a numpy reference run.

The scheme of Swanberg, Desfontaines, Haney, "DP-SIPS: A simpler, more scalable mechanism for
differentially private partition selection" (arXiv 2301.01998): run the plain weighted set union
several times, removing the items already released from every person's set before each round and
giving the later rounds the larger share of the budget. Each round here is the exact weighted
Gaussian of :mod:`.discrete` (Gopi et al., ICML 2020, Appendix D, with the discrete Gaussian of
Canonne, Kamath, Steinke, NeurIPS 2020), so every constant is an integer and every draw exact.

Released: R_1 ∪ … ∪ R_k, where round i, given the items released so far R_<i (public: DP output),
lets each person p keep K_p^i, the first Δ0 items of S_p \\ R_<i in the order of a salted hash of
(p, item) with the round's salt (all of them if fewer), builds the weighted-Gaussian histogram H_i
of the K_p^i (each kept item gets ⌊2^30/√|K_p^i|⌋ units) and releases
R_i = {u ∈ supp(H_i) : X_i[u] + Z_i[u] > R_i}, X_i = ⌊H_i·2^g⌋, Z_i[u] ~ N_Z(0, s_i²) fresh, with
the constants of :func:`.discrete.plan_discrete_round` at (ρ_i, δ_t,i).

Constants. δ_n = δ/2, δ_t = δ − δ_n; ρ_n the largest ρ whose zCDP converts to (ε, δ_n) (CKS 2020,
§2.3, Corollary 13, as :mod:`.discrete`); ρ_i = λ_i·ρ_n rounded down, λ = :data:`SIPS_SHARES`;
δ_t,i = δ_t/k rounded down (λ exact fractions). Checked exactly (Fractions): Σ_i Δ²/(2s_i²) <= ρ_n, Σ_i δ_t,i <= δ_t.

Guarantee: (ε, δ)-DP for adding or removing one person. Proof. Let D' = D plus person y; fix the
salts (the proof holds for every salt).
(1) One round, fixed history. Fix h = R_<i. Every other person's kept set K_p^i(h) is a function of
    its own rows, the salt and h only, so it is the same under D and D'; H_i(D', h) − H_i(D, h) is
    y's own vector (a_t units on each of its t <= Δ0 kept items). This is exactly the neighbouring
    pair of :mod:`.discrete`: on C_i(h) = supp(H_i(D, h)) the noisy grid vector is ρ_i-zCDP
    (step (1) there, s_i² >= Δ²/(2ρ_i)), and an item of T_i(h) = supp(H_i(D', h)) \\ C_i(h) (kept
    by y alone this round) is released with probability at most δ_t,i in all (step (2) there).
(2) The shadow run. Let G be M(D') with round i's release restricted to C_i(h) for every h (the
    items of T_i(h) dropped). Let B be the event that M(D') releases an item of some T_i(h). On ¬B
    the two runs see the same history every round and coincide; their noises on T_i(h) are
    independent of everything G sees, and each round's bound holds for every history, so
    P[B] <= Σ_i δ_t,i <= δ_t.
(3) G(D') against M(D). Given the same history, round i of both applies the same threshold on
    C_i(h) to two discrete Gaussian vectors whose means differ by y's grid vector: Rényi divergence
    of order α at most α·ρ_i both ways. Adaptive composition of zCDP over the rounds (Bun, Steinke,
    "Concentrated Differential Privacy", TCC 2016, the composition lemma) bounds the whole transcript by α·Σρ_i <= α·ρ_n both ways, and the
    conversion gives P[G(D') ∈ O] <= e^ε·P[M(D) ∈ O] + δ_n and the reverse.
(4) Both directions, as :mod:`.discrete`, step (3), with q = P[B] <= δ_t: P[M(D') ∈ O] <=
    e^ε·P[M(D) ∈ O] + δ_n + δ_t; and P[M(D) ∈ O] <= e^ε·P[M(D') ∈ O] + δ_n + δ_t (with
    a = P[G(D') ∈ O], P[M(D') ∈ O] >= (1 − q)·a; if e^ε·a <= 1 then e^ε·a <= e^ε·(1 − q)·a + q,
    otherwise the right side exceeds 1).
The only channel between persons is the kept-set choice, and it goes through released items: the
sensitivity of every round is y's own vector, as in the single round.

On Spark the rounds are :func:`dp_spark.stages.set_union.rounds_items_of_edges` (each round the
exact weighted-Gaussian stage and threshold step of the grouped releases' private key step);
:func:`sips_release` is the numpy reference the tests and the audit run. With one share (1,) it is exactly :func:`.discrete.plan_discrete_set_union`'s mechanism.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Sequence

import numpy as np

from dp_spark.accounting.exact import exact, ratio_down
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.set_union.discrete import (
    EXACT_POLICY,
    DiscreteSetUnionPlan,
    discrete_release_mask,
    plan_discrete_round,
    zcdp_for_dp,
)
from dp_spark.noise.records import NoiseDraw
from dp_spark.summaries.set_union import UNIT, person_units

__all__ = ["SIPS", "SIPS_SHARES", "SipsPlan", "plan_sips", "kept_sets", "sips_release"]

#: The method's name.
SIPS = "sips"
#: The rounds' shares of ρ_n: a small first round clears the frequent items, the last gets the most.
SIPS_SHARES = (Fraction(1, 10), Fraction(9, 10))


@dataclass(frozen=True)
class SipsPlan:
    """Every public constant of one multi-round run: the rounds' exact plans (:func:`plan_sips`)."""

    epsilon: float
    delta: float
    max_items: int
    noise_rho: float
    noise_delta: float
    threshold_delta: float
    shares: tuple[Fraction, ...]
    rounds: tuple[DiscreteSetUnionPlan, ...]
    method: str = SIPS
    noise: str = "discrete-gaussian"
    gamma: float | None = None

    @property
    def scale(self) -> float:
        """σ of the last round (the largest share), in weight units."""
        return self.rounds[-1].scale

    @property
    def rho(self) -> float:
        """The last round's threshold, in weight units."""
        return self.rounds[-1].rho

    @property
    def noise_records(self) -> tuple[NoiseDraw, ...]:
        """One record per round (one exact discrete Gaussian draw per item of its histogram)."""
        k = len(self.rounds)
        return tuple(replace(r.noise_record, target=f"round {i + 1} of {k}: each item's histogram weight "
                             "(released if above the round's threshold)") for i, r in enumerate(self.rounds))

    def release_probability(self, weight: float) -> float:
        """P[an item of this weight in every round is released by some round]: 1 − Π_i (1 − p_i)."""
        return float(1.0 - np.prod([1.0 - r.release_probability(weight) for r in self.rounds]))

    def weight_for(self, probability: float) -> float:
        """A weight at which the last round alone releases an item with at least ``probability``."""
        return self.rounds[-1].weight_for(probability)


def plan_sips(epsilon: float, delta: float, max_items: int,
              shares: Sequence[Fraction] = SIPS_SHARES) -> SipsPlan:
    """The rounds' constants at (ε, δ), Δ0 = ``max_items`` (module docstring). Public parameters
    only; ParameterError outside ε > 0, 0 < δ < 1, Δ0 >= 1, shares > 0 summing to at most 1."""
    epsilon, delta = float(epsilon), float(delta)
    if isinstance(max_items, bool) or not isinstance(max_items, (int, np.integer)) or int(max_items) < 1:
        raise ParameterError(f"max_items must be a whole number >= 1; got {max_items!r}")
    if not (math.isfinite(epsilon) and epsilon > 0 and 0.0 < delta < 1.0):
        raise ParameterError("the multi-round set union needs epsilon > 0 and 0 < delta < 1")
    shares = tuple(Fraction(x) for x in shares)
    if not shares or any(not x > 0 for x in shares) or sum(shares) > 1:
        raise ParameterError("shares must be positive and sum to at most 1")
    max_items = int(max_items)
    noise_delta = delta / 2.0
    threshold_delta = float(exact(delta) - exact(noise_delta))
    if noise_delta <= 0.0:
        raise ParameterError(f"delta = {delta:g} is too small to split")
    noise_rho = zcdp_for_dp(epsilon, noise_delta)
    k = len(shares)
    round_delta = ratio_down(threshold_delta, k)
    rounds = []
    for share in shares:
        rho_i = float(share * exact(noise_rho))
        while exact(rho_i) > share * exact(noise_rho):  # rounded down: never more than the share
            rho_i = math.nextafter(rho_i, 0.0)
        rounds.append(plan_discrete_round(epsilon, delta, max_items, rho_i, noise_delta, round_delta))
    spent = sum(Fraction(r.l2_squared) / (2 * r.sigma * r.sigma) for r in rounds)
    if spent > exact(noise_rho) or k * exact(round_delta) > exact(threshold_delta):
        raise ParameterError("the rounds' constants exceed the budget")  # a defect: never for valid input
    return SipsPlan(epsilon=epsilon, delta=delta, max_items=max_items, shares=shares, rounds=tuple(rounds),
                    noise_rho=noise_rho, noise_delta=noise_delta, threshold_delta=threshold_delta)


def kept_sets(sets: Sequence[Sequence[int]], released: set[int], max_items: int,
              rank: np.ndarray) -> list[list[int]]:
    """K_p: the first Δ0 items of each person's set minus the released items, in the order of
    ``rank`` (a public per-item key standing for the round's salted hash; ties by item)."""
    out = []
    for s in sets:
        left = sorted((u for u in set(s) if u not in released), key=lambda u: (rank[u], u))
        out.append(left[:max_items])
    return out


def round_histogram(kept: Sequence[Sequence[int]], n_items: int) -> np.ndarray:
    """The weighted-Gaussian histogram of the kept sets, in whole units of 2^-30 (int64)."""
    units = np.zeros(n_items, dtype=np.int64)
    for s in kept:
        if s:
            units[np.asarray(s, dtype=np.int64)] += person_units(EXACT_POLICY, len(s))
    return units


def sips_release(sets: Sequence[Sequence[int]], n_items: int, plan: SipsPlan, rng: np.random.Generator,
                 ranks: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """The numpy reference run (module docstring) over persons' item sets (codes < ``n_items``):
    the mask of the released items. ``ranks[i]``: round i's item order (default: the identity)."""
    released: set[int] = set()
    out = np.zeros(n_items, dtype=bool)
    for i, round_plan in enumerate(plan.rounds):
        rank = ranks[i] if ranks is not None else np.arange(n_items)
        hist = round_histogram(kept_sets(sets, released, plan.max_items, rank), n_items)
        mask = discrete_release_mask(hist.astype(np.float64) * UNIT, round_plan, rng)
        out |= mask
        released |= set(np.flatnonzero(mask).tolist())
    return out
