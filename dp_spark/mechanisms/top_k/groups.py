"""One group's top-k selection with its own stream (numpy only): what the grouped top-k runs in every
group, on the executors or on the driver, and the ungrouped release in its one group.

Input per group: the NON-PRIVATE distinct-person counts of that group (a public domain's d counts in
domain order, or the k̄ largest counts in the canonical order count descending, item ascending, and
the (k̄+1)-th), after every person was capped to at most m groups. One person moves each (group,
item) count by at most 1, all in the same direction, in at most m groups.

Guarantee. :class:`GroupSelection` runs the ungrouped mechanism of :mod:`dp_spark.mechanisms.top_k`
at the group's share: ε/m (and δ/m) for the pure and (ε, δ) forms (:func:`~._common.group_share`;
basic composition over a person's ≤ m groups, parallel composition over the others: (ε, δ)-DP in
all), or ρ/m-zCDP for the bounded-range forms (:mod:`.zcdp`: ρ-zCDP in all). Both compositions
assume every group's draws independent of every other group's: group g draws only from
``root.stream(g)`` (:class:`dp_spark.noise.rng.StreamRoot`), a stream of its own, fixed by the
public index g (its position in the canonical keys) and the release's root: unseeded, ChaCha20
under the release's 256-bit key from counter g·2⁶⁴ (disjoint blocks of one keystream; a re-run
task draws the same values); seeded (tests only), the SeedSequence child
``(..., g)``. The draws do not depend on which process runs the group, the partitioning, or the
other groups, so a seeded output is the same on the driver and on the executors, whatever the
partitioning. The selection returns item indices and ⊥ only, never a count, and logs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dp_spark.errors import ParameterError
from dp_spark.mechanisms.top_k._common import group_share
from dp_spark.mechanisms.top_k.error import domain_top_k
from dp_spark.mechanisms.top_k.joint import joint_top_k
from dp_spark.mechanisms.top_k.unknown_domain import unknown_domain_calibration, unknown_domain_gumbel
from dp_spark.mechanisms.top_k.zcdp import gumbel_peel_top_k, zcdp_group_epsilon
from dp_spark.noise.rng import StreamRoot

__all__ = ["GroupSelection"]

_DOMAIN = ("joint", "pnf-joint", "pnf-peel", "cdp-peel")


@dataclass(frozen=True)
class GroupSelection:
    """Every group's selection of one release (module docstring): ``method`` at ``epsilon`` (and
    ``delta``) per group, as built by :meth:`laplace` or :meth:`zcdp`; ``root`` the release's streams.
    Picklable (a task closure carries it, with the root's key: :class:`~dp_spark.noise.rng.StreamRoot`)."""

    method: str
    k: int
    epsilon: float  # the group's ε (unknown-domain: the per-item ε'; zcdp cdp-peel: per round)
    delta: float  # the group's δ (unknown-domain: the threshold's δ)
    kbar: int
    bounded_range: bool  # the ρ-zCDP form (noise="gaussian")
    root: StreamRoot

    @classmethod
    def laplace(cls, method: str, k: int, epsilon: float, delta: float, max_groups: int, kbar: int,
                root: StreamRoot) -> "GroupSelection":
        """``method`` in every group at (ε/m, δ/m) of the selection's (``epsilon``, ``delta``):
        (ε, δ)-DP over all groups (ε-DP for the pure methods)."""
        eps_g, delta_g = group_share(epsilon, delta, max_groups)
        if method == "unknown-domain":
            eps_g, delta_g, _ = unknown_domain_calibration(eps_g, delta_g, k)
        elif method not in _DOMAIN:
            raise ParameterError(f"method {method!r} has no per-group form; use one of "
                                 f"{', '.join(_DOMAIN)} or unknown-domain")
        return cls(method, int(k), eps_g, delta_g, int(kbar), False, root)

    @classmethod
    def zcdp(cls, method: str, k: int, rho: float, max_groups: int, root: StreamRoot) -> "GroupSelection":
        """``method`` (``joint`` or ``cdp-peel``) in every group at ρ/m-zCDP of the selection's ρ
        (:func:`~.zcdp.zcdp_group_epsilon`): ρ-zCDP over all groups."""
        return cls(method, int(k), zcdp_group_epsilon(method, rho, max_groups, k), 0.0, 0, True, root)

    @property
    def domain(self) -> bool:
        """Whether the groups' counts are a public domain's (else the k̄ largest)."""
        return self.method != "unknown-domain"

    def __call__(self, group: int, counts: np.ndarray, next_count: float = 0.0) -> tuple[np.ndarray, bool]:
        """Group ``group``'s released item indices into ``counts`` (rank order) and whether ⊥
        follows them (unknown-domain: fewer than k cleared the threshold), drawn from
        ``root.stream(group)`` only. ``next_count``: unknown-domain's (k̄+1)-th count."""
        rng = self.root.stream(group)
        if self.method == "unknown-domain":
            result = unknown_domain_gumbel(counts, self.k, self.epsilon, self.delta, self.kbar, rng, next_count)
            return result.indices, result.bottom
        if self.bounded_range:
            pick = joint_top_k if self.method == "joint" else gumbel_peel_top_k
            return pick(counts, self.k, self.epsilon, rng), False
        return domain_top_k(self.method, counts, self.k, self.epsilon, self.delta, rng)[0], False
