"""Audit: empirical ε lower bounds of the top-k mechanisms against their claims.

For each mechanism: worst-case neighbouring count vectors — D, and D + one
person, i.e. every count of that person's items +1 — and an output event S
much likelier on one than on the other (for the joint mechanisms found by
brute force over all small count vectors and persons, tests below say which);
the real mechanism runs n times on each (fixed test seeds); the
Clopper–Pearson bound (tests/audit/stats.py) must not exceed the claimed ε,
and the same audit run on a broken variant (ε doubled, i.e. noise scale
halved) must exceed it, proving the audit can see a factor-2 mistake.
"""

from __future__ import annotations

import numpy as np
import pytest

from dp_spark.mechanisms.top_k import (
    cdp_peel_top_k,
    joint_top_k,
    pnf_joint_top_k,
    pnf_peel_top_k,
    unknown_domain_gumbel,
)
from dp_spark.mechanisms.top_k.auto import auto_anchor_ranks, noisy_rank_counts
from tests.audit.stats import assert_detects
from tests.audit.stats import epsilon_lower_bound


def event_rate(run, counts, n: int, seed: int, event) -> int:
    """How many of n runs of ``run(counts, rng)`` land in ``event``."""
    rng = np.random.default_rng(seed)
    return sum(bool(event(run(counts, rng))) for _ in range(n))


def audit(run, likely, unlikely, event, n, seed, delta=0.0) -> float:
    """ε lower bound from P[S] on ``likely`` against P[S] on ``unlikely``."""
    k1 = event_rate(run, likely, n, seed, event)
    k2 = event_rate(run, unlikely, n, seed + 1, event)
    return epsilon_lower_bound(k1, n, k2, n, delta)


# --- joint mechanisms --------------------------------------------------------
# Brute force over all count vectors in {0,1,2}^d (d <= 6, k <= 2) and every
# person (a non-empty set of items): at ε = 3 the largest ratio with a
# measurable event is D = (1,0,0,0,0,0) against D + a person holding items
# 2..5, for S = {output (0, 1)}: on D it is an optimal sequence, on D + person
# its error is 1 while four other items tie with item 0's runner-up.
JOINT_D = np.array([1, 0, 0, 0, 0, 0])
JOINT_D_PLUS = JOINT_D + np.array([0, 0, 1, 1, 1, 1])
JOINT_EPS = 3.0


def _is_01(out) -> bool:
    return tuple(int(i) for i in out) == (0, 1)


@pytest.mark.parametrize("name, sampler, n", [("joint", joint_top_k, 6000),
                                              ("pnf-joint", pnf_joint_top_k, 6000)])
def test_joint_mechanisms(audit_record, name, sampler, n):
    honest = audit(lambda c, r: sampler(c, 2, JOINT_EPS, r), JOINT_D, JOINT_D_PLUS, _is_01, n, 11)
    audit_record(f"top-k {name} (d=6, k=2)", JOINT_EPS, honest, n)
    broken = audit(lambda c, r: sampler(c, 2, 2 * JOINT_EPS, r), JOINT_D, JOINT_D_PLUS, _is_01, n, 11)
    assert_detects(f"top-k {name}", JOINT_EPS, broken)


# --- peeling -------------------------------------------------------------------
# d items with no holder, against one person holding items 0 and 1:
# S = {output (0, 1)}; each of the two rounds moves the odds by about e^(ε/2),
# so the ratio approaches e^ε (the composed claim) as d grows. CDP-Peel's
# exponential-mechanism rounds are less tight than permute-and-flip's, so it
# gets more items (d = 30: ratio e^2.7 at ε' = 1.5 per round, e^4.7 broken).
def _peel_pair(d: int):
    base = np.zeros(d, dtype=np.int64)
    return base + np.r_[1, 1, np.zeros(d - 2, dtype=np.int64)], base


@pytest.mark.parametrize("name, eps, d, n", [("pnf-peel", 3.0, 10, 20000), ("cdp-peel", 3.0, 30, 40000)])
def test_peeling_mechanisms(audit_record, name, eps, d, n):
    delta = 1e-6 if name == "cdp-peel" else 0.0
    plus, base = _peel_pair(d)

    def run(factor):
        if name == "pnf-peel":
            return lambda c, r: pnf_peel_top_k(c, 2, factor * eps, r)
        return lambda c, r: cdp_peel_top_k(c, 2, factor * eps, delta, r)

    honest = audit(run(1), plus, base, _is_01, n, 21, delta)
    audit_record(f"top-k {name} (d={d}, k=2)", eps, honest, n, delta)
    broken = audit(run(2), plus, base, _is_01, n, 21, delta)
    assert_detects(f"top-k {name}", eps, broken)


# --- Unknown Domain Gumbel -------------------------------------------------------
# k = 1: ten items far above the threshold (kbar = 10, so the (kbar+1)-th count
# is 0); the person adds 1 to item 0. Top-1 of Gumbel-noised counts with all
# utilities moving up is ε-DP (the δ covers items entering/leaving the top kbar).
UD_D = np.full(10, 100)
UD_D_PLUS = UD_D + np.r_[1, np.zeros(9, dtype=np.int64)]


def test_unknown_domain_gumbel(audit_record):
    eps, delta, n = 2.0, 1e-6, 20000

    def run(factor):
        return lambda c, r: unknown_domain_gumbel(c, 1, factor * eps, delta, 10, r).indices

    def is_0(idx):
        return idx.size == 1 and int(idx[0]) == 0

    honest = audit(run(1), UD_D_PLUS, UD_D, is_0, n, 31, delta)
    audit_record("top-k unknown-domain (k=1, kbar=10)", eps, honest, n, delta)
    broken = audit(run(2), UD_D_PLUS, UD_D, is_0, n, 31, delta)
    assert_detects("top-k unknown-domain", eps, broken)


# --- auto's selection step ----------------------------------------------------------
# The only data auto's choice sees: Laplace-noised counts at ranks 1 and k. A
# person holding every item moves both order statistics by +1 (the ℓ1
# worst case); S = {every noisy value above its count on D + person}: the
# Laplace tail ratio is then exactly e^(2/b) = e^ε.
def test_auto_choice_noisy_rank_counts(audit_record):
    eps, n = 1.0, 30000
    counts = np.array([40, 30, 30, 20, 10, 10, 5, 5, 5, 0])
    plus = counts + 1
    ranks = auto_anchor_ranks(2, counts.size)  # ranks 1, 2
    level = np.sort(plus)[::-1][ranks - 1]

    def run(factor):
        return lambda c, r: noisy_rank_counts(c, ranks, factor * eps, r)

    def above(values):
        return bool(np.all(values > level))

    honest = audit(run(1), plus, counts, above, n, 41)
    audit_record("top-k auto choice (noisy ranks 1 and k)", eps, honest, n)
    broken = audit(run(2), plus, counts, above, n, 41)
    assert_detects("top-k auto choice", eps, broken)



# --- grouped top-k (issue 24) ----------------------------------------------------
# Two groups, cap m = 2: ten items nobody holds in each group, against one
# person holding item 0 in BOTH groups; k = 1 (PNF-Peel, one round of
# permute-and-flip), S = {both groups output item 0}. Each group runs at ε/2
# (dp_spark.mechanisms.top_k.error.grouped_domain_top_k), each ratio approaches e^(ε/2) as d
# grows, so the two compose to at most e^ε; the broken variant forgets the
# cap (each group at the full ε, as if m = 1), which composes towards e^(2ε)
# and must be caught.
def test_grouped_selection_composes_over_the_persons_groups(audit_record):
    from dp_spark.mechanisms.top_k.error import grouped_domain_top_k

    eps, n, d = 3.0, 20000, 10
    plus, base = _peel_pair(d)
    plus[1] = 0  # the person holds item 0 only
    base2, plus2 = np.vstack([base, base]), np.vstack([plus, plus])

    def run(m):
        return lambda c, r: grouped_domain_top_k("pnf-peel", c, 1, eps, 0.0, m, r)

    def both_0(outs):
        return all(int(o[0]) == 0 for o in outs)

    honest = audit(run(2), plus2, base2, both_0, n, 51)
    audit_record("top-k grouped pnf-peel (2 groups, m=2, d=10, k=1)", eps, honest, n)
    broken = audit(run(1), plus2, base2, both_0, n, 51)
    assert_detects("top-k grouped (cap ignored)", eps, broken)


# --- grouped top-k under ρ-zCDP (issue 36 §3, noise="gaussian") ---------------------
# Each group's selection must be ε_g-bounded-range (BR), not just ε_g-DP: BR
# is what makes it ε_g²/8-zCDP (Cesar & Rogers 2021) and lets a person's m
# groups compose to ρ with ε_g = √(8ρ/m). BR bounds the RANGE of the privacy
# loss: for events S (likelier on D) and T (likelier on D + person),
# ln(P[S|D]/P[S|D+]) + ln(P[T|D+]/P[T|D]) <= ε_g, where an ε_g-DP mechanism
# may reach 2ε_g. Joint mechanism, the JOINT_D pair above, k = 2, ρ = 4.5,
# m = 4: ε_g = √(8·4.5/4) = 3. Brute force over its 30 sequences: S = {(0, 1)}
# and T = {the first item is one the person holds} are the extremes of the
# loss, and their sum is exactly ε_g (the bound is tight). Each one-sided
# bound is taken at α/2, so the sum holds with probability >= 1 − α. Broken:
# the cap ignored (each group at √(8ρ), as if m = 1): 2ε_g.
ZCDP_RHO, ZCDP_M = 4.5, 4


def _first_held(out) -> bool:
    return int(out[0]) in (2, 3, 4, 5)


def _zcdp_group(method: str, k: int, rho: float, m: int):
    from dp_spark.mechanisms.top_k.zcdp import grouped_zcdp_top_k

    return lambda c, r: grouped_zcdp_top_k(method, c[None, :], k, rho, m, r)[0][0]


def test_zcdp_joint_group_selection_is_bounded_range(audit_record):
    from dp_spark.mechanisms.top_k.zcdp import zcdp_group_epsilon
    from tests.audit.stats import ALPHA

    n = 8000
    claimed = zcdp_group_epsilon("joint", ZCDP_RHO, ZCDP_M, 2)
    assert claimed == pytest.approx(3.0) and claimed**2 / 8 <= ZCDP_RHO / ZCDP_M

    def loss_range(m, seed):
        run = _zcdp_group("joint", 2, ZCDP_RHO, m)
        up = epsilon_lower_bound(event_rate(run, JOINT_D, n, seed, _is_01), n,
                                 event_rate(run, JOINT_D_PLUS, n, seed + 1, _is_01), n, alpha=ALPHA / 2)
        down = epsilon_lower_bound(event_rate(run, JOINT_D_PLUS, n, seed + 2, _first_held), n,
                                   event_rate(run, JOINT_D, n, seed + 3, _first_held), n, alpha=ALPHA / 2)
        return up + down

    audit_record("top-k grouped zCDP joint: loss range (m=4, ε_g=3)", claimed, loss_range(ZCDP_M, 61), n)
    assert_detects("top-k grouped zCDP joint (cap ignored)", claimed, loss_range(1, 61))


# One-shot Gumbel per group (the zCDP form's default), k = 2 rounds at
# ε' = √(8ρ/(m·k)) = 1.5 for ρ = 2.25, m = 4: each round is ε'-BR, so ε'-DP,
# and the group's output is kε' = 3-DP (and k·ε'²/8 = ρ/m-zCDP). The
# _peel_pair event of the CDP-Peel audit above (d = 30). Broken: the cap
# ignored (ε' = 3 per round).
def test_zcdp_peel_group_selection_within_k_rounds(audit_record):
    from dp_spark.mechanisms.top_k.zcdp import zcdp_group_epsilon

    rho, m, k, d, n = 2.25, 4, 2, 30, 40000
    eps_round = zcdp_group_epsilon("cdp-peel", rho, m, k)
    assert eps_round == pytest.approx(1.5) and k * eps_round**2 / 8 <= rho / m
    claimed = k * eps_round
    plus, base = _peel_pair(d)
    honest = audit(_zcdp_group("cdp-peel", k, rho, m), plus, base, _is_01, n, 63)
    audit_record(f"top-k grouped zCDP one-shot Gumbel (m=4, ε'=1.5, k=2, d={d})", claimed, honest, n)
    broken = audit(_zcdp_group("cdp-peel", k, rho, 1), plus, base, _is_01, n, 63)
    assert_detects("top-k grouped zCDP one-shot Gumbel (cap ignored)", claimed, broken)
