"""DP Set Union's histogram: how one person's items raise it (no noise here).

The update policies are a bounded-sensitivity transformation of the data: they draw no noise and
release nothing. The Spark stage (:mod:`dp_spark.stages.set_union`) runs them over shards of
persons; the mechanism layer (:mod:`dp_spark.mechanisms.set_union`) adds the noise and applies the
threshold.

Gopi, Gulhane, Kulkarni, Shen, Shokouhi, Yekhanin, "Differentially Private Set Union" (ICML 2020),
Algorithm 1 step 2b with the update policies of Section 2 (Count, after Korolova et al. 2009),
Appendix D (Weighted Laplace, Weighted Gaussian), Section 3 (Policy Laplace, an ℓ1 descent toward
the cutoff Γ) and Section 4 (Policy Gaussian, an ℓ2 descent toward Γ).

A histogram is NON-PRIVATE. It becomes private only through
:mod:`dp_spark.mechanisms.set_union.thresholding` (noise plus the threshold ρ of
:mod:`dp_spark.mechanisms.set_union.thresholds`), which is sound because every kernel here
guarantees two facts for neighbouring inputs H₁ (with person y) and H₂ (without y), persons visited
in any fixed order that does not depend on the data:

(S) sensitivity: ‖H₁ − H₂‖ ≤ 1 in ℓ1 for ``weighted-laplace``, ``policy-laplace`` and
    ``policy-greedy``, in ℓ2 for ``weighted-gaussian`` and ``policy-gaussian``; ``count`` has ℓ1
    sensitivity Δ0 (each item moves by at most 1).
(T) new items are light: T = supp(H₁) \\ supp(H₂), the items only y holds, has |T| ≤ Δ0 and H₁[u] ≤
    1/|T| (Laplace policies), ≤ 1/√|T| (Gaussian policies), = 1 (count) for u ∈ T.

``policy-greedy`` (Carvalho, Wang, Gondara, AAAI 2022) has (S) in ℓ1 but a weaker (T), over a
different support: its support is every item some person keeps (weight 0 included), T is again the
items only y keeps, |T| ≤ Δ0, and their weights satisfy Σ_{u∈T} H₁[u] ≤ 1 (not 1/|T| each). The proof,
and the threshold that (T) in this form needs, are in :mod:`dp_spark.mechanisms.set_union.greedy`.

Proof of (T): only y touches an item of T, and y's set S_y ⊇ T. Count adds 1; Weighted adds 1/|S_y|
≤ 1/|T| or 1/√|S_y| ≤ 1/√|T|. In the policies every item of T starts at 0, so it has the largest gap
Γ among y's items, hence the largest increment; the increments of the |T| items of T are equal and
their ℓ1 (resp. ℓ2) norm is at most y's budget 1, so each is ≤ 1/|T| (resp. 1/√|T|). Proof of (S)
for the policies: each weight stays ≤ Γ, so one person's update moves the coordinates S_i of H
toward (Γ, …, Γ) by ℓ1 (resp. ℓ2) distance min(1, distance); by the paper's Lemmas 3.1 / 4.1 this
map is non-expansive in ℓ1 (resp. ℓ2), so the difference y's own update made (norm ≤ 1) never grows
while later persons update. Count and Weighted are additive, so (S) is immediate. Property tests
check both facts on random neighbours (tests/unit/test_set_union.py): exactly, in integer units, for
the additive policies; to 1e-9 for the sequential ones.

Sharding: persons are split into shards by a hash of their own id, each shard runs the policy alone
and the shard histograms are added. Adding y changes only y's shard, so the sum inherits (S); an
item only y holds occurs in no other shard, so its summed weight is y's own increment and (T) holds.
Neither fact depends on the cutoff, so each shard may run with its own (dp_spark's default is
Γ/√shards, :func:`~dp_spark.mechanisms.set_union.shard_cutoff`). One shard with cutoff Γ is the
paper's algorithm exactly.

Fixed-point weights of the additive policies (what makes the Spark sum exact): a Count / Weighted
person adds to each kept item a whole number of units of 2^-30 (:data:`UNIT`), :func:`person_units`:
2^30 (count), ⌊2^30/|S|⌋ (weighted-laplace), ⌊2^30/√|S|⌋ (weighted-gaussian), all rounded DOWN.
Rounding down only shrinks the person's vector, so its ℓ1 norm stays ≤ 1 (|S|·⌊2^30/|S|⌋ ≤ 2^30),
its ℓ2 norm ≤ 1 (|S|·⌊2^30/√|S|⌋² ≤ 2^60) and an item only they hold weighs ≤ 1/|T| resp. 1/√|T|:
(S) and (T) hold exactly, with no floating-point tolerance. The histogram is a sum of integers,
exact in any order, and a weight is units·2^-30, exact in float64 below 2^23 (count: always). Each
weight is lower by less than one unit (≈ 9.3e-10) per person; the sum overflows a long only past
2^33 persons holding one item.

The sequential policies stay in float64: rounding each increment inside the descent would break the
non-expansiveness of Lemmas 3.1 / 4.1, and rounding a finished shard histogram adds up to one unit
to every coordinate that differs between neighbours, with no data-independent bound on how many do.
Their determinism comes from a fixed visiting order, a fixed item order per person, CPU-independent
numpy operations (pairwise ``np.sum``, no BLAS ``dot``), and adding the shard histograms in shard
order.

Layout: a shard's persons in CSR form: person ``p`` (in visiting order) holds the distinct item
codes ``codes[indptr[p]:indptr[p + 1]]``, at most Δ0; ``weights`` is a float64 array indexed by item
code. Pure numpy."""

from __future__ import annotations

import math

import numpy as np

from dp_spark.errors import ParameterError

__all__ = [
    "POLICIES",
    "NOISE_OF",
    "SEQUENTIAL",
    "HELD_SUPPORT",
    "BY_FREQUENCY",
    "check_policy",
    "count_update",
    "weighted_laplace_update",
    "weighted_gaussian_update",
    "policy_laplace_update",
    "policy_gaussian_update",
    "policy_greedy_update",
    "update_histogram",
    "sequential_update",
    "build_histogram",
    "person_weight",
    "person_units",
    "UNIT_BITS",
    "UNIT",
    "DEFAULT_SHARDS",
]

#: The update policies, in the paper's order of increasing utility.
POLICIES = ("count", "weighted-laplace", "weighted-gaussian", "policy-laplace", "policy-gaussian", "policy-greedy")
#: Which noise each policy is paired with (Count is Korolova et al.'s Laplace baseline).
NOISE_OF = {
    "count": "laplace",
    "weighted-laplace": "laplace",
    "weighted-gaussian": "gaussian",
    "policy-laplace": "laplace",
    "policy-gaussian": "gaussian",
    "policy-greedy": "laplace",
}
#: Policies whose update depends on the histogram so far (order matters).
SEQUENTIAL = ("policy-laplace", "policy-gaussian", "policy-greedy")
#: Policies whose release considers every kept item, weight 0 included (:data:`SEQUENTIAL` others and
#: the additive policies consider the items of positive weight): their fact (T) needs it.
HELD_SUPPORT = ("policy-greedy",)
#: Policies that visit (and keep) a person's items by the person's own frequency, most frequent first
#: (ties by the salted hash); the others keep Δ0 items by the salted hash alone.
BY_FREQUENCY = ("policy-greedy",)
#: The additive policies' weights are whole numbers of units of 2^-UNIT_BITS.
UNIT_BITS = 30
#: One unit of weight, 2^-30 (a power of two: units·UNIT is exact in float64).
UNIT = 2.0 ** -UNIT_BITS
_ONE = 1 << UNIT_BITS
#: Person shards of the sequential policies when ``shards`` is not given: a
#: fixed number, independent of the data and of the cluster's configuration
#: (the per-shard cutoff Γ/√shards, and so the output's utility, depends on it).
DEFAULT_SHARDS = 8


def check_policy(method: object) -> str:
    if method not in POLICIES:
        raise ParameterError(f"method must be one of {', '.join(POLICIES)}; got {method!r}.")
    return str(method)


def person_units(method: str, size: int) -> int:
    """The additive policies' per-item increment in units of 2^-30 for a person keeping ``size``
    items, rounded DOWN (exact integers): 2^30 (count), ⌊2^30/size⌋ (weighted-laplace), ⌊2^30/√size⌋
    = isqrt(⌊2^60/size⌋) (weighted-gaussian). The person's vector has ℓ1 norm ≤ 1 (weighted-laplace)
    resp. ℓ2 norm ≤ 1 (weighted-gaussian)."""
    size = int(size)
    if size < 1:
        raise ParameterError(f"size must be a whole number >= 1; got {size!r}.")
    if method == "count":
        return _ONE
    if method == "weighted-laplace":
        return _ONE // size
    if method == "weighted-gaussian":
        return math.isqrt((_ONE * _ONE) // size)
    raise ParameterError(f"person_units is for count and weighted policies; got {method!r}.")


def person_weight(method: str, size: int) -> float:
    """:func:`person_units` · :data:`UNIT`: 1 (count), 1/size, 1/√size, rounded down to the grid of
    2^-30."""
    return person_units(method, size) * UNIT


def count_update(weights: np.ndarray, codes: np.ndarray) -> None:
    """Count: H[u] += 1 for each of the person's items (ℓ1 norm |S| ≤ Δ0)."""
    weights[codes] += 1.0


def weighted_laplace_update(weights: np.ndarray, codes: np.ndarray) -> None:
    """Weighted Laplace (Appendix D.1): H[u] += 1/|S| rounded down to the
    grid of 2^-30 (ℓ1 norm ≤ 1)."""
    if len(codes):
        weights[codes] += person_weight("weighted-laplace", len(codes))


def weighted_gaussian_update(weights: np.ndarray, codes: np.ndarray) -> None:
    """Weighted Gaussian (Appendix D.2): H[u] += 1/√|S| rounded down to the
    grid of 2^-30 (ℓ2 norm ≤ 1)."""
    if len(codes):
        weights[codes] += person_weight("weighted-gaussian", len(codes))


def policy_laplace_update(
    weights: np.ndarray, codes: np.ndarray, gamma: float, budget: float = 1.0
) -> None:
    """Policy Laplace (Section 3, the ℓ1 descent / water-filling update).

    The person's items below the cutoff Γ rise at equal rate, each stopping at Γ, until the ℓ1
    budget (1) is spent: with gaps g_u = Γ − H[u] > 0, add min(g_u, λ) where Σ_u min(g_u, λ) =
    budget, or fill every gap when Σ_u g_u ≤ budget. Weights never exceed Γ."""
    if not len(codes):
        return
    current = weights[codes]
    gaps = gamma - current
    active = gaps > 0.0
    if not active.any():
        return
    idx = codes[active]
    g = gaps[active]
    if g.sum() <= budget:
        weights[idx] = gamma
        return
    s = np.sort(g)
    m = len(s)
    before = np.concatenate(([0.0], np.cumsum(s)[:-1]))  # Σ of gaps smaller than s[k]
    spent_at = before + s * (m - np.arange(m))  # Σ_u min(g_u, s[k])
    k = int(np.searchsorted(spent_at, budget, side="left"))  # first level that would overspend
    level = (budget - before[k]) / (m - k)  # λ, with s[k-1] <= λ <= s[k]
    raised = np.minimum(g, level)
    weights[idx] = np.where(raised >= g, gamma, np.minimum(current[active] + raised, gamma))


def policy_gaussian_update(
    weights: np.ndarray, codes: np.ndarray, gamma: float, budget: float = 1.0
) -> None:
    """Policy Gaussian (Section 4, the ℓ2 descent update): with gaps g_u = Γ − H[u] over the
    person's items below Γ and Z = ‖g‖₂, add min(budget, Z)·g_u/Z: a move toward (Γ, …, Γ) by ℓ2
    distance at most the budget (1)."""
    if not len(codes):
        return
    current = weights[codes]
    gaps = gamma - current
    active = gaps > 0.0
    if not active.any():
        return
    idx = codes[active]
    g = gaps[active]
    norm = math.sqrt(float(np.sum(g * g)))  # pairwise sum, not BLAS: the same bits on every CPU
    if norm <= budget:
        weights[idx] = gamma
        return
    weights[idx] = np.minimum(current[active] + (budget / norm) * g, gamma)


def policy_greedy_update(
    weights: np.ndarray, codes: np.ndarray, gamma: float, budget: float = 1.0
) -> None:
    """Policy Greedy (Carvalho, Wang, Gondara, AAAI 2022, the greedy update "GW"): the person's items
    in the given order (``codes``: the person's own most frequent first, an order that depends on
    nothing but the person's rows), each item below the cutoff Γ raised to Γ while the budget (1)
    lasts, the first item it does not cover raised by what is left, the rest unchanged. Items at or
    above Γ are skipped. The person's increments sum to at most the budget; weights never exceed Γ
    (unless they already did). Proof of (S) and (T): :mod:`dp_spark.mechanisms.set_union.greedy`."""
    _greedy_step(weights, np.asarray(codes, dtype=np.int64).tolist(), float(gamma), float(budget))


def _greedy_step(w, codes: list, gamma: float, budget: float = 1.0) -> None:
    """:func:`policy_greedy_update` on a list (or array) of weights for one person, in place: the
    same IEEE operations in the same order either way."""
    left = budget
    for c in codes:
        current = w[c]
        if current >= gamma:
            continue
        cost = gamma - current
        if cost < left:
            w[c] = gamma
            left -= cost
        else:  # the budget ends here: the item gets what is left (never above Γ)
            w[c] = min(current + left, gamma)
            return


def _laplace_step(w: list, codes: list, gamma: float, budget: float = 1.0) -> None:
    """:func:`policy_laplace_update` on Python floats for one person (the same IEEE operations in a
    fixed order)."""
    active = [(c, gamma - w[c]) for c in codes if w[c] < gamma]
    if not active:
        return
    gaps = sorted(g for _, g in active)
    if sum(gaps) <= budget:  # the same as Σ g <= budget in any order up to rounding
        for c, _ in active:
            w[c] = gamma
        return
    m, before, level = len(gaps), 0.0, None
    for k, gap in enumerate(gaps):
        if before + gap * (m - k) >= budget:  # first level that would overspend
            level = (budget - before) / (m - k)
            break
        before += gap
    if level is None:  # rounding: the sorted running sum fell short of the budget
        level = gaps[-1]
    for c, gap in active:
        raised = min(gap, level)
        w[c] = gamma if raised >= gap else min(w[c] + raised, gamma)


def _gaussian_step(w: list, codes: list, gamma: float, budget: float = 1.0) -> None:
    """:func:`policy_gaussian_update` on Python floats for one person.

    With every weight at most Γ (the kernels' invariant: weights start at 0 and only ever become Γ or
    min(·, Γ)) an item at Γ has the gap 0.0 exactly, and keeping it changes no bit: its square adds
    0.0 to the sum, Γ + s·0.0 = Γ, and setting it to Γ leaves it Γ. So the gaps of all the person's
    items are used without filtering; a weight above Γ (another caller's) takes the filtering path."""
    gaps = [gamma - w[c] for c in codes]
    if gaps and min(gaps) >= 0.0:
        norm = math.sqrt(sum([g * g for g in gaps]))  # a sequential sum: the same bits every run
        if norm <= budget:
            for c in codes:
                w[c] = gamma
            return
        scale = budget / norm
        for c, g in zip(codes, gaps):
            raised = w[c] + scale * g
            w[c] = gamma if gamma < raised else raised  # min(raised, Γ), as the filtered rule
        return
    _filtered_gaussian_step(w, codes, gamma, budget)


def _filtered_gaussian_step(w: list, codes: list, gamma: float, budget: float = 1.0) -> None:
    """:func:`policy_gaussian_update` on Python floats for one person, its items at or above Γ dropped
    first (any weights)."""
    active = [(c, gamma - w[c]) for c in codes if w[c] < gamma]
    if not active:
        return
    norm = math.sqrt(sum(g * g for _, g in active))  # a sequential sum: the same bits every run
    if norm <= budget:
        for c, _ in active:
            w[c] = gamma
        return
    scale = budget / norm
    for c, g in active:
        w[c] = min(w[c] + scale * g, gamma)


def _sequential_loop(weights: np.ndarray, indptr: np.ndarray, codes: np.ndarray,
                     method: str, gamma: float) -> None:
    """The persons of one shard, in order, on Python floats (cheaper than numpy calls for the many
    persons with few items). Each step is exactly :func:`policy_laplace_update` /
    :func:`policy_gaussian_update` / :func:`policy_greedy_update` (tested), so (S) and (T) hold;
    the result is deterministic (fixed operation order)."""
    w = weights.tolist()
    sequential_update(w, indptr, codes, method, gamma)
    weights[:] = w


def sequential_update(w: list, indptr, codes, method: str, gamma: float) -> list:
    """The sequential policy over one shard's persons (CSR ``indptr``, ``codes``) on a Python list
    of weights, in place: :func:`update_histogram`'s loop, for callers keeping a shard's histogram
    as a list across calls. NON-PRIVATE; (S) and (T) as there."""
    if method not in SEQUENTIAL:
        raise ParameterError(f"sequential_update is for {', '.join(SEQUENTIAL)}; got {method!r}.")
    if gamma is None or not math.isfinite(gamma) or gamma <= 0:
        raise ParameterError(f"method {method!r} needs a finite cutoff gamma > 0; got {gamma!r}.")
    step = {"policy-laplace": _laplace_step, "policy-gaussian": _gaussian_step,
            "policy-greedy": _greedy_step}[method]
    flat = np.asarray(codes, dtype=np.int64).tolist()
    bounds = np.asarray(indptr, dtype=np.int64).tolist()
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        if hi > lo:
            step(w, flat[lo:hi], float(gamma))
    return w


def update_histogram(
    weights: np.ndarray,
    indptr: np.ndarray,
    codes: np.ndarray,
    method: str,
    gamma: float | None = None,
) -> np.ndarray:
    """Algorithm 1's histogram loop (step 2b for every person): the policy ``method`` over one
    shard's persons in the given order, updating ``weights`` in place (and returning it). ``gamma``
    (the cutoff Γ) is required by the policy-* updates. NON-PRIVATE; facts (S) and (T) hold."""
    method = check_policy(method)
    indptr = np.asarray(indptr, dtype=np.int64)
    codes = np.asarray(codes, dtype=np.int64)
    if method in SEQUENTIAL:
        if gamma is None or not math.isfinite(gamma) or gamma <= 0:
            raise ParameterError(f"method {method!r} needs a finite cutoff gamma > 0; got {gamma!r}.")
        _sequential_loop(weights, indptr, codes, method, float(gamma))
        return weights
    # Additive policies: integer units summed exactly (any order gives the same bits).
    sizes = np.diff(indptr)
    kept = sizes > 0
    per_person = np.zeros(len(sizes), dtype=np.int64)
    distinct, index = np.unique(sizes[kept], return_inverse=True)
    table = np.array([person_units(method, n) for n in distinct.tolist()], dtype=np.int64)
    per_person[kept] = table[index.ravel()]
    units = np.zeros(len(weights), dtype=np.int64)
    np.add.at(units, codes, np.repeat(per_person, sizes))
    weights += units * UNIT
    return weights


def build_histogram(
    indptr: np.ndarray,
    codes: np.ndarray,
    n_items: int,
    method: str,
    gamma: float | None = None,
) -> np.ndarray:
    """:func:`update_histogram` on zeros of length ``n_items``. Items no person holds keep weight 0
    (outside the support, never released)."""
    weights = np.zeros(int(n_items), dtype=np.float64)
    return update_histogram(weights, indptr, codes, method, gamma)
