"""Noise and threshold of DP Set Union, applied to one partition of the histogram.

Gopi et al., "Differentially Private Set Union" (ICML 2020), Algorithm 1
step 3: for every item u in the support of the histogram H draw fresh noise
Z_u (Lap(b) or N(0, σ²), :mod:`dp_spark.mechanisms.set_union.thresholds`) and release u
iff H[u] + Z_u > ρ. Only the identities of the released items leave this
function; the noisy weights are discarded (they are not part of the
mechanism's output). With the histogram facts (S) and (T) of
:mod:`dp_spark.summaries.set_union` the released set is (ε, δ)-DP.

The histogram may be as large as the data's vocabulary, so this runs inside
Spark, one call per partition (from ``mapInPandas``). Each partition gets its
own generator from a ``NoiseRoot``:

- unseeded (every publishable release): ``NoiseRoot.from_os()`` holds NO key.
  Each partition's generator is seeded from the executor's OS entropy at the
  moment it runs (:func:`dp_spark.noise.make_rng`), so no value that could
  reproduce the noise ever exists on the driver, in a pickled function, in a
  query plan or in an event log. The release materializes the thresholded
  partitions once (:mod:`dp_spark.stages.set_union`, ``materialize``) and
  hands out a DataFrame that reads those stored rows, so the noise step is
  never evaluated a second time (a second evaluation would be a second
  release).
- seeded (tests and demos only, and marked so): the root holds the state of
  one child of the release's seeded ``SeedSequence`` and partition p uses the
  child with spawn key (…, p) — exactly ``SeedSequence.spawn``'s p-th child —
  so a seeded run is reproducible by anyone who knows the seed.

Either way no draw is shared between partitions or items. Pure numpy; no
pyspark, no pandas.

The Spark stage never imports this module: the release hands the stage a
:class:`ThresholdStep` (the plan's constants and the noise root), and the
stage calls it inside ``mapInPandas`` — once per partition for that
partition's mask function, then once per batch of (item, weight) rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

import numpy as np

from dp_spark.noise import make_rng, spawn_rngs
from dp_spark.noise.rng import check_rng
from dp_spark.mechanisms.set_union.discrete import DiscreteSetUnionPlan, discrete_release_mask
from dp_spark.mechanisms.set_union.thresholds import SetUnionPlan

__all__ = ["NoiseRoot", "ThresholdStep", "derive_randomness", "release_mask"]

#: Upper end (exclusive) of the item-sampling salt: fits a Spark long literal.
SALT_RANGE = 2**62


@dataclass(frozen=True)
class NoiseRoot:
    """Where the per-partition noise generators come from.

    ``entropy=None`` (:meth:`from_os`, every unseeded release): no key at all;
    each partition's generator is seeded from the OS entropy of the process
    that runs it. Otherwise the picklable state of a
    ``numpy.random.SeedSequence`` (entropy and spawn key) from which
    per-partition generators are spawned reproducibly (seeded runs: tests
    and demos only)."""

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

    def partition_rng(self, partition: int) -> np.random.Generator:
        """The generator of Spark partition ``partition``: fresh OS entropy
        (keyless root), or the root's child with spawn key
        ``spawn_key + (partition,)``."""
        if self.entropy is None:
            return make_rng()
        seq = np.random.SeedSequence(self.entropy, spawn_key=self.spawn_key + (int(partition),))
        return np.random.Generator(np.random.PCG64(seq))


def derive_randomness(rng: np.random.Generator, keyed: bool = True) -> tuple[int, NoiseRoot]:
    """Split the release's root generator (``dp_spark.noise.make_rng``, seeded
    by the OS unless a test seed was given) into two independent children:
    the salt of the per-person item sampling (not privacy noise: the privacy
    argument holds for every salt; it only makes each person's choice of Δ0
    items a fresh uniform-looking sample, as the paper's random choice) and
    the root of the per-partition noise generators. With ``keyed=False``
    (unseeded releases) the noise root is :meth:`NoiseRoot.from_os`: it holds
    no key, so nothing that could reproduce the noise leaves this function."""
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
    """Boolean mask of the items released: weight + noise > ρ (Algorithm 1,
    step 3), one fresh noise draw per item from ``rng``. Items of weight
    <= 0 are outside the histogram's support and are never released. A
    :class:`~dp_spark.mechanisms.set_union.discrete.DiscreteSetUnionPlan`
    (the private key step): exact integer noise and threshold,
    :func:`~dp_spark.mechanisms.set_union.discrete.discrete_release_mask`.

    Guarantee: over all partitions, the released set is (ε, δ)-DP at
    ``plan.epsilon``, ``plan.delta`` when the weights are the summed shard
    histograms of :mod:`dp_spark.summaries.set_union` (facts (S), (T)).
    Floating-point noise is fine here: only the comparison is released.
    """
    if isinstance(plan, DiscreteSetUnionPlan):
        return discrete_release_mask(weights, plan, rng)
    weights = np.asarray(weights, dtype=np.float64)
    check_rng(rng)
    if plan.noise == "laplace":
        noise = rng.laplace(0.0, plan.scale, weights.shape)
    else:
        noise = rng.normal(0.0, plan.scale, weights.shape)
    return (weights > 0.0) & (weights + noise > plan.rho)


@dataclass(frozen=True)
class ThresholdStep:
    """The noise + threshold step of one release (Algorithm 1, step 3), in
    the form the Spark stage runs it: ``step(p)`` is the mask function of
    Spark partition ``p`` — :func:`release_mask` with the plan's constants
    and the generator ``root.partition_rng(p)``, made once per partition —
    and ``step(p)(weights)`` the boolean mask of the released items of one
    batch. Successive batches of a partition continue the same generator,
    so every item gets its own draw.

    Guarantee: as :func:`release_mask` — over all partitions the released
    set is (``plan.epsilon``, ``plan.delta``)-DP for the summed shard
    histograms of :mod:`dp_spark.summaries.set_union`. Picklable (it
    travels to the executors inside the ``mapInPandas`` function); a keyless
    root (unseeded) holds nothing that could reproduce the noise."""

    plan: SetUnionPlan | DiscreteSetUnionPlan
    root: NoiseRoot

    def __call__(self, partition: int) -> Callable[[np.ndarray], np.ndarray]:
        return partial(release_mask, plan=self.plan, rng=self.root.partition_rng(int(partition)))
