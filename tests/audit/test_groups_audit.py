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
"""

from __future__ import annotations

import numpy as np

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


def test_private_group_keys_release_a_new_key_with_probability_at_most_delta(audit_record):
    """The key step of groups=None (dp_spark.releases.group_keys): D has one
    person on a common key; y adds the t <= Δ0 = m keys nobody else holds
    whose chance of any release is largest, through the real kernel and
    release mask at the step's constants (key_mechanism; δ large enough to
    measure). Broken: the threshold ρ halved must be detected."""
    import dataclasses

    from dp_spark.releases.group_keys import key_mechanism
    from tests.audit.test_set_union_audit import DELTA, TRIALS, new_items_bound, worst_new_items

    plan = key_mechanism(1.0, DELTA / 2, 3)
    t = worst_new_items(plan)
    bound, hits = new_items_bound(plan, 311, t)
    audit_record(f"group keys (set-union on the group column): person adds {t} new keys", plan.epsilon, bound,
                 TRIALS, delta=plan.threshold_delta)
    assert hits / TRIALS >= 0.5 * plan.threshold_delta
    broken = dataclasses.replace(plan, rho=plan.rho / 2)
    assert_detects("group keys with threshold halved", plan.epsilon,
                   new_items_bound(broken, 311, worst_new_items(broken))[0])


def _block_sums(max_groups_claimed: int, count: int, blocks: int, m: int, seed: int) -> np.ndarray:
    """The real zCDP per-group mechanism (release_groups, noise="gaussian")
    on ``blocks`` independent copies of m groups whose counts are ``count``
    at the one candidate l = 1 (max_bound 1: the choice is trivial); each
    group's draw is independent, so one call yields every block. Returns
    each block's summed estimate."""
    from dp_spark.mechanisms.distinct_count.grouped import release_groups

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
