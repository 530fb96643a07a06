"""Privacy audits of the continual-distinct mechanisms (Jain et al., NeurIPS 2023).

Each audit runs the real mechanism on worst-case neighbouring inputs, counts an
event where the likelihood ratio is largest, and compares the Clopper–Pearson
ε lower bound with the claimed (ε, δ) that the ρ-zCDP guarantee implies,
ε = ρ + 2·sqrt(ρ·ln(1/δ)) (Bun–Steinke 2016, Prop. 1.3). Each also runs a
broken variant with the noise scale halved (4ρ) and shows the audit detects it.

Trials are batched: one run of a mechanism over a long horizon yields many
independent copies of the audited piece (every leaf node of a tree carries its
own discrete Gaussian draw; every release of the block-1 baseline its own).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dp_spark.mechanisms.continual_distinct import BinaryTreeMechanism, StreamSummaries, continual_counts
from dp_spark.mechanisms.continual_distinct.mechanisms import group_rho
from tests.audit.stats import assert_detects
from tests.audit.stats import epsilon_lower_bound

DELTA = 1e-3
LOG2_T = 19
T = 1 << LOG2_T


def claimed_epsilon(rho: float, delta: float = DELTA) -> float:
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def _lower_bound(on_d: np.ndarray, on_d_prime: np.ndarray, threshold: int) -> float:
    """ε lower bound for the event {output ≥ threshold} (likelier on D, whose value is 1 higher)."""
    k1, k2 = int(np.sum(on_d >= threshold)), int(np.sum(on_d_prime >= threshold))
    return epsilon_lower_bound(k1, on_d.shape[0], k2, on_d_prime.shape[0], DELTA)


def _leaf_values(sigma2: Fraction, z: np.ndarray, seed: int) -> np.ndarray:
    release = BinaryTreeMechanism(T, sigma2=sigma2).batch(z, np.random.default_rng(seed))
    return z + release.node_noise[0]  # leaf node = its step's value + its own draw


def test_binary_tree_node_audit(audit_record):
    """A tree node of sensitivity 1 with σ² = 1 is 1/2-zCDP. Worst case: the
    node's count is 1 on D, 0 on D' (one item's flip inside the node). Event:
    node value ≥ 2, where the discrete Gaussian's likelihood ratio is large."""
    claimed = claimed_epsilon(0.5)
    ones, zeros = np.ones(T, dtype=np.int64), np.zeros(T, dtype=np.int64)
    bound = _lower_bound(_leaf_values(Fraction(1), ones, 1), _leaf_values(Fraction(1), zeros, 2), 2)
    audit_record("continual tree node (discrete Gaussian)", claimed, bound, T, DELTA)
    broken = _lower_bound(_leaf_values(Fraction(1, 4), ones, 3), _leaf_values(Fraction(1, 4), zeros, 4), 2)
    assert_detects("continual tree node (discrete Gaussian)", claimed, broken)


def _baseline_releases(rho: float, count: int, seed: int) -> np.ndarray:
    z = np.zeros(T, dtype=np.int64)
    z[0] = count  # the item is present from step 1 to T on D, absent on D'
    summaries = StreamSummaries(T, 0, z, z.reshape(1, -1), np.zeros((1, T), dtype=np.int64))
    return continual_counts(summaries, rho, "baseline", block=1, rng=np.random.default_rng(seed)).estimates


def test_recompute_baseline_audit(audit_record):
    """The block-1 baseline releases D(r) + N_Z(0, m/(2ρ)) at every step; with
    ρ = m/2 each release is a sensitivity-1 count with σ² = 1, i.e. ρ/m = 1/2
    per release (zCDP composes additively over the m releases). Worst case:
    one item present at every step. Each release is one trial."""
    rho_total, claimed = T / 2, claimed_epsilon(0.5)
    bound = _lower_bound(_baseline_releases(rho_total, 1, 5), _baseline_releases(rho_total, 0, 6), 2)
    audit_record("continual recompute baseline (per release)", claimed, bound, T, DELTA)
    broken = _lower_bound(_baseline_releases(4 * rho_total, 1, 7), _baseline_releases(4 * rho_total, 0, 8), 2)
    assert_detects("continual recompute baseline (per release)", claimed, broken)


def _grouped_differences(rho_group: float, in_a: int, in_b: int, seeds) -> np.ndarray:
    """a − b for two groups' block-1 baselines (each group's own counter at
    ``rho_group``, independent noise): item x present in group a (``in_a``)
    and/or b (``in_b``) from step 1 to T; one trial per step and run."""
    out = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        a = _baseline_counts(rho_group, in_a, rng)
        b = _baseline_counts(rho_group, in_b, rng)
        out.append(a - b)
    return np.concatenate(out)


def _baseline_counts(rho: float, count: int, rng) -> np.ndarray:
    z = np.zeros(T, dtype=np.int64)
    z[0] = count
    summaries = StreamSummaries(T, 0, z, z.reshape(1, -1), np.zeros((1, T), dtype=np.int64))
    return continual_counts(summaries, rho, "baseline", block=1, rng=rng).estimates


def test_grouped_counters_audit(audit_record):
    """Grouped continual-distinct (issue 24), m = 1: item x has events in groups
    a and b, a first in the public order, so D keeps x in a; its neighbour D'
    (x's a-events removed, the release's subset relation) keeps x in b instead:
    both groups' series move. Each group's counter runs at ρ/(2m)
    (``group_rho``); the claim is the total ρ. Event: a − b ≥ 5 (likelier on
    D). The broken variant is the tempting mistake, each group at ρ/m
    ("parallel composition": one item, one group), which the audit detects."""
    rho_total, claimed, runs = T / 2, claimed_epsilon(0.5), 4  # ρ/T = 1/2 per step: one trial per step
    n = runs * T

    def bound(rho_group, seeds):
        on_d = _grouped_differences(rho_group, 1, 0, seeds[:runs])
        on_d_prime = _grouped_differences(rho_group, 0, 1, seeds[runs:])
        return _lower_bound(on_d, on_d_prime, 5)

    audit_record("grouped continual counters (m = 1, subset neighbour)", claimed,
                 bound(group_rho(rho_total, "baseline", 1), range(20, 28)), n, DELTA)
    assert_detects("grouped continual counters (m = 1, subset neighbour)", claimed,
                   bound(rho_total, range(30, 38)))
