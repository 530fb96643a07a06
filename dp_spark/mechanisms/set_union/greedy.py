"""Policy Greedy DP Set Union: why it is private, and its threshold ρ (pure math).

Carvalho, Wang, Gondara, "Incorporating Item Frequency for Differentially
Private Set Union" (AAAI 2022), the greedy update ("GW") with Laplace noise,
inside the framework of Gopi et al. (ICML 2020, Algorithm 1 and Theorem B.1 of
its supplement). The update is
:func:`dp_spark.summaries.set_union.policy_greedy_update`: a person visits its
kept items in an order fixed by its OWN rows (the paper's local item
frequency: how many of the person's rows hold the item, most first; ties by a
salted hash of (person, item)), raises each item below the cutoff Γ to Γ while
its budget 1 lasts, gives the first item it cannot cover what is left, and
stops. Released: {u kept by some person : H[u] + Z_u > ρ}, Z_u ~ Lap(b) i.i.d.,
b = 1/ε rounded up (the real-valued mechanism; what runs is its exact
counterpart on a grid, whose threshold :mod:`.laplace_grid` derives by the
same steps from the discrete tail). Guarantee: person-level (ε, δ)-DP for adding or removing
one person, at every cutoff Γ > 0 (so every shard cutoff), every salt and
every Δ0.

Proof. Let D' = D plus person y; every other person keeps the same items in
the same order (a function of its own rows and the salt), and the persons of
a shard are visited in an order fixed by their ids.

(1) Monotone and ℓ1 non-expansive step. For one person with items u_1..u_k
    and histograms H ≥ G (coordinatewise), write c_j(X) = max(Γ − X[u_j], 0);
    the step adds a_j(X) = min(c_j(X), 1 − Σ_{i<j} a_i(X)), so the total spent
    up to j is s_j(X) = min(1, Σ_{i≤j} c_i(X)). As c_j(H) ≤ c_j(G):
    (a) F(H) ≥ F(G): if a_j(G) > 0, either H's item is filled
        (F(H)[u_j] = max(H[u_j], Γ) ≥ Γ ≥ F(G)[u_j]) or H's budget ends there,
        and then a_j(H) = 1 − s_{j−1}(H) ≥ 1 − s_{j−1}(G) ≥ a_j(G).
    (b) ‖F(H) − F(G)‖₁ = Σ(F(H) − F(G)) = ‖H − G‖₁ + s_k(H) − s_k(G). If
        s_k(G) = 1 this is ≤ ‖H − G‖₁. Otherwise G filled every item:
        F(G)[u_j] = max(G[u_j], Γ), while F(H)[u_j] ≤ max(H[u_j], Γ) always,
        so each changed coordinate moves by ≤ max(H, Γ) − max(G, Γ) ≤ H − G.
    The item order must not depend on H: ordering by the current weight (the
    greedy policy of Gopi et al.'s supplement, Appendix E, "highest weight
    below Γ first") breaks (b), its sensitivity grows with the number of
    later persons (tests/unit/test_set_union_greedy.py reproduces both).
(2) Sensitivity (S). Before y the two runs agree; y's own step makes
    H' ≥ H with ‖H' − H‖₁ = y's spend ≤ 1; by (1) every later person of the
    shard keeps H' ≥ H and never increases ‖H' − H‖₁; other shards are equal.
    So the summed histograms satisfy H' ≥ H and ‖H' − H‖₁ ≤ 1 (also ℓ2 ≤ 1).
(3) New items (T). The candidates are the items some person keeps, weight 0
    included (:data:`~dp_spark.summaries.set_union.HELD_SUPPORT`). T, the
    candidates of D' that are not candidates of D, are the items only y
    keeps: |T| ≤ Δ0, only y raises them, so h_u = H'[u] ≥ 0 with
    Σ_{u∈T} h_u ≤ 1. (Positive weight would not do as the candidate set: the
    extra weight y leaves on a shared item lets a later person reach items it
    left at 0 without y, so the items of positive weight only with y are not
    bounded in number by anything public; the tests show one such cascade.)
    With q(h) = P[h + Z > ρ] = ½·e^{−(ρ−h)/b} (h ≤ 1 ≤ ρ),
    φ(h) = −ln(1 − q(h)) is convex and increasing on [0, 1] (−ln(1 − x) is
    convex increasing, q convex increasing), so Σ_{u∈T} φ(h_u) over the
    polytope {h ≥ 0, Σ h ≤ 1} is largest at a vertex e_u:
    P[some item of T released] = 1 − e^{−Σ φ(h_u)}
    ≤ 1 − (1 − q(1))·(1 − q(0))^{Δ0 − 1} =: f(ρ), and :func:`rho_greedy` is
    the smallest ρ ≥ 1 with f(ρ) ≤ δ (to a relative margin of 1e-9 on δ,
    far above the floats' error). At the vertex one item carries the whole
    weight (when the cutoff is below 1, y fills several items to it, but the
    convexity argument already covers every such split); the Δ0 − 1 others cost q(0) each, which is what ρ pays for the
    fixed candidate set (Lemma: f(ρ) ≤ ½·e^{−ρ/b}·(e^{1/b} + Δ0 − 1), the
    union bound, the bisection's upper end).
(4) Both directions, as in Gopi et al.'s Lemma A.1 (written out in
    :mod:`.discrete`, step (3)): on the candidates of D the vector H + Z is
    ε-DP by the Laplace mechanism (ℓ1 sensitivity 1, scale ≥ 1/ε) and the
    released set there is its post-processing; the items of T are released
    with probability ≤ δ, independently. So the release is (ε, δ)-DP.

What the reference code does differently (``ricardocarvalhods/diff-private-
set-union``, ``dpsu_gw.py``): it keeps every item of a person (no Δ0) and
uses ρ = 1 + b·ln(1/(2δ)), which covers the one partly filled new item but
not the person's other new items, each of which enters its histogram at
weight 0 and is noised and thresholded as well (with no bound on their
number there). Here Δ0 bounds them and ρ pays for them.

A Gaussian variant is not offered. The same ℓ1 greedy with Gaussian noise is
private (ℓ2 ≤ ℓ1 ≤ 1 in (2); the Gaussian tail is convex below ρ in (3)) but
spends an ℓ1 budget under noise calibrated to ℓ2, larger than Lap(1/ε) at
the same (ε, δ). A greedy with an ℓ2 budget (Σ a_j² ≤ 1) is not ℓ2
non-expansive: an item costing 1 − η instead of 1 frees √(2η − η²) of budget
for the next item, so a difference η becomes about √(2η) (the tests show
it); no sensitivity bound follows.
"""

from __future__ import annotations

import math

import numpy as np

from dp_spark.accounting.exact import ratio_up
from dp_spark.errors import ParameterError

__all__ = ["GREEDY_MARGIN", "greedy_failure", "rho_greedy"]

#: Relative margin on δ in the threshold search: ρ is chosen with f(ρ) ≤ δ·(1 − GREEDY_MARGIN).
GREEDY_MARGIN = 1e-9


def greedy_failure(rho: float, scale: float, max_items: int) -> float:
    """f(ρ) = 1 − (1 − q(1))·(1 − q(0))^{Δ0 − 1}, q(h) = ½·e^{−(ρ−h)/b}: the largest probability that
    an item only the added person keeps is released (module docstring, step (3)); needs ρ ≥ 1."""
    if rho < 1.0:
        raise ParameterError(f"the greedy failure bound needs rho >= 1; got {rho!r}.")
    q1 = 0.5 * math.exp(-(rho - 1.0) / scale)
    q0 = 0.5 * math.exp(-rho / scale)
    return float(-math.expm1(math.log1p(-q1) + (int(max_items) - 1) * math.log1p(-q0)))


def rho_greedy(epsilon: float, delta: float, max_items: int) -> float:
    """Policy Greedy's threshold: the smallest ρ ≥ 1 (bisection, returned from the safe side) with
    :func:`greedy_failure` (ρ) ≤ δ·(1 − :data:`GREEDY_MARGIN`), for Lap(b) noise, b = 1/ε rounded up
    (the scale drawn). Between 1 + b·ln(1/(2δ)) (one new item of weight 1) and the union bound
    b·ln((e^{1/b} + Δ0 − 1)/(2δ))."""
    scale = ratio_up(1.0, epsilon)
    max_items = int(max_items)
    target = float(delta) * (1.0 - GREEDY_MARGIN)

    def ok(rho: float) -> bool:
        return greedy_failure(rho, scale, max_items) <= target

    lo = max(1.0, 1.0 + scale * math.log(0.5 / target))
    log_mass = float(np.logaddexp(1.0 / scale, math.log(max_items - 1))) if max_items > 1 else 1.0 / scale
    hi = max(lo, scale * (log_mass + math.log(0.5 / target)))
    while not ok(hi):  # the union bound holds, so this only guards against rounding
        hi = hi + max(1e-12, 1e-12 * hi)
    if ok(lo):
        return float(lo)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return float(hi)
