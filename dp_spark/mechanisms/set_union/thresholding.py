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
item order, take the draws of bucket b's own generator from a ``NoiseRoot``.
Unseeded (every publishable release), the root holds NO key and each bucket's
generator is seeded from the executor's OS entropy
(:func:`dp_spark.noise.make_rng`), so nothing that could reproduce the noise
exists on the driver, in a pickled function, plan or event log; the release
materializes the thresholded items once (:mod:`dp_spark.stages.set_union`),
so the noise step is never evaluated twice (that would be a second release).
Seeded (tests and demos only): bucket b uses the root's ``SeedSequence``
child with spawn key ``(..., b)``, reproducible by anyone with the seed; which
draw an item gets depends on the item, its bucket's items and the seed, never
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

from dp_spark.noise import make_rng, spawn_rngs
from dp_spark.noise.rng import check_rng
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.set_union.discrete import DiscreteSetUnionPlan, discrete_release_mask
from dp_spark.mechanisms.set_union.gaussian_grid import GaussianGridMask, gaussian_grid_mask
from dp_spark.mechanisms.set_union.laplace_grid import GridMask, laplace_grid_mask
from dp_spark.mechanisms.set_union.thresholds import SetUnionPlan
from dp_spark.summaries.set_union import HELD_SUPPORT

__all__ = ["NoiseRoot", "ThresholdStep", "derive_randomness", "release_mask"]

#: Upper end (exclusive) of the item-sampling salt: fits a Spark long literal.
SALT_RANGE = 2**62


@dataclass(frozen=True)
class NoiseRoot:
    """Where the noise buckets' generators come from: ``entropy=None``
    (:meth:`from_os`), OS entropy where each bucket runs; otherwise the
    picklable ``SeedSequence`` state they are spawned from (seeded runs)."""

    entropy: int | tuple[int, ...] | None
    spawn_key: tuple[int, ...] = ()

    @classmethod
    def from_os(cls) -> "NoiseRoot":
        """A root holding no key: partition generators seeded by the OS where they run."""
        return cls(None, ())

    @property
    def keyed(self) -> bool:
        """True when the root holds a reproducible key (a seeded run)."""
        return self.entropy is not None

    def bucket_rng(self, bucket: int) -> np.random.Generator:
        """The generator of noise bucket ``bucket``: fresh OS entropy
        (keyless root), or the root's child with spawn key
        ``spawn_key + (bucket,)``."""
        if self.entropy is None:
            return make_rng()
        seq = np.random.SeedSequence(self.entropy, spawn_key=self.spawn_key + (int(bucket),))
        return np.random.Generator(np.random.PCG64(seq))


def derive_randomness(rng: np.random.Generator, keyed: bool = True) -> tuple[int, NoiseRoot]:
    """Split the release's root generator into (the salt of the per-person
    item sampling, the noise root). The salt is not privacy noise (the proof
    holds for every salt); it makes each person's choice of Δ0 items a fresh
    sample. ``keyed=False`` (unseeded): the root is :meth:`NoiseRoot.from_os`,
    holding no key."""
    salt_rng, noise_rng = spawn_rngs(check_rng(rng), 2)
    salt = int(salt_rng.integers(0, SALT_RANGE))
    if not keyed:
        return salt, NoiseRoot.from_os()
    seq = noise_rng.bit_generator.seed_seq
    entropy = seq.entropy  # an int (OS entropy, int seeds) or a sequence of ints
    if isinstance(entropy, (int, np.integer)):
        entropy = int(entropy)
    else:
        entropy = tuple(int(e) for e in entropy)
    return salt, NoiseRoot(entropy, tuple(int(k) for k in seq.spawn_key))


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
    with ``root.bucket_rng(b)``), ``step(b)(weights)`` one batch's mask;
    batches of a bucket continue its generator, and an item's draws do not
    depend on where the batches break (the bucket's
    :class:`~.laplace_grid.GridMask` or :class:`~.gaussian_grid.GaussianGridMask`
    draws in fixed blocks). ``step(b, size)``: the caller passes the bucket's
    ``size`` items in one call, and exactly ``size`` draws are made (blocks of
    ``size``), as the Spark stage does.
    Guarantee as :func:`release_mask`. Picklable; a keyless root holds nothing
    that could reproduce the noise."""

    plan: SetUnionPlan | DiscreteSetUnionPlan
    root: NoiseRoot

    def __call__(self, bucket: int, size: int | None = None) -> Callable[[np.ndarray], np.ndarray]:
        rng = self.root.bucket_rng(int(bucket))
        plan = self.plan
        block = {} if size is None else {"block": int(size)}
        if isinstance(plan, SetUnionPlan) and plan.grid_bits is not None and plan.noise == "gaussian":
            return GaussianGridMask(plan.scale, plan.rho, rng, plan.grid_bits, **block)
        if isinstance(plan, SetUnionPlan) and plan.grid_bits is not None:
            return GridMask(plan.scale, plan.rho, plan.method in HELD_SUPPORT, rng, plan.grid_bits, **block)
        return partial(release_mask, plan=plan, rng=rng)
