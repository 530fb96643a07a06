"""The BLT factorized counter (dp_spark.mechanisms.continual_distinct.blt): closed forms, the fitted
table against the square root, Lemma D, the sensitivity bound on random neighbouring streams,
checkpoints, batch/online equality and the stated per-step variance."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings

from dp_spark.errors import ParameterError
from dp_spark.mechanisms.continual_distinct import blt
from dp_spark.mechanisms.continual_distinct import factorized as fz
from dp_spark.mechanisms.continual_distinct._blt_table import TABLE
from dp_spark.noise.discrete_batch import discrete_gaussian_batch_wide
from dp_spark.noise.rng import make_rng
from tests.unit.test_continual import _summaries
from tests.unit.test_factorized import _neighbouring_streams


def _random_params(rng, n: int, bits: int = 36, with_one: bool = False) -> blt.BLTParams:
    d = np.sort(1.0 - 10.0 ** rng.uniform(-4, -0.2, n))
    if with_one:
        d[-1] = 1.0
    s = rng.dirichlet(np.ones(n)) * rng.uniform(0.3, 1.0)
    return blt.BLTParams.from_floats(d, s, bits)


def _exact_strategy(params: blt.BLTParams, x: list[int]) -> list[Fraction]:
    """2^K (Cx)_t exactly (Fractions): the linear recurrence B^lin_i(t) = d_i B^lin_i(t−1) + 2^K x_t."""
    unit = 1 << params.bits
    d = [Fraction(v, unit) for v in params.decays]
    s = [Fraction(v, unit) for v in params.scales]
    state = [Fraction(0)] * len(d)
    out = []
    for xt in x:
        out.append(unit * xt + sum(si * bi for si, bi in zip(s, state)))
        state = [di * bi + unit * xt for di, bi in zip(d, state)]
    return out


# --------------------------------------------------------------------------- closed forms


@pytest.mark.parametrize("seed", range(6))
def test_closed_forms_equal_the_direct_series(seed):
    """S_r(n) and S_ℓ(t) in closed form equal the cumulative sums of the direct series (r by its
    definition, ℓ by running the inverse on an impulse), also with a non-decaying buffer (d = 1);
    and ℓ * r is the all-ones sequence (A = L·C)."""
    rng = make_rng(seed)
    params = _random_params(rng, int(rng.integers(1, 6)), with_one=seed % 2 == 1)
    n = 3000
    r = blt.strategy_coefficients(params, n)
    ell = blt.prefix_coefficients(params, n)
    assert np.allclose(np.convolve(r, ell)[:n], np.ones(n), rtol=0, atol=1e-9)
    s_r, s_l = np.cumsum(r * r), np.cumsum(ell * ell)
    for t in (1, 2, 3, 10, 257, 1000, n):
        assert blt.strategy_square_sums(params, t) == pytest.approx(s_r[t - 1], rel=1e-11)
        assert blt.prefix_square_sums(params, t) == pytest.approx(s_l[t - 1], rel=1e-9)
        assert blt.prefix_square_sums_gram(params, t) == pytest.approx(s_l[t - 1], rel=1e-9)


def test_every_table_entry_has_a_stable_inverse_and_its_gram_form_is_accurate():
    """For every committed entry, quantised at its T: the inverse is stable (spectral radius at most
    1 up to rounding: a buffer with d = 1 and a negligible scale puts an eigenvalue within 1e-10 of
    1), and up to T = 2^12 the Gram doubling S_ℓ(t) (what ``std`` and the fit use) equals the direct
    series at t = T/2 and T."""
    for n, entries in TABLE.items():
        for log_t, log_w in entries:
            horizon = 1 << log_t
            params = blt.table_params(horizon, 1 << log_w, buffers=n)
            assert blt.spectral_radius(params) < 1 + 1e-9, (n, log_t, log_w)
            if log_t <= 12:
                ell = blt.prefix_coefficients(params, horizon)
                for t in (horizon // 2, horizon):
                    assert blt.prefix_square_sums_gram(params, t) == pytest.approx(
                        float(np.sum(ell[:t] ** 2)), rel=1e-9), (n, log_t, log_w, t)


def test_table_entries_closed_forms_match_at_their_horizon():
    """For table entries at T = 2^12 (and one at 2^16), S_ℓ(T) by the eigen closed form and by the
    Gram doubling equal the direct series."""
    for horizon, w in ((1 << 12, 1), (1 << 12, 8), (1 << 12, 64), (1 << 16, 1)):
        params = blt.table_params(horizon, w)
        direct = float(np.sum(blt.prefix_coefficients(params, horizon) ** 2))
        assert blt.prefix_square_sums(params, horizon) == pytest.approx(direct, rel=1e-8)
        assert blt.prefix_square_sums_gram(params, horizon) == pytest.approx(direct, rel=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_upper_coefficients_bound_r_exactly_and_tightly(seed):
    """R_j ≥ 2^30 r_j for every j (exact rationals), R_j − 2^30 r_j ≤ 2, R non-increasing."""
    rng = make_rng(10 + seed)
    params = _random_params(rng, int(rng.integers(1, 6)), with_one=seed == 3)
    horizon = 256
    upper = blt.upper_coefficients(params, horizon)
    unit = 1 << params.bits
    powers = [Fraction(g, unit) for g in params.scales]
    assert int(upper[0]) == 1 << 30
    for j in range(1, horizon):
        exact = sum(powers) * (1 << 30)
        assert exact <= int(upper[j]) <= exact + 2
        powers = [p * Fraction(dn, unit) for p, dn in zip(powers, params.decays)]
    assert np.all(np.diff(upper) <= 0)


def test_parameters_are_checked():
    with pytest.raises(ParameterError, match="sum to at most 1"):
        blt.BLTParams(36, (1 << 35, 1 << 35), (1 << 35, (1 << 35) + 1))
    with pytest.raises(ParameterError):
        blt.BLTParams(36, (0,), (1,))
    with pytest.raises(ParameterError):
        blt.BLTParams(36, ((1 << 36) + 1,), (1,))
    with pytest.raises(ParameterError, match="equally many"):
        blt.BLTParams(36, (1, 2), (1,))
    assert blt.blt_bits(1 << 20) == 36 and blt.blt_bits(1 << 22) == 38 and blt.blt_bits(16) == 36


# --------------------------------------------------------------------------- the fitted table


@pytest.mark.parametrize("log2_horizon", [10, 12, 16])
@pytest.mark.parametrize("w", [1, 8, 32])
def test_table_is_within_five_percent_of_the_square_root(log2_horizon, w):
    """Max variance of the table's BLT as the counter states and calibrates it (Δ̌²·S_ℓ(T)/4^K:
    the exact integer sensitivity bound, Lemma D's slack included) is at most 1.05× the real square
    root's (B_c(w)·S_c(T)), under both relations, 4 and 5 buffers."""
    horizon = 1 << log2_horizon
    c = fz.sqrt_coefficients(horizon)
    s_c = float(fz.partial_square_sums(c)[-1])
    for relation in ("item-removal", "subset"):
        bound = fz.removal_bound(c, horizon, w) if relation == "item-removal" else fz.subset_bound(c, horizon, w)
        for n in (4, 5):
            params = blt.table_params(horizon, w, buffers=n)
            sens = blt.sensitivity_bound(params, horizon, w, relation) / 2.0**params.bits
            assert sens * sens * blt.prefix_square_sums_gram(params, horizon) <= 1.05 * bound * s_c


def test_table_at_two_to_the_twenty():
    """The 5-buffer entry at T = 2^20, w = 1 stays within 1.02× of the square root's max variance."""
    horizon = 1 << 20
    c = fz.sqrt_coefficients(horizon)
    params = blt.table_params(horizon, 1)
    sens = blt.sensitivity_bound(params, horizon, 1, "item-removal") / 2.0**params.bits
    sqrt_max = fz.removal_bound(c, horizon, 1) * float(fz.partial_square_sums(c)[-1])
    assert sens * sens * blt.prefix_square_sums_gram(params, horizon) <= 1.02 * sqrt_max


# --------------------------------------------------------------------------- Lemma D and sensitivity


@pytest.mark.parametrize("seed", range(5))
def test_lemma_d_on_random_streams(seed):
    """−M < Y_t − 2^K(Cx)_t ≤ 0 at every step, exactly, on random integer streams (large values
    included), for random parameters (one with a non-decaying buffer) and a table entry."""
    rng = make_rng(20 + seed)
    params = blt.table_params(256, 4) if seed == 0 else _random_params(rng, int(rng.integers(1, 6)),
                                                                         with_one=seed == 2)
    x = rng.integers(-3, 4, size=200).tolist()
    x[17] = 10**6
    counter = blt.BLTCounter(256, params, Fraction(1))
    slack = params.slack()
    for y, exact in zip((counter.advance(v) for v in x), _exact_strategy(params, x)):
        assert -slack < y - exact <= 0


@settings(max_examples=60, deadline=None)
@given(_neighbouring_streams())
def test_random_neighbours_move_the_strategy_within_the_bound(case):
    """Random multi-item streams and neighbours (whole item removed, or any subset of its events),
    through dp_spark's stream summaries, for every w = 2^j: ‖C(z_w − z'_w)‖² ≤ B_C(w) (exact
    rationals against the integer bound of R/2^30), and the fixed-point strategies move by
    ‖Y − Y'‖ ≤ Δ̌ (exact integers), with the table's parameters for (T, w)."""
    horizon, relation, events, neighbour = case
    x, y = _summaries(events, horizon), _summaries(neighbour, horizon)
    for j, w in enumerate(x.flippancy_bounds):
        w = int(w)
        params = blt.table_params(horizon, w)
        upper = blt.upper_coefficients(params, horizon)
        core = fz.removal_bound(upper, horizon, w) if relation == "item-removal" else fz.subset_bound(upper, horizon, w)
        a, b = x.z_truncated[j].astype(np.int64).tolist(), y.z_truncated[j].astype(np.int64).tolist()
        diff = [u - v for u, v in zip(_exact_strategy(params, a), _exact_strategy(params, b))]
        assert sum(v * v for v in diff) * Fraction(1 << 60, 1 << (2 * params.bits)) <= core
        ca, cb = blt.BLTCounter(horizon, params, Fraction(1)), blt.BLTCounter(horizon, params, Fraction(1))
        moved = [ca.advance(u) - cb.advance(v) for u, v in zip(a, b)]
        assert math.isqrt(sum(v * v for v in moved)) <= blt.sensitivity_bound(params, horizon, w, relation)


def test_sensitivity_bound_is_nearly_reached_at_flippancy_one():
    """w = 1, item removal: a single insert at step 1 moves C x by the whole first column, so
    ‖CΔ‖² = S_r(T) = B_C(1): the integer bound is within 1e-6 of the realised ‖Y − Y'‖."""
    horizon = 1024
    params = blt.table_params(horizon, 1)
    a = blt.BLTCounter(horizon, params, Fraction(1))
    b = blt.BLTCounter(horizon, params, Fraction(1))
    moved = [a.advance(1 if t == 0 else 0) - b.advance(0) for t in range(horizon)]
    realised = math.sqrt(sum(v * v for v in moved))
    bound = blt.sensitivity_bound(params, horizon, 1, "item-removal")
    assert realised <= bound <= realised * (1 + 1e-6)


# --------------------------------------------------------------------------- counter


def test_checkpoint_round_trip_mid_stream_is_bit_identical():
    """Saving after 37 steps (through JSON) and resuming gives the same later estimates, std and
    state (floats bit-exact) as the uninterrupted counter with the same generator state."""
    horizon = 128
    x = make_rng(3).integers(-1, 2, size=horizon).tolist()
    counter = blt.BLTCounter.for_flippancy(horizon, 0.3, 4, "subset")
    rng = make_rng(11)
    for v in x[:37]:
        counter.step(v, rng)
    saved = json.loads(json.dumps(counter.to_dict()))
    rng_state = rng.bit_generator.state
    rest = [counter.step(v, rng) for v in x[37:]]
    restored = blt.BLTCounter.from_dict(saved)
    rng2 = make_rng(0)
    rng2.bit_generator.state = rng_state
    again = [restored.step(v, rng2) for v in x[37:]]
    assert again == rest
    assert restored.to_dict() == counter.to_dict()
    with pytest.raises(ParameterError, match="horizon is reached"):
        counter.step(0, rng)


def test_a_checkpoint_keeps_the_noise_drawn_ahead_and_old_states_load():
    """The draws made ahead are in the checkpoint (a resumed counter uses them, not fresh ones); a
    version-1 state (no draws ahead) loads and draws afresh; more draws ahead than steps left is
    refused."""
    horizon = 64
    counter = blt.BLTCounter.for_flippancy(horizon, 0.3, 4, "subset")
    rng = make_rng(4)
    counter.step(1, rng)
    saved = json.loads(json.dumps(counter.to_dict()))
    assert saved["version"] == 2 and len(saved["pending"]) == horizon - 1
    restored = blt.BLTCounter.from_dict(saved)
    exhausted = make_rng(0)
    exhausted.bit_generator.state = rng.bit_generator.state
    assert [restored.step(1, exhausted)[0] for _ in range(5)] == [counter.step(1, rng)[0] for _ in range(5)]
    old = {**saved, "version": 1}
    del old["pending"]
    assert blt.BLTCounter.from_dict(old).to_dict()["pending"] == []
    with pytest.raises(ParameterError, match="more pre-drawn noise than steps remain"):
        blt.BLTCounter.from_dict({**saved, "pending": saved["pending"] + ["0"]})


def test_the_batch_form_refuses_a_counter_holding_draws_ahead():
    """blt_counts leaves its counter unchanged, so from a counter holding draws ahead every run (and
    the counter's own later steps) would reuse them: refused."""
    counter = blt.BLTCounter.for_flippancy(64, 0.5, 1, "subset")
    counter.step(0, make_rng(1))
    with pytest.raises(ParameterError, match="no noise drawn ahead"):
        blt.blt_counts([0] * 8, counter, make_rng(2))


def test_batch_form_equals_the_online_form_and_outputs_are_integers():
    """blt_counts (its own loop) and step-by-step use with the same seed give identical estimates
    and std; estimates are Python ints online and int64 in batch; the batch's strategy is Y."""
    horizon = 256
    x = make_rng(4).integers(-1, 2, size=horizon)
    counter = blt.BLTCounter.for_flippancy(horizon, 0.5, 2, "item-removal")
    batch = blt.blt_counts(x, counter, make_rng(9))
    rng = make_rng(9)
    online = [counter.step(int(v), rng) for v in x]
    assert all(type(e) is int for e, _ in online)
    assert batch.estimates.dtype == np.int64
    assert batch.estimates.tolist() == [e for e, _ in online]
    assert batch.std.tolist() == [s for _, s in online]
    fresh = blt.BLTCounter(horizon, counter.params, counter.sigma2)
    assert batch.strategy.tolist() == [fresh.advance(int(v)) for v in x]


def test_estimates_are_post_processing_of_the_noisy_strategy():
    """Re-running only the noise side on ỹ = Y + Z (Z from the same generator, drawn ahead
    PREFETCH at a time and used in order) reproduces the estimates: what is released is a function
    of ỹ: one batch at T = 64 (all the steps), two at T = 2048."""
    assert blt.PREFETCH == 1024
    for horizon, batches in ((64, (64,)), (2048, (1024, 1024))):
        x = make_rng(5).integers(-1, 2, size=horizon).tolist()
        counter = blt.BLTCounter.for_flippancy(horizon, 0.5, 1, "subset")
        batch = blt.blt_counts(x, counter, make_rng(2))
        rng = make_rng(2)
        noise = [int(v) for n in batches for v in discrete_gaussian_batch_wide(counter.sigma2, n, rng)]
        side = blt.BLTCounter(horizon, counter.params, counter.sigma2)
        assert [side.release(int(y) + z) for y, z in zip(batch.strategy, noise)] == batch.estimates.tolist()


def test_calibration_and_noise_record_cost_rho():
    """σ̌² ≥ Δ̌²/(2ρ) exactly, and the record's cost is ρ (within the rational rounding)."""
    horizon, rho = 1024, 0.25
    for relation in ("subset", "item-removal"):
        counter = blt.BLTCounter.for_flippancy(horizon, rho, 8, relation)
        sens = blt.sensitivity_bound(counter.params, horizon, 8, relation)
        assert counter.sigma2 >= Fraction(sens * sens) / (2 * Fraction(rho))
        record = counter.noise_record("step", 8, relation, draws=horizon)
        assert record.kind == "factorized-counter"
        assert record.cost().rho == pytest.approx(rho, rel=1e-5)
        assert record.cost().rho <= rho * (1 + 1e-12)


def test_per_step_variance_matches_the_statement():
    """2000 seeds at T = 16, ρ = 0.02: the empirical variance of estimate_t − D(t) at every step is
    within 14% of the stated std_t² (sampling sd ≈ 3.2%), and the stated std increases in t."""
    horizon, runs = 16, 2000
    x = [1, 0, -1, 1, 1, 0, 0, -1, 0, 1, 0, 0, -1, 1, 0, 0]
    truth = np.cumsum(x)
    template = blt.BLTCounter.for_flippancy(horizon, 0.02, 2, "subset")
    errors = np.empty((runs, horizon))
    rng = make_rng(123)
    for i in range(runs):
        errors[i] = blt.blt_counts(x, template, rng).estimates - truth
    std = np.asarray([template.std(t) for t in range(1, horizon + 1)])
    assert blt.blt_counts(x, template, rng).std == pytest.approx(std, rel=1e-12)  # incremental = Gram
    assert np.all(np.diff(std) > 0)
    ratio = errors.var(axis=0) / std**2
    assert np.all(np.abs(ratio - 1) < 0.14), ratio
    assert abs(float(errors.mean())) < 4 * float(std[-1]) / math.sqrt(runs)
