"""Privacy audit of the square-root factorized continual counter ("bounded", counter="factorized").

The release is y = Ř z + Z, Z ~ N_Z(0, σ̌²)^T, on the w-truncated difference stream z (every estimate
is post-processing of y, so auditing y is at least as strong as auditing the estimates). For a
neighbouring pair z, z' the log-likelihood ratio of two discrete Gaussians with the same σ̌ is an
affine function of <y, Ř(z − z')>, so the most powerful event is a threshold on the projection

    s = <y − Ř z', u> / (σ̌·‖u‖),  u = Ř(z − z'):  s ~ N(‖u‖/σ̌, 1) on z, N(0, 1) on z'.

Worst-case pairs (the constructions behind the factorized module's sensitivity lemmas), built with
dp_spark's reference stream semantics (``stream_summaries``, truncated at w), at T = 8:

- item removal, w = 2: one item with two equally spaced alternating flips, removed entirely
  (‖u‖² = 0.71·U_ř(2));
- subset, w = 1: the anti-phase pair (jumps −1, +1: the neighbour holds the item before the release
  does; ‖u‖² = 0.78·B_ř(1)). The w = 2 anti-phase pair (jumps −1, +2, −1) reaches only 0.61–0.67 of
  B_ř(2) at T ≤ 32, too little for the factor-2 check to have power at an affordable trial count.

Trials are batched: one run of ``factorized_counts`` over a long horizon on the pattern repeated
block after block (a new item per block). Ř is lower-triangular Toeplitz with the same coefficients
at every horizon, so block b of y is Ř_T z_blk + Z_b plus the exactly known contribution of the
earlier blocks' (fixed, public) stream, which is subtracted: each block is one independent sample of
the horizon-T release. σ² is the one the "bounded" release calibrates for horizon T, ρ, w and the
relation; the claim is (ε, δ) = (ρ + 2·sqrt(ρ·ln(1/δ)), δ) (Bun–Steinke 2016, Prop. 1.3) at
δ = 10⁻² (any δ is a point of the ρ-zCDP guarantee; this one leaves the factor-2 check most power at
this trial count). The broken variant halves σ (4ρ) and must be detected.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dp_spark.mechanisms.continual_distinct import continual_counts, stream_summaries
from dp_spark.mechanisms.continual_distinct import factorized as fz
from tests.audit.stats import assert_detects, epsilon_lower_bound

DELTA = 1e-2
RHO = 0.5
BIG = 1 << 15  # horizon of one batched run


def claimed_epsilon(rho: float, delta: float = DELTA) -> float:
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def _difference_stream(events, horizon: int, w: int) -> np.ndarray:
    """The w-truncated difference stream of one item's events (time, ±1), as the release computes it."""
    if not events:
        return np.zeros(horizon, dtype=np.int64)
    times, ops = zip(*events)
    summaries = stream_summaries(list(times), [0] * len(times), list(ops), horizon)
    return np.asarray(summaries.z_truncated[summaries.level_of(w)], dtype=np.int64)


# relation, w, horizon T, the item's events on D, the indices of the events D' keeps
CASES = {
    # flips at steps 1 and 5 (equal spacing T/w); D' has none of the item's events
    "item-removal": ("item-removal", 2, 8, [(1, 1), (5, -1)], []),
    # D: insert and delete at step 1 (absent), insert at 7; D' keeps the first insert only: the item
    # is present on [1, 6] in D' and on [7, 8] in D, Δ = −1, +1 at steps 1, 7
    "subset": ("subset", 1, 8, [(1, 1), (1, -1), (7, 1)], [0]),
}
TRIALS = 100_000
THRESHOLD = 3.0  # on s, fixed in advance (both variants reach events well above δ there)


class _Capture:
    """Wraps the factorized module's sampler and exact product to keep what the release computed."""

    def __init__(self, monkeypatch):
        self.draws, self.strategy = [], []
        sampler, product = fz.discrete_gaussian_batch_wide, fz.toeplitz_int

        def draw(sigma2, size, rng):
            out = sampler(sigma2, size, rng)
            self.draws.append((sigma2, out))
            return out

        def strategy(r, x):
            out = product(r, x)
            self.strategy.append(out)
            return out

        monkeypatch.setattr(fz, "discrete_gaussian_batch_wide", draw)
        monkeypatch.setattr(fz, "toeplitz_int", strategy)


def _projections(case, z, sigma2, seed, capture) -> np.ndarray:
    """s for TRIALS independent horizon-T releases on the difference stream ``z`` (one block each)."""
    relation, w, horizon, events, kept = case
    z_d = _difference_stream(events, horizon, w)
    z_ref = _difference_stream([events[i] for i in kept], horizon, w)
    r = fz.sqrt_int_coefficients(horizon)
    u = fz.toeplitz_int(r, z_d - z_ref).astype(np.int64)
    own = fz.toeplitz_int(r, z).astype(np.int64)  # Ř_T z_blk
    reference = fz.toeplitz_int(r, z_ref).astype(np.int64)  # Ř_T z'_blk
    blocks = BIG // horizon
    tiled = np.tile(z, blocks)
    capture.draws.clear()
    capture.strategy.clear()
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(math.ceil(TRIALS / blocks)):
        release = fz.factorized_counts(tiled, None, rng, flippancy_bound=w, relation=relation, sigma2=sigma2)
        (noise_var, draws), strategy = capture.draws.pop(), capture.strategy.pop()
        assert noise_var == release.sigma2_int == sigma2 * 4**fz.DEFAULT_BITS
        y = strategy.astype(np.int64) + draws  # the release's noisy strategy
        if not out:  # the known contribution of earlier blocks: Ř_BIG·tiled minus each block's own
            earlier = strategy.astype(np.int64) - np.tile(own, blocks)
        samples = (y - earlier).reshape(blocks, horizon) - reference
        assert int(np.max(np.abs(samples))) < 2**36 and int(np.max(np.abs(u))) < 2**22
        out.append(samples @ u)  # exact in int64: T·2^36·2^22 < 2^63
    sigma = math.sqrt(noise_var)
    return np.concatenate(out)[:TRIALS] / (sigma * math.sqrt(float(u @ u)))


def _lower_bound(on_d, on_d_prime) -> float:
    k1, k2 = int(np.sum(on_d >= THRESHOLD)), int(np.sum(on_d_prime >= THRESHOLD))
    return epsilon_lower_bound(k1, on_d.shape[0], k2, on_d_prime.shape[0], DELTA)


@pytest.mark.parametrize("name", sorted(CASES))
def test_factorized_counter_audit(name, audit_record, monkeypatch):
    """The worst-case pair of each relation at its calibrated σ (claim holds) and at σ/2 (detected).
    The pair's ‖u‖² is checked against the release's own sensitivity bound B_ř(w) first, and the
    "bounded" release is checked to calibrate exactly this σ."""
    case = CASES[name]
    relation, w, horizon, events, kept = case
    z = _difference_stream(events, horizon, w)
    z_ref = _difference_stream([events[i] for i in kept], horizon, w)
    u = fz.toeplitz_int(fz.sqrt_int_coefficients(horizon), z - z_ref).astype(object)
    bound = fz.sensitivity2(horizon, w, relation)
    assert 0.6 * bound <= sum(v * v for v in u) <= bound  # a worst case the bound nearly reaches

    sigma2 = fz.sigma2_for_flippancy(horizon, RHO, w, relation)
    times, ops = zip(*events)
    bounded = continual_counts(stream_summaries(list(times), [0] * len(times), list(ops), horizon), RHO,
                               "bounded", max_flippancy=w, counter="factorized", relation=relation,
                               rng=np.random.default_rng(0))
    assert bounded.noise[0].scale == pytest.approx(math.sqrt(sigma2), rel=1e-15)

    claimed = claimed_epsilon(RHO)
    label = f"factorized counter ({relation}, w = {w}, T = {horizon})"
    capture = _Capture(monkeypatch)
    on_d = _projections(case, z, sigma2, 1, capture)
    on_d_prime = _projections(case, z_ref, sigma2, 2, capture)
    audit_record(label, claimed, _lower_bound(on_d, on_d_prime), TRIALS, DELTA)
    broken_d = _projections(case, z, sigma2 / 4, 3, capture)
    broken_d_prime = _projections(case, z_ref, sigma2 / 4, 4, capture)
    assert_detects(label, claimed, _lower_bound(broken_d, broken_d_prime))
