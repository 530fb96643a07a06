"""Continual release of distinct counts: the driver-side mechanisms (numpy only).

Jain, Kalemaj, Raskhodnikova, Sivakumar, Smith, "Counting Distinct Elements in
the Turnstile Model with Differential Privacy under Continual Observation"
(NeurIPS 2023, arXiv 2306.06723). Input: the exact ``StreamSummaries`` of a
stream (``dp_spark.summaries.continual_distinct``); output: one private estimate of the
number of present items D(t) per step t = 1..T.

Guarantee: item-level ρ-zCDP under ``relation``: "subset" (default; the
paper's Definition 1.2: any subset of one item's events replaced by no-ops) or
"item-removal" (all events of one item; narrower). Sensitivities and their
proofs are in :mod:`.relations`: the tree's node vector moves by
ℓ2² ≤ κ·w·L (κ = 4 for "subset", 1 for "item-removal"), sparse-vector queries
and counts by ≤ 1 under both; every σ² below carries κ. All noise is exact
integer noise (discrete Gaussian and discrete Laplace, Canonne–Kamath–Steinke
2020) on integer statistics: estimates are integers; ``std`` and
``error_bound`` are floats.

Mechanisms (``method=`` in ``continual_counts``):

"select" (``DEFAULT_METHOD``, batch only) — one counter (Algorithm 1 at a
    flippancy bound 2^j, or the recompute baseline at a block B) chosen
    privately from the finished stream by its noise bound plus a noisy
    truncation or staleness count, which a second noisy count then states;
    the chosen counter gets 90 % of ρ. Proof and error statement in
    :mod:`.select`.

"auto" (``DEFAULT_STREAM_METHOD``, the online default) — lazy counters under
    a zCDP filter, then the recompute baseline past the crossover; needs no
    flippancy bound; proof in :mod:`.auto`. The levels are planned by the
    trees' crossover rule; each runs the counter with the smaller noise bound
    (factorized or tree; ``level_counter``; online the factorized counter is
    the streaming BLT counter). When no tree can beat the baseline at the
    public parameters (T, ρ, β, relation) it *is* the baseline.

"bounded" — Algorithm 1 (given flippancy bound w): ``BinaryTreeMechanism``
    on the w-truncated difference stream z_w[t] = Σ_u ẽ_u(t) − ẽ_u(t−1),
    σ² = κ·w·L/(2ρ), L = log2(T) + 1: the node vector moves by ℓ2² ≤ κ·w·L
    (:mod:`.relations` (a)), so ρ-zCDP. Error: each estimate's noise is
    N(0, popcount(t)·σ²) (``std``); with probability ≥ 1 − β all
    |noise_t| ≤ std_t·sqrt(2 ln(2T/β)) (union bound), which bounds the error
    when every item flips at most w times (else add the number of items that
    flip more; not released). w is rounded up to a power of two (the
    summaries' truncation levels).
    ``counter="factorized"`` runs the square-root factorized counter of
    :mod:`.factorized` on the same w-truncated stream instead of the tree:
    y = Ř z_w + N_Z(0, σ̌²)^T with σ̌² = B/(2ρ) (rounded up), B the exact integer
    ℓ2² sensitivity of Ř z_w (U(w), Lemma A, for "item-removal"; min(4U, V),
    Lemmas B and C, for "subset"), so ρ-zCDP; the estimates round(A Ř^(−1) y)
    are post-processing. Error: each estimate's noise has variance at most
    σ̌²·S_ℓ̌(t) (``std``, increasing in t), is sub-Gaussian with that
    variance proxy (a linear map of independent discrete Gaussians, CKS 2020),
    and the rounding adds at most 1/2: with probability ≥ 1 − β all
    |error_t| ≤ std_t·sqrt(2 ln(2T/β)) + 1/2, under the same flippancy
    assumption. Grouped runs: its own factor (see "Groups").

"adaptive" — Algorithm 3 (no flippancy bound): counters M_j for w_j = 2^j,
    j = 0..J (J = ``summaries.max_level``), on the whole stream, each at
    ρ_tree = (1 − f)·ρ/(J + 1) — per level the binary tree or the factorized
    counter, whichever has the smaller noise bound at the public
    (T, ρ_tree, w_j, relation) (``level_counter="best"``, the default; online
    the factorized counter is the streaming BLT counter); a sparse vector (ρ_svt = f·ρ, cutoff J) on
    q_t = over_counts[j, t] − τ_j (sensitivity 1). From j = 0, each step asks
    the query for the current j; "above" sets j ← j + 1 and asks again at the
    same step, until "below" or j = J; the estimate at t is M_j's. Default
    f = 1/2 (ALGORITHMS.md §4.4 [RECALL]: the paper's split is not legible in
    the seed); τ_j = s·a_j (our choice), a_j = σ_j·sqrt(L)·sqrt(2 ln(4T(J+1)/β))
    the simultaneous (β/2) bound of a tree M_j (a factorized M_j: its largest
    per-step std σ̌_j·√(S_ℓ̌(T)) in place of σ_j·√L), s = ``threshold_scale``
    (default 1).
    Privacy: composition, (J+1)·ρ_tree + ρ_svt = ρ; the level path depends on
    the sparse-vector answers only, so it (``flippancy_bound``) may be
    released. Error (probability ≥ 1 − β, β/2 each): while j(t) < J,
    |error_t| ≤ std_t·sqrt(2 ln(4T(J+1)/β)) + τ_j + α_svt (+ 1/2, the
    rounding, at a factorized level), α_svt the sparse
    vector's accuracy (at "below", fewer than τ_j + α_svt items flip more than
    w_j, and only they are truncated); at j(t) = J the truncation term is 0 if
    2^J ≥ T, else unbounded (inf).

"baseline" — the comparison of the paper's Theorem 3.10 (Jain,
    Raskhodnikova, Sivakumar, Smith, ICML 2023), implemented as periodic
    recompute (ALGORITHMS.md §4.5 [RECALL]): at r = 1, 1+B, 1+2B, … release
    D(r) + N(0, s²), held until the next release. D(r) moves by at most 1, so
    the m = ⌈T/B⌉ releases have ℓ2² ≤ m and s² = m/(2ρ) gives ρ-zCDP. The
    default B minimises (B − 1) + s_B·sqrt(2 ln(2m/β)) (public). Error with
    probability ≥ 1 − β: ≤ s·sqrt(2 ln(2m/β)) + (t − r(t))·Δ, ``error_bound``
    taking Δ = 1 (one update per step, the paper's model; several events per
    step can exceed it).

Groups — a release grouped by ``group_by`` runs one independent counter
(:func:`continual_counts`) per public group key on that group's stream, after
each ITEM's events are capped to at most m of its groups (the first m in a
fixed public hash order of (item, group); a per-item transformation, done by
the Spark stage). Ungrouped is the one-group run: factor 1, the whole ρ.

Guarantee: item-level ρ-zCDP for all groups' series together, under the
release's relation. Proof. Let D' be D with a subset of item x's events
removed; the cap keeps x's groups G (of D) and G' (of D'), |G|, |G'| <= m,
and every other item's capped events are identical. In group g the two
streams differ only in x's events there, and:
- g in G ∩ G': x's events E'_g ⊆ E_g: a *subset* pair of group g's stream;
- g in G \\ G': D has all of x's events E_g, D' none: an *item-removal* pair;
- g in G' \\ G: D' has all of x's (remaining) events E'_g, D none: an
  item-removal pair (a group enters G' only because groups ranked before it
  lost all of x's events);
- any other g: identical streams.
So with k = |G ∩ G'| at most k subset pairs and 2(m − k) item-removal pairs
change — up to 2m groups (m = 1: x's events in a and b, a kept; remove
x's a-events and b is kept instead). Each counter is ρ_g-zCDP under either
relation, with independent noise, so the series are
(k + 2(m − k))·ρ_g ≤ 2m·ρ_g-zCDP: ``ρ_g = ρ/(2m)`` (:func:`group_factor` 2m)
for "select", "auto", "adaptive" and "baseline". "bounded" (trees only) needs less: a
tree is calibrated to ℓ2² ≤ 4·w·L under "subset" and moves by ℓ2² ≤ w·L under
item-removal, so the changed groups' trees add up to
ℓ2² ≤ k·4wL + 2(m − k)·wL ≤ m·4wL and ``ρ_g = ρ/m`` suffices (factor m).
Checked on random neighbours in tests/unit/test_continual_groups.py.
The factorized counter ("bounded", ``counter="factorized"``) has its own
factor, from public (T, w) only (:func:`factorized_group_factor`). Each
group's counter is calibrated to B = B_ř(w) = min(4U, V), the exact integer
bound on ‖ŘΔ‖² for a subset pair of its stream (:mod:`.factorized`,
Lemmas B and C); an item-removal pair moves it by ‖ŘΔ‖² ≤ U = U_ř(w)
(Lemma A), so it costs U/B of the group's ρ_g (the zCDP cost of the discrete
Gaussian is ‖ŘΔ‖²/(2σ̌²) with σ̌² ≥ B/(2ρ_g)). The changed groups cost at most
(k + 2(m − k)·U/B)·ρ_g ≤ max(m, 2m·U/B)·ρ_g (linear in k ∈ [0, m]; design
notes of issue 38, §2.4), and the factor is max(m, ⌈2m·U/B⌉). For w ≥ 2,
B > 2U (B = 4U at large T; 2U/B ≈ 0.5–0.6 at w = 2, and at w = 4 for T <= 128)
and the factor is m; at w = 1
(B = V = 2·S(T/2), U = S(T)) 2U/B ≈ 1.05–1.15 (T = 2^16 down to 8) and
the factor is ⌈2m·U/B⌉ > m: the tree's m would not be enough there. Every
changed group costs at most ρ_g (U ≤ B, checked), so with G public keys the
factor is also at most G.

Fewer groups: with G public keys at most min(2m, G) counters change (every
changed group is one of the G keys), so the factor is min(2m, G) (for
"bounded", min(m, G): the changed trees sum to ≤ min(m, G)·4wL). G is the
number of public keys, never a count from the data.

Rounding: the chain from the charge to the noise. The plan charges ρ (the
budget of the release's ``local`` filter, which counts binary values exactly:
``PrivacyFilter(..., as_written=False)``, :func:`dp_spark.accounting.filter.fits`).
Each group's counter runs at ρ_g (:func:`group_rho`) and splits it into the
parts p_1..p_n of ``budget_split`` (Σ p_i <= ρ_g exactly); its noise at part
i is calibrated to p_i (σ² >= Δ²/(2·p_i), rounded up onto the sampler's
grid), so step i costs at most factor·p_i. The grouped step i is charged c_i
(:func:`grouped_budget_split`), and the chain needs, exactly:

(a) c_i >= factor·p_i for every i: no step spends more than it is charged;
(b) Σ c_i <= ρ: the steps fit the local filter and the guarantee.

c_i = factor·p_i rounded UP gives (a). For (b), ρ_g leaves room for that
rounding: for a float x >= 2^-1022, float_up(x) < x + ulp(x) <= x·(1 + 2^-52),
so Σ float_up(factor·p_i) <= factor·ρ_g·(1 + 2^-52) <= ρ with ρ_g the largest
float at or below ρ / (factor·(1 + 2^-52)). A power-of-two factor needs no
room: factor·p_i is then a float, and ρ_g = ρ/factor rounded down. Given the
total ρ, the last step is charged what is left of it (``remainder``): by (b)
that is at least float_up(factor·p_n), so (a) holds for it too. Both are
checked exactly (:class:`fractions.Fraction`) whenever the split is made, and
a violation is refused before anything is read.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from dp_spark.accounting.exact import exact, float_down, float_up, remainder, share_down
from dp_spark import checks as _checks
from dp_spark.summaries.continual_distinct import StreamSummaries
from dp_spark.mechanisms.continual_distinct.auto import AUTO_COUNTERS, auto_plan, auto_run, baseline_record, level_counter
from dp_spark.mechanisms.continual_distinct.factorized import factorized_counts
from dp_spark.mechanisms.continual_distinct.factorized import sensitivity2 as factorized_sensitivity2
from dp_spark.mechanisms.continual_distinct.factorized import sigma2_for_flippancy as factorized_sigma2
from dp_spark.mechanisms.continual_distinct.select import select_plan, select_run
from dp_spark.mechanisms.continual_distinct.svt import SparseVector
from dp_spark.mechanisms.continual_distinct.relations import DEFAULT_RELATION, check_relation, relation_statement, sensitivity_factor
from dp_spark.mechanisms.continual_distinct.tree import (
    BinaryTreeMechanism,
    integer_vector,
    nodes_per_step,
    num_levels,
    sigma_for_flippancy,
)
from dp_spark.errors import ParameterError
from dp_spark.noise.discrete_batch import discrete_gaussian_batch, rational_sigma2
from dp_spark.noise.rng import check_rng

__all__ = [
    "MECHANISMS",
    "COUNTERS",
    "DEFAULT_COUNTER",
    "ContinualResult",
    "AdaptivePlan",
    "RecomputePlan",
    "adaptive_plan",
    "recompute_plan",
    "round_up_flippancy",
    "continual_counts",
    "budget_split",
    "DEFAULT_METHOD",
    "DEFAULT_STREAM_METHOD",
    "counts_by_group",
    "group_factor",
    "group_rho",
    "grouped_budget_split",
    "grouped_label",
    "bounded_label", "svt_label", "tree_label", "baseline_label",
    "check_counter",
    "factorized_group_factor",
    "merged_records",
]

MECHANISMS = ("auto", "select", "adaptive", "bounded", "baseline")
#: The default of a batch release ("select" reads the finished stream) and of the online counter.
DEFAULT_METHOD = "select"
DEFAULT_STREAM_METHOD = "auto"
#: The counters "bounded" can run on the w-truncated stream: the binary tree (Algorithm 1 as written)
#: or the square-root factorized counter (:mod:`.factorized`, issue 38).
COUNTERS = ("tree", "factorized")
DEFAULT_COUNTER = "tree"


@dataclass(frozen=True)
class ContinualResult:
    """Private continual distinct counts and their error statements.

    Attributes (position t−1 is step t):
        method: "bounded", "adaptive" or "baseline".
        horizon: T.
        rho: the zCDP budget spent (item-level ρ-zCDP).
        estimates: the released estimates of D(t).
        std: standard deviation of the Gaussian noise in each estimate (given
            the released level path for "adaptive").
        error_bound: a bound holding simultaneously for all t with probability
            ≥ 1 − β, under the assumptions in ``notes`` (inf where none holds).
        beta: that failure probability.
        flippancy_bound: the w used at each step ("bounded": constant;
            "adaptive": the sparse vector's public level path; "baseline": None).
        parameters: the mechanism's parameters (budget split, σ's, thresholds).
        notes: plain-language assumptions behind ``error_bound``.
        noise: one record per privacy draw batch, in the order drawn (the
            sparse vector, each tree that ran, the recompute baseline), each
            charged to its ``budget_split`` label; public values only.
    """

    method: str
    horizon: int
    rho: float
    estimates: np.ndarray
    std: np.ndarray
    error_bound: np.ndarray
    beta: float
    flippancy_bound: np.ndarray | None
    parameters: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    relation: str = DEFAULT_RELATION
    noise: tuple = ()

    def to_dict(self) -> dict:
        """JSON-friendly form (lists of floats; inf bounds become None)."""

        def floats(array: np.ndarray) -> list:
            return [float(v) if math.isfinite(v) else None for v in np.asarray(array, dtype=np.float64)]

        return {
            "method": self.method,
            "privacy_unit": relation_statement(self.relation),
            "relation": self.relation,
            "rho": self.rho,
            "horizon": self.horizon,
            "beta": self.beta,
            "estimates": [int(v) for v in np.asarray(self.estimates, dtype=np.int64)],
            "std": floats(self.std),
            "error_bound": floats(self.error_bound),
            "flippancy_bound": None if self.flippancy_bound is None else [int(v) for v in self.flippancy_bound],
            "parameters": self.parameters,
            "notes": list(self.notes),
        }


def round_up_flippancy(max_flippancy: int) -> int:
    """Smallest power of two ≥ max_flippancy (the truncation levels are powers of two)."""
    w = _checks.integer(max_flippancy, "max_flippancy", 1)
    return 1 << (w - 1).bit_length()


@dataclass(frozen=True)
class AdaptivePlan:
    """Parameters of Algorithm 3 derived from public inputs only."""

    horizon: int
    max_level: int
    rho: float
    rho_tree: float
    rho_svt: float
    cutoff: int
    sigmas: np.ndarray
    thresholds: np.ndarray
    tree_quantile: float
    svt_alpha: float
    beta: float
    counters: tuple[str, ...] = ()  # per level: "tree" or "factorized" (:func:`.auto.level_counter`)
    sigma2: tuple[Fraction, ...] = ()  # per level: the counter's exact σ² (count units)

    def counter(self, level: int) -> str:
        return self.counters[level] if self.counters else "tree"

    def to_dict(self) -> dict:
        return {
            "max_level": self.max_level,
            "rho_per_tree": self.rho_tree,
            "rho_sparse_vector": self.rho_svt,
            "sparse_vector_cutoff": self.cutoff,
            "sigma_per_level": [float(s) for s in self.sigmas],
            "counter_per_level": [self.counter(j) for j in range(self.max_level + 1)],
            "thresholds": [float(s) for s in self.thresholds],
            "tree_quantile": self.tree_quantile,
            "sparse_vector_alpha": self.svt_alpha,
        }


def adaptive_plan(
    horizon: int,
    max_level: int,
    rho: float,
    beta: float = 0.05,
    svt_fraction: float = 0.5,
    threshold_scale: float = 1.0,
    relation: str = DEFAULT_RELATION,
    counter: str = "tree",
    online: bool = False,
) -> AdaptivePlan:
    """Budget split, per-level counter, σ_j and thresholds τ_j of Algorithm 3 (see module doc).

    ``counter``: each level's counter, "tree" (default: Algorithm 3 as published), "factorized" or
    "best" (the smaller noise bound at the public (T, ρ_tree, 2^j, relation):
    :func:`.auto.level_counter`; ``online``: the factorized counter is the streaming BLT counter).
    τ_j = s·a_j, a_j the counter's largest per-step std × q."""
    horizon = _checks.horizon(horizon)
    top = _checks.log2_exact(horizon)
    max_level = _checks.integer(max_level, "max_level", 0, top)
    rho = _checks.positive(rho, "rho")
    beta = _checks.open_unit(beta, "beta")
    svt_fraction = _checks.open_unit(svt_fraction, "svt_fraction")
    threshold_scale = _checks.positive(threshold_scale, "threshold_scale")
    levels = num_levels(horizon)
    cutoff = max_level  # j can only be raised J times
    if cutoff == 0:
        rho_svt, rho_tree = 0.0, rho  # nothing to switch: one tree, all the budget
    else:
        rho_svt = svt_fraction * rho
        rho_tree = share_down(remainder(rho, rho_svt), max_level + 1)  # shares sum to <= rho exactly
    if counter not in AUTO_COUNTERS:
        raise ParameterError(f"counter must be one of {', '.join(AUTO_COUNTERS)}, got {counter!r}")
    tree_quantile = math.sqrt(2.0 * math.log(4.0 * horizon * (max_level + 1) / beta))
    # (counter, exact σ², a_j) per level; a tree's σ² is tree.sigma2_for_flippancy's, a_j = σ_j·√L·q
    chosen = [level_counter(horizon, rho_tree, 1 << j, relation, tree_quantile, counter, online)
              for j in range(max_level + 1)]
    sigmas = np.array([math.sqrt(s2) for _, s2, _ in chosen])
    thresholds = threshold_scale * np.array([a for _, _, a in chosen])
    if cutoff:
        svt = SparseVector(rho_svt, cutoff)
        svt_alpha = svt.alpha(horizon + cutoff, beta / 2.0)
    else:
        svt_alpha = 0.0
    return AdaptivePlan(
        horizon, max_level, rho, rho_tree, rho_svt, cutoff, sigmas, thresholds, tree_quantile, svt_alpha, beta,
        tuple(name for name, _, _ in chosen), tuple(s2 for _, s2, _ in chosen),
    )


@dataclass(frozen=True)
class RecomputePlan:
    """Parameters of the periodic-recompute baseline (public inputs only)."""

    horizon: int
    rho: float
    block: int
    releases: int
    sigma: float
    quantile: float
    beta: float

    def release_steps(self) -> np.ndarray:
        """Steps r = 1, 1+B, 1+2B, … at which a fresh noisy count is released."""
        return np.arange(1, self.horizon + 1, self.block, dtype=np.int64)

    @property
    def sigma2(self) -> Fraction:
        """The exact σ² = m/(2ρ) of the discrete Gaussian (rounded up on the sampler's grid)."""
        return rational_sigma2(Fraction(self.releases) / (2 * Fraction(self.rho)))

    def to_dict(self) -> dict:
        return {"block": self.block, "releases": self.releases, "sigma": self.sigma, "quantile": self.quantile}


def recompute_plan(horizon: int, rho: float, beta: float = 0.05, block: int | None = None) -> RecomputePlan:
    """Block length B, number of releases m = ⌈T/B⌉ and s = sqrt(m/(2ρ))."""
    horizon = _checks.horizon(horizon)
    rho = _checks.positive(rho, "rho")
    beta = _checks.open_unit(beta, "beta")
    if block is None:
        blocks = np.arange(1, horizon + 1, dtype=np.float64)
        releases = np.ceil(horizon / blocks)
        bound = (blocks - 1) + np.sqrt(releases / (2 * rho)) * np.sqrt(2 * np.log(2 * releases / beta))
        block = int(blocks[int(np.argmin(bound))])
    else:
        block = _checks.integer(block, "block", 1, horizon)
    releases = -(-horizon // block)
    sigma = math.sqrt(rational_sigma2(Fraction(releases) / (2 * Fraction(rho))))
    quantile = math.sqrt(2.0 * math.log(2.0 * releases / beta))
    return RecomputePlan(horizon, rho, block, releases, sigma, quantile, beta)


def _bounded(
    summaries: StreamSummaries, rho: float, max_flippancy: int | None, beta: float, relation: str, rng,
    counter: str = DEFAULT_COUNTER,
) -> ContinualResult:
    if max_flippancy is None:
        raise ParameterError(
            "method='bounded' needs max_flippancy (a bound on how often an item may flip); "
            "or use method='adaptive', which needs none"
        )
    w = round_up_flippancy(max_flippancy)
    if w > (1 << summaries.max_level):
        raise ParameterError(
            "max_flippancy exceeds the largest truncation level computed in the summaries "
            f"(2^max_level = {1 << summaries.max_level}); recompute them with a larger max_level"
        )
    T = summaries.horizon
    stream = summaries.z_truncated[summaries.level_of(w)]
    quantile = math.sqrt(2.0 * math.log(2.0 * T / beta))
    if counter == "factorized":
        release, parameters, head, noise = _factorized_counter(stream, rho, w, relation, rng)
        rounding = 0.5  # estimates are rounded to whole counts after the noise
    else:
        tree = BinaryTreeMechanism.for_flippancy(T, rho, w, relation)
        release = tree.batch(stream, rng)
        parameters = {"sigma": tree.sigma, "levels": tree.levels}
        head = [f"Algorithm 1 (Jain et al. NeurIPS 2023): binary tree with discrete Gaussian noise, "
                f"sigma^2 = {sensitivity_factor(relation)}*w*L/(2*rho) on the w-truncated difference stream."]
        noise, rounding = (tree.noise_record(bounded_label(w), w, relation),), 0.0
    notes = head + [
        "error_bound assumes every item flips at most w times; otherwise add the number of items "
        "with flippancy above w (not released).",
    ]
    if w != max_flippancy:
        notes.append("max_flippancy was rounded up to the next power of two.")
    return ContinualResult(
        method="bounded",
        horizon=T,
        rho=rho,
        estimates=release.estimates,
        std=release.std,
        error_bound=release.std * quantile + rounding,
        beta=beta,
        flippancy_bound=np.full(T, w, dtype=np.int64),
        parameters={"flippancy_bound": w, **parameters, "quantile": quantile, "relation": relation},
        notes=tuple(notes),
        relation=relation,
        noise=noise,
    )


def _factorized_counter(stream: np.ndarray, rho: float, w: int, relation: str, rng) -> tuple:
    """"bounded" with the square-root factorized counter (module docstring): the release, its
    parameters, its notes and its noise record."""
    T = stream.shape[0]
    sigma2 = factorized_sigma2(T, rho, w, relation)  # exact, count units; σ̌² = 4^k·sigma2 ≥ B/(2ρ)
    release = factorized_counts(stream, None, rng, flippancy_bound=w, relation=relation,
                                step=bounded_label(w, "factorized"), sigma2=sigma2)
    bound = "U(w) (Lemma A)" if relation == "item-removal" else "min(4U(w), V(w)) (Lemmas B, C)"
    notes = [
        "Algorithm 1 (Jain et al. NeurIPS 2023) with a square-root factorized counter instead of the binary "
        "tree: discrete Gaussian noise on the integer strategy R z of the w-truncated difference stream, "
        f"sigma^2 = B/(2*rho) with B = {bound}, an exact integer bound on the l2^2 sensitivity of R z; the "
        "estimates are post-processing of the noisy strategy.",
        "std is the exact per-step noise standard deviation bound sigma*sqrt(S(t)) (non-decreasing in t); "
        "error_bound = std*sqrt(2 ln(2T/beta)) + 1/2 (the rounding to whole counts).",
    ]
    parameters = {"counter": "factorized", "sigma": release.sigma, "sensitivity": release.noise[0].sensitivity,
                  "std_last": float(release.std[-1]), "std_max": float(np.max(release.std))}
    return release, parameters, notes, release.noise


# The budget steps each method's records are charged to (the online form's too).
def bounded_label(w: int, counter: str = DEFAULT_COUNTER) -> str:
    if counter == "factorized":
        return f"square-root factorized counter (Algorithm 1 with a factorized counter), flippancy bound w = {w}"
    return f"binary tree mechanism (Algorithm 1), flippancy bound w = {w}"


def svt_label(cutoff: int) -> str:
    return f"sparse vector (Algorithm 2), cutoff {cutoff}"


def tree_label(level: int) -> str:
    return f"binary tree mechanism, w = {1 << level} (Algorithm 3)"


def level_label(level: int, counter: str = "tree") -> str:
    """The budget step of "adaptive"'s counter at ``level`` (the tree's label for a tree)."""
    if counter == "factorized":
        return f"factorized counter, w = {1 << level} (Algorithm 3)"
    return tree_label(level)


def baseline_label(plan: "RecomputePlan") -> str:
    return (f"periodic recompute baseline: {plan.releases} discrete Gaussian counts, one every "
            f"{plan.block} steps")


def _level_path(summaries: StreamSummaries, plan: AdaptivePlan, rng) -> tuple[np.ndarray, tuple]:
    """Run the sparse vector over the steps (vectorised within each round);
    returns the level path and the record of the sparse vector's draws
    (none when no sparse vector runs)."""
    T, J = summaries.horizon, summaries.max_level
    path = np.full(T, J, dtype=np.int64)
    if J == 0:
        return path, ()
    svt = SparseVector(plan.rho_svt, plan.cutoff)
    noise = (svt.noise_record(svt_label(plan.cutoff)),)
    level, start = 0, 0
    while level < J and start < T:
        index = svt.first_above(summaries.over_counts[level, start:], float(plan.thresholds[level]), rng)
        if index is None:
            path[start:] = level
            return path, noise
        path[start : start + index] = level
        start += index  # re-ask at the same step with the doubled bound
        level += 1
    path[start:] = level
    return path, noise


def _adaptive(
    summaries: StreamSummaries, rho: float, beta: float, svt_fraction: float, threshold_scale: float,
    relation: str, rng, counter: str = "best",
) -> ContinualResult:
    T, J = summaries.horizon, summaries.max_level
    plan = adaptive_plan(T, J, rho, beta, svt_fraction, threshold_scale, relation, counter)
    path, noise = _level_path(summaries, plan, rng)
    estimates = np.zeros(T, dtype=np.int64)
    std = np.zeros(T, dtype=np.float64)
    rounding = np.zeros(T, dtype=np.float64)
    # Each counter M_j is run over the whole stream; only its estimates at the
    # steps where it is selected are released (post-processing). Counters never
    # selected need not be sampled: the output distribution is the same.
    for level in np.unique(path).tolist():
        label = level_label(level, plan.counter(level))
        if plan.counter(level) == "factorized":
            release = factorized_counts(summaries.z_truncated[level], None, rng, flippancy_bound=1 << level,
                                        relation=relation, step=label, sigma2=plan.sigma2[level])
            noise += release.noise
            level_std = release.std
        else:
            tree = BinaryTreeMechanism(T, float(plan.sigmas[level]))  # σ already on the sampler's grid
            release = tree.batch(summaries.z_truncated[level], rng)
            noise += (tree.noise_record(label, 1 << level, relation),)
            level_std = plan.sigmas[level] * np.sqrt(nodes_per_step(T).astype(np.float64))
        chosen = path == level
        estimates[chosen] = release.estimates[chosen]
        std[chosen] = level_std[chosen]
        rounding[chosen] = 0.5 if plan.counter(level) == "factorized" else 0.0  # its estimates are rounded
    truncation = np.where(path < J, plan.thresholds[path] + plan.svt_alpha, 0.0)
    if (1 << J) < T:
        truncation = np.where(path == J, np.inf, truncation)
    notes = [
        "Algorithm 3 (Jain et al. NeurIPS 2023): counters for w = 2^j, j = 0..J (per level the binary "
        "tree or the factorized counter, whichever has the smaller noise bound), switched by a "
        "sparse vector on the number of items whose flippancy exceeds the current w.",
        "Budget split (ALGORITHMS.md 4.4, not confirmed from the paper): svt_fraction*rho to the "
        "sparse vector, the rest equally over the J+1 trees.",
        "error_bound = counter noise bound (+ 1/2 for a factorized counter's rounding) + truncation bound "
        "(threshold + sparse-vector accuracy), with probability >= 1 - beta overall.",
    ]
    if J == 0:
        notes.append("max_level = 0: a single tree (w = 1) gets the whole budget; no sparse vector runs.")
    if (1 << J) < T:
        notes.append("max_level < log2(horizon): at the top level the truncation error is not bounded (inf).")
    parameters = plan.to_dict()
    parameters.update({"svt_fraction": svt_fraction, "threshold_scale": threshold_scale, "levels": num_levels(T),
                       "relation": relation})
    return ContinualResult(
        method="adaptive",
        horizon=T,
        rho=rho,
        estimates=estimates,
        std=std,
        error_bound=std * plan.tree_quantile + truncation + rounding,
        beta=beta,
        flippancy_bound=(1 << path).astype(np.int64),
        parameters=parameters,
        notes=tuple(notes),
        relation=relation,
        noise=noise,
    )


def _baseline(
    summaries: StreamSummaries, rho: float, beta: float, block: int | None, relation: str, rng
) -> ContinualResult:
    T = summaries.horizon
    plan = recompute_plan(T, rho, beta, block)
    counts = np.cumsum(integer_vector(summaries.z, "summaries.z", T))
    steps = plan.release_steps()
    noisy = counts[steps - 1] + discrete_gaussian_batch(plan.sigma2, plan.releases, rng)
    which = np.arange(T) // plan.block
    estimates = noisy[which]
    staleness = np.arange(T) - (steps[which] - 1)
    std = np.full(T, plan.sigma)
    notes = [
        "Baseline for the paper's Theorem 3.10 comparison: periodic recompute (ALGORITHMS.md 4.5, "
        "not confirmed from the paper); block=1 is the count at every step as a sensitivity-1 query.",
        "error_bound includes staleness (t - last release step), assuming the distinct count changes "
        "by at most 1 per step (one update per step, as in the paper); with several events per step "
        "the staleness term can be larger.",
    ]
    return ContinualResult(
        method="baseline",
        horizon=T,
        rho=rho,
        estimates=estimates,
        std=std,
        error_bound=plan.sigma * plan.quantile + staleness,
        beta=beta,
        flippancy_bound=None,
        parameters={**plan.to_dict(), "relation": relation},
        notes=tuple(notes),
        relation=relation,
        noise=(baseline_record(baseline_label(plan), plan.sigma, plan.releases,
                               f"the distinct count every {plan.block} steps"),),
    )


def _auto(summaries: StreamSummaries, rho: float, beta: float, relation: str, options: dict, rng) -> ContinualResult:
    plan = auto_plan(summaries.horizon, rho, beta, relation, **options)
    if plan.top_level > summaries.max_level:
        raise ParameterError(
            f"method 'auto' needs summaries up to max_level {plan.top_level}; recompute them with a larger max_level"
        )
    out = auto_run(summaries, plan, rng)
    T = summaries.horizon
    path = out["path"]
    baseline = out["baseline"]
    notes = [
        "auto: Algorithm 3 of Jain et al. (NeurIPS 2023) with lazily started trees (flippancy bounds "
        f"1..{1 << max(plan.top_level, 0)}) and the recompute baseline past the crossover; zCDP filter.",
        "error_bound per step: tree noise bound + truncation (threshold + sparse-vector accuracy) at tree steps; "
        "noise bound + staleness x max_step_change at baseline steps: the bound assumes the count changes "
        "by at most max_step_change per step (default 1, one update per step as in the paper); with several "
        "events per step the staleness term can be larger.",
    ]
    if plan.top_level < 0:
        notes[0] = ("auto: at these public parameters no binary tree's error bound beats the recompute "
                    "baseline's, so the whole budget goes to the baseline.")
    parameters = {**plan.to_dict(), "levels": num_levels(T)}
    if baseline is not None:
        parameters["baseline"] = {"start": baseline.start, "rho": baseline.rho, "block": baseline.block,
                                  "releases": baseline.releases, "sigma": baseline.sigma}
    flippancy = np.where(path >= 0, 1 << np.maximum(path, 0), 0).astype(np.int64)
    return ContinualResult("auto", T, rho, out["estimates"], out["std"], out["error_bound"], beta,
                           flippancy, parameters, tuple(notes), relation, out["noise"])


def _select(summaries: StreamSummaries, rho: float, beta: float, relation: str, rng) -> ContinualResult:
    plan = select_plan(summaries.horizon, rho, beta, relation)
    out = select_run(summaries, plan, rng)
    T = summaries.horizon
    choice = out["choice"]
    if "flippancy_bound" in choice:
        what = (f"the {choice['counter']} counter on the stream truncated at flippancy {choice['flippancy_bound']} "
                f"(Algorithm 1 of Jain et al., NeurIPS 2023)")
        term = "the number of items that flip more than the bound (stated from a noisy count)"
        flippancy = np.full(T, choice["flippancy_bound"], dtype=np.int64)
    else:
        what = f"the recompute baseline every {choice['block']} steps"
        term = "the count's largest change within a block (stated from a noisy count)"
        flippancy = None
    notes = (
        f"select: one counter chosen privately from the finished stream ran over all steps: {what}.",
        f"error_bound per step: noise bound + {term}; it needs no assumption about the data.",
    )
    parameters = {**plan.to_dict(), "choice": choice, "levels": num_levels(T)}
    return ContinualResult("select", T, rho, out["estimates"], out["std"], out["error_bound"], beta,
                           flippancy, parameters, notes, relation, out["noise"])


def budget_split(
    method: str,
    rho: float,
    horizon: int,
    beta: float = 0.05,
    max_flippancy: int | None = None,
    relation: str = DEFAULT_RELATION,
    counter: str = DEFAULT_COUNTER,
    level_counter: str = "best",
    online: bool = False,
) -> list[tuple[str, float]]:
    """The data-independent ledger of ρ for ``method`` (labels and zCDP ρ's,
    summing to ρ): public parameters only; the adaptive parts say what they
    *may* spend. ``counter`` ("bounded" only) names the counter in the label;
    ``level_counter`` ("auto" and "adaptive") is the levels' counter choice the
    run uses: it names each level's counter and moves "auto"'s crossover, so
    the split; ``online``: the split of the online counter (its factorized
    levels are BLT counters)."""
    rho = _checks.positive(rho, "rho")
    horizon = _checks.horizon(horizon)
    counter = check_counter(method, counter)
    if method == "auto":
        return auto_plan(horizon, rho, beta, relation, counter=level_counter, online=online).budget_split()
    if method == "select":
        return select_plan(horizon, rho, beta, relation).budget_split()
    if method == "bounded":
        return [(bounded_label(max_flippancy, counter), rho)]
    if method == "adaptive":
        J = _checks.log2_exact(horizon)
        plan = adaptive_plan(horizon, J, rho, beta, relation=relation, counter=level_counter, online=online)
        parts = [(svt_label(plan.cutoff), plan.rho_svt)] if plan.cutoff else []
        return parts + [(level_label(j, plan.counter(j)), plan.rho_tree) for j in range(J + 1)]
    if method == "baseline":
        return [(baseline_label(recompute_plan(horizon, rho, beta)), rho)]
    raise ParameterError(f"method must be one of {', '.join(MECHANISMS)}, got {method!r}")


def continual_counts(
    summaries: StreamSummaries,
    rho: float,
    method: str = DEFAULT_METHOD,
    max_flippancy: int | None = None,
    *,
    rng: np.random.Generator,
    beta: float = 0.05,
    svt_fraction: float | None = None,
    threshold_scale: float | None = None,
    block: int | None = None,
    relation: str = DEFAULT_RELATION,
    tree_fraction: float | None = None,
    tree_levels: int | None = None,
    max_step_change: int | None = 1,
    counter: str = DEFAULT_COUNTER,
    level_counter: str = "best",
) -> ContinualResult:
    """Private estimate of the number of present items at every step, item-level ρ-zCDP.

    Releases one integer estimate per step (plus public std / error bounds),
    under ``relation`` ("subset", default, or "item-removal"); every draw is
    exact integer noise.

    Args:
        summaries: exact ``StreamSummaries`` (Spark stage or ``stream_summaries``).
        rho: zCDP budget, > 0; the whole of it is spent.
        method: "select" (default), "auto", "adaptive", "bounded" (needs
            ``max_flippancy``) or "baseline": module docstring.
        max_flippancy: the bound w for "bounded" (rounded up to a power of two).
        rng: the generator every noise draw comes from.
        beta: failure probability of the ``error_bound`` statement.
        svt_fraction: "adaptive"/"auto", share of ρ for the sparse vector.
        threshold_scale: "adaptive"/"auto", multiplies the thresholds τ_j.
        block: "baseline" only, release every ``block`` steps (default: the best bound).
        relation: the neighbouring relation the guarantee is stated for.
        tree_fraction: "auto" only, share g of the remaining budget per tree.
        tree_levels: "auto" only, force this many trees (None: the crossover rule).
        max_step_change: "auto" only, the public bound on the count's change
            per step its error_bound rests on (None: recompute every step).
        counter: "bounded" only: "tree" (default, Algorithm 1's binary tree)
            or "factorized" (the square-root factorized counter, :mod:`.factorized`).
        level_counter: "auto" and "adaptive", each level's counter: "best"
            (default, the smaller noise bound: :func:`.auto.level_counter`),
            "tree" (Algorithm 3 and "auto" as published) or "factorized".
    """
    if not isinstance(summaries, StreamSummaries):
        raise ParameterError("summaries must be a StreamSummaries (see dp_spark.mechanisms.continual_distinct.stream_summaries)")
    rho = _checks.positive(rho, "rho")
    beta = _checks.open_unit(beta, "beta")
    relation = check_relation(relation)
    check_rng(rng)
    counter = check_counter(method, counter)
    if max_flippancy is not None and method != "bounded":
        raise ParameterError("max_flippancy applies only to method='bounded'; leave it None for the others")
    if method == "bounded":
        return _bounded(summaries, rho, max_flippancy, beta, relation, rng, counter)
    if method == "adaptive":
        return _adaptive(summaries, rho, beta, 0.5 if svt_fraction is None else svt_fraction,
                         1.0 if threshold_scale is None else threshold_scale, relation, rng, level_counter)
    if method == "baseline":
        return _baseline(summaries, rho, beta, block, relation, rng)
    if method == "select":
        return _select(summaries, rho, beta, relation, rng)
    if method == "auto":
        options = {k: v for k, v in (("svt_fraction", svt_fraction), ("threshold_scale", threshold_scale),
                                     ("tree_fraction", tree_fraction), ("tree_levels", tree_levels)) if v is not None}
        options["max_step_change"] = max_step_change
        options["counter"] = level_counter
        return _auto(summaries, rho, beta, relation, options, rng)
    raise ParameterError(f"method must be one of {', '.join(MECHANISMS)}, got {method!r}")


def counts_by_group(summaries: Iterable[StreamSummaries], rho: float, method: str = DEFAULT_METHOD,
                    max_flippancy: int | None = None, *, rng: np.random.Generator,
                    beta: float = 0.05, counter: str = DEFAULT_COUNTER) -> tuple[ContinualResult, ...]:
    """:func:`continual_counts` on each group's ``summaries`` in group order at
    ``rho`` (a grouped release's ρ_g = :func:`group_rho`; the whole ρ for one
    group), drawing from ``rng`` in turn. Guarantee: module docstring, "Groups"."""
    return tuple(continual_counts(s, rho, method, max_flippancy, rng=rng, beta=beta, counter=counter)
                 for s in summaries)


def check_counter(method: str, counter: str) -> str:
    """``counter`` checked: one of :data:`COUNTERS`, and "factorized" only for "bounded"."""
    if counter not in COUNTERS:
        raise ParameterError(f"counter must be one of {', '.join(COUNTERS)}, got {counter!r}")
    if counter != DEFAULT_COUNTER and method != "bounded":
        raise ParameterError(f"counter {counter!r} applies only to method 'bounded'; leave it {DEFAULT_COUNTER!r} "
                             f"for {method!r}")
    return counter


#: The relative room ρ_g leaves below ρ/factor (module docstring, "Rounding").
ROUNDING_ROOM = Fraction(1, 2**52)


def factorized_group_factor(max_groups: int, horizon: int, flippancy_bound: int) -> int:
    """max(m, ⌈2m·U/B⌉): the groups' worth of budget one item's neighbour can cost a grouped
    "bounded" release with the factorized counter (module docstring, "Groups"), U and B its exact
    item-removal and subset bounds at the public (T, w)."""
    m = _checks.integer(max_groups, "max_groups", 1)
    removal = factorized_sensitivity2(horizon, flippancy_bound, "item-removal")
    calibrated = factorized_sensitivity2(horizon, flippancy_bound, "subset")
    if removal > calibrated:  # B ≥ U holds by construction (V's multiset contains U's); the G cap rests on it
        raise ParameterError("internal: the factorized counter's subset bound is below its item-removal bound")
    return max(m, -(-2 * m * removal // calibrated))


def group_factor(method: str, max_groups: int, n_groups: int | None = None,
                 counter: str = DEFAULT_COUNTER, horizon: int | None = None,
                 flippancy_bound: int | None = None) -> int:
    """How many groups' worth of budget one item's neighbour can touch: m for
    "bounded", 2m for the others, at most ``n_groups`` G when known (module
    docstring, "Groups"); None: G not known yet (2m / m, sound). The
    factorized counter (``counter="factorized"``, "bounded" only) needs the
    tree ``horizon`` and ``flippancy_bound`` w: :func:`factorized_group_factor`."""
    counter = check_counter(method, counter)
    m = int(max_groups)
    if m < 1:
        raise ParameterError("max_groups must be at least 1")
    if counter == "factorized":
        if horizon is None or flippancy_bound is None:
            raise ParameterError("the factorized counter's group factor needs the tree horizon and w")
        factor = factorized_group_factor(m, horizon, flippancy_bound)
    else:
        factor = m if method == "bounded" else 2 * m
    if n_groups is None:
        return factor
    if int(n_groups) < 1:
        raise ParameterError("a grouped release needs at least one public key")
    return min(factor, int(n_groups))


def group_rho(rho: float, method: str, max_groups: int, n_groups: int | None = None, **counter) -> float:
    """ρ_g, each group's counter's budget: the largest float at or below
    ρ / (``group_factor``·(1 + 2^-52)), or ρ/factor rounded down for a
    power-of-two factor (module docstring, "Rounding"). ``counter``: the
    counter's keywords of :func:`group_factor`."""
    factor = group_factor(method, max_groups, n_groups, **counter)
    room = 0 if factor & (factor - 1) == 0 else ROUNDING_ROOM  # a power of two: factor·p_i exact
    return float_down(exact(rho) / (factor * (1 + room)))


def grouped_label(label: str, factor: int) -> str:
    """A budget step of the grouped release: the per-group step ``label``,
    summed over the ``factor`` group counters one item can change."""
    return f"{label}; per group at ρ/{factor} (one item's neighbour costs at most {factor} groups' worth)"


def grouped_budget_split(parts: list[tuple[str, float]], factor: int,
                         total: float | None = None) -> list[tuple[str, float]]:
    """The grouped release's budget split from one group's (``budget_split``
    at ρ_g): step i charged factor·p_i rounded up and, given ``total`` (the
    release's ρ), the last step what is left of it. Checked exactly (module
    docstring, "Rounding"); ParameterError otherwise (public parameters only)."""
    factor = int(factor)
    wanted = [exact(part) * factor for _, part in parts]
    charged = [float_up(w) for w in wanted]
    if total is not None and charged:
        charged[-1] = remainder(total, *charged[:-1])
    if any(Fraction(c) < w for c, w in zip(charged, wanted)) or (
            total is not None and sum(map(Fraction, charged), Fraction(0)) > exact(total)):
        raise ParameterError(f"the grouped budget split does not fit its total at factor {factor}: "
                             "each group's ρ must be group_rho(ρ, ...)")
    return [(grouped_label(label, factor), c) for (label, _), c in zip(parts, charged)]


def merged_records(per_group: list[tuple], factor: int) -> list:
    """Every group's noise records as one list, each charged to its grouped
    step (:func:`grouped_label`); records equal but for their number of draws
    are merged. With several groups each is marked ``parallel`` (the groups'
    counters are disjoint parts of the step). Public values only."""
    merged: dict = {}
    mark = {"parallel": True} if len(per_group) > 1 else {}
    for records in per_group:
        for r in records:
            r = dataclasses.replace(r.at(grouped_label(r.step, factor)), parameters={**r.parameters, **mark})
            key = dataclasses.replace(r, draws=None)
            key = (key.step, key.kind, key.scale, key.std, key.sensitivity, key.target,
                   tuple(sorted((k, repr(v)) for k, v in key.parameters.items())))
            if key in merged:
                old = merged[key]
                draws = None if old.draws is None or r.draws is None else old.draws + r.draws
                merged[key] = dataclasses.replace(old, draws=draws)
            else:
                merged[key] = r
    return list(merged.values())
