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
