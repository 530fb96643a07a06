"""Audit: the private choice of the group cap m (dp_spark.mechanisms.groups)
on neighbouring groups-per-person histograms, D and D + one person.

The events were found by brute force over all histograms in {0..4}^M
(M ≤ 5) and every added person, maximising what the broken variant leaks
at a measurable probability. Each audit runs the real mechanism n times on
both inputs (fixed test seeds); the Clopper–Pearson bound
(tests/audit/stats.py) must not exceed the claimed ε, and the same event and
trial count on a broken variant must exceed it:

- quantile (ε = 2, q = 0.5): D = one person with 2 groups, D + a person with
  1 group; S = {m = 2}. Broken: ε doubled (the noise scale halved).
- GEM (ε = 1): D = nobody (M = 5), D + a person with 5 groups; S = {m = 1}.
  Broken: the exponential mechanism on Σ_p min(c_p, m) with sensitivity 1
  for every m (the mistake GEM's Δ_m = m avoids: a person moves q_m by up
  to m, not 1).
- zCDP per-group counts (the grouped distinct-count's noise="gaussian",
  ρ = 0.51, m = 4, δ = 0.01): D = 4 groups at count 1000, D + y = at 1001;
  S = {sum of the 4 estimates ≥ 4006}. Broken: σ without the √m factor.
- joint choice of (m, l) (the grouped distinct-count's max_groups=None,
  ε = 1): caps 1 and 4, one person moving q_{m,1} by m; S = {(4, 1)}.
  Broken: sensitivities l instead of m·l.
- private group keys (groups=None; the exact discrete set-union of
  dp_spark.releases.group_keys at ε = 1, δ = 0.1, Δ0 = 3): exactly, every
  released key set's probability on D and D + y (brute-force pmf) for
  shared-key, new-key and mixed y; and measured through the real mask, one
  person added to a key. Broken: σ halved / the threshold halved (exact),
  σ/4 (measured).
"""

from __future__ import annotations

import math

import numpy as np

from dp_spark.accounting import ZCDP, ApproxDP
from dp_spark.mechanisms.exponential import exponential_mechanism
from dp_spark.mechanisms.groups import choose_max_groups, gem_utilities
from tests.audit.stats import assert_detects, epsilon_lower_bound


def rate(choose, histogram, n, seed, event) -> int:
    rng = np.random.default_rng(seed)
    return sum(choose(histogram, rng) == event for _ in range(n))


def audit(choose, likely, unlikely, event, n, seed) -> float:
    return epsilon_lower_bound(rate(choose, likely, n, seed, event), n,
                               rate(choose, unlikely, n, seed + 1, event), n)


def test_quantile_choice_of_the_group_cap(audit_record):
    eps, n = 2.0, 20000
    d, d_plus = np.array([0, 1]), np.array([1, 1])

    def real(h, rng):
        return choose_max_groups(h, eps, rng, method="quantile", quantile=0.5)

    def broken(h, rng):
        return choose_max_groups(h, 2 * eps, rng, method="quantile", quantile=0.5)

    audit_record("groups: quantile choice of m", eps, audit(real, d, d_plus, 2, n, 71), n)
    assert_detects("groups: quantile choice of m", eps, audit(broken, d, d_plus, 2, n, 71))


def test_gem_choice_of_the_group_cap(audit_record):
    eps, n = 1.0, 30000
    d = np.zeros(5, dtype=np.int64)
    d_plus = d.copy()
    d_plus[4] = 1

    def real(h, rng):
        return choose_max_groups(h, eps, rng, method="gem", beta=0.2)

    def broken(h, rng):
        return 1 + exponential_mechanism(gem_utilities(h)[0], eps, 1.0, rng)

    audit_record("groups: GEM choice of m", eps, audit(real, d, d_plus, 1, n, 73), n)
    assert_detects("groups: GEM choice of m", eps, audit(broken, d, d_plus, 1, n, 73))


KEYS_EPSILON, KEYS_DELTA_AUDIT, KEYS_M = 1.0, 0.1, 3  # δ large, so that the δ parts are measurable


def _key_histogram(persons: list[list[int]], n_keys: int) -> np.ndarray:
    """The key step's histogram (the real weighted-Gaussian kernel) of persons' key sets."""
    from dp_spark.mechanisms.set_union import build_histogram
    from dp_spark.releases.group_keys import KEY_STEP_POLICY

    sizes = [len(p) for p in persons]
    indptr = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    codes = np.array([c for p in persons for c in p], dtype=np.int64)
    return build_histogram(indptr, codes, n_keys, KEY_STEP_POLICY, None)


def _set_probabilities(weights: np.ndarray, plan) -> np.ndarray:
    """P[released set = O] for every O ⊆ keys (bit i: key i), exactly (brute-force pmf per key; keys independent)."""
    from dp_spark.mechanisms.set_union import grid_statistic
    from tests.unit.test_set_union_discrete import released_probability

    x = grid_statistic(weights, plan.grid_bits)
    p = [released_probability(int(v), plan) if w > 0 else 0.0 for v, w in zip(x, weights)]
    outcomes = np.arange(2 ** len(p))
    out = np.ones(len(outcomes))
    for i, pi in enumerate(p):
        out *= np.where((outcomes >> i) & 1, pi, 1.0 - pi)
    return out


def _needed_delta(p1: np.ndarray, p2: np.ndarray, epsilon: float) -> float:
    """The smallest δ with P1(S) <= e^ε·P2(S) + δ for EVERY event S (S = the outcomes where P1 > e^ε·P2)."""
    return float(np.clip(p1 - math.exp(epsilon) * p2, 0.0, None).sum())


def _needed_epsilon(p1: np.ndarray, p2: np.ndarray, delta: float) -> float:
    """The smallest ε with :func:`_needed_delta` <= δ (bisection; both directions)."""
    lo, hi = 0.0, 50.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if max(_needed_delta(p1, p2, mid), _needed_delta(p2, p1, mid)) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


#: Neighbours of the key step: y's key set (codes; keys 0..2 are held by the k background persons, 3.. by
#: nobody else). The added person moves weight onto one or three shared keys, brings new keys, or both.
KEY_NEIGHBOURS = {"one shared key": [0], "three shared keys": [0, 1, 2], "one new key": [3],
                  "three new keys": [3, 4, 5], "shared and new": [0, 3]}


def _worst_exact_epsilon(plan, delta: float) -> tuple[float, str, float]:
    """max over the neighbours and background sizes k of the exact ε needed
    at δ, or at the noise's δ/2 alone when y brings no new key (then the
    threshold's part is not needed: a stricter check)."""
    worst, where, worst_at = 0.0, "", delta
    for name, y in KEY_NEIGHBOURS.items():
        at = delta if max(y) >= 3 else delta / 2
        for k in range(0, int(np.ceil(plan.rho)) + 3):
            background = [[0, 1, 2]] * k + [[0]] * k  # key 0 heavier than keys 1 and 2
            n = max(3, max(y) + 1)
            d, d_y = _key_histogram(background, n), _key_histogram(background + [y], n)
            eps = _needed_epsilon(_set_probabilities(d_y, plan), _set_probabilities(d, plan), at)
            if eps > worst:
                worst, where, worst_at = eps, f"{name}, k = {k}", at
    return worst, where, worst_at


def test_private_group_keys_exact_neighbour_ratios_stay_within_e_eps_plus_delta(audit_record):
    """The key step of groups=None (dp_spark.releases.group_keys) at its
    real constants (key_step_plan, Δ0 = m = 3): D = k persons on the keys
    0..2, D + y for every y of KEY_NEIGHBOURS; the released key set's
    probability, computed EXACTLY for every output (brute-force discrete
    Gaussian pmf, keys independent), satisfies P(S) <= e^ε·P'(S) + δ for
    every event S both ways (δ/2, the noise's part, when y brings no new
    key): the smallest such ε is recorded against the claim. Broken (σ
    halved, or the threshold R halved): the exact ε needed exceeds it."""
    import dataclasses

    from dp_spark.releases.group_keys import key_step_plan

    plan = key_step_plan(ApproxDP(KEYS_EPSILON, KEYS_DELTA_AUDIT), KEYS_M)
    worst, where, at = _worst_exact_epsilon(plan, plan.delta)
    audit_record(f"group keys (exact discrete set-union), exact over outputs: {where}", plan.epsilon, worst,
                 0, delta=at)
    assert worst > 0.3 * plan.epsilon  # the neighbours are sharp enough to mean something
    halved = dataclasses.replace(plan, sigma=plan.sigma // 2)
    assert _worst_exact_epsilon(halved, plan.delta)[0] > plan.epsilon
    low = dataclasses.replace(plan, threshold=plan.threshold // 2)
    assert _worst_exact_epsilon(low, plan.delta)[0] > plan.epsilon


KEYS_RHO_AUDIT, KEYS_ZCDP_DELTA = 0.5, 0.05  # a (ρ, δ) release's key step, δ large enough to measure


def _renyi(p: np.ndarray, q: np.ndarray, alpha: float) -> float:
    """D_α(P‖Q) of two distributions over the same outcomes (inf when P charges an outcome Q does not)."""
    if np.any((p > 0) & (q <= 0)):
        return math.inf
    keep = p > 0
    return float(np.log(np.sum(p[keep] ** alpha * q[keep] ** (1.0 - alpha))) / (alpha - 1.0))


def _worst_renyi(plan, delta: float) -> tuple[float, float, str]:
    """(max over neighbours, background sizes k and orders α of D_α/α both ways between M(D) and
    M(D + y) given E' = "no key only y holds released"; the largest P[not E']; where the first was)."""
    worst, failure, where = 0.0, 0.0, ""
    for name, y in KEY_NEIGHBOURS.items():
        for k in range(0, int(np.ceil(plan.rho)) + 3):
            background = [[0, 1, 2]] * k + [[0]] * k
            n = max(3, max(y) + 1)
            h, h_y = _key_histogram(background, n), _key_histogram(background + [y], n)
            d, d_y = _set_probabilities(h, plan), _set_probabilities(h_y, plan)
            new = sum(1 << i for i in range(n) if h[i] <= 0 < h_y[i])  # the keys only y holds
            shared = (np.arange(len(d_y)) & new) == 0  # outcomes releasing none of them
            failure = max(failure, float(d_y[~shared].sum()))
            given = np.where(shared, d_y, 0.0) / d_y[shared].sum()
            for alpha in (1.25, 2.0, 4.0, 16.0):
                for first, second in ((given, d), (d, given)):
                    ratio = _renyi(first, second, alpha) / alpha
                    if ratio > worst:
                        worst, where = ratio, f"{name}, k = {k}, α = {alpha:g}"
    return worst, failure, where


def test_private_group_keys_of_a_zcdp_release_are_approximately_zcdp_exactly(audit_record):
    """The key step of a (ρ, δ) release (count-release, groups=None: key_step_plan(ZCDP(ρ_k, δ_k)), the
    discrete module's (4)) at ρ = 0.5, δ = 0.05, Δ0 = 3: for every neighbour of KEY_NEIGHBOURS and
    background size, EXACTLY over all released key sets, P[a key only y holds is released] <= δ and,
    given that none is, D_α/α <= ρ both ways at α = 1.25, 2, 4, 16 (δ-approximate ρ-zCDP, Bun & Steinke
    2016, Definition 8.1). Broken: σ halved exceeds ρ; the threshold halved exceeds δ."""
    import dataclasses

    from dp_spark.releases.group_keys import key_step_plan

    plan = key_step_plan(ZCDP(KEYS_RHO_AUDIT, KEYS_ZCDP_DELTA), KEYS_M)
    worst, failure, where = _worst_renyi(plan, KEYS_ZCDP_DELTA)
    audit_record(f"group keys of a zCDP release, exact D_α/α against ρ: {where}", KEYS_RHO_AUDIT, worst, 0,
                 delta=failure)
    assert failure <= KEYS_ZCDP_DELTA and worst <= KEYS_RHO_AUDIT
    assert worst > 0.2 * KEYS_RHO_AUDIT and failure > 0.05 * KEYS_ZCDP_DELTA  # sharp enough to mean something
    assert _worst_renyi(dataclasses.replace(plan, sigma=plan.sigma // 2), KEYS_ZCDP_DELTA)[0] > KEYS_RHO_AUDIT
    assert _worst_renyi(dataclasses.replace(plan, threshold=plan.threshold // 2), KEYS_ZCDP_DELTA)[1] \
        > KEYS_ZCDP_DELTA


KEY_TRIALS = 200_000


def _key_released(weights, plan, seed: int) -> int:
    """Runs (of KEY_TRIALS) of the real mask (exact sampler) releasing key 0."""
    from dp_spark.mechanisms.set_union import release_mask

    tiled = np.tile(np.asarray(weights, dtype=np.float64), KEY_TRIALS)
    return int(release_mask(tiled, plan, np.random.default_rng(seed)).reshape(KEY_TRIALS, -1)[:, 0].sum())


def _measured_key_bound(plan, seed: int) -> float:
    """The largest two-sided ε lower bound over background sizes k: D = k
    persons on key 0, D + y = one more (the largest one-key move)."""
    from tests.audit.stats import ALPHA, two_sided_lower_bound

    grid = range(1, int(np.ceil(plan.rho)) + 3)
    best = 0.0
    for k in grid:
        with_y = _key_released(_key_histogram([[0]] * (k + 1), 1), plan, seed + 2 * k)
        without = _key_released(_key_histogram([[0]] * k, 1), plan, seed + 2 * k + 1)
        best = max(best, two_sided_lower_bound(with_y, KEY_TRIALS, without, KEY_TRIALS, plan.noise_delta,
                                               alpha=ALPHA / len(grid)))
    return best


def test_private_group_keys_measured_through_the_exact_sampler(audit_record):
    """The same step measured: the real mask (exact discrete Gaussian
    draws), one person added to a key; Clopper–Pearson ε lower bound <= ε.
    Broken: σ divided by 4 must be detected."""
    import dataclasses

    from dp_spark.releases.group_keys import key_step_plan

    plan = key_step_plan(ApproxDP(KEYS_EPSILON, KEYS_DELTA_AUDIT), KEYS_M)
    bound = _measured_key_bound(plan, 351)
    audit_record("group keys (exact discrete set-union): person adds a key's weight", plan.epsilon, bound,
                 KEY_TRIALS, delta=plan.noise_delta)
    assert_detects("group keys with σ/4", plan.epsilon,
                   _measured_key_bound(dataclasses.replace(plan, sigma=plan.sigma // 4), 351))


def _block_sums(max_groups_claimed: int, count: int, blocks: int, m: int, seed: int) -> np.ndarray:
    """The real zCDP per-group mechanism (release_groups, noise="gaussian")
    on ``blocks`` independent copies of m groups whose counts are ``count``
    at the one candidate l = 1 (max_bound 1: the choice is trivial); each
    group's draw is independent, so one call yields every block. Returns
    each block's summed estimate."""
    from dp_spark.mechanisms.distinct_count.cap_bound import release_groups

    at = np.full((blocks * m, 1), count, dtype=np.int64)
    released, _ = release_groups(at, [1], 1, max_groups_claimed, 0.05, np.random.default_rng(seed),
                                 noise="gaussian", select=ZCDP_SELECT, count=ZCDP_COUNT)
    return np.array([r["estimate"] for r in released]).reshape(blocks, m).sum(axis=1)


ZCDP_SELECT, ZCDP_COUNT, ZCDP_DELTA = 0.01, 0.5, 1e-2


def test_grouped_zcdp_counts(audit_record):
    """The grouped distinct-count's ρ-zCDP counts (discrete Gaussian with √m
    scaling), m = 4: D has every count of 4 groups at 1000, D + y at 1001
    (the worst case: one person moves each of their m groups' c_{g,1} by
    l = 1). Event: the 4 estimates' sum ≥ 4006. Claim: ρ = select + count
    = 0.51-zCDP, so (ρ + 2·√(ρ·ln(1/δ)), δ)-DP at δ = 0.01 (Bun–Steinke
    2016, Prop. 1.3). Broken: the noise without the √m factor (each group
    calibrated as if a person touched one group: 4ρ across the 4 groups)."""
    import math

    m, blocks, threshold = 4, 8000, 4 * 1000 + 6
    rho = ZCDP_SELECT + ZCDP_COUNT
    claimed = rho + 2.0 * math.sqrt(rho * math.log(1.0 / ZCDP_DELTA))

    def bound(claimed_m, seed):
        plus = _block_sums(claimed_m, 1001, blocks, m, seed) >= threshold
        base = _block_sums(claimed_m, 1000, blocks, m, seed + 1) >= threshold
        return epsilon_lower_bound(int(plus.sum()), blocks, int(base.sum()), blocks, ZCDP_DELTA)

    audit_record("groups: zCDP per-group counts (m = 4)", claimed, bound(m, 81), blocks, ZCDP_DELTA)
    assert_detects("groups: zCDP per-group counts (m = 4)", claimed, bound(1, 83))


def test_joint_choice_of_the_cap_and_bound(audit_record):
    """The grouped distinct-count's joint choice of (m, l) with
    max_groups=None (dp_spark.mechanisms.distinct_count.cap_bound), ε = 1,
    permute-and-flip over GEM's same-direction scores, on neighbouring score
    tables: caps 1 and 4, bound 1, 4 groups; D has c_{g,1,1} = 2 and
    c_{g,4,1} = 0 in every group, D + y adds 1 to one group at cap 1 and to
    all 4 groups at cap 4 (y keeps 1 group, resp. 4: q moves by m·l, the
    worst case). Event: (m, l) = (4, 1). Found by a search over such tables
    for the largest leak of the broken variant. Broken: sensitivities l
    (forgetting that one person moves up to m groups), which the release's
    m·l avoids."""
    from dp_spark.mechanisms.distinct_count.cap_bound import choose_cap_and_bound, joint_scores
    from dp_spark.mechanisms.distinct_count.gem import generalized_permute_and_flip

    eps, n, caps, bounds = 1.0, 30000, [1, 4], [1]
    d = np.zeros((2, 4, 1), dtype=np.int64)
    d[0] = 2
    d_plus = d.copy()
    d_plus[0, 0, 0] += 1
    d_plus[1, :, 0] += 1
    margins = np.zeros((2, 1), dtype=np.int64)

    def real(at, rng):
        return choose_cap_and_bound(at, caps, bounds, margins, eps, rng)

    def broken(at, rng):
        q, _ = joint_scores(at, caps, bounds, margins)
        return divmod(int(generalized_permute_and_flip(q, np.ones(2), eps, 0.2, rng, monotone=True)), 1)

    audit_record("groups: joint choice of (m, l)", eps, audit(real, d_plus, d, (1, 0), n, 91), n)
    assert_detects("groups: joint choice of (m, l)", eps, audit(broken, d_plus, d, (1, 0), n, 91))
