"""Audit of the multi-round exact weighted Gaussian (dp_spark.mechanisms.set_union.sips).

Every run goes through the real constants and the real exact threshold step
(:func:`dp_spark.mechanisms.set_union.discrete_release_mask`), ``TRIALS`` runs per input, with the
rounds simulated per history: the trials are grouped by the items released so far, and each
group's next round is built from the persons' kept sets given that history
(:func:`~dp_spark.mechanisms.set_union.sips.kept_sets`), as the mechanism does.

1. y adds weight to an item others hold (the composed noise's (ε, δ_noise) claim): D = k persons
   on item 0, D' adds y on it; event: item 0 released by some round, both directions
   (two_sided_lower_bound), over a grid of k (Bonferroni).
2. y adds Δ0 items nobody else holds (the rounds' thresholds: δ_threshold in all); event: any of
   them released.
3. The rounds' channel: z keeps one item (Δ0 = 1), item 0 first; when round 1 releases item 0
   (likelier with y on it), z keeps item 1 in round 2. Event: item 1 released.

Power: the same procedure against a broken variant (every round's σ halved for (1), the
thresholds halved for (2)) must prove a leak (assert_detects).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dp_spark.mechanisms.set_union import discrete_release_mask
from dp_spark.mechanisms.set_union.sips import kept_sets, plan_sips, round_histogram
from dp_spark.summaries.set_union import UNIT
from tests.audit.stats import ALPHA, assert_detects, epsilon_lower_bound, two_sided_lower_bound

TRIALS = 200_000
EPSILON = 1.0
DELTA = 0.1  # large, so that the δ parts are measurable with TRIALS runs


def released_runs(plan, sets, n_items: int, rng) -> np.ndarray:
    """(TRIALS, n_items) masks of the items released over the rounds, the trials grouped by history."""
    out = np.zeros((TRIALS, n_items), dtype=bool)
    rank = np.arange(n_items)
    for r in plan.rounds:
        histories, index = np.unique(out, axis=0, return_inverse=True)
        index = index.reshape(-1)
        for h, released in enumerate(histories):
            rows = np.flatnonzero(index == h)
            hist = round_histogram(kept_sets(sets, set(np.flatnonzero(released).tolist()), plan.max_items, rank),
                                   n_items) * UNIT
            mask = discrete_release_mask(np.tile(hist, rows.size), r, rng).reshape(rows.size, n_items)
            out[rows] |= mask
    return out



def halved_sigma(plan):
    return dataclasses.replace(plan, rounds=tuple(dataclasses.replace(r, sigma=max(1, r.sigma // 2))
                                                  for r in plan.rounds))


def halved_threshold(plan):
    return dataclasses.replace(plan, rounds=tuple(dataclasses.replace(r, threshold=r.threshold // 2)
                                                  for r in plan.rounds))


def added_weight_bound(plan, seed: int) -> float:
    """Audit (1): the largest two-sided bound over k persons already on item 0."""
    grid = (1, 2, 3, 4)
    best = 0.0
    for k in grid:
        rng = np.random.default_rng([seed, k])
        with_y = int(released_runs(plan, [[0]] * (k + 1), 1, rng)[:, 0].sum())
        without = int(released_runs(plan, [[0]] * k, 1, rng)[:, 0].sum())
        best = max(best, two_sided_lower_bound(with_y, TRIALS, without, TRIALS, plan.noise_delta,
                                               alpha=ALPHA / len(grid)))
    return best


def new_items_bound(plan, seed: int) -> tuple[float, int]:
    """Audit (2): one background person on item 0; y adds items 1..Δ0."""
    rng = np.random.default_rng(seed)
    new = list(range(1, plan.max_items + 1))
    n = plan.max_items + 1
    with_y = int(released_runs(plan, [[0], new], n, rng)[:, 1:].any(axis=1).sum())
    without = int(released_runs(plan, [[0]], n, rng)[:, 1:].any(axis=1).sum())
    assert without == 0
    return epsilon_lower_bound(with_y, TRIALS, without, TRIALS, plan.threshold_delta), with_y


def test_one_person_adding_weight_moves_the_output_by_at_most_e_eps(audit_record):
    plan = plan_sips(EPSILON, DELTA, 1)
    bound = added_weight_bound(plan, 300)
    audit_record("set-union sips: person adds weight (two rounds)", plan.epsilon, bound, TRIALS,
                 delta=plan.noise_delta)
    assert_detects("set-union sips with every round's noise halved", plan.epsilon,
                   added_weight_bound(halved_sigma(plan), 300))


def test_one_person_adding_new_items_releases_one_with_probability_at_most_delta(audit_record):
    plan = plan_sips(EPSILON, DELTA, 4)
    bound, hits = new_items_bound(plan, 301)
    audit_record("set-union sips: person adds 4 new items", plan.epsilon, bound, TRIALS,
                 delta=plan.threshold_delta)
    assert hits > 0
    assert_detects("set-union sips with the thresholds halved", plan.epsilon,
                   new_items_bound(halved_threshold(plan), 301)[0])


def test_the_rounds_channel_through_a_later_persons_kept_item(audit_record):
    plan = plan_sips(EPSILON, DELTA, 1)
    rng = np.random.default_rng(302)
    k = 2  # persons on item 0 besides z; z holds [0, 1] and keeps one item
    base = [[0]] * k + [[0, 1]]
    with_y = released_runs(plan, [[0]] + base, 2, rng)
    without = released_runs(plan, base, 2, rng)
    assert with_y[:, 0].mean() > without[:, 0].mean()  # y moves round 1, hence z's round-2 item
    bound = two_sided_lower_bound(int(with_y[:, 1].sum()), TRIALS, int(without[:, 1].sum()), TRIALS,
                                  plan.noise_delta)
    audit_record("set-union sips: y moves a later person's kept item", plan.epsilon, bound, TRIALS,
                 delta=plan.noise_delta)
