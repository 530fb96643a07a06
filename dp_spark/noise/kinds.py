"""The noise kinds: one object per kind, holding all of its math.

A :class:`NoiseKind` is what a privacy draw's record
(:class:`~dp_spark.noise.records.NoiseDraw`) names in ``kind``: the exact
sampler that draws it, the privacy cost of its draws for a sensitivity (pure
ε or ρ-zCDP), its tail at β (the one interval every table, JSON report and
HTML page states) and its words in an error statement. Nothing else in
dp_spark computes a kind's tail or cost (after OpenDP, which keeps each
sampler beside its privacy map).

A record describes ``draws`` independent draws protecting one statistic (a
number, or a vector over items, groups or steps) of sensitivity
``sensitivity`` (ℓ1, or ℓ2 when ``parameters["norm"] == 2``): its cost is the
kind's cost of that statistic whatever the number of draws, times
``parameters["rounds"]`` for sequential rounds (peeling). Per kind, the cost
(the standard privacy map of its mechanism) and the tail h with
P(|error| > h) <= β:

- ``laplace`` Lap(b): ε = Δ₁/b (Dwork et al. 2006); h = b·ln(1/β).
- ``discrete-laplace``, P(x) ∝ exp(−|x|/b): ε = Δ₁/b (Ghosh et al. 2009;
  Canonne, Kamath & Steinke 2020); h the smallest integer with P(|X| > h) <= β.
- ``gaussian`` N(0, σ²): ρ = Δ₂²/(2σ²)-zCDP (Bun & Steinke 2016);
  h = σ·Φ⁻¹(1 − β/2). Charged to an (ε, δ) step, it is checked by the
  analytic Gaussian mechanism's exact δ(ε) (Balle & Wang 2018, Theorem 8).
- ``discrete-gaussian`` N_Z(0, σ²): ρ = Δ₂²/(2σ²) (Canonne, Kamath & Steinke
  2020, Theorem 14); h the smallest integer with 2·P(X > h) <= β, from its
  own tail (:func:`dp_spark.noise.tails.discrete_gaussian_upper_quantile`),
  never above ⌈σ·Φ⁻¹(1 − β/2)⌉.
- ``binary-tree``: a discrete Gaussian on each node of a binary tree; ρ as
  the discrete Gaussian's for the tree's ℓ2 sensitivity; no interval here
  (the per-step bound is in the released series).
- ``factorized-counter``: a discrete Gaussian N_Z(0, σ̌²) on each coordinate of Řx, the
  integer strategy of a factorized continual counter
  (:mod:`dp_spark.mechanisms.continual_distinct.factorized`); scale σ̌/2^k and sensitivity
  √B/2^k in count units, so ρ = Δ₂²/(2σ²) as the discrete Gaussian's (Canonne, Kamath & Steinke
  2020); no interval here (the per-step bound is in the released series).
- ``exponential-mechanism``, ``gem`` (scale 2Δ/ε on scores of sensitivity
  Δ): ε = 2Δ/scale (McSherry & Talwar 2007; McKenna & Sheldon 2020); the
  exponential mechanism's utility loss is at most
  scale·(log_outcomes + ln(1/β)); GEM has no interval (its β is a parameter).
- ``exponential`` (permute-and-flip as report-noisy-max, Exp(Δ/ε') on
  monotone counts, one round per selected item): ε = rounds·Δ/scale (McKenna
  & Sheldon 2020, monotone case); every draw is below scale·ln(spread/β).
- ``gumbel`` (report-noisy-max / one-shot top-k on ``spread`` scores): the
  spread max − min of its draws is at most :func:`gumbel_gap` with
  probability >= 1 − β.
- ``gumbel`` and ``sparse-vector`` have no closed-form cost here: their
  modules prove theirs (bounded-range composition, Unknown Domain Gumbel's
  threshold, the sparse vector's rounds) and their plans charge it; the
  sparse vector has no interval (its release states its accuracy).

Pure Python and numpy; no pyspark.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from dp_spark.accounting import ZCDP, PureDP
from dp_spark.accounting.exact import exact, sqrt_down
from dp_spark.noise.continuous import exponential, gaussian, gumbel, laplace
from dp_spark.noise.discrete import discrete_gaussian, discrete_laplace
from dp_spark.noise.tails import discrete_gaussian_upper_quantile

__all__ = ["KINDS", "NoiseKind", "analytic_gaussian_delta", "epsilon_for", "gumbel_gap"]


def gumbel_gap(scale: float, n: int, beta: float) -> float:
    """With probability >= 1 − β, max − min of n Gumbel(scale) draws is at most this."""
    big = math.log(2.0 * n / beta)
    return scale * (big + math.log(big))


def _discrete_laplace_tail(scale: float, beta: float, _p) -> int:
    """Smallest integer h with P(|X| > h) <= β for discrete Laplace noise
    P(X = x) ∝ exp(−|x|/scale): P(|X| >= m) = 2·e^(−m/s)/(1 + e^(−1/s))."""
    m = scale * math.log(2.0 / (beta * (1.0 + math.exp(-1.0 / scale))))
    return max(0, math.ceil(m) - 1)


def _normal_quantile(q: float) -> float:
    from scipy.special import ndtri  # lazy: Spark workers load this module; +130-370 ms a worker

    return float(ndtri(q))


def _normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def analytic_gaussian_delta(sigma: float, l2_sensitivity: float, epsilon: float) -> float:
    """The exact δ at ε of the Gaussian mechanism N(0, σ²) on a statistic of
    ℓ2 sensitivity Δ (Balle & Wang 2018, Theorem 8):
    δ(ε) = Φ(Δ/(2σ) − εσ/Δ) − e^ε·Φ(−Δ/(2σ) − εσ/Δ)."""
    a, b = l2_sensitivity / (2.0 * sigma), epsilon * sigma / l2_sensitivity
    return max(0.0, _normal_cdf(a - b) - math.exp(epsilon) * _normal_cdf(-a - b))


def epsilon_for(cost, *, bounded_range: bool = False) -> float:
    """The ε a pure ε-DP mechanism runs at on a budget step of cost
    ``cost`` (the inverse of its cost): the step's ε, or under ρ-zCDP the
    largest ε whose zCDP cost fits, rounded down: √(2ρ) (ε-DP ⇒ ε²/2-zCDP,
    Bun & Steinke 2016), or √(8ρ) for a selection sampled by the exponential
    mechanism (ε-bounded range ⇒ ε²/8-zCDP, Cesar & Rogers 2021); 0.0 for
    no step (``None``)."""
    if cost is None:
        return 0.0
    if isinstance(cost, ZCDP):
        return sqrt_down((8 if bounded_range else 2) * exact(cost.rho))
    return cost.epsilon


def _pure(scale: float, sensitivity: float, _p) -> PureDP:
    return PureDP(sensitivity / scale)


def _selection(scale: float, sensitivity: float, _p) -> PureDP:
    return PureDP(2.0 * sensitivity / scale)


def _rounds(scale: float, sensitivity: float, p) -> PureDP:
    return PureDP(int(p.get("rounds", 1)) * sensitivity / scale)


def _zcdp(scale: float, sensitivity: float, _p) -> ZCDP:
    return ZCDP(sensitivity * sensitivity / (2.0 * scale * scale))


@dataclass(frozen=True)
class NoiseKind:
    """One noise kind: ``phrase`` (its words in an error statement),
    ``scale_words`` (how its scale is said: "of scale", "with sigma", or
    None when the scale is not said), ``sampler`` (the function that draws
    it, exact where the draw is released as a number), ``tail(scale, β,
    parameters)`` (None: no interval of its own) and ``cost(scale,
    sensitivity, parameters)`` (None: its module charges it)."""

    name: str
    phrase: str
    scale_words: str | None = None
    sampler: Callable | None = None
    tail: Callable[[float, float, Mapping[str, Any]], float] | None = None
    cost: Callable[[float, float, Mapping[str, Any]], Any] | None = None
    #: the std is an upper bound (the discrete Gaussian's is at most σ)
    std_at_most: bool = False
    #: an error statement states the std (a Gaussian's is its σ, said already)
    states_std: bool = True

    def half_width(self, scale: float, beta: float, parameters: Mapping[str, Any]) -> float:
        """h with P(the draw's error > h) <= β; ValueError without an interval."""
        if not 0.0 < beta < 1.0:
            raise ValueError("beta must lie in (0, 1)")
        if self.tail is None:
            raise ValueError(f"{self.name} noise has no interval of its own")
        return self.tail(scale, beta, parameters)


def _kinds(*kinds: NoiseKind) -> Mapping[str, NoiseKind]:
    return {k.name: k for k in kinds}


#: Every kind a record may name.
KINDS: Mapping[str, NoiseKind] = _kinds(
    NoiseKind("discrete-laplace", "discrete Laplace noise", "of scale", discrete_laplace,
              _discrete_laplace_tail, _pure),
    NoiseKind("laplace", "Laplace noise", "of scale", laplace,
              lambda s, beta, _p: s * math.log(1.0 / beta), _pure),
    # the discrete Gaussian's own tail (Canonne, Kamath & Steinke 2020), never above ⌈σ·Φ⁻¹(1 − β/2)⌉
    NoiseKind("discrete-gaussian", "discrete Gaussian noise", "with sigma", discrete_gaussian,
              lambda s, beta, _p: discrete_gaussian_upper_quantile(s, beta / 2.0), _zcdp, std_at_most=True),
    NoiseKind("gaussian", "Gaussian noise", "with sigma", gaussian,
              lambda s, beta, _p: s * _normal_quantile(1.0 - beta / 2.0), _zcdp, states_std=False),
    NoiseKind("gumbel", "Gumbel noise (report-noisy-max)", "of scale", gumbel,
              lambda s, beta, p: gumbel_gap(s, int(p["spread"]), beta)),
    NoiseKind("exponential", "exponential noise (permute-and-flip)", "of scale", exponential,
              lambda s, beta, p: s * math.log(p["spread"] / beta), _rounds),
    NoiseKind("exponential-mechanism", "the exponential mechanism", None, None,
              lambda s, beta, p: s * (p["log_outcomes"] + math.log(1.0 / beta)), _selection),
    NoiseKind("gem", "the Generalized Exponential Mechanism", None, None, None, _selection),
    NoiseKind("sparse-vector", "the sparse vector technique (discrete Laplace noise)", None, discrete_laplace),
    NoiseKind("binary-tree", "discrete Gaussian noise on the nodes of a binary tree", "with sigma",
              discrete_gaussian, None, _zcdp, std_at_most=True),
    NoiseKind("factorized-counter", "discrete Gaussian noise on a factorized counter (the square-root "
              "factorization; streamed, its buffered-linear-Toeplitz approximation)", "with sigma",
              discrete_gaussian, None, _zcdp, std_at_most=True),
)
