"""Update policies of DP Set Union: how one person's items raise the histogram.

Gopi, Gulhane, Kulkarni, Shen, Shokouhi, Yekhanin, "Differentially Private
Set Union" (ICML 2020), Algorithm 1 step 2b with the update policies of
Section 2 (Count, after Korolova et al. 2009), Appendix D (Weighted Laplace,
Weighted Gaussian), Section 3 (Policy Laplace, an ℓ1 descent toward the cutoff
Γ) and Section 4 (Policy Gaussian, an ℓ2 descent toward Γ).

Nothing here is private: a histogram is a NON-PRIVATE summary. It becomes
private only through :mod:`dp_spark.partition_selection.thresholding` (noise plus the
threshold ρ of :mod:`dp_spark.partition_selection.thresholds`), and that step is sound
because of the two facts every kernel here guarantees for neighbouring inputs
H₁ (with person y) and H₂ (without y), persons visited in any fixed order that
does not depend on the data:

(S) sensitivity — ‖H₁ − H₂‖ ≤ 1 in ℓ1 for ``weighted-laplace`` and
    ``policy-laplace``, in ℓ2 for ``weighted-gaussian`` and
    ``policy-gaussian``; ``count`` has ℓ1 sensitivity Δ0 (each item moves by
    at most 1).
(T) new items are light — the set T = supp(H₁) \\ supp(H₂) of items only y
    holds has |T| ≤ Δ0 and H₁[u] ≤ 1/|T| (Laplace policies), ≤ 1/√|T|
    (Gaussian policies), = 1 (count) for u ∈ T.

Proof of (T): only y touches an item of T, and y's set S_y ⊇ T. Count adds 1;
Weighted adds 1/|S_y| ≤ 1/|T| or 1/√|S_y| ≤ 1/√|T|. In the policies every
item of T starts at 0, so it has the largest gap Γ among y's items, hence the
largest increment; the increments of the |T| items of T are equal and their
ℓ1 (resp. ℓ2) norm is at most y's budget 1, so each is ≤ 1/|T| (resp. 1/√|T|).
Proof of (S) for the policies: each weight stays ≤ Γ, so one person's update
is "move the coordinates S_i of H toward the point (Γ, …, Γ) by ℓ1 (resp. ℓ2)
distance min(1, distance)"; the paper's Lemmas 3.1 / 4.1 show that this map is
non-expansive in ℓ1 (resp. ℓ2), so the difference y's own update made (norm
≤ 1) never grows while later persons update. The Count and Weighted updates
are additive, so (S) is immediate. Both facts are checked by property tests
on random neighbouring data sets (tests/unit/test_set_union.py), to a
floating-point tolerance of 1e-9.

Sharding (how dp_spark runs the sequential policies on Spark): persons are
split into shards by a hash of their own id, each shard runs the policy alone
and the shard histograms are added. Adding y changes only y's shard, so the
sum inherits (S) from that shard; and an item only y holds occurs in no other
shard, so its summed weight is y's own increment and (T) holds too. Neither
fact depends on the value of the cutoff, so each shard may run with its own
cutoff (dp_spark's default is Γ/√shards, :func:`~dp_spark.partition_selection.shard_cutoff`).
One shard with cutoff Γ is the paper's algorithm exactly.

Layout: a shard's persons are given in CSR form — person ``p`` (in visiting
order) holds the distinct item codes ``codes[indptr[p]:indptr[p + 1]]``,
already restricted to at most Δ0 items — and ``weights`` is a float64 array
indexed by item code. Pure numpy; no pyspark, no pandas.
"""

from __future__ import annotations

import math

import numpy as np

from dp_spark.errors import ParameterError

__all__ = [
    "POLICIES",
    "NOISE_OF",
    "SEQUENTIAL",
    "check_policy",
    "count_update",
    "weighted_laplace_update",
    "weighted_gaussian_update",
    "policy_laplace_update",
    "policy_gaussian_update",
    "update_histogram",
    "build_histogram",
    "person_weight",
]

#: The update policies, in the paper's order of increasing utility.
POLICIES = ("count", "weighted-laplace", "weighted-gaussian", "policy-laplace", "policy-gaussian")
#: Which noise each policy is paired with (Count is Korolova et al.'s Laplace baseline).
NOISE_OF = {
    "count": "laplace",
    "weighted-laplace": "laplace",
    "weighted-gaussian": "gaussian",
    "policy-laplace": "laplace",
    "policy-gaussian": "gaussian",
}
#: Policies whose update depends on the histogram so far (order matters).
SEQUENTIAL = ("policy-laplace", "policy-gaussian")


def check_policy(policy: object) -> str:
    if policy not in POLICIES:
        raise ParameterError(f"policy must be one of {', '.join(POLICIES)}; got {policy!r}.")
    return str(policy)


def person_weight(policy: str, size: int) -> float:
    """The per-item increment of the additive policies for a person keeping
    ``size`` items: 1 (count), 1/size (weighted-laplace), 1/√size
    (weighted-gaussian)."""
    if policy == "count":
        return 1.0
    if policy == "weighted-laplace":
        return 1.0 / size
    if policy == "weighted-gaussian":
        return 1.0 / math.sqrt(size)
    raise ParameterError(f"person_weight is for count and weighted policies; got {policy!r}.")


def count_update(weights: np.ndarray, codes: np.ndarray) -> None:
    """Count: H[u] += 1 for each of the person's items (ℓ1 norm |S| ≤ Δ0)."""
    weights[codes] += 1.0


def weighted_laplace_update(weights: np.ndarray, codes: np.ndarray) -> None:
    """Weighted Laplace (Appendix D.1): H[u] += 1/|S| (ℓ1 norm 1)."""
    if len(codes):
        weights[codes] += 1.0 / len(codes)


def weighted_gaussian_update(weights: np.ndarray, codes: np.ndarray) -> None:
    """Weighted Gaussian (Appendix D.2): H[u] += 1/√|S| (ℓ2 norm 1)."""
    if len(codes):
        weights[codes] += 1.0 / math.sqrt(len(codes))


def policy_laplace_update(
    weights: np.ndarray, codes: np.ndarray, gamma: float, budget: float = 1.0
) -> None:
    """Policy Laplace (Section 3, the ℓ1 descent / water-filling update).

    Items of the person below the cutoff Γ are raised at equal rate, each
    stopping when it reaches Γ, until the person's ℓ1 budget (1) is spent:
    with gaps g_u = Γ − H[u] > 0, add min(g_u, λ) where λ solves
    Σ_u min(g_u, λ) = budget, or fill every gap when Σ_u g_u ≤ budget.
    Weights never exceed Γ (an item that reaches Γ is set to Γ exactly).
    """
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
    """Policy Gaussian (Section 4, the ℓ2 descent update).

    With the gap vector g_u = Γ − H[u] over the person's items below Γ and
    Z = ‖g‖₂, add min(budget, Z)·g_u/Z: the histogram moves straight toward
    (Γ, …, Γ) by ℓ2 distance at most the budget (1), reaching Γ when Z ≤ 1.
    """
    if not len(codes):
        return
    current = weights[codes]
    gaps = gamma - current
    active = gaps > 0.0
    if not active.any():
        return
    idx = codes[active]
    g = gaps[active]
    norm = math.sqrt(float(np.dot(g, g)))
    if norm <= budget:
        weights[idx] = gamma
        return
    weights[idx] = np.minimum(current[active] + (budget / norm) * g, gamma)


def update_histogram(
    weights: np.ndarray,
    indptr: np.ndarray,
    codes: np.ndarray,
    policy: str,
    gamma: float | None = None,
) -> np.ndarray:
    """Run ``policy`` over the persons of one shard, in the given order,
    updating ``weights`` in place (and returning it).

    This is Algorithm 1's histogram loop (step 2b for every person) of Gopi et
    al.; ``gamma`` (the cutoff Γ) is required by the policy-* updates.
    NON-PRIVATE output; facts (S) and (T) of the module docstring hold.
    """
    policy = check_policy(policy)
    indptr = np.asarray(indptr, dtype=np.int64)
    codes = np.asarray(codes, dtype=np.int64)
    if policy in SEQUENTIAL:
        if gamma is None or not math.isfinite(gamma) or gamma <= 0:
            raise ParameterError(f"policy {policy!r} needs a finite cutoff gamma > 0; got {gamma!r}.")
        step = policy_laplace_update if policy == "policy-laplace" else policy_gaussian_update
        for p in range(len(indptr) - 1):
            lo, hi = indptr[p], indptr[p + 1]
            if hi > lo:
                step(weights, codes[lo:hi], gamma)
        return weights
    # Additive policies: the order does not matter, so do it in one pass.
    sizes = np.diff(indptr)
    if policy == "count":
        per_person = np.ones(len(sizes))
    elif policy == "weighted-laplace":
        per_person = 1.0 / np.maximum(sizes, 1)
    else:
        per_person = 1.0 / np.sqrt(np.maximum(sizes, 1))
    np.add.at(weights, codes, np.repeat(per_person, sizes))
    return weights


def build_histogram(
    indptr: np.ndarray,
    codes: np.ndarray,
    n_items: int,
    policy: str,
    gamma: float | None = None,
) -> np.ndarray:
    """A fresh shard histogram: :func:`update_histogram` on zeros of length
    ``n_items``. Items no person holds keep weight 0 (they are not in the
    histogram's support and can never be released)."""
    weights = np.zeros(int(n_items), dtype=np.float64)
    return update_histogram(weights, indptr, codes, policy, gamma)
