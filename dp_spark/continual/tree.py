"""Binary tree mechanism with Gaussian noise (continual prefix sums).

The binary tree (a.k.a. hierarchical) mechanism of Dwork, Naor, Pitassi and
Rothblum (STOC 2010) and Chan, Shi and Song (2010/2011), in the form used by
Algorithm 1 of Jain, Kalemaj, Raskhodnikova, Sivakumar, Smith, "Counting
Distinct Elements in the Turnstile Model with Differential Privacy under
Continual Observation" (NeurIPS 2023; Definitions 3.3 and 3.4 there).

Tree. For a horizon T = 2^k the tree has L = k + 1 levels. Level i (0 = leaves)
partitions [1, T] into the T / 2^i dyadic intervals ((n-1)·2^i, n·2^i]. Every
node I gets its own independent draw Z_I ~ N(0, σ²) and releases
``sum(z[t] for t in I) + Z_I``. The estimate at step t is the sum of the noisy
nodes of the dyadic decomposition of [1, t] (Definition 3.3): one node at every
level i whose bit is set in t, namely the node ending at ⌊t / 2^i⌋·2^i. So the
estimate at t carries popcount(t) ≤ L independent draws and its noise has
standard deviation σ·sqrt(popcount(t)) (``output_std``).

Privacy (a sensitivity statement, proved where it is used). Releasing all node
values is the Gaussian mechanism on the vector of all node sums, so if every
neighbouring input changes that vector by at most Δ₂ in ℓ2, the release is
Δ₂²/(2σ²)-zCDP (Bun–Steinke 2016, Prop. 1.6) and every estimate is
post-processing. For Algorithm 1 (``sigma_for_flippancy``): for the
flippancy-truncated difference stream, removing every event of one item changes
each node sum by at most 1 and changes at most w nodes per level, so
Δ₂² ≤ w·L and σ² = w·L/(2ρ) gives ρ-zCDP (proof in
``dp_spark.continual.mechanisms``; the property is tested on random
neighbouring streams in ``tests/unit/test_continual.py``).

Draw order (so the online and the batch forms agree for the same generator):
at step t the nodes that end at t are completed, for levels 0, 1, ..., v(t)
where 2^v(t) is the largest power of two dividing t, and each gets one normal
draw in that level order. ``batch`` draws the same 2T − 1 normals in one call
and assigns them in the same order.

Online state (``BinaryTreeMechanism``) is O(L): for each level the exact sum of
the still-open node and the noisy value of the last completed node, which is
all the dyadic decomposition of any later prefix needs. ``to_dict`` /
``from_dict`` checkpoint it without re-drawing released noise. The state holds
exact (non-private) partial sums: store it like the input data, never publish it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dp_spark.continual import _checks
from dp_spark.errors import ParameterError
from dp_spark.noise.rng import check_rng

__all__ = [
    "BinaryTreeMechanism",
    "TreeRelease",
    "num_levels",
    "nodes_per_step",
    "node_sums",
    "sigma_for_flippancy",
    "rho_for_flippancy",
]

_STATE_KIND = "dp_spark.continual.BinaryTreeMechanism"
_STATE_VERSION = 1


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
    """Exact node sums of the tree over ``z`` (length a power of two).

    Entry ``[i][n]`` is ``sum(z[n*2^i : (n+1)*2^i])`` (0-based), the node of
    level i covering steps n·2^i + 1 .. (n+1)·2^i. This is the vector the
    Gaussian noise protects; tests use it to check the ℓ2 sensitivity.
    """
    array = np.asarray(z, dtype=np.float64)
    if array.ndim != 1:
        raise ParameterError("z must be a 1-d array (one entry per step)")
    horizon = _checks.horizon(array.shape[0], "len(z)")
    return [array.reshape(-1, 1 << level).sum(axis=1) for level in range(num_levels(horizon))]


def sigma_for_flippancy(horizon: int, rho: float, flippancy_bound: int) -> float:
    """σ = sqrt(w·L / (2ρ)): per-node noise of Algorithm 1 for flippancy bound w.

    ℓ2² sensitivity of the node vector is at most w·L for item-level neighbours
    (whole item removed; see ``dp_spark.continual.mechanisms``), and the
    Gaussian mechanism with σ² = Δ₂²/(2ρ) is ρ-zCDP. The paper's own constant
    for σ is not legible in the seed text; this one is proved and tested here.
    """
    levels = num_levels(horizon)
    rho = _checks.positive_finite(rho, "rho")
    w = _checks.integer(flippancy_bound, "flippancy_bound", 1)
    return math.sqrt(w * levels / (2.0 * rho))


def rho_for_flippancy(horizon: int, sigma: float, flippancy_bound: int) -> float:
    """ρ = w·L / (2σ²): the zCDP cost of the tree with per-node σ for bound w."""
    levels = num_levels(horizon)
    sigma = _checks.positive_finite(sigma, "sigma")
    w = _checks.integer(flippancy_bound, "flippancy_bound", 1)
    return w * levels / (2.0 * sigma * sigma)


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
    """Result of one batch run of the tree mechanism.

    ``estimates[t-1]`` is the noisy prefix sum at step t; ``std[t-1]`` is the
    standard deviation of its noise, σ·sqrt(popcount(t)). ``node_noise[i]`` holds
    the draws Z_I of level i in node order (for tests; never publish it next to
    the estimates of a real release — it would let anyone remove the noise).
    """

    estimates: np.ndarray
    std: np.ndarray
    sigma: float
    node_noise: tuple[np.ndarray, ...]


class BinaryTreeMechanism:
    """Binary tree mechanism for continual prefix sums, Gaussian noise N(0, σ²) per node.

    Online use: call ``step(z_t, rng)`` once per step t = 1..T; it returns the
    noisy prefix sum of z_1..z_t. Batch use: ``batch(z, rng)`` on the whole
    length-T array; with the same generator state it returns exactly the same
    estimates as T calls of ``step``.

    Guarantee: the mechanism is Δ₂²/(2σ²)-zCDP for any neighbouring relation
    under which the vector of all node sums (``node_sums``) moves by at most Δ₂
    in ℓ2. Build it with ``for_flippancy(horizon, rho, w)`` to get Algorithm 1
    of Jain et al. (NeurIPS 2023): σ² = w·L/(2ρ), item-level ρ-zCDP when fed
    the w-truncated difference stream.
    """

    def __init__(self, horizon: int, sigma: float) -> None:
        self._horizon = _checks.horizon(horizon)
        self._sigma = _checks.positive_finite(sigma, "sigma")
        self._levels = num_levels(self._horizon)
        self._t = 0
        self._partial = [0.0] * self._levels
        self._last_noisy = [0.0] * self._levels

    @classmethod
    def for_flippancy(cls, horizon: int, rho: float, flippancy_bound: int) -> BinaryTreeMechanism:
        """Algorithm 1's tree: σ² = w·L/(2ρ) (item-level ρ-zCDP on w-truncated input)."""
        return cls(horizon, sigma_for_flippancy(horizon, rho, flippancy_bound))

    @property
    def horizon(self) -> int:
        return self._horizon

    @property
    def sigma(self) -> float:
        return self._sigma

    @property
    def levels(self) -> int:
        return self._levels

    @property
    def steps_done(self) -> int:
        """How many steps have been fed to the online form."""
        return self._t

    def output_std(self) -> np.ndarray:
        """σ·sqrt(popcount(t)) for t = 1..T: the noise std of every estimate."""
        return self._sigma * np.sqrt(nodes_per_step(self._horizon).astype(np.float64))

    # ------------------------------------------------------------------ online
    def step(self, z_t: float, rng: np.random.Generator) -> float:
        """Feed z_t for the next step t and return the noisy prefix sum at t.

        Draws one N(0, σ²) value for each node completed at t (levels
        0..v(t)), in level order; nothing already drawn is ever re-drawn.
        """
        check_rng(rng)
        value = _checks.finite_number(z_t, "z_t")
        if self._t >= self._horizon:
            raise ParameterError(
                "the tree has already consumed all steps of its horizon; "
                "start a new mechanism (and budget) for further steps"
            )
        self._t += 1
        t = self._t
        for level in range(self._levels):
            self._partial[level] += value
        completed = 1
        while completed < self._levels and t % (1 << completed) == 0:
            completed += 1
        noise = rng.normal(0.0, self._sigma, size=completed)
        for level in range(completed):
            self._last_noisy[level] = self._partial[level] + float(noise[level])
            self._partial[level] = 0.0
        return float(sum(self._last_noisy[level] for level in range(self._levels) if (t >> level) & 1))

    def to_dict(self) -> dict:
        """Checkpointable online state (JSON-serialisable).

        Holds the exact partial sums of open nodes (non-private: protect it like
        the input) and the noisy values of the last completed node per level.
        """
        return {
            "kind": _STATE_KIND,
            "version": _STATE_VERSION,
            "horizon": self._horizon,
            "sigma": self._sigma,
            "t": self._t,
            "partial": [float(v) for v in self._partial],
            "last_noisy": [float(v) for v in self._last_noisy],
        }

    @classmethod
    def from_dict(cls, state: dict) -> BinaryTreeMechanism:
        """Restore an online mechanism saved by ``to_dict``."""
        if not isinstance(state, dict) or state.get("kind") != _STATE_KIND:
            raise ParameterError("state is not a saved BinaryTreeMechanism (wrong or missing 'kind')")
        if state.get("version") != _STATE_VERSION:
            raise ParameterError(f"state version must be {_STATE_VERSION}; re-create the checkpoint")
        mech = cls(state["horizon"], state["sigma"])
        mech._t = _checks.integer(state["t"], "state['t']", 0, mech._horizon)
        partial = _checks.finite_vector(state["partial"], "state['partial']", mech._levels)
        last = _checks.finite_vector(state["last_noisy"], "state['last_noisy']", mech._levels)
        mech._partial = [float(v) for v in partial]
        mech._last_noisy = [float(v) for v in last]
        return mech

    # ------------------------------------------------------------------- batch
    def batch(self, z: object, rng: np.random.Generator) -> TreeRelease:
        """Run the mechanism on the whole stream z (length T) at once.

        Independent of the online state (does not advance it). Draws the
        2T − 1 node noises in the same order as T calls of ``step``.
        """
        check_rng(rng)
        values = _checks.finite_vector(z, "z", self._horizon)
        sums = node_sums(values)
        positions = _draw_positions(self._horizon)
        draws = rng.normal(0.0, self._sigma, size=2 * self._horizon - 1)
        steps = np.arange(1, self._horizon + 1, dtype=np.int64)
        estimates = np.zeros(self._horizon, dtype=np.float64)
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
            sigma=self._sigma,
            node_noise=tuple(noise_by_level),
        )
