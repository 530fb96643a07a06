"""Online (one step at a time) continual distinct counting, with checkpoints.

For the streaming job: the driver keeps a ``ContinualCounter``, feeds it the
exact per-step columns the Spark stage computed for one micro-batch (step t),
and writes the returned private estimate. ``to_dict`` / ``from_dict`` let a
restarted query resume without re-drawing released noise and without spending
the budget again (ρ is spent once, when the counter is created; the state
records it).

Same mechanisms, guarantees and constants as ``continual_counts`` (see
``dp_spark.continual.mechanisms``): item-level ρ-zCDP. For "bounded" and
"baseline" the noise is drawn in the same order as the batch form, so the same
generator state gives the same estimates; for "adaptive" the order differs
(all trees step together, then the sparse vector), the distribution is the same.

The checkpoint holds exact partial sums and the sparse vector's threshold noise:
store it like the input data and never publish it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dp_spark.continual import _checks
from dp_spark.continual.mechanisms import (
    MECHANISMS,
    adaptive_plan,
    recompute_plan,
    round_up_flippancy,
)
from dp_spark.continual.svt import SparseVector
from dp_spark.continual.tree import BinaryTreeMechanism, num_levels, sigma_for_flippancy
from dp_spark.errors import ParameterError
from dp_spark.noise.rng import check_rng

__all__ = ["ContinualCounter", "StepEstimate"]

_STATE_KIND = "dp_spark.continual.ContinualCounter"
_STATE_VERSION = 1


@dataclass(frozen=True)
class StepEstimate:
    """One released step: the estimate, its noise std and (1 − β) error bound."""

    step: int
    estimate: float
    std: float
    error_bound: float
    flippancy_bound: int | None


class ContinualCounter:
    """Online continual distinct counter ("adaptive", "bounded" or "baseline").

    ``step(rng, z=..., z_truncated=..., over_counts=...)`` takes the exact
    values for the next step t: ``z`` (change of the distinct count; needed by
    "baseline"), ``z_truncated`` and ``over_counts`` (length max_level + 1
    columns of ``StreamSummaries`` at step t; "bounded" needs ``z_truncated``,
    "adaptive" both).
    """

    def __init__(
        self,
        horizon: int,
        rho: float,
        mechanism: str = "adaptive",
        max_flippancy: int | None = None,
        *,
        max_level: int | None = None,
        beta: float = 0.05,
        svt_fraction: float = 0.5,
        threshold_scale: float = 1.0,
        block: int | None = None,
    ) -> None:
        self._horizon = _checks.horizon(horizon)
        self._rho = _checks.positive_finite(rho, "rho")
        self._beta = _checks.open_unit(beta, "beta")
        top = _checks.log2_exact(self._horizon)
        self._max_level = top if max_level is None else _checks.integer(max_level, "max_level", 0, top)
        if mechanism not in MECHANISMS:
            raise ParameterError(f"mechanism must be one of {', '.join(MECHANISMS)}, got {mechanism!r}")
        if max_flippancy is not None and mechanism != "bounded":
            raise ParameterError("max_flippancy applies only to mechanism='bounded'; leave it None for the others")
        self._mechanism = mechanism
        self._config = {
            "horizon": self._horizon,
            "rho": self._rho,
            "mechanism": mechanism,
            "max_flippancy": max_flippancy,
            "max_level": self._max_level,
            "beta": self._beta,
            "svt_fraction": svt_fraction,
            "threshold_scale": threshold_scale,
            "block": block,
        }
        self._t = 0
        self._levels = num_levels(self._horizon)
        if mechanism == "bounded":
            if max_flippancy is None:
                raise ParameterError("mechanism='bounded' needs max_flippancy; or use mechanism='adaptive'")
            self._w = round_up_flippancy(max_flippancy)
            if self._w > (1 << self._max_level):
                raise ParameterError("max_flippancy exceeds 2^max_level; raise max_level")
            self._trees = [BinaryTreeMechanism(self._horizon, sigma_for_flippancy(self._horizon, self._rho, self._w))]
            self._quantile = math.sqrt(2.0 * math.log(2.0 * self._horizon / self._beta))
        elif mechanism == "adaptive":
            self._plan = adaptive_plan(
                self._horizon, self._max_level, self._rho, self._beta, svt_fraction, threshold_scale
            )
            self._trees = [BinaryTreeMechanism(self._horizon, float(s)) for s in self._plan.sigmas]
            self._svt = SparseVector(self._plan.rho_svt, self._plan.cutoff) if self._plan.cutoff else None
            self._level = 0
        else:
            self._recompute = recompute_plan(self._horizon, self._rho, self._beta, block)
            self._count = 0.0
            self._held = 0.0
            self._last_release = 0

    @property
    def rho(self) -> float:
        """The zCDP budget this counter spends (once, over the whole horizon)."""
        return self._rho

    @property
    def steps_done(self) -> int:
        return self._t

    @property
    def horizon(self) -> int:
        return self._horizon

    def _column(self, values: object, name: str) -> np.ndarray:
        if values is None:
            raise ParameterError(f"mechanism={self._mechanism!r} needs {name} at every step")
        return _checks.finite_vector(values, name, self._max_level + 1)

    def step(
        self,
        rng: np.random.Generator,
        *,
        z: float | None = None,
        z_truncated: object = None,
        over_counts: object = None,
    ) -> StepEstimate:
        """Consume step t = steps_done + 1 and return its private estimate."""
        check_rng(rng)
        if self._t >= self._horizon:
            raise ParameterError("the horizon is reached; start a new counter (and budget) for more steps")
        t = self._t + 1
        popcount = bin(t).count("1")
        if self._mechanism == "bounded":
            column = self._column(z_truncated, "z_truncated")
            tree = self._trees[0]
            estimate = tree.step(column[_checks.log2_exact(self._w)], rng)
            std = tree.sigma * math.sqrt(popcount)
            result = StepEstimate(t, estimate, std, std * self._quantile, self._w)
        elif self._mechanism == "adaptive":
            column = self._column(z_truncated, "z_truncated")
            over = self._column(over_counts, "over_counts")
            outputs = [tree.step(column[j], rng) for j, tree in enumerate(self._trees)]
            J = self._max_level
            while self._level < J and self._svt is not None and not self._svt.halted:
                level = self._level
                if not self._svt.query(over[level] - float(self._plan.thresholds[level]), 0.0, rng):
                    break
                self._level += 1
            level = self._level
            std = float(self._plan.sigmas[level]) * math.sqrt(popcount)
            if level < J:
                truncation = float(self._plan.thresholds[level]) + self._plan.svt_alpha
            else:
                truncation = 0.0 if (1 << J) >= self._horizon else math.inf
            result = StepEstimate(t, outputs[level], std, std * self._plan.tree_quantile + truncation, 1 << level)
        else:
            if z is None:
                raise ParameterError("mechanism='baseline' needs z at every step")
            self._count += _checks.finite_number(z, "z")
            plan = self._recompute
            if (t - 1) % plan.block == 0:
                self._held = self._count + float(rng.normal(0.0, plan.sigma))
                self._last_release = t
            bound = plan.sigma * plan.quantile + (t - self._last_release)
            result = StepEstimate(t, self._held, plan.sigma, bound, None)
        self._t = t
        return result

    def to_dict(self) -> dict:
        """JSON-serialisable checkpoint (confidential: holds exact partial sums)."""
        state: dict = {"kind": _STATE_KIND, "version": _STATE_VERSION, "config": dict(self._config), "t": self._t}
        if self._mechanism in ("bounded", "adaptive"):
            state["trees"] = [tree.to_dict() for tree in self._trees]
        if self._mechanism == "adaptive":
            state["level"] = self._level
            state["svt"] = None if self._svt is None else self._svt.to_dict()
        if self._mechanism == "baseline":
            state["count"] = self._count
            state["held"] = self._held
            state["last_release"] = self._last_release
        return state

    @classmethod
    def from_dict(cls, state: dict) -> ContinualCounter:
        """Restore a counter saved by ``to_dict``; no noise is re-drawn, no budget re-spent."""
        if not isinstance(state, dict) or state.get("kind") != _STATE_KIND:
            raise ParameterError("state is not a saved ContinualCounter (wrong or missing 'kind')")
        if state.get("version") != _STATE_VERSION:
            raise ParameterError(f"state version must be {_STATE_VERSION}; re-create the checkpoint")
        config = dict(state["config"])
        counter = cls(
            config.pop("horizon"), config.pop("rho"), config.pop("mechanism"), config.pop("max_flippancy"), **config
        )
        counter._t = _checks.integer(state["t"], "state['t']", 0, counter._horizon)
        if counter._mechanism in ("bounded", "adaptive"):
            trees = [BinaryTreeMechanism.from_dict(s) for s in state["trees"]]
            if len(trees) != len(counter._trees) or any(
                a.sigma != b.sigma or a.steps_done != counter._t for a, b in zip(trees, counter._trees)
            ):
                raise ParameterError("state trees do not match the saved configuration; re-create the checkpoint")
            counter._trees = trees
        if counter._mechanism == "adaptive":
            counter._level = _checks.integer(state["level"], "state['level']", 0, counter._max_level)
            counter._svt = None if state["svt"] is None else SparseVector.from_dict(state["svt"])
        if counter._mechanism == "baseline":
            counter._count = _checks.finite_number(state["count"], "state['count']")
            counter._held = _checks.finite_number(state["held"], "state['held']")
            counter._last_release = _checks.integer(state["last_release"], "state['last_release']", 0, counter._t)
        return counter
