"""Continuous (floating-point) noise samplers.

Each function draws from ``rng`` (a ``numpy.random.Generator``) and returns a
float when ``size`` is None, else a float64 array of shape ``size``.

These samplers use floating-point arithmetic, so their outputs must not be
released at full float resolution as noise added to a sensitive value: the
low-order bits of a textbook float Laplace sample can leak the value it was
added to (Mironov, "On significance of the least significant bits for
differential privacy", CCS 2012). Use them where only a comparison or an
argmax is released (Gumbel report-noisy-max, noisy thresholds), and use the
exact integer samplers of :mod:`dp_spark.noise.discrete` to noise integer
statistics that are released as numbers.
"""

from __future__ import annotations

import numpy as np

from dp_spark.checks import Size, positive as positive_finite, size as check_size
from dp_spark.noise.rng import check_rng

__all__ = ["laplace", "gaussian", "gumbel", "exponential"]

FloatOrArray = float | np.ndarray


def _finish(draw: np.ndarray | float, size: Size) -> FloatOrArray:
    return float(draw) if size is None else np.asarray(draw, dtype=np.float64)


def laplace(scale: float, rng: np.random.Generator, size: Size = None) -> FloatOrArray:
    """Draw Laplace noise with density exp(-|x|/scale) / (2·scale).

    Added to a statistic of L1 sensitivity Δ with ``scale = Δ/ε`` it gives
    ε-differential privacy (Dwork–McSherry–Nissim–Smith 2006); see the module
    note on floating point before releasing the sum as a number.
    """
    scale = positive_finite(scale, "scale")
    size = check_size(size)
    return _finish(check_rng(rng).laplace(0.0, scale, size), size)


def gaussian(scale: float, rng: np.random.Generator, size: Size = None) -> FloatOrArray:
    """Draw Gaussian noise N(0, scale²) (``scale`` is the standard deviation σ).

    Added to a statistic of L2 sensitivity Δ₂ it gives ρ-zCDP with
    ρ = Δ₂² / (2σ²) (Bun–Steinke 2016, Proposition 1.6).
    """
    scale = positive_finite(scale, "scale")
    size = check_size(size)
    return _finish(check_rng(rng).normal(0.0, scale, size), size)


def gumbel(scale: float, rng: np.random.Generator, size: Size = None) -> FloatOrArray:
    """Draw Gumbel noise with CDF exp(-exp(-x/scale)) (location 0).

    Adding Gumbel(2Δ/ε) to each score and releasing only the argmax samples
    the exponential mechanism exactly (the "Gumbel-max trick"); that release
    is ε-DP and, being a bounded-range mechanism, ε²/8-zCDP
    (Cesar–Rogers 2021; Durfee–Rogers 2019 for the Gumbel top-k form).
    """
    scale = positive_finite(scale, "scale")
    size = check_size(size)
    return _finish(check_rng(rng).gumbel(0.0, scale, size), size)


def exponential(scale: float, rng: np.random.Generator, size: Size = None) -> FloatOrArray:
    """Draw exponential noise with mean ``scale`` (density exp(-x/scale)/scale, x ≥ 0).

    Used by one-sided mechanisms such as permute-and-flip's report-noisy-max
    form (McKenna–Sheldon 2020), whose privacy is stated there.
    """
    scale = positive_finite(scale, "scale")
    size = check_size(size)
    return _finish(check_rng(rng).exponential(scale, size), size)
