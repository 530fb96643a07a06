"""Random generators for the mechanism layer.

Every privacy-protecting draw in dp_spark comes from a ``numpy.random.Generator``
passed explicitly as ``rng``. In production the root generator is seeded from
operating-system entropy (``make_rng()``), and independent children are spawned
from it for each mechanism or Spark partition (``spawn_rngs``), so no noise draw
is ever reused across items or partitions. A fixed integer seed exists only for
tests and demos: a seeded release is reproducible by anyone who knows the seed
and therefore carries no privacy guarantee.
"""

from __future__ import annotations

import numbers

import numpy as np

from dp_spark import checks
from dp_spark.errors import ParameterError

__all__ = ["make_rng", "spawn_rngs", "check_rng"]


def make_rng(seed: int | None = None) -> np.random.Generator:
    """Return a new random generator.

    With ``seed=None`` (the default, and the only setting fit for publication)
    the generator is seeded from operating-system entropy through
    ``numpy.random.SeedSequence()``, so two calls give unrelated streams.

    A non-negative integer ``seed`` gives a reproducible generator. Use it
    only in tests and demos: anyone who knows the seed can recompute the noise
    and subtract it, so a seeded output is *not* differentially private.
    """
    if seed is None:
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence()))
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ParameterError(
            f"seed must be None (OS entropy) or a non-negative int, got {type(seed).__name__}; "
            "pass seed=None for a release you intend to publish"
        )
    if seed < 0:
        raise ParameterError("seed must be a non-negative int (or None for OS entropy)")
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(seed))))


def spawn_rngs(rng: np.random.Generator, n: int) -> list[np.random.Generator]:
    """Return ``n`` statistically independent child generators of ``rng``.

    The children come from ``SeedSequence.spawn`` on ``rng``'s seed sequence
    (``Generator.spawn``), so they are independent of each other and of the
    parent's own stream, and repeated calls give fresh children. Use one child
    per mechanism or per Spark partition. Children of a seeded generator are
    reproducible (tests only).
    """
    check_rng(rng)
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise ParameterError(
            f"n must be a non-negative int (number of child generators), got {n!r}"
        )
    n = int(n)
    if hasattr(rng, "spawn"):
        return list(rng.spawn(n))
    seed_seq = rng.bit_generator.seed_seq  # numpy < 1.25
    bit_generator_type = type(rng.bit_generator)
    return [np.random.Generator(bit_generator_type(child)) for child in seed_seq.spawn(n)]


check_rng = checks.rng  # one rule for every sampler (dp_spark.checks)
