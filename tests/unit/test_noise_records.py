"""Noise as data (issue 23): the records mechanisms return with their
released values — their tails, their JSON form, their completeness (one
record per privacy draw) and that they hold public values only. No Spark."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import norm

from dp_spark.mechanisms.count_release import bounded_plan, private_count_release
from dp_spark.mechanisms.distinct_count.bound import noisy_size, release_from_counts
from dp_spark.mechanisms.top_k.auto import choose_mechanism
from dp_spark.mechanisms.top_k.error import CONFIDENCE, domain_top_k, error_bound, selection_noise
from dp_spark.mechanisms.top_k.unknown_domain import unknown_domain_gumbel
from dp_spark.noise.records import KINDS, NoiseDraw, noise_from_dicts, noise_to_dicts
from dp_spark.noise.tails import discrete_laplace_std


def _discrete_pmf(scale=None, sigma=None, width=6000):
    xs = np.arange(-width, width + 1)
    logp = -np.abs(xs) / scale if scale is not None else -(xs.astype(float) ** 2) / (2 * sigma**2)
    pmf = np.exp(logp - logp.max())
    return xs, pmf / pmf.sum()


@pytest.mark.parametrize("scale", [0.5, 1.0, 3.7, 20.0])
@pytest.mark.parametrize("beta", [0.05, 0.2])
def test_discrete_laplace_half_width_is_the_smallest(scale, beta):
    xs, pmf = _discrete_pmf(scale=scale)
    record = NoiseDraw("count", "discrete-laplace", scale=scale, std=discrete_laplace_std(scale), sensitivity=1.0)
    h = record.half_width(beta)
    assert pmf[np.abs(xs) > h].sum() <= beta + 1e-12
    assert h == 0 or pmf[np.abs(xs) > h - 1].sum() > beta


@pytest.mark.parametrize("sigma", [0.7, 2.0, 9.3, 40.0])
@pytest.mark.parametrize("beta", [0.05, 0.2])
def test_discrete_gaussian_half_width_is_the_smallest(sigma, beta):
    """The discrete Gaussian's own two-sided tail, the smallest integer that holds by brute force (issue 37
    §3: one tail per kind; the continuous ⌈σ·z⌉ stated ±2 at σ = 0.7 where the groups table stated ±1)."""
    xs, pmf = _discrete_pmf(sigma=sigma)
    record = NoiseDraw("counts", "discrete-gaussian", scale=sigma, std=sigma, sensitivity=1.0)
    h = record.half_width(beta)
    assert h == int(h) and pmf[np.abs(xs) > h].sum() <= beta
    assert h == 0 or pmf[np.abs(xs) > h - 1].sum() > beta
    assert h <= math.ceil(sigma * float(norm.isf(beta / 2)))  # never wider than the continuous statement


def test_continuous_half_widths():
    lap = NoiseDraw("s", "laplace", scale=2.0, std=2.0 * math.sqrt(2), sensitivity=1.0)
    assert lap.half_width(0.05) == pytest.approx(2.0 * math.log(20.0), rel=1e-15)  # P(|X| > h) = e^(−h/b)
    gauss = NoiseDraw("s", "gaussian", scale=3.0, std=3.0, sensitivity=1.0)
    assert gauss.half_width(0.05) == pytest.approx(3.0 * 1.959963984540054, rel=1e-12)
    for kind in ("gem", "sparse-vector", "binary-tree"):
        with pytest.raises(ValueError, match="no interval"):
            NoiseDraw("s", kind, scale=1.0, std=None, sensitivity=1.0).half_width(0.05)


def test_a_record_refuses_unknown_kinds_and_fields():
    with pytest.raises(ValueError, match="unknown noise kind"):
        NoiseDraw("s", "uniform", scale=1.0, std=1.0, sensitivity=1.0)
    with pytest.raises(ValueError, match="not allowed"):
        NoiseDraw("s", "laplace", scale=1.0, std=1.0, sensitivity=1.0, parameters={"value": 12})
    with pytest.raises(ValueError, match="positive"):
        NoiseDraw("s", "laplace", scale=0.0, std=1.0, sensitivity=1.0)


def test_records_round_trip_through_json():
    records = (NoiseDraw("select", "gem", scale=4.0, std=None, sensitivity=1.0,
                         parameters={"candidates": [1, 4, 16], "beta": 0.2}),
               NoiseDraw("count", "discrete-laplace", scale=2.0, std=discrete_laplace_std(2.0), sensitivity=4.0,
                         target="the count"))
    assert noise_from_dicts(json.loads(json.dumps(noise_to_dicts(records)))) == records
    assert noise_from_dicts(None) == ()  # an older report without records


@pytest.mark.parametrize("method", ["joint", "pnf-joint", "pnf-peel", "cdp-peel", "unknown-domain"])
def test_the_top_k_error_bound_is_the_selection_records_bound(method):
    k, eps, delta, size = 5, 1.0, 1e-6, 200
    record = selection_noise(method, k, eps, delta, size)
    assert error_bound(method, k, eps, delta, size) == record.half_width(1.0 - CONFIDENCE)
    assert record.kind in KINDS and record.sensitivity == 1.0


def test_distinct_count_returns_one_record_per_draw():
    rng = np.random.default_rng(3)
    counts = np.array([40, 70, 90, 100, 104, 106, 107, 107], dtype=np.int64)
    out = release_from_counts(counts, 1.0, 0.05, rng)
    gem, count = out["noise"]
    assert (gem.step, gem.kind) == ("select", "gem") and gem.parameters["candidates"] == [1, 4, 8]
    assert (count.step, count.kind) == ("count", "discrete-laplace")
    assert count.scale == out["noise_scale"] and count.std == out["noise_std"] and count.sensitivity == out["bound"]
    noisy, record = noisy_size(1000, 3, 0.01, rng)
    assert record.kind == "discrete-laplace" and record.sensitivity == 3 and record.scale == 300.0


def test_pcr_returns_a_record_per_selection_and_per_count():
    rng = np.random.default_rng(5)
    counts = np.array([900, 850, 600, 400, 80, 40, 10], dtype=np.int64)
    result = private_count_release(counts, 0, 4.0, 1e-6, 0.1, 7, rng)
    kinds = [r.kind for r in result.noise]
    assert kinds.count("gumbel") == result.selection_calls
    assert kinds.count("discrete-gaussian") == len(result.released) > 0
    sigmas = [r.scale for r in result.noise if r.kind == "discrete-gaussian"]
    assert sigmas == [x.sigma for x in result.released]  # in the order released


def test_top_k_mechanisms_return_their_records():
    rng = np.random.default_rng(1)
    counts = np.arange(50, dtype=np.int64)
    for method in ("joint", "pnf-joint", "pnf-peel", "cdp-peel"):
        indices, record = domain_top_k(method, counts, 3, 1.0, 1e-6, rng)
        assert len(indices) == 3 and record == selection_noise(method, 3, 1.0, 1e-6, 50)
    assert len(unknown_domain_gumbel(counts[-20:], 3, 1.0, 1e-6, 20, rng).noise) == 1
    assert choose_mechanism(counts, 3, 1.0, 0.0, rng).noise == ()  # public choice: nothing drawn
    spent = choose_mechanism(counts, 40, 1.0, 1e-6, rng)
    (record,) = spent.noise
    assert record.kind == "discrete-laplace" and record.draws == 2 and record.sensitivity == 2.0


def test_bounded_count_release_records_its_keyed_draws():
    calibrated = bounded_plan(1.0, 1e-6, 4)
    selection, counts = calibrated.noise
    assert (selection.kind, selection.scale) == ("gaussian", calibrated.selection_sigma)
    assert (counts.kind, counts.scale) == ("discrete-gaussian", calibrated.count_sigma)
    assert selection.sensitivity == counts.sensitivity == 2.0 and counts.parameters["norm"] == 2


def test_records_hold_no_private_value():
    """A record is a function of the parameters and the released values
    only: counts that release the same bound give the same records, however
    different they are (so no count can be in them)."""
    rng = np.random.default_rng(0)
    by_bound: dict = {}
    for _ in range(40):
        counts = np.sort(rng.integers(0, 10**6, size=20)).astype(np.int64)
        out = release_from_counts(counts, 1.0, 0.05, rng)
        by_bound.setdefault(out["bound"], []).append(out["noise"])
    assert by_bound and all(r == records[0] for records in by_bound.values() for r in records)
    for records in by_bound.values():
        for record in records[0]:
            assert set(record.to_dict()) == {"step", "kind", "scale", "std", "sensitivity", "draws", "target",
                                             "parameters"}


@pytest.mark.parametrize("method, options", [
    ("auto", {"tree_levels": 3}), ("auto", {}), ("adaptive", {}), ("bounded", {"max_flippancy": 4}), ("baseline", {}),
])
def test_continual_counts_return_a_record_per_mechanism_run(method, options):
    """The sparse vector (when it runs), each tree that ran (2T − 1 node
    draws), the recompute baseline (one draw per release), each charged to
    a step of ``budget_split``."""
    from dp_spark.mechanisms.continual_distinct import budget_split, continual_counts, stream_summaries

    T = 64
    rng = np.random.default_rng(2)
    times = rng.integers(1, T + 1, size=300)
    items = rng.integers(0, 40, size=300)
    ops = np.where(rng.random(300) < 0.6, 1, -1)
    summaries = stream_summaries(times, items, ops, T)
    result = continual_counts(summaries, 2.0, method, rng=rng, **options)
    kinds = [r.kind for r in result.noise]
    used = {int(w) for w in (result.flippancy_bound if result.flippancy_bound is not None else []) if w > 0}
    trees = [r for r in result.noise if r.kind in ("binary-tree", "factorized-counter")]  # one per level run
    assert {r.parameters["flippancy_bound"] for r in trees} == used
    assert all(r.draws == (2 * T - 1 if r.kind == "binary-tree" else T) and r.scale > 0 for r in trees)
    if method in ("auto", "adaptive") and trees:
        assert kinds[0] == "sparse-vector"
    if method == "auto" and not options:
        assert kinds == ["discrete-gaussian"]  # no counter beats the baseline at T = 64
    if method == "auto" and options:
        assert trees, "tree_levels=3 starts at least the first counter"
        assert {r.kind for r in trees} == {"factorized-counter"}  # each level's smaller noise bound
    if method == "baseline":
        (record,) = result.noise
        assert record.draws == result.parameters["releases"] and record.scale == result.parameters["sigma"]
    if method == "bounded":
        assert kinds == ["binary-tree"] and trees[0].parameters["flippancy_bound"] == 4
    if method != "auto":
        labels = [label for label, _ in budget_split(method, 2.0, T, 0.05, options.get("max_flippancy"))]
        assert all(r.step in labels for r in result.noise)
