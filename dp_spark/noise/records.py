"""Noise as data: one public record per privacy draw a mechanism makes.

Every mechanism returns, with its released values, a :class:`NoiseDraw` for
each privacy draw (or batch of identical draws) it made: the budget step it is
charged to, the kind of noise, its scale, its standard deviation and the
sensitivity of what it protects. ``Release.noise`` holds them, the JSON
report writes them (``noise``), the error statements are sentences made from
them (:meth:`NoiseDraw.describe`) and the HTML report's intervals are their
tails (:meth:`NoiseDraw.half_width`): the renderers compute no tail.
(After dp_accounting, where a mechanism is described by the events it runs.)

A record holds public values only: parameters, scales, sensitivities, the
number of draws when that number is public (``draws=None`` when it is not,
e.g. one draw per histogram item). Never a drawn value, a noisy value or a
true value; :meth:`NoiseDraw.to_dict` refuses any field outside this schema.

Kinds (:data:`KINDS`) and what :meth:`NoiseDraw.half_width` (β) returns:

``discrete-laplace``  P(X = x) ∝ exp(−|x|/scale); the smallest integer h with
                      P(|X| > h) <= β.
``laplace``           Lap(scale); scale·ln(1/β) (P(|X| > h) = e^(−h/scale)).
``discrete-gaussian`` N_Z(0, σ²), σ = scale; the smallest integer h with
                      P(|X| > h) = 2·P(X > h) <= β, from the discrete Gaussian's own
                      tail (:func:`dp_spark.noise.tails.discrete_gaussian_upper_quantile`
                      at β/2; Canonne, Kamath & Steinke 2020), never above
                      ⌈σ·Φ⁻¹(1 − β/2)⌉. The one tail of this kind: the groups
                      tables, the JSON and the HTML all state it.
``gaussian``          N(0, σ²); σ·Φ⁻¹(1 − β/2).
``gumbel``            Gumbel(scale) on ``spread`` scores (report-noisy-max /
                      one-shot top-k); with probability >= 1 − β the spread
                      max − min of ``spread`` draws is at most this.
``exponential``       Exp(scale) on ``spread`` scores (permute-and-flip as
                      report-noisy-max); every draw is below scale·ln(spread/β).
``exponential-mechanism``  the (joint) exponential mechanism / permute-and-flip
                      over e^``log_outcomes`` outcomes, scale = 2Δ/ε; its
                      utility loss is at most scale·(log_outcomes + ln(1/β)).
``gem``               the Generalized Exponential Mechanism (its own β is a
                      parameter); no interval.
``sparse-vector``     AboveThreshold rounds with discrete Laplace noise; no interval
                      (the release states its own accuracy).
``binary-tree``       discrete Gaussian N_Z(0, σ²) on each node of a binary
                      tree; the per-step error bound is in the released series.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping

from dp_spark.noise.tails import discrete_gaussian_upper_quantile

__all__ = ["KINDS", "NoiseDraw", "gumbel_gap", "noise_from_dicts", "noise_to_dicts"]

#: kind -> how it is said in an error statement
KINDS: Mapping[str, str] = {
    "discrete-laplace": "discrete Laplace noise",
    "laplace": "Laplace noise",
    "discrete-gaussian": "discrete Gaussian noise",
    "gaussian": "Gaussian noise",
    "gumbel": "Gumbel noise (report-noisy-max)",
    "exponential": "exponential noise (permute-and-flip)",
    "exponential-mechanism": "the exponential mechanism",
    "gem": "the Generalized Exponential Mechanism",
    "sparse-vector": "the sparse vector technique (discrete Laplace noise)",
    "binary-tree": "discrete Gaussian noise on the nodes of a binary tree",
}

#: Parameters a record may carry (public, kind-specific); anything else is refused.
PARAMETERS = frozenset({
    "spread", "log_outcomes", "candidates", "beta", "rounds", "cutoff", "threshold_scale", "query_scale",
    "levels", "flippancy_bound", "norm",
    "candidate_betas",  # the distinct-count choice's per-candidate GEM failure shares
    "bound",  # a grouped count's per-person bound (released with each group): the HTML matches a group's record by it
})


def gumbel_gap(scale: float, n: int, beta: float) -> float:
    """With probability >= 1 − β, max − min of n Gumbel(scale) draws is at most this."""
    big = math.log(2.0 * n / beta)
    return scale * (big + math.log(big))


def _discrete_laplace_half_width(scale: float, beta: float) -> int:
    """Smallest integer h with P(|X| > h) <= beta for discrete Laplace noise
    P(X = x) ∝ exp(-|x|/scale): P(|X| >= m) = 2·e^(−m/s)/(1 + e^(−1/s))."""
    m = scale * math.log(2.0 / (beta * (1.0 + math.exp(-1.0 / scale))))
    return max(0, math.ceil(m) - 1)


def _normal_two_sided(beta: float) -> float:
    from scipy.special import ndtri  # lazy: Spark workers load this; +130-370 ms a worker

    return float(ndtri(1.0 - beta / 2.0))


@dataclass(frozen=True)
class NoiseDraw:
    """One privacy draw (or ``draws`` identical independent ones), public values only.

    ``step``: the budget step it is charged to (a ``budget_split`` label);
    ``kind``: one of :data:`KINDS`; ``scale``: the distribution's scale
    parameter (b of a Laplace, σ of a Gaussian, 2Δ/ε of an exponential
    mechanism); ``std``: the standard deviation of one draw (an upper bound
    for the discrete Gaussian; None where it says nothing useful, e.g. a
    selection); ``sensitivity``: of the statistic the noise protects (ℓ1, or
    ℓ2 when ``parameters["norm"] == 2``); ``draws``: how many such draws
    (None: not a public number, e.g. one per histogram item); ``target``:
    what the noise was added to or chose, in words; ``parameters``: the
    kind's public constants (:data:`PARAMETERS`).
    """

    step: str
    kind: str
    scale: float
    std: float | None
    sensitivity: float
    draws: int | None = 1
    target: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown noise kind {self.kind!r}; one of {', '.join(KINDS)}")
        unknown = set(self.parameters) - PARAMETERS
        if unknown:
            raise ValueError(f"noise record parameters not allowed: {', '.join(sorted(unknown))}")
        if not (self.scale > 0 and math.isfinite(self.scale)):
            raise ValueError("a noise record's scale must be positive and finite")

    def at(self, step: str) -> "NoiseDraw":
        """The same record charged to the budget step ``step``."""
        return replace(self, step=step)

    def half_width(self, beta: float) -> float:
        """h with P(this draw's error > h) <= β (see the module's table); for
        the selections, the bound on their utility loss. ValueError for a
        kind without one (gem, sparse-vector, binary-tree)."""
        if not 0.0 < beta < 1.0:
            raise ValueError("beta must lie in (0, 1)")
        s, p = self.scale, self.parameters
        if self.kind == "discrete-laplace":
            return _discrete_laplace_half_width(s, beta)
        if self.kind == "laplace":
            return s * math.log(1.0 / beta)
        if self.kind == "discrete-gaussian":
            return discrete_gaussian_upper_quantile(s, beta / 2.0)
        if self.kind == "gaussian":
            return s * _normal_two_sided(beta)
        if self.kind == "gumbel":
            return gumbel_gap(s, int(p["spread"]), beta)
        if self.kind == "exponential":
            return s * math.log(p["spread"] / beta)
        if self.kind == "exponential-mechanism":
            return s * (p["log_outcomes"] + math.log(1.0 / beta))
        raise ValueError(f"{self.kind} noise has no interval of its own")

    def describe(self) -> str:
        """The record as a phrase for an error statement, e.g. "discrete
        Laplace noise of scale 2.02 (standard deviation 2.83) on a count of
        sensitivity 1"."""
        what = KINDS[self.kind]
        if self.kind in ("discrete-laplace", "laplace", "gumbel", "exponential"):
            what += f" of scale {self.scale:.3g}"
        elif self.kind in ("discrete-gaussian", "gaussian", "binary-tree"):
            what += f" with sigma {self.scale:.4g}"
        if self.std is not None and self.kind not in ("gaussian",):
            bound = "at most " if self.kind in ("discrete-gaussian", "binary-tree") else ""
            if self.kind != "discrete-gaussian" or self.std != self.scale:
                what += f" (standard deviation {bound}{self.std:.3g})"
            else:
                what += " (standard deviation at most sigma)"
        norm = " (ℓ2)" if self.parameters.get("norm") == 2 else ""
        target = f" on {self.target}" if self.target else ""
        return f"{what}{target}, sensitivity {self.sensitivity:g}{norm}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (the report's ``noise`` entries)."""
        out = asdict(self)
        out["parameters"] = dict(self.parameters)
        return out

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> "NoiseDraw":
        return cls(step=record["step"], kind=record["kind"], scale=float(record["scale"]),
                   std=None if record.get("std") is None else float(record["std"]),
                   sensitivity=float(record["sensitivity"]), draws=record.get("draws"),
                   target=record.get("target", ""), parameters=dict(record.get("parameters") or {}))


def noise_to_dicts(records) -> list[dict[str, Any]]:
    return [r.to_dict() for r in records]


def noise_from_dicts(records) -> tuple[NoiseDraw, ...]:
    """Records from a report (an older report without ``noise``: none)."""
    return tuple(NoiseDraw.from_dict(r) for r in (records or ()))
