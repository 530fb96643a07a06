"""Binary tree mechanism with discrete Gaussian noise (continual prefix sums).

Dwork, Naor, Pitassi and Rothblum (STOC 2010) and Chan, Shi and Song
(2010/2011), in the form of Algorithm 1 of Jain, Kalemaj, Raskhodnikova,
Sivakumar, Smith (NeurIPS 2023; Definitions 3.3 and 3.4 there).

For T = 2^k the tree has L = k + 1 levels; level i (0 = leaves) partitions
[1, T] into the dyadic intervals ((n-1)·2^i, n·2^i]. Every node I releases
``sum(z[t] for t in I) + Z_I`` with an independent Z_I ~ N_Z(0, σ²) (exact
integer sampler; z is integer, so every estimate is an exact integer). The
estimate at t sums the nodes of the dyadic decomposition of [1, t], one per
set bit of t: popcount(t) ≤ L draws, noise std ≤ σ·sqrt(popcount(t))
(``output_std``).

Privacy: releasing all nodes is the Gaussian mechanism on the vector of node
sums, so if a neighbour moves it by at most Δ₂ in ℓ2 the release is
Δ₂²/(2σ²)-zCDP (Canonne–Kamath–Steinke 2020, Theorem 14) and every estimate is
post-processing. σ² is exact and rounded *up* onto the sampler's grid
(``rational_sigma2``). For Algorithm 1, Δ₂² ≤ κ·w·L on the w-truncated
difference stream (κ = 4 "subset", 1 "item-removal"; proof in
:mod:`.relations`), so σ² = κ·w·L/(2ρ) gives ρ-zCDP.

``batch`` draws all 2T − 1 nodes in one call; the online form draws a node's
noise when an estimate first uses it (same joint distribution, different
draw order), keeping O(L) state (per level the open node's exact sum and the
last completed node), which ``to_dict`` / ``from_dict`` checkpoint without
re-drawing released noise. The state holds exact (non-private) partial sums:
store it like the input data, never publish it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from dp_spark import checks as _checks
from dp_spark.mechanisms.continual_distinct.relations import sensitivity_factor
from dp_spark.errors import ParameterError
from dp_spark.noise.discrete_batch import discrete_gaussian_batch, rational_sigma2
from dp_spark.noise.records import NoiseDraw
from dp_spark.noise.rng import check_rng

__all__ = [
    "BinaryTreeMechanism",
    "TreeRelease",
    "num_levels",
    "nodes_per_step",
    "node_sums",
    "sigma_for_flippancy",
    "sigma2_for_flippancy",
    "rho_for_flippancy",
    "integer_vector",
]

_STATE_KIND = "dp_spark.mechanisms.continual_distinct.BinaryTreeMechanism"
_STATE_VERSION = 2


def num_levels(horizon: int) -> int:
    """Number of levels L = log2(T) + 1 of the binary tree over T = 2^k leaves."""
    return _checks.log2_exact(_checks.horizon(horizon)) + 1


def nodes_per_step(horizon: int) -> np.ndarray:
    """popcount(t) for t = 1..T: how many noisy nodes the estimate at t sums."""
    steps = np.arange(1, _checks.horizon(horizon) + 1, dtype=np.int64)
    count = np.zeros_like(steps)
    for level in range(num_levels(horizon)):
        count += (steps >> level) & 1
    return count


def node_sums(z: object) -> list[np.ndarray]:
    """Exact node sums over ``z`` (length a power of two): ``[i][n]`` is
    ``sum(z[n*2^i : (n+1)*2^i])``, the vector the noise protects."""
    array = np.asarray(z)
    if array.dtype.kind not in "iub":
        array = array.astype(np.float64)
    if array.ndim != 1:
        raise ParameterError("z must be a 1-d array (one entry per step)")
    horizon = _checks.horizon(array.shape[0], "len(z)")
    return [array.reshape(-1, 1 << level).sum(axis=1) for level in range(num_levels(horizon))]


def integer_vector(values: object, name: str, length: int | None = None) -> np.ndarray:
    """``values`` as int64, refused unless every entry is an integer (the
    message quotes no entry: entries are data-derived)."""
    array = np.asarray(values)
    if array.dtype.kind not in "iub":
        floats = _checks.finite_vector(array, name)
        if not np.all(floats == np.round(floats)) or np.any(np.abs(floats) > 2**53):
            raise ParameterError(f"{name} must contain only integers (exact counts)")
        array = floats
    array = array.astype(np.int64)
    if array.ndim != 1:
        raise ParameterError(f"{name} must be a 1-d array, got {array.ndim} dimensions")
    if length is not None and array.shape[0] != length:
        raise ParameterError(f"{name} must have length {length} (one entry per step), got {array.shape[0]}")
    return array


def sigma2_for_flippancy(horizon: int, rho: float, flippancy_bound: int, relation: str = "subset") -> Fraction:
    """σ² = κ·w·L/(2ρ), exact and rounded up by ``rational_sigma2``: ρ-zCDP
    for the node vector's ℓ2² sensitivity κ·w·L (:mod:`.relations`)."""
    levels = num_levels(horizon)
    rho = _checks.positive(rho, "rho")
    w = _checks.integer(flippancy_bound, "flippancy_bound", 1)
    return rational_sigma2(Fraction(sensitivity_factor(relation) * w * levels) / (2 * Fraction(rho)))


def sigma_for_flippancy(horizon: int, rho: float, flippancy_bound: int, relation: str = "subset") -> float:
    """σ = sqrt(σ²) of ``sigma2_for_flippancy`` (a float, for error statements only)."""
    return math.sqrt(sigma2_for_flippancy(horizon, rho, flippancy_bound, relation))


def rho_for_flippancy(horizon: int, sigma: float, flippancy_bound: int, relation: str = "subset") -> float:
    """ρ = κ·w·L / (2σ²): the zCDP cost of the tree with per-node σ for bound w."""
    levels = num_levels(horizon)
    sigma = _checks.positive(sigma, "sigma")
    w = _checks.integer(flippancy_bound, "flippancy_bound", 1)
    return sensitivity_factor(relation) * w * levels / (2.0 * sigma * sigma)


def _draw_positions(horizon: int) -> list[np.ndarray]:
    """For each level, the index of each node's draw in the step-major order."""
    steps = np.arange(1, horizon + 1, dtype=np.int64)
    levels = num_levels(horizon)
    # completed nodes at step t: levels 0..v(t), where 2^v(t) divides t.
    completed = np.ones(horizon, dtype=np.int64)
    for level in range(1, levels):
        completed += (steps % (1 << level) == 0).astype(np.int64)
    offset = np.concatenate(([0], np.cumsum(completed)[:-1]))
    positions = []
    for level in range(levels):
        ends = np.arange(1 << level, horizon + 1, 1 << level, dtype=np.int64)
        positions.append(offset[ends - 1] + level)
    return positions


@dataclass(frozen=True)
class TreeRelease:
    """One batch run: ``estimates[t-1]`` the noisy prefix sum at step t
    (int64), ``std[t-1]`` = σ·sqrt(popcount(t)). ``node_noise[i]``: level i's
    draws, for tests only (published next to the estimates it would remove
    the noise)."""

    estimates: np.ndarray
    std: np.ndarray
    sigma: float
    node_noise: tuple[np.ndarray, ...]


def _as_sigma2(sigma: object = None, sigma2: object = None) -> Fraction:
    if (sigma is None) == (sigma2 is None):
        raise ParameterError("give exactly one of sigma and sigma2")
    if sigma2 is None:
        value = Fraction(_checks.positive(sigma, "sigma")) ** 2
    elif isinstance(sigma2, Fraction):
        value = sigma2
    else:
        value = Fraction(_checks.positive(sigma2, "sigma2"))
    if value <= 0:
        raise ParameterError("sigma2 must be > 0")
    return rational_sigma2(value)


class BinaryTreeMechanism:
    """Binary tree mechanism for continual prefix sums, N_Z(0, σ²) per node.

    Online: ``step(z_t, rng)`` once per step t = 1..T returns the noisy
    prefix sum at t; batch: ``batch(z, rng)``. Δ₂²/(2σ²)-zCDP when the node
    vector (``node_sums``) moves by at most Δ₂ in ℓ2; ``for_flippancy`` gives
    Algorithm 1 (item-level ρ-zCDP on the w-truncated difference stream).
    """

    def __init__(self, horizon: int, sigma: float | None = None, *, sigma2: object = None) -> None:
        self._horizon = _checks.horizon(horizon)
        self._sigma2 = _as_sigma2(sigma, sigma2)
        self._levels = num_levels(self._horizon)
        self._t = 0
        self._partial = [0] * self._levels
        # last completed node per level: exact sum, and its noise once drawn (None: not drawn yet)
        self._last_sum = [0] * self._levels
        self._last_noise: list[int | None] = [None] * self._levels
        # node noises the online form has drawn (None: unknown, a state saved before it was recorded)
        self._drawn: int | None = 0

    @classmethod
    def for_flippancy(
        cls, horizon: int, rho: float, flippancy_bound: int, relation: str = "subset"
    ) -> BinaryTreeMechanism:
        """Algorithm 1's tree: σ² = κ·w·L/(2ρ) (item-level ρ-zCDP on w-truncated input)."""
        return cls(horizon, sigma2=sigma2_for_flippancy(horizon, rho, flippancy_bound, relation))

    @property
    def horizon(self) -> int:
        return self._horizon

    @property
    def sigma2(self) -> Fraction:
        """The exact σ² of every node's discrete Gaussian."""
        return self._sigma2

    @property
    def sigma(self) -> float:
        return math.sqrt(self._sigma2)

    @property
    def levels(self) -> int:
        return self._levels

    def noise_record(self, step: str, flippancy_bound: int, relation: str = "subset") -> NoiseDraw:
        """The record of one batch run (:meth:`batch`: 2T − 1 node draws of
        N_Z(0, σ²)) on a w-truncated stream, whose node vector has ℓ2
        sensitivity sqrt(κ·w·L) (``relations``)."""
        return NoiseDraw(step, "binary-tree", scale=self.sigma, std=self.sigma,
                         sensitivity=math.sqrt(sensitivity_factor(relation) * flippancy_bound * self._levels),
                         draws=2 * self._horizon - 1,
                         target=f"the nodes of the tree over the stream truncated at flippancy {flippancy_bound}",
                         parameters={"levels": self._levels, "flippancy_bound": int(flippancy_bound), "norm": 2})

    def online_noise_record(self, step: str, flippancy_bound: int, relation: str = "subset") -> NoiseDraw:
        """:meth:`noise_record` with ``draws`` the node noises :meth:`estimate`
        has drawn (a function of the public steps the tree was used at; None
        when unknown, a state saved before the count was kept)."""
        return replace(self.noise_record(step, flippancy_bound, relation), draws=self._drawn)

    @property
    def drawn(self) -> int | None:
        """Node noises drawn by the online form so far (None: unknown)."""
        return self._drawn

    @property
    def steps_done(self) -> int:
        """How many steps have been fed to the online form."""
        return self._t

    def output_std(self) -> np.ndarray:
        """σ·sqrt(popcount(t)) for t = 1..T: a bound on every estimate's noise std."""
        return self.sigma * np.sqrt(nodes_per_step(self._horizon).astype(np.float64))

    def advance(self, z_t: int) -> None:
        """Feed z_t for the next step without releasing anything (no noise drawn)."""
        value = integer_vector([z_t], "z_t")[0]
        if self._t >= self._horizon:
            raise ParameterError(
                "the tree has already consumed all steps of its horizon; "
                "start a new mechanism (and budget) for further steps"
            )
        self._t += 1
        t = self._t
        for level in range(self._levels):
            self._partial[level] += int(value)
        completed = 1
        while completed < self._levels and t % (1 << completed) == 0:
            completed += 1
        for level in range(completed):
            self._last_sum[level] = self._partial[level]
            self._last_noise[level] = None
            self._partial[level] = 0

    def estimate(self, rng: np.random.Generator) -> int:
        """The noisy prefix sum at the current step (draws each used node's noise once)."""
        check_rng(rng)
        t = self._t
        used = [level for level in range(self._levels) if (t >> level) & 1]
        missing = [level for level in used if self._last_noise[level] is None]
        if missing:
            draws = discrete_gaussian_batch(self._sigma2, len(missing), rng)
            for level, draw in zip(missing, draws.tolist()):
                self._last_noise[level] = int(draw)
            if self._drawn is not None:
                self._drawn += len(missing)
        return int(sum(self._last_sum[level] + self._last_noise[level] for level in used))

    def step(self, z_t: int, rng: np.random.Generator) -> int:
        """Feed z_t for the next step t and return the noisy prefix sum at t."""
        check_rng(rng)
        self.advance(z_t)
        return self.estimate(rng)

    def to_dict(self) -> dict:
        """Checkpointable online state (JSON): exact partial sums (non-private:
        protect it like the input), the drawn noise of completed nodes, and
        ``drawn`` (public)."""
        return {
            "kind": _STATE_KIND,
            "version": _STATE_VERSION,
            "horizon": self._horizon,
            "sigma2": [self._sigma2.numerator, self._sigma2.denominator],
            "t": self._t,
            "partial": [int(v) for v in self._partial],
            "last_sum": [int(v) for v in self._last_sum],
            "last_noise": [None if v is None else int(v) for v in self._last_noise],
            "drawn": self._drawn,
        }

    @classmethod
    def from_dict(cls, state: dict) -> BinaryTreeMechanism:
        """Restore an online mechanism saved by ``to_dict``."""
        if not isinstance(state, dict) or state.get("kind") != _STATE_KIND:
            raise ParameterError("state is not a saved BinaryTreeMechanism (wrong or missing 'kind')")
        if state.get("version") != _STATE_VERSION:
            raise ParameterError(f"state version must be {_STATE_VERSION}; re-create the checkpoint")
        try:
            num, den = (int(v) for v in state["sigma2"])
            sigma2 = Fraction(num, den)
        except (TypeError, ValueError, ZeroDivisionError):
            raise ParameterError("state['sigma2'] must be [numerator, denominator]") from None
        mech = cls(state["horizon"], sigma2=sigma2)
        if mech._sigma2 != sigma2:
            raise ParameterError("state['sigma2'] is not on the sampler's grid; re-create the checkpoint")
        mech._t = _checks.integer(state["t"], "state['t']", 0, mech._horizon)
        mech._partial = [int(v) for v in integer_vector(state["partial"], "state['partial']", mech._levels)]
        mech._last_sum = [int(v) for v in integer_vector(state["last_sum"], "state['last_sum']", mech._levels)]
        noise = state["last_noise"]
        if not isinstance(noise, list) or len(noise) != mech._levels:
            raise ParameterError("state['last_noise'] must be a list with one entry per level")
        mech._last_noise = [None if v is None else _checks.integer(v, "state['last_noise']", -(2**62)) for v in noise]
        drawn = state.get("drawn")  # absent from states saved before the count was kept: unknown
        mech._drawn = None if drawn is None else _checks.integer(drawn, "state['drawn']", 0, 2 * mech._horizon - 1)
        return mech

    def batch(self, z: object, rng: np.random.Generator) -> TreeRelease:
        """Run on the whole integer stream z (length T): all 2T − 1 node noises
        in one call, step-major order; the online state is untouched."""
        check_rng(rng)
        values = integer_vector(z, "z", self._horizon)
        sums = node_sums(values)
        positions = _draw_positions(self._horizon)
        draws = discrete_gaussian_batch(self._sigma2, 2 * self._horizon - 1, rng)
        steps = np.arange(1, self._horizon + 1, dtype=np.int64)
        estimates = np.zeros(self._horizon, dtype=np.int64)
        noise_by_level = []
        for level in range(self._levels):
            noise = draws[positions[level]]
            noise_by_level.append(noise)
            noisy = sums[level] + noise
            used = ((steps >> level) & 1).astype(bool)
            estimates[used] += noisy[(steps[used] >> level) - 1]
        return TreeRelease(
            estimates=estimates,
            std=self.output_std(),
            sigma=self.sigma,
            node_noise=tuple(noise_by_level),
        )
