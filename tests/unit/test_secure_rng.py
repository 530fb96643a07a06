"""Issue 21 §4: privacy noise comes from a cryptographically secure generator.

Unseeded generators (every publishable release) are ChaCha20 keyed from OS
entropy, their children too; seeded generators (tests and demos only) stay
PCG64 so that seeded outputs are unchanged; per-item keyed generators are
ChaCha20 keyed by the item's digest."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from randomgen import ChaCha
from scipy import stats

from dp_spark.mechanisms.count_release.keyed import item_generator, noise_key
from dp_spark.mechanisms.set_union.thresholding import derive_randomness
from dp_spark.mechanisms.top_k.auto import choice_stream
from dp_spark.noise import discrete_gaussian, discrete_laplace, make_rng, spawn_rngs
from dp_spark.noise.rng import SECURE_ROUNDS, secure_generator

ROOT = Path(__file__).resolve().parents[2] / "dp_spark"


def _is_chacha20(rng: np.random.Generator) -> bool:
    bg = rng.bit_generator
    return isinstance(bg, ChaCha) and bg.state["state"]["rounds"] == 20


def test_unseeded_generators_are_chacha20_from_os_entropy():
    assert SECURE_ROUNDS == 20
    a, b = make_rng(), make_rng()
    assert _is_chacha20(a) and _is_chacha20(b)
    assert a.bit_generator.seed_seq.pool_size == 8  # a 256-bit pool: the key's size
    assert a.integers(0, 2**63, size=4).tolist() != b.integers(0, 2**63, size=4).tolist()


def test_children_of_an_unseeded_generator_are_chacha20_and_independent():
    root = make_rng()
    kids = spawn_rngs(root, 3) + list(root.spawn(2)) + [choice_stream(root)]
    assert all(_is_chacha20(k) for k in kids)
    draws = [tuple(k.integers(0, 2**63, size=4).tolist()) for k in kids]
    assert len(set(draws)) == len(draws)


def test_children_keep_the_parents_rounds():
    weak = np.random.Generator(ChaCha(np.random.SeedSequence(1), rounds=8))
    assert all(k.bit_generator.state["state"]["rounds"] == 8 for k in spawn_rngs(weak, 2))


def test_set_union_partitions_of_an_unseeded_release_draw_from_chacha20():
    salt, root = derive_randomness(make_rng(), seeded=False)
    assert not root.seeded and _is_chacha20(root.stream(0))


def test_seeded_generators_stay_pcg64_and_unchanged():
    rng = make_rng(42)
    assert isinstance(rng.bit_generator, np.random.PCG64)
    assert rng.random() == np.random.Generator(np.random.PCG64(np.random.SeedSequence(42))).random()
    assert isinstance(spawn_rngs(make_rng(1), 1)[0].bit_generator, np.random.PCG64)
    seeded_root = derive_randomness(make_rng(3), seeded=True)[1]
    assert isinstance(seeded_root.stream(2).bit_generator, np.random.PCG64)


def test_item_generators_are_chacha20_keyed_by_the_digest():
    key = noise_key(make_rng(5))
    g1, g2, g3 = item_generator("a", key, "count"), item_generator("a", key, "count"), item_generator("b", key, "count")
    assert _is_chacha20(g1)
    x1, x2, x3 = (g.integers(0, 2**63, size=4).tolist() for g in (g1, g2, g3))
    assert x1 == x2 and x1 != x3


def test_samplers_are_right_on_the_secure_generator():
    # the exact samplers consume bits in many ways (integers, random, bit
    # masks): check their first two moments and a KS test on ChaCha20 too
    rng = secure_generator(np.random.SeedSequence(2101))
    lap = discrete_laplace(3.0, rng, size=40_000)
    p = np.exp(-1 / 3.0)
    assert abs(lap.mean()) < 5 * np.sqrt(2 * p) / (1 - p) / np.sqrt(lap.size)
    assert lap.var() == pytest.approx(2 * p / (1 - p) ** 2, rel=0.05)
    gau = discrete_gaussian(4.0, rng, size=40_000)
    assert abs(gau.mean()) < 5 * 4.0 / np.sqrt(gau.size)
    assert gau.var() == pytest.approx(16.0, rel=0.05)
    assert stats.kstest(rng.random(20_000), "uniform").pvalue > 1e-4
    assert stats.kstest(rng.laplace(0.0, 2.0, 20_000), "laplace", args=(0.0, 2.0)).pvalue > 1e-4


# Every place that builds a generator for privacy noise, and why it may.
_ALLOWED = {
    "noise/rng.py": "the one home of generator construction",
    "mechanisms/set_union/thresholding.py": "a seeded run's per-partition PCG64 (tests/demos only)",
    "mechanisms/count_release/keyed.py": "ChaCha20 keyed by a per-item PRF digest",
    "streaming/query.py": "restores a seeded run's saved PCG64 state (tests/demos only)",
    "sample_data.py": "the synthetic, public sample files (fixed seeds; no privacy noise)",
}


def test_no_other_module_builds_a_generator():
    pattern = re.compile(r"default_rng\(|PCG64\(|Philox\(|MT19937\(|SFC64\(|ChaCha\(|AESCounter\(|RandomState\(")
    found = {str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py") if pattern.search(p.read_text())}
    assert found <= set(_ALLOWED), found - set(_ALLOWED)
