"""Sparse vector technique (online, with a cutoff) under zCDP.

Stands in for Algorithm 2 of Jain, Kalemaj, Raskhodnikova, Sivakumar, Smith
(NeurIPS 2023), whose constants are not legible in the seed text: c rounds of
AboveThreshold (Dwork–Roth, "The Algorithmic Foundations of Differential
Privacy", Algorithm 1 / Theorem 3.23), each with a fresh noisy threshold,
halting after the c-th "above". Per round (parameter ε₀), with exact
discrete Laplace noise and integer queries q:
    threshold offset η ~ Lap_Z(b₁), b₁ = 2/ε₀ (drawn at the round's first query)
    each query       ν ~ Lap_Z(b₂), b₂ = 4/ε₀; "above" iff q + ν ≥ ⌈τ⌉ + η
(b₁, b₂ rounded *up* onto the grid 2^−10: never less noise; for integer
q + ν − η, "≥ τ" and "≥ ⌈τ⌉" agree).

Guarantee: for sensitivity-1 queries (chosen adaptively, thresholds from
earlier answers only) each round is (1/b₁ + 2/b₂) ≤ ε₀-DP (Dwork–Roth Thm
3.23; its proof shifts η by 1 and each ν by 2, integer shifts under which
the discrete Laplace's ratio is at most exp(1/b), as for the continuous one),
hence ε₀²/2-zCDP (Bun–Steinke 2016, Prop. 1.4); c rounds compose to
c·ε₀²/2, so ε₀ = sqrt(2ρ/c) makes the whole ρ-zCDP (an unfinished round is
charged in full). [Standard constants, not confirmed against the paper's
Algorithm 2 / Theorem 3.7.]

Accuracy (Dwork–Roth Thm 3.24, union over c rounds): with probability
≥ 1 − β, over at most k queries every "below" has q < τ + α and every "above"
q ≥ τ − α, α = 2·b₂·ln(4ck/β) (the discrete Laplace tail
P[|X| ≥ x] ≤ 2·exp(−x/b) costs the factor 2 in the log).

``to_dict`` includes the current round's threshold noise η, which must stay
secret: store checkpoints like the input data, never publish them.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dp_spark import checks as _checks
from dp_spark.mechanisms.continual_distinct.tree import integer_vector
from dp_spark.errors import ParameterError
from dp_spark.accounting.exact import ratio_up, sqrt_down
from dp_spark.noise.discrete_batch import discrete_laplace_batch, rational_scale
from dp_spark.noise.records import NoiseDraw
from dp_spark.noise.rng import check_rng
from dp_spark.noise.tails import discrete_laplace_std

__all__ = ["SparseVector"]

_STATE_KIND = "dp_spark.mechanisms.continual_distinct.SparseVector"
_STATE_VERSION = 2


class SparseVector:
    """Online sparse vector technique with cutoff c, ρ-zCDP for sensitivity-1 queries.

    ``query`` answers True ("above") or False; after c "above" answers further
    queries raise ``ParameterError``. ``first_above`` answers a run of queries
    at once (same distribution as ``query`` on each until the first "above").
    """

    def __init__(self, rho: float, cutoff: int) -> None:
        self._rho = _checks.positive(rho, "rho")
        self._cutoff = _checks.integer(cutoff, "cutoff", 1)
        # ε₀ = sqrt(2ρ/c) rounded down, exactly: c·ε₀²/2 <= ρ on the floats
        self._epsilon = sqrt_down(2 * Fraction(self._rho) / self._cutoff)
        self._aboves = 0
        self._queries = 0
        self._threshold_noise: float | None = None

    @property
    def rho(self) -> float:
        return self._rho

    @property
    def cutoff(self) -> int:
        return self._cutoff

    @property
    def epsilon_per_round(self) -> float:
        """ε₀ = sqrt(2ρ/c): each AboveThreshold round is ε₀-DP."""
        return self._epsilon

    @property
    def threshold_scale(self) -> Fraction:
        """Discrete Laplace scale of the threshold noise, b₁ = 2/ε₀ (rounded up to 2^−10)."""
        return rational_scale(ratio_up(2.0, self._epsilon))

    def noise_record(self, step: str) -> NoiseDraw:
        """The record of this sparse vector's draws on sensitivity-1 queries
        (b₂ per query, b₁ per round; ``draws`` None: the path reveals it only in part)."""
        b2 = float(self.query_scale)
        return NoiseDraw(step, "sparse-vector", scale=b2, std=discrete_laplace_std(b2), sensitivity=1.0,
                         draws=None, target="the number of items above each flippancy bound, per step",
                         parameters={"cutoff": int(self._cutoff), "threshold_scale": float(self.threshold_scale),
                                     "query_scale": b2})

    @property
    def query_scale(self) -> Fraction:
        """Discrete Laplace scale of the query noise, b₂ = 4/ε₀ (rounded up to 2^−10)."""
        return rational_scale(ratio_up(4.0, self._epsilon))

    @property
    def aboves(self) -> int:
        return self._aboves

    @property
    def queries_answered(self) -> int:
        return self._queries

    @property
    def halted(self) -> bool:
        return self._aboves >= self._cutoff

    def alpha(self, num_queries: int, beta: float) -> float:
        """α = 2·b₂·ln(4ck/β): the (α, β)-accuracy over k queries (c rounds)."""
        k = _checks.integer(num_queries, "num_queries", 1)
        beta = _checks.open_unit(beta, "beta")
        return 2.0 * float(self.query_scale) * math.log(4.0 * self._cutoff * k / beta)

    def _start_round(self, rng: np.random.Generator) -> int:
        if self.halted:
            raise ParameterError(
                "the sparse vector has given its cutoff number of 'above' answers; stop querying it"
            )
        if self._threshold_noise is None:
            self._threshold_noise = int(discrete_laplace_batch(self.threshold_scale, 1, rng)[0])
        return self._threshold_noise

    def query(self, value: int, threshold: float, rng: np.random.Generator) -> bool:
        """Answer one sensitivity-1 integer query: True iff value + ν ≥ ⌈threshold⌉ + η."""
        check_rng(rng)
        value = int(integer_vector([value], "value")[0])
        threshold = math.ceil(_checks.finite_number(threshold, "threshold"))
        eta = self._start_round(rng)
        nu = int(discrete_laplace_batch(self.query_scale, 1, rng)[0])
        self._queries += 1
        if value + nu >= threshold + eta:
            self._aboves += 1
            self._threshold_noise = None
            return True
        return False

    def first_above(
        self, values: object, threshold: float, rng: np.random.Generator, chunk: int = 4096
    ) -> int | None:
        """Answer ``values`` in order until the first "above"; its 0-based
        index (the round ends there), or None if all were "below". The values
        must not depend on answers given inside this call; only the number of
        noise draws consumed differs from repeated ``query`` calls."""
        check_rng(rng)
        array = integer_vector(values, "values")
        threshold = math.ceil(_checks.finite_number(threshold, "threshold"))
        chunk = _checks.integer(chunk, "chunk", 1)
        eta = self._start_round(rng)
        for start in range(0, array.shape[0], chunk):
            part = array[start : start + chunk]
            nu = discrete_laplace_batch(self.query_scale, part.shape[0], rng)
            hits = np.flatnonzero(part + nu >= threshold + eta)
            if hits.shape[0]:
                index = int(hits[0])
                self._queries += index + 1
                self._aboves += 1
                self._threshold_noise = None
                return start + index
            self._queries += part.shape[0]
        return None

    def to_dict(self) -> dict:
        """Checkpointable state (JSON-serialisable; the threshold noise is secret)."""
        return {
            "kind": _STATE_KIND,
            "version": _STATE_VERSION,
            "rho": self._rho,
            "cutoff": self._cutoff,
            "aboves": self._aboves,
            "queries": self._queries,
            "threshold_noise": self._threshold_noise,
        }

    @classmethod
    def from_dict(cls, state: dict) -> SparseVector:
        """Restore a sparse vector saved by ``to_dict`` (keeps its drawn threshold noise)."""
        if not isinstance(state, dict) or state.get("kind") != _STATE_KIND:
            raise ParameterError("state is not a saved SparseVector (wrong or missing 'kind')")
        if state.get("version") != _STATE_VERSION:
            raise ParameterError(f"state version must be {_STATE_VERSION}; re-create the checkpoint")
        svt = cls(state["rho"], state["cutoff"])
        svt._aboves = _checks.integer(state["aboves"], "state['aboves']", 0, svt._cutoff)
        svt._queries = _checks.integer(state["queries"], "state['queries']", 0)
        noise = state["threshold_noise"]
        svt._threshold_noise = None if noise is None else _checks.integer(noise, "state['threshold_noise']", -(2**62))
        return svt
