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

The kinds, their costs and their tails: :mod:`dp_spark.noise.kinds`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping

from dp_spark.accounting import ZCDP, PureDP, pure_to_zcdp
from dp_spark.noise.kinds import KINDS as NOISE_KINDS
from dp_spark.noise.kinds import analytic_gaussian_delta, gumbel_gap

__all__ = ["KINDS", "NoiseDraw", "gumbel_gap", "noise_from_dicts", "noise_to_dicts", "overspent_steps",
           "uncharged_records"]

#: kind -> how it is said in an error statement (:data:`dp_spark.noise.kinds.KINDS` holds the rest)
KINDS: Mapping[str, str] = {name: kind.phrase for name, kind in NOISE_KINDS.items()}

#: Parameters a record may carry (public, kind-specific); anything else is refused.
PARAMETERS = frozenset({
    "spread", "log_outcomes", "candidates", "beta", "rounds", "cutoff", "threshold_scale", "query_scale",
    "levels", "flippancy_bound", "norm",
    "candidate_betas",  # the distinct-count choice's per-candidate GEM failure shares
    "bound",  # a grouped count's per-person bound (released with each group): the HTML matches a group's record by it
    "bounded_range",  # a selection sampled by the exponential mechanism: ε-bounded range, so ε²/8-zCDP
    "role",  # "choice" / "statement": a draw that picks a counter or states an error term, added to no estimate
    "parallel",  # one of a step's records over disjoint groups: the check counts them once, at the largest
})


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
        """h with P(this draw's error > h) <= β (the kind's one tail,
        :data:`dp_spark.noise.kinds.KINDS`); for the selections, the bound on
        their utility loss. ValueError for a kind without one (gem,
        sparse-vector, binary-tree)."""
        return NOISE_KINDS[self.kind].half_width(self.scale, beta, self.parameters)

    def cost(self):
        """What this record's draws cost together (the kind's privacy map of
        a statistic of this sensitivity: pure ε or ρ-zCDP), or None for a kind
        whose module charges it (gumbel, sparse-vector)."""
        rule = NOISE_KINDS[self.kind].cost
        return None if rule is None else rule(self.scale, self.sensitivity, self.parameters)

    def describe(self) -> str:
        """The record as a phrase for an error statement, e.g. "discrete
        Laplace noise of scale 2.02 (standard deviation 2.83) on a count of
        sensitivity 1"."""
        kind = NOISE_KINDS[self.kind]
        what = kind.phrase
        if kind.scale_words == "of scale":
            what += f" of scale {self.scale:.3g}"
        elif kind.scale_words == "with sigma":
            what += f" with sigma {self.scale:.4g}"
        if self.std is not None and kind.states_std:
            bound = "at most " if kind.std_at_most else ""
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


#: Relative slack of the check below: scales are rounded up, costs computed in floats.
_SLACK = 1e-9


def _rho(record, cost) -> float:
    """A record's cost as ρ-zCDP: its own, or its pure ε's (ε²/2; ε²/8 for a
    bounded-range selection, Cesar & Rogers 2021), round by round."""
    if isinstance(cost, ZCDP):
        return cost.rho
    rounds = int(record.parameters.get("rounds", 1))
    per_round = cost.epsilon / rounds
    return rounds * (per_round ** 2 / 8 if record.parameters.get("bounded_range") else pure_to_zcdp(per_round))


def _total(charged, amount) -> float:
    """The costs of ``charged`` ((record, cost) pairs) composed: summed,
    except that records marked ``parallel`` (parts of one step over disjoint
    groups) count once, at their largest. A grouped release's records state
    each group's share, so for them this bounds each part, not the
    composition over a person's groups (which their plans state and the
    audit tier tests)."""
    parallel = [amount(r, c) for r, c in charged if r.parameters.get("parallel")]
    return sum(amount(r, c) for r, c in charged if not r.parameters.get("parallel")) + max(parallel, default=0.0)


def _within(charged, step: Mapping[str, Any]) -> bool:
    """Whether the (record, cost) pairs ``charged`` fit in one budget step's
    cost ``step`` (its report form: kind and ε, δ or ρ)."""
    pure = all(isinstance(c, PureDP) for _, c in charged)
    if step["kind"] == "pure-dp" or (step["kind"] == "approx-dp" and pure):
        return pure and _total(charged, lambda _r, c: c.epsilon) <= step["epsilon"] * (1 + _SLACK)
    if step["kind"] == "zcdp":
        return _total(charged, _rho) <= step["rho"] * (1 + _SLACK)
    # an (ε, δ) step holding one Gaussian: by the continuous Gaussian's exact δ at the step's ε (Balle &
    # Wang 2018). For a discrete Gaussian this can understate δ (σ = 1, Δ = 1, ε = 1: 0.127 against
    # 0.141 summed exactly): its own bound (Canonne, Kamath & Steinke 2020, Theorem 7) is not checked yet
    if len(charged) == 1 and isinstance(charged[0][1], ZCDP) and step["delta"] > 0:
        r = charged[0][0]
        return analytic_gaussian_delta(r.scale, r.sensitivity, step["epsilon"]) <= step["delta"] * (1 + _SLACK)
    return False


def overspent_steps(noise, budget_split) -> list[str]:
    """The budget steps (labels) whose records' costs add up to more than
    the step's cost (Σ cost(records of a step) <= the step's cost, each by
    its kind's privacy map: :meth:`NoiseDraw.cost`); steps holding a record
    whose kind has no closed-form cost (gumbel, sparse-vector) are left to
    their module. Public values only: the records and the split."""
    by_step: dict[str, list] = {}
    for record in noise:
        by_step.setdefault(record.step, []).append((record, record.cost()))
    return [part["step"] for part in budget_split
            if (charged := by_step.get(part["step"])) and all(c is not None for _, c in charged)
            and not _within(charged, part)]


def uncharged_records(noise, budget_split) -> int:
    """How many records name a step the budget split does not have: draws
    charged to no step, which no check could bound (a defect). Public values
    only: the records' steps and the split's labels."""
    labels = {part["step"] for part in budget_split}
    return sum(1 for record in noise if record.step not in labels)
