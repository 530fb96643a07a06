"""Neighbouring relations for continual distinct counting, and their sensitivities.

Jain, Kalemaj, Raskhodnikova, Sivakumar, Smith (NeurIPS 2023), Definition 1.2:
streams x and x' are *item-neighbours* if x' is x with *a subset* of the
entries concerning one item u replaced by no-ops (or vice versa):
``relation="subset"``, the default. ``relation="item-removal"`` is the
narrower relation where the subset is *all* of u's entries; its guarantee
protects fewer pairs, so it must be asked for.

Sensitivities (property-tested in ``tests/unit/test_continual.py`` on random
neighbour pairs of both kinds). ẽ_u, ẽ'_u are u's w-truncated existence
vectors in x and x' ("freeze at the w-th flip",
:mod:`dp_spark.summaries.continual_distinct`), each flipping at most w times;
counts, flips and truncation are per item, so only u's terms differ.

(a) Tree nodes of Algorithm 1 (flippancy bound w, L = log2 T + 1 levels).
    A node over steps a..b holds Σ_v ẽ_v(b) − ẽ_v(a−1); it moves by δ − δ'
    with δ = ẽ_u(b) − ẽ_u(a−1), δ' = ẽ'_u(b) − ẽ'_u(a−1), both in {−1, 0, 1}.
    δ ≠ 0 only if ẽ_u flips inside a..b, and one level's nodes are disjoint,
    so at most f ≤ w nodes per level have δ ≠ 0 and f' ≤ w have δ' ≠ 0. With
    c nodes where both are non-zero, the level's ℓ2² is
    ≤ 4c + (f − c) + (f' − c) = f + f' + 2c ≤ 4w. Hence Δ₂² ≤ κ·w·L with
    κ = 4 ("subset"). Under "item-removal" ẽ'_u ≡ 0, so Δ₂² ≤ w·L (κ = 1).
    Under "subset" κ = 1 is false: a pair with Δ₂² = 2·w·L exists (T = 8,
    w = 2; in the tests). σ² = κ·w·L/(2ρ) makes the tree ρ-zCDP.
(b) Sparse-vector queries over_counts[j, t] = #{v : flips of v by t > 2^j}:
    only u's indicator can change, so each moves by ≤ 1 under both relations.
(c) Counts D(t) (the recompute baseline): only u's presence at t can change,
    so |D(t) − D'(t)| ≤ 1 under both relations; m released counts have
    ℓ2² ≤ m.
"""

from __future__ import annotations

from dp_spark.errors import ParameterError

__all__ = ["RELATIONS", "DEFAULT_RELATION", "sensitivity_factor", "relation_statement", "check_relation"]

RELATIONS = ("subset", "item-removal")
DEFAULT_RELATION = "subset"

_FACTOR = {"subset": 4, "item-removal": 1}

_STATEMENT = {
    "subset": (
        "item-level (Jain et al. 2023, Definition 1.2): neighbouring streams differ by replacing any "
        "subset of one item's events with no-ops"
    ),
    "item-removal": (
        "item-level, whole-item removal: neighbouring streams differ by all events of one item "
        "(one stream has them, the other none); narrower than the paper's Definition 1.2"
    ),
}


def check_relation(relation: object) -> str:
    """Return ``relation`` after checking it is one of ``RELATIONS``."""
    if relation not in RELATIONS:
        raise ParameterError(f"relation must be one of {', '.join(RELATIONS)}, got {relation!r}")
    return str(relation)


def sensitivity_factor(relation: str) -> int:
    """κ with tree-node ℓ2² sensitivity ≤ κ·w·L (4 for "subset", 1 for "item-removal")."""
    return _FACTOR[check_relation(relation)]


def relation_statement(relation: str) -> str:
    """Plain-language statement of the relation, for a release's report."""
    return _STATEMENT[check_relation(relation)]
