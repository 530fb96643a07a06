"""Noise samplers for the mechanism layer (numpy, scipy and stdlib only).

- ``make_rng``, ``spawn_rngs``: OS-seeded generators and independent children.
- ``laplace``, ``gaussian``, ``gumbel``, ``exponential``: float samplers.
- ``bernoulli_exp``, ``discrete_laplace``, ``discrete_gaussian``: exact integer
  samplers (Canonne–Kamath–Steinke 2020) for noising integer statistics;
  ``*_batch``: the same, vectorised in numpy int64 (still exact).
- tail quantiles and standard deviations for error statements.

Every draw takes an explicit ``rng: numpy.random.Generator``.
"""

from dp_spark.noise.continuous import exponential, gaussian, gumbel, laplace
from dp_spark.noise.discrete import bernoulli_exp, discrete_gaussian, discrete_laplace
from dp_spark.noise.discrete_batch import (
    bernoulli_exp_batch,
    discrete_gaussian_batch,
    discrete_laplace_batch,
    rational_sigma2,
)
from dp_spark.noise.rng import make_rng, spawn_rngs
from dp_spark.noise.tails import (
    discrete_gaussian_std_upper,
    discrete_laplace_std,
    discrete_laplace_upper_quantile,
    laplace_upper_quantile,
)

__all__ = [
    "make_rng",
    "spawn_rngs",
    "laplace",
    "gaussian",
    "gumbel",
    "exponential",
    "bernoulli_exp",
    "discrete_laplace",
    "discrete_gaussian",
    "bernoulli_exp_batch",
    "discrete_laplace_batch",
    "discrete_gaussian_batch",
    "rational_sigma2",
    "laplace_upper_quantile",
    "discrete_laplace_upper_quantile",
    "discrete_laplace_std",
    "discrete_gaussian_std_upper",
]
