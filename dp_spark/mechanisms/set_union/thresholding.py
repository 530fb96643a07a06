"""Noise and threshold of DP Set Union, applied to one noise bucket of the histogram.

Gopi et al., "Differentially Private Set Union" (ICML 2020), Algorithm 1 step
3: for every item u in the support of the histogram H draw fresh noise Z_u
and release u iff H[u] + Z_u > ρ: exact discrete Laplace on a grid for the
Laplace policies (:mod:`.laplace_grid`), exact discrete Gaussian on a grid
for the Gaussian ones (:mod:`.gaussian_grid`).
Only the released items' identities leave; with the histogram facts (S) and
(T) of :mod:`dp_spark.summaries.set_union` the released set is (ε, δ)-DP.

This runs inside Spark, one call per noise bucket: the items are split into a
fixed number of buckets by a public hash of the item alone
(:data:`dp_spark.stages.set_union.NOISE_BUCKETS`), and bucket b's items, in
item order, take the draws of bucket b's own stream of the release's
:class:`~dp_spark.noise.rng.StreamRoot`. Unseeded (every publishable release),
that is ChaCha20 under a 256-bit key drawn on the driver from the release's
generator, from counter b·2⁶⁴, so a bucket draws the same values however often
Spark runs its task (a retry, a speculative or zombie attempt, a second
evaluation): one draw per item, as the analysis counts, and the key is never
logged, in a plan or in a DataFrame. Seeded (tests and demos only): bucket b
uses the root's ``SeedSequence`` child with spawn key ``(..., b)``,
reproducible by anyone with the seed. Either way which draw an item gets
depends on the item, its bucket's items and the root, never
on the number of Spark partitions or tasks. No draw is shared between buckets
or items; every draw is independent of the data (how many draws a bucket
makes depends on how many items it holds, not what they are), so each
item's noise is a fresh exact draw as Algorithm 1 needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

import numpy as np

from dp_spark.noise import spawn_rngs
from dp_spark.noise.rng import StreamRoot, check_rng
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.set_union.discrete import DiscreteSetUnionPlan, discrete_release_mask
from dp_spark.mechanisms.set_union.gaussian_grid import GaussianGridMask, gaussian_grid_mask
from dp_spark.mechanisms.set_union.laplace_grid import GridMask, laplace_grid_mask
from dp_spark.mechanisms.set_union.thresholds import SetUnionPlan
from dp_spark.summaries.set_union import HELD_SUPPORT

__all__ = ["ThresholdStep", "derive_randomness", "release_mask"]

#: Upper end (exclusive) of the item-sampling salt: fits a Spark long literal.
SALT_RANGE = 2**62


def derive_randomness(rng: np.random.Generator, seeded: bool = True) -> tuple[int, StreamRoot]:
    """Split the release's root generator into (the salt of the per-person
    item sampling, the noise buckets' :class:`~dp_spark.noise.rng.StreamRoot`).
    The salt is not privacy noise (the proof holds for every salt); it makes
    each person's choice of Δ0 items a fresh sample. ``seeded=False``
    (every publishable release): the root holds a 256-bit ChaCha20 key drawn
    from ``rng``; ``seeded``: the noise child's SeedSequence state (tests)."""
    salt_rng, noise_rng = spawn_rngs(check_rng(rng), 2)
    salt = int(salt_rng.integers(0, SALT_RANGE))
    return salt, StreamRoot.from_child(noise_rng, seeded)


def release_mask(weights: np.ndarray, plan: SetUnionPlan | DiscreteSetUnionPlan,
                 rng: np.random.Generator) -> np.ndarray:
    """Boolean mask of the released items: weight + noise > ρ, one fresh draw
    per item from ``rng``; weight <= 0 is outside the support, never released,
    except for the policies of ``HELD_SUPPORT`` (``policy-greedy``), whose
    support is every kept item, weight 0 included (:mod:`.greedy`, step (3)).
    A :class:`~.discrete.DiscreteSetUnionPlan` uses
    :func:`~.discrete.discrete_release_mask`; a Laplace plan (``grid_bits``
    set) the exact discrete Laplace on the grid,
    :func:`~.laplace_grid.laplace_grid_mask`; a Gaussian plan the exact
    discrete Gaussian on the grid, :func:`~.gaussian_grid.gaussian_grid_mask`;
    a plan without a grid is refused (no float noise). Over all partitions the released set is (``plan.epsilon``,
    ``plan.delta``)-DP for the summed shard histograms (facts (S), (T)).
    """
    if isinstance(plan, DiscreteSetUnionPlan):
        return discrete_release_mask(weights, plan, rng)
    if plan.grid_bits is not None and plan.noise == "gaussian":
        return gaussian_grid_mask(weights, plan.scale, plan.rho, rng, plan.grid_bits)
    if plan.grid_bits is not None:
        return laplace_grid_mask(weights, plan.scale, plan.rho, plan.method in HELD_SUPPORT, rng, plan.grid_bits)
    raise ParameterError("a set-union plan runs on the grid (grid_bits); float Laplace or Gaussian noise is refused")


@dataclass(frozen=True)
class ThresholdStep:
    """The noise + threshold step (Algorithm 1, step 3) as the Spark stage runs
    it: ``step(b)`` is noise bucket ``b``'s mask function (:func:`release_mask`
    with ``root.stream(b)``), ``step(b)(weights)`` one batch's mask;
    batches of a bucket continue its generator, and an item's draws do not
    depend on where the batches break (the bucket's
    :class:`~.laplace_grid.GridMask` or :class:`~.gaussian_grid.GaussianGridMask`
    draws in fixed blocks). ``step(b, size)``: the caller passes the bucket's
    ``size`` items in one call, and exactly ``size`` draws are made (blocks of
    ``size``), as the Spark stage does.
    Guarantee as :func:`release_mask`. Picklable (it travels to the executors
    in the task closure, with the root's key: see :class:`~dp_spark.noise.rng.StreamRoot`)."""

    plan: SetUnionPlan | DiscreteSetUnionPlan
    root: StreamRoot

    def __call__(self, bucket: int, size: int | None = None) -> Callable[[np.ndarray], np.ndarray]:
        rng = self.root.stream(int(bucket))
        plan = self.plan
        block = {} if size is None else {"block": int(size)}
        if isinstance(plan, SetUnionPlan) and plan.grid_bits is not None and plan.noise == "gaussian":
            return GaussianGridMask(plan.scale, plan.rho, rng, plan.grid_bits, **block)
        if isinstance(plan, SetUnionPlan) and plan.grid_bits is not None:
            return GridMask(plan.scale, plan.rho, plan.method in HELD_SUPPORT, rng, plan.grid_bits, **block)
        return partial(release_mask, plan=plan, rng=rng)
