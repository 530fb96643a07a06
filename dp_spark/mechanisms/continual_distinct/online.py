"""Online (one step at a time) continual distinct counting, with checkpoints.

For the streaming job: the driver keeps a ``ContinualCounter``, feeds it the
exact per-step columns the Spark stage computed for one micro-batch (step t),
and writes the returned private estimate. ρ is spent once, when the counter is
created; ``to_dict`` / ``from_dict`` let a restarted query resume without
re-drawing released noise or spending the budget again.

Same mechanisms, guarantees and constants as ``continual_counts``
(:mod:`.mechanisms`, :mod:`.auto`): item-level ρ-zCDP under ``relation``,
exact integer noise, integer estimates, the same output distribution (tree
node noise is drawn lazily, when a node is first used, so the draw order
differs). The exception is the factorized counter: the batch form's
square-root counter needs the whole stream, so the online form runs the
buffered-linear-Toeplitz counter of :mod:`.blt` (Dvijotham, McMahan, Pillutla,
Steinke, Thakurta 2024; O(buffers) state and step cost), a different
factorization with the same guarantee (ρ-zCDP on the w-truncated stream under
``relation``, proof in :mod:`.blt`) and a stated per-step variance within a
few percent of the square root's: for "bounded" with ``counter="factorized"``,
and at each level of "auto" and "adaptive" whose BLT bound beats the tree's
(``level_counter="best"``, the default; the plan is
``budget_split(..., online=True)``). A level's BLT counter runs, and draws,
from step 1, because its estimate at t depends on all its earlier noise;
drawing noise whose result is never released costs nothing, so only a level
the path reaches is charged and recorded (a tree draws lazily instead).
"select" is batch only. For "auto" a counter is started and charged only
when the sparse vector reaches it; the checkpoint records which were, so a
restored counter never charges or draws them again. ``noise_records()``
returns the batch form's records, with ``draws`` counting the draws actually
used.

The checkpoint holds exact partial sums, the sparse vector's threshold noise
and the BLT counters' noise drawn ahead: store it like the input data and
never publish it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dp_spark import checks as _checks
from dp_spark.accounting import ZCDP, PrivacyFilter
from dp_spark.mechanisms.continual_distinct.auto import AUTO_COUNTERS, BaselinePhase, auto_plan, baseline_record
from dp_spark.mechanisms.continual_distinct.blt import BLTCounter
from dp_spark.mechanisms.continual_distinct.mechanisms import (
    DEFAULT_COUNTER,
    DEFAULT_STREAM_METHOD,
    MECHANISMS,
    adaptive_plan,
    baseline_label,
    bounded_label,
    check_counter,
    level_label,
    recompute_plan,
    round_up_flippancy,
    svt_label,
)
from dp_spark.mechanisms.continual_distinct.relations import DEFAULT_RELATION, check_relation
from dp_spark.mechanisms.continual_distinct.svt import SparseVector
from dp_spark.mechanisms.continual_distinct.tree import BinaryTreeMechanism, integer_vector, num_levels, sigma2_for_flippancy
from dp_spark.errors import ParameterError
from dp_spark.noise.discrete_batch import discrete_gaussian_batch
from dp_spark.noise.records import NoiseDraw
from dp_spark.noise.rng import check_rng

__all__ = ["ContinualCounter", "StepEstimate"]

_STATE_KIND = "dp_spark.mechanisms.continual_distinct.ContinualCounter"
_STATE_VERSION = 4
# version 2: no counter (always the tree); versions 2-3: no level_counter ("auto"/"adaptive" ran trees)
_READABLE_VERSIONS = (2, 3, 4)


@dataclass(frozen=True)
class StepEstimate:
    """One released step: the estimate, its noise std and (1 − β) error bound."""

    step: int
    estimate: int
    std: float
    error_bound: float
    flippancy_bound: int | None


class ContinualCounter:
    """Online continual distinct counter ("auto", "adaptive", "bounded" or "baseline").

    ``counter`` ("bounded" only): "tree" (default, the binary tree) or "factorized" (the BLT
    counter of :mod:`.blt`). ``level_counter`` ("auto" and "adaptive"): each flippancy level's
    counter, "best" (default: the BLT counter or the tree, whichever has the smaller noise bound
    at the public (T, ρ_j, 2^j, relation), :func:`.auto.level_counter` with ``online=True``),
    "tree" or "factorized". A level's BLT counter runs (and draws) from step 1, since its
    estimate at t depends on all its earlier noise; only a level the path reaches is released
    and charged (a tree draws lazily instead).

    ``step(rng, z=..., z_truncated=..., over_counts=...)`` takes step t's exact
    values: ``z`` (change of the distinct count), ``z_truncated`` and
    ``over_counts`` (the length max_level + 1 columns of ``StreamSummaries``).
    "bounded" needs ``z_truncated``, "adaptive" it and ``over_counts``,
    "baseline" ``z``, "auto" all three.
    """

    def __init__(
        self,
        horizon: int,
        rho: float,
        method: str = DEFAULT_STREAM_METHOD,
        max_flippancy: int | None = None,
        *,
        max_level: int | None = None,
        beta: float = 0.05,
        svt_fraction: float | None = None,
        threshold_scale: float | None = None,
        block: int | None = None,
        relation: str = DEFAULT_RELATION,
        tree_fraction: float | None = None,
        tree_levels: int | None = None,
        max_step_change: int | None = 1,
        counter: str = DEFAULT_COUNTER,
        level_counter: str = "best",
    ) -> None:
        self._horizon = _checks.horizon(horizon)
        self._rho = _checks.positive(rho, "rho")
        self._beta = _checks.open_unit(beta, "beta")
        top = _checks.log2_exact(self._horizon)
        self._max_level = top if max_level is None else _checks.integer(max_level, "max_level", 0, top)
        if method not in MECHANISMS:
            raise ParameterError(f"method must be one of {', '.join(MECHANISMS)}, got {method!r}")
        if max_flippancy is not None and method != "bounded":
            raise ParameterError("max_flippancy applies only to method='bounded'; leave it None for the others")
        if method == "select":
            raise ParameterError("method 'select' chooses its counter from the finished stream: batch only; "
                                 "use 'auto' online")
        self._method = method
        self._counter = check_counter(method, counter)
        self._relation = check_relation(relation)
        if level_counter not in AUTO_COUNTERS:
            raise ParameterError(f"level_counter must be one of {', '.join(AUTO_COUNTERS)}, got {level_counter!r}")
        self._level_counter = level_counter
        self._config = {
            "horizon": self._horizon,
            "rho": self._rho,
            "method": method,
            "max_flippancy": max_flippancy,
            "max_level": self._max_level,
            "beta": self._beta,
            "svt_fraction": svt_fraction,
            "threshold_scale": threshold_scale,
            "block": block,
            "relation": self._relation,
            "tree_fraction": tree_fraction,
            "tree_levels": tree_levels,
            "max_step_change": max_step_change,
            "counter": self._counter,
            "level_counter": level_counter,
        }
        self._t = 0
        self._levels = num_levels(self._horizon)
        if method == "bounded":
            if max_flippancy is None:
                raise ParameterError("method='bounded' needs max_flippancy; or use method='adaptive'")
            self._w = round_up_flippancy(max_flippancy)
            if self._w > (1 << self._max_level):
                raise ParameterError("max_flippancy exceeds 2^max_level; raise max_level")
            if self._counter == "factorized":
                self._blt = BLTCounter.for_flippancy(self._horizon, self._rho, self._w, self._relation)
                self._trees = []
            else:
                sigma2 = sigma2_for_flippancy(self._horizon, self._rho, self._w, self._relation)
                self._trees = [BinaryTreeMechanism(self._horizon, sigma2=sigma2)]
            self._quantile = math.sqrt(2.0 * math.log(2.0 * self._horizon / self._beta))
        elif method == "adaptive":
            self._plan = adaptive_plan(
                self._horizon, self._max_level, self._rho, self._beta,
                0.5 if svt_fraction is None else svt_fraction, 1.0 if threshold_scale is None else threshold_scale,
                self._relation, level_counter, online=True,
            )
            self._trees = [
                BLTCounter.for_flippancy(self._horizon, self._plan.rho_tree, 1 << j, self._relation)
                if self._plan.counter(j) == "factorized" else BinaryTreeMechanism(self._horizon, float(sigma))
                for j, sigma in enumerate(self._plan.sigmas)
            ]
            self._svt = SparseVector(self._plan.rho_svt, self._plan.cutoff) if self._plan.cutoff else None
            self._level = 0
            self._released: list[int] = []  # levels whose estimates were released (a BLT level draws from step 1)
        elif method == "auto":
            options = {k: v for k, v in (("svt_fraction", svt_fraction), ("threshold_scale", threshold_scale),
                                         ("tree_fraction", tree_fraction), ("tree_levels", tree_levels)) if v is not None}
            options["max_step_change"] = max_step_change
            self._auto = auto_plan(self._horizon, self._rho, self._beta, self._relation, counter=level_counter,
                                   online=True, **options)
            if self._auto.top_level > self._max_level:
                raise ParameterError("method 'auto' needs max_level >= its top tree level; raise max_level")
            self._trees = [
                BLTCounter.for_flippancy(self._horizon, self._auto.tree_rho[j], 1 << j, self._relation)
                if self._auto.counters[j] == "factorized" else BinaryTreeMechanism(self._horizon, sigma2=s2)
                for j, s2 in enumerate(self._auto.sigma2)
            ]
            self._svt = SparseVector(self._auto.rho_svt, self._auto.cutoff) if self._auto.cutoff else None
            self._level = 0 if self._auto.top_level >= 0 else -1
            self._started: list[int] = []
            self._phase: BaselinePhase | None = None
            if self._level < 0:  # baseline only, from step 1 with the whole budget
                plan = self._auto
                self._phase = BaselinePhase.plan(self._horizon, 1, plan.rho_rest, plan.quantile, plan.max_step_change)
            self._count = 0
            self._held = 0
            self._last_release = 0
        if method == "baseline":
            self._recompute = recompute_plan(self._horizon, self._rho, self._beta, block)
            self._count = 0
            self._held = 0
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
            raise ParameterError(f"method={self._method!r} needs {name} at every step")
        return integer_vector(values, name, self._max_level + 1)

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
        if self._method == "bounded" and self._counter == "factorized":
            column = self._column(z_truncated, "z_truncated")
            estimate, std = self._blt.step(int(column[_checks.log2_exact(self._w)]), rng)
            # sub-Gaussian tail of Σ ℓ_j Z_j (each Z_j σ̌²-sub-Gaussian, CKS 2020) with a union bound
            # over T steps, plus the final rounding and the fixed-point bias (module blt)
            bound = std * self._quantile + 0.5 + self._blt.bias_bound()
            result = StepEstimate(t, estimate, std, bound, self._w)
        elif self._method == "bounded":
            column = self._column(z_truncated, "z_truncated")
            tree = self._trees[0]
            estimate = tree.step(int(column[_checks.log2_exact(self._w)]), rng)
            std = tree.sigma * math.sqrt(popcount)
            result = StepEstimate(t, estimate, std, std * self._quantile, self._w)
        elif self._method == "adaptive":
            column = self._column(z_truncated, "z_truncated")
            over = self._column(over_counts, "over_counts")
            latest = self._feed_levels(column, rng)
            J = self._max_level
            while self._level < J and self._svt is not None and not self._svt.halted:
                level = self._level
                if not self._svt.query(int(over[level]), float(self._plan.thresholds[level]), rng):
                    break
                self._level += 1
            level = self._level
            if level < J:
                truncation = float(self._plan.thresholds[level]) + self._plan.svt_alpha
            else:
                truncation = 0.0 if (1 << J) >= self._horizon else math.inf
            estimate, std, extra = self._level_estimate(level, latest, popcount, float(self._plan.sigmas[level]), rng)
            if level not in self._released:
                self._released.append(level)
            result = StepEstimate(t, estimate, std, std * self._plan.tree_quantile + truncation + extra, 1 << level)
        elif self._method == "auto":
            result = self._auto_step(t, popcount, rng, z, z_truncated, over_counts)
        else:
            result = self._baseline_step(t, rng, z, self._recompute)
        self._t = t
        return result

    def _feed_levels(self, column: np.ndarray, rng) -> dict[int, tuple[int, float]]:
        """Step t's truncated change into every level's counter: a tree adds it to its partial sums
        (it draws only when asked for an estimate); a BLT counter steps, drawing its noise, and its
        (estimate, std) is returned by level."""
        latest = {}
        for j, counter in enumerate(self._trees):
            if isinstance(counter, BLTCounter):
                latest[j] = counter.step(int(column[j]), rng)
            else:
                counter.advance(int(column[j]))
        return latest

    def _level_estimate(self, level: int, latest: dict, popcount: int, sigma: float, rng) -> tuple[int, float, float]:
        """(estimate, std, the bound's extra term) of the current level's counter at this step: a
        tree's lazily drawn estimate (std σ·√popcount(t)), or the BLT counter's (its rounding 1/2
        and fixed-point bias added to the bound, module blt)."""
        counter = self._trees[level]
        if isinstance(counter, BLTCounter):
            estimate, std = latest[level]
            return estimate, std, 0.5 + counter.bias_bound()
        return counter.estimate(rng), sigma * math.sqrt(popcount), 0.0

    def _count_step(self, z: object) -> None:
        if z is None:
            raise ParameterError(f"method={self._method!r} needs z at every step")
        self._count += int(integer_vector([z], "z")[0])

    def _baseline_step(self, t: int, rng, z, plan) -> StepEstimate:
        """Periodic recompute from step 1 (``plan``: a RecomputePlan)."""
        self._count_step(z)
        if (t - 1) % plan.block == 0:
            self._held = self._count + int(discrete_gaussian_batch(plan.sigma2, 1, rng)[0])
            self._last_release = t
        bound = plan.sigma * plan.quantile + (t - self._last_release)
        return StepEstimate(t, self._held, plan.sigma, bound, None)

    def _auto_ledger(self) -> PrivacyFilter:
        """The filter over the trees' and baseline's share, rebuilt from the started phases."""
        ledger = PrivacyFilter(ZCDP(self._auto.rho_rest), as_written=False)  # binary values, as used
        for level in self._started:
            ledger.spend(ZCDP(self._auto.tree_rho[level]), label=f"tree w={1 << level}")
        if self._phase is not None:
            ledger.spend(ZCDP(self._phase.rho), label="recompute baseline")
        return ledger

    def _auto_step(self, t: int, popcount: int, rng, z, z_truncated, over_counts) -> StepEstimate:
        """One step of "auto" (``dp_spark.mechanisms.continual_distinct.auto``): trees, sparse vector, then baseline."""
        plan = self._auto
        self._count_step(z)
        latest: dict = {}
        if self._level >= 0:
            column = self._column(z_truncated, "z_truncated")
            over = self._column(over_counts, "over_counts")
            latest = self._feed_levels(column, rng)
            while self._level >= 0 and self._svt.query(int(over[self._level]), float(plan.thresholds[self._level]), rng):
                self._level = self._level + 1 if self._level < plan.top_level else -1
            if self._level < 0:  # switch: the baseline gets what the started trees left
                self._phase = BaselinePhase.plan(
                    self._horizon, t, self._auto_ledger().remaining.rho, plan.quantile, plan.max_step_change
                )
                self._auto_ledger()  # checks the filter admits it
        if self._level >= 0:
            level = self._level
            if level not in self._started:
                self._auto_ledger().spend(ZCDP(plan.tree_rho[level]))  # raises if it would not fit
                self._started.append(level)
            truncation = 0.0 if (1 << level) >= self._horizon else float(plan.thresholds[level]) + plan.svt_alpha
            estimate, std, extra = self._level_estimate(level, latest, popcount, math.sqrt(plan.sigma2[level]), rng)
            return StepEstimate(t, estimate, std, std * plan.quantile + truncation + extra, 1 << level)
        phase = self._phase
        if (t - phase.start) % phase.block == 0:
            self._held = self._count + int(discrete_gaussian_batch(phase.sigma2, 1, rng)[0])
            self._last_release = t
        staleness = (t - self._last_release) * (plan.max_step_change or 0)  # 0: B = 1 without a bound
        return StepEstimate(t, self._held, phase.sigma, phase.sigma * plan.quantile + staleness, None)

    def noise_records(self) -> tuple[NoiseDraw, ...]:
        """The :class:`~dp_spark.noise.records.NoiseDraw` of every privacy draw
        so far, at the batch form's granularity, order and budget steps: the
        sparse vector (once it has answered; ``draws`` None), each tree that has
        drawn (``draws``: nodes drawn), then the baseline (``draws``: releases
        so far). Built from the state alone, so a restored counter reports what
        an uninterrupted one does; public values only (they follow from the
        configuration and the released steps). A tree restored from a state
        without a draw count reports ``draws`` None."""
        records: list[NoiseDraw] = []
        if self._method == "bounded" and self._counter == "factorized":
            if self._blt.steps_done:
                records.append(self._blt.noise_record(bounded_label(self._w, "factorized"), self._w, self._relation))
        elif self._method == "bounded":
            records += self._tree_records({self._w.bit_length() - 1: bounded_label(self._w)})
        elif self._method == "adaptive":
            if self._svt is not None and self._svt.queries_answered:
                records.append(self._svt.noise_record(svt_label(self._plan.cutoff)))
            records += self._tree_records({j: level_label(j, self._plan.counter(j)) for j in range(len(self._trees))})
        elif self._method == "baseline":
            plan = self._recompute
            draws = -(-self._t // plan.block)  # one draw at each of the steps 1, 1 + B, ... so far
            if draws:
                records.append(baseline_record(baseline_label(plan),
                                               plan.sigma, draws, f"the distinct count every {plan.block} steps"))
        else:
            records += self._auto_records()
        return tuple(records)

    def _tree_records(self, steps: dict[int, str]) -> list[NoiseDraw]:
        """The record of each tree (level j, charged to ``steps[j]``) that drew
        node noise; w = 2^j for "adaptive"/"auto", the bound for "bounded"."""
        out = []
        for j, step in sorted(steps.items()):
            tree = self._trees[0] if self._method == "bounded" else self._trees[j]
            if isinstance(tree, BLTCounter):  # it draws at every step; released (and recorded) once reached
                if tree.steps_done and self._tree_may_have_drawn(j):
                    out.append(tree.noise_record(step, 1 << j, self._relation))
                continue
            if tree.drawn == 0 or (tree.drawn is None and not self._tree_may_have_drawn(j)):
                continue
            out.append(tree.online_noise_record(step, 1 << j, self._relation))
        return out

    def _tree_may_have_drawn(self, level: int) -> bool:
        """Whether a tree with an unknown draw count (an old state) can have drawn; for a BLT
        level, whether its estimates were released (the path reached it)."""
        if self._method == "bounded":
            return self._t > 0
        if self._method == "auto":
            return level in self._started
        if isinstance(self._trees[level], BLTCounter):
            return level in self._released
        return self._t > 0 and level <= self._level

    def _auto_records(self) -> list[NoiseDraw]:
        plan = self._auto
        split = plan.budget_split()
        rest_step = split[-1][0]  # the trees and the baseline share the filter's step
        records = []
        if self._svt is not None and self._svt.queries_answered:
            records.append(self._svt.noise_record(split[0][0]))
        records += self._tree_records({j: rest_step for j in range(len(self._trees))})
        phase = self._phase
        if phase is not None and self._t >= phase.start:
            draws = (self._t - phase.start) // phase.block + 1  # steps start, start + B, ... so far
            records.append(baseline_record(rest_step, phase.sigma, draws,
                                           f"the distinct count every {phase.block} steps from step {phase.start}"))
        return records

    def to_dict(self) -> dict:
        """JSON-serialisable checkpoint (confidential: holds exact partial sums)."""
        state: dict = {"kind": _STATE_KIND, "version": _STATE_VERSION, "config": dict(self._config), "t": self._t}
        if self._method in ("bounded", "adaptive"):
            state["trees"] = [tree.to_dict() for tree in self._trees]
        if self._method == "bounded" and self._counter == "factorized":
            state["blt"] = self._blt.to_dict()
        if self._method == "adaptive":
            state["level"] = self._level
            state["svt"] = None if self._svt is None else self._svt.to_dict()
            state["released"] = list(self._released)
        if self._method in ("baseline", "auto"):
            state["count"] = self._count
            state["held"] = self._held
            state["last_release"] = self._last_release
        if self._method == "auto":
            state["trees"] = [tree.to_dict() for tree in self._trees]
            state["level"] = self._level
            state["svt"] = None if self._svt is None else self._svt.to_dict()
            state["started"] = list(self._started)
            p = self._phase
            state["phase"] = None if p is None else {
                "start": p.start, "rho": p.rho, "block": p.block, "releases": p.releases,
                "sigma2": [p.sigma2.numerator, p.sigma2.denominator],
            }
        return state

    @classmethod
    def from_dict(cls, state: dict) -> ContinualCounter:
        """Restore a counter saved by ``to_dict``; no noise is re-drawn, no budget re-spent."""
        if not isinstance(state, dict) or state.get("kind") != _STATE_KIND:
            raise ParameterError("state is not a saved ContinualCounter (wrong or missing 'kind')")
        if state.get("version") not in _READABLE_VERSIONS:
            raise ParameterError(f"state version must be one of {_READABLE_VERSIONS}; re-create the checkpoint")
        config = dict(state["config"])
        config.setdefault("level_counter", "tree")  # versions 2-3 ran trees at every level
        method = config.pop("method", None)
        legacy = config.pop("mechanism", None)  # older states name the method "mechanism"
        counter = cls(
            config.pop("horizon"), config.pop("rho"), legacy if method is None else method,
            config.pop("max_flippancy"), **config
        )
        counter._t = _checks.integer(state["t"], "state['t']", 0, counter._horizon)
        if counter._method in ("bounded", "adaptive", "auto"):
            saved = state["trees"]
            if not isinstance(saved, list) or len(saved) != len(counter._trees):
                raise ParameterError("state trees do not match the saved configuration; re-create the checkpoint")
            trees = [BLTCounter.from_dict(s, sensitivity=fresh.sensitivity_int) if isinstance(fresh, BLTCounter)
                     else BinaryTreeMechanism.from_dict(s) for s, fresh in zip(saved, counter._trees)]
            fed = counter._t
            if counter._method == "auto" and state.get("phase") is not None:
                # "auto" stops feeding its trees once the baseline starts (at the phase's first step)
                fed = min(fed, _checks.integer(state["phase"].get("start"), "phase start", 1, counter._horizon))
            if len(trees) != len(counter._trees) or any(
                a.sigma2 != b.sigma2 or a.steps_done != fed or getattr(a, "params", None) != getattr(b, "params", None)
                or a.horizon != b.horizon for a, b in zip(trees, counter._trees)
            ):
                raise ParameterError("state trees do not match the saved configuration; re-create the checkpoint")
            counter._trees = trees
        if counter._method == "bounded" and counter._counter == "factorized":
            counter._restore_blt(state)
        if counter._method == "adaptive":
            counter._level = _checks.integer(state["level"], "state['level']", 0, counter._max_level)
            counter._svt = None if state["svt"] is None else SparseVector.from_dict(state["svt"])
            # versions 2-3 ran trees only, whose records follow their own draw counts
            released = state.get("released", list(range(counter._level + 1)) if counter._t else [])
            counter._released = [_checks.integer(v, "state['released']", 0, counter._level) for v in released]
        if counter._method in ("baseline", "auto"):
            counter._count = _checks.integer(state["count"], "state['count']", -(2**62))
            counter._held = _checks.integer(state["held"], "state['held']", -(2**62))
            counter._last_release = _checks.integer(state["last_release"], "state['last_release']", 0, counter._t)
        if counter._method == "auto":
            counter._restore_auto(state)
        return counter

    def _restore_blt(self, state: dict) -> None:
        """The BLT counter's saved state, checked against the one the configuration builds."""
        fresh = self._blt
        saved = state.get("blt")
        if not isinstance(saved, dict):
            raise ParameterError("state has no BLT counter; re-create the checkpoint")
        restored = BLTCounter.from_dict(saved, sensitivity=fresh.sensitivity_int)
        if (restored.params != fresh.params or restored.sigma2 != fresh.sigma2 or restored.horizon != fresh.horizon
                or restored.steps_done != self._t):
            raise ParameterError("state BLT counter does not match the saved configuration; re-create the checkpoint")
        self._blt = restored

    def _restore_auto(self, state: dict) -> None:
        top = self._auto.top_level
        self._level = _checks.integer(state["level"], "state['level']", -1, max(top, -1))
        self._svt = None if state["svt"] is None else SparseVector.from_dict(state["svt"])
        started = state["started"]
        if not isinstance(started, list) or len(set(started)) != len(started):
            raise ParameterError("state['started'] must list distinct tree levels")
        self._started = [_checks.integer(v, "state['started']", 0, max(top, 0)) for v in started]
        phase = state["phase"]
        if phase is None:
            self._phase = None
        else:
            num, den = (int(v) for v in phase["sigma2"])
            self._phase = BaselinePhase(
                _checks.integer(phase["start"], "phase start", 1, self._horizon),
                _checks.positive(phase["rho"], "phase rho"),
                _checks.integer(phase["block"], "phase block", 1, self._horizon),
                _checks.integer(phase["releases"], "phase releases", 1, self._horizon),
                Fraction(num, den),
            )
        if (self._phase is None) != (self._level >= 0):
            raise ParameterError("state phase and level disagree; re-create the checkpoint")
        self._auto_ledger()  # the recorded spends must fit the budget
