"""Issue 40 follow-ups at the plan and mechanism level (no Spark): the grouped joint top-k's total
work G·d·k is refused above ``MAX_GROUPED_JOINT_WORK`` when the plan is built (nothing read or spent),
accepted at the limit; the grouped distinct-count's joint choice of the cap scores the cap candidates up
to the released number of keys, read from the counts at the public limit's candidates."""

from __future__ import annotations

import numpy as np
import pytest

from dp_spark.errors import ParameterError
from dp_spark.mechanisms.distinct_count.cap_bound import cap_candidates, scored_caps
from dp_spark.plans import top_k
from dp_spark.plans.top_k import MAX_GROUPED_JOINT_WORK, MAX_TOP_K_KEYS


def _keys(n: int) -> list[str]:
    return [f"k{j}" for j in range(n)]


@pytest.mark.parametrize("method", ["joint", "pnf-joint"])
def test_private_keys_count_as_the_key_limit_in_the_joint_work(method):
    """Keys chosen privately: G is the release's key limit (100,000), so d·k = 200,000 is the most a
    joint run takes (d = 20,000, the most G·d <= MAX_GROUPED_SUMMARY allows, with k = 10); k = 11 is
    refused by the plan, with the public quantities named."""
    assert MAX_TOP_K_KEYS * 20_000 * 10 == MAX_GROUPED_JOINT_WORK
    at = top_k.plan(k=10, epsilon=1.0, method=method, domain_size=20_000, group_by="g", max_groups=2)
    assert at.params.mechanism == method and "group_keys" in at.split
    with pytest.raises(ParameterError) as refused:
        top_k.plan(k=11, epsilon=1.0, method=method, domain_size=20_000, group_by="g", max_groups=2)
    text = str(refused.value)
    assert "100,000 groups (the release's key limit: the keys are chosen privately)" in text
    assert "20,000" in text and "k = 11" in text and f"{MAX_GROUPED_JOINT_WORK:,}" in text
    assert "fewer keys (public keys: groups=)" in text and "'cdp-peel' or 'pnf-peel'" in text


def test_public_keys_count_as_given_and_the_peeling_methods_are_not_limited():
    keys = _keys(1_000)
    assert 1_000 * 40_000 * 500 == MAX_GROUPED_JOINT_WORK
    top_k.plan(k=500, epsilon=1.0, method="joint", domain_size=40_000, group_by="g", groups=keys, max_groups=1)
    with pytest.raises(ParameterError, match=r"1,000 public keys × domain size 40,001 × k = 500"):
        top_k.plan(k=500, epsilon=1.0, method="joint", domain_size=40_001, group_by="g", groups=keys,
                   max_groups=1)
    for method in ("cdp-peel", "pnf-peel"):  # no k × d sweep: the same sizes are taken
        top_k.plan(k=500, epsilon=1.0, method=method, domain_size=40_001, group_by="g", groups=keys, max_groups=1)
    # one key fewer: the same d·k is accepted (the limit is on the total)
    top_k.plan(k=500, epsilon=1.0, method="joint", domain_size=40_001, group_by="g", groups=keys[:999],
               max_groups=1)


def test_auto_and_the_gaussian_joint_are_limited_as_the_joint_mechanism_they_run():
    keys = _keys(1_000)
    with pytest.raises(ParameterError, match="above the limit"):  # grouped auto with a domain runs a joint kind
        top_k.plan(k=500, epsilon=1.0, domain_size=40_001, group_by="g", groups=keys, max_groups=1)
    with pytest.raises(ParameterError, match="method 'joint'"):
        top_k.plan(k=500, epsilon=1.0, method="joint", noise="gaussian", domain_size=40_001, group_by="g",
                   groups=keys, max_groups=1)
    # the gaussian default (cdp-peel) is not limited
    top_k.plan(k=500, epsilon=1.0, noise="gaussian", domain_size=40_001, group_by="g", groups=keys, max_groups=1)


def test_an_ungrouped_run_keeps_its_per_group_limit_only():
    top_k.plan(k=1_000, epsilon=1.0, method="joint", domain_size=1_000_000)  # d·k = 10^9: the ungrouped limit
    with pytest.raises(ParameterError, match="domain size × k"):
        top_k.plan(k=1_000, epsilon=1.0, method="joint", domain_size=1_000_001)


@pytest.mark.parametrize("n_keys", [1, 2, 3, 4, 5, 10, 16, 17, 1_000, 65_536, 65_537, 99_999, 100_000])
def test_the_joint_choice_scores_the_candidates_of_the_released_keys_from_the_limits_counts(n_keys):
    """Counts made at the candidates of the key limit (100,000) serve every released number of keys:
    the choice scores exactly cap_candidates(n) (as with n public keys), each below n read at itself,
    n read at the first counted cap >= n (which keeps every row, as n does)."""
    counted = cap_candidates(100_000)
    assert counted == [2 ** i for i in range(17)] + [100_000]
    caps, rows = scored_caps(counted, n_keys)
    assert caps == cap_candidates(n_keys) and max(caps) == n_keys
    assert [counted[r] for r in rows[:-1]] == caps[:-1]
    assert counted[rows[-1]] >= n_keys and (rows[-1] == 0 or counted[rows[-1] - 1] < n_keys)
    public, at = scored_caps(cap_candidates(n_keys), n_keys)  # public keys: every counted cap, in order
    assert public == caps and at.tolist() == list(range(len(caps)))


def test_scored_caps_refuses_counts_that_miss_a_candidate():
    with pytest.raises(ValueError, match="every power of two below 10"):
        scored_caps([1, 2, 8, 16], 10)  # no 4
    with pytest.raises(ValueError, match="a cap >= it"):
        scored_caps([1, 2, 4, 8], 10)  # nothing keeps every row
    with pytest.raises(ValueError, match="increase"):
        scored_caps([2, 1, 16], 10)
