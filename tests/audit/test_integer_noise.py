"""Released integer statistics get exact integer noise, never floating-point
noise (Mironov 2012: the low-order bits of float noise can leak the value it
was added to).

Every release path that releases integer counts runs with a recording
generator: the release's ``make_rng`` is replaced by one returning a
``numpy.random.Generator`` subclass (same bit stream, same draws) that
records every continuous draw (normal, laplace, gumbel, exponential,
uniform, ...) with the dp_spark module that asked for it. The test fails if
a continuous draw comes from any module other than those whose float noise
only decides a comparison or an argmax (nothing drawn there is added to a
released number): the selection mechanisms (Gumbel / exponential noise for
report-noisy-max and Unknown Domain Gumbel), the sparse vector's noisy
threshold comparisons, and set-union's noisy-threshold selection. It also
checks that the released counts are whole numbers.

Paths: distinct-count (greedy, matching, sampling), count-release (pcr;
bounded, whose count noise is drawn inside Spark by
``keyed_noisy_counts``: checked in process with a recording per-item
generator, and its released counts are whole numbers), continual-distinct
(adaptive, bounded, baseline: expected to fail until the float Gaussian of
the continual mechanisms is replaced by the exact discrete Gaussian,
finding 5).
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

import dp_spark
from dp_spark.mechanisms.count_release import keyed as pcr_keyed
from dp_spark.mechanisms.count_release import keyed_noisy_counts, noise_key

CONTINUOUS = ("normal", "standard_normal", "laplace", "logistic", "gumbel", "exponential",
              "standard_exponential", "uniform", "random", "gamma", "standard_gamma", "lognormal",
              "standard_cauchy", "standard_t", "beta", "chisquare", "wald", "weibull")

#: Modules whose continuous noise only decides comparisons or an argmax.
COMPARISON_ONLY = ("dp_spark.mechanisms.exponential", "dp_spark.mechanisms.top_k.", "dp_spark.mechanisms.distinct_count.gem", "dp_spark.mechanisms.continual_distinct.svt", "dp_spark.mechanisms.set_union.thresholding")


def _caller() -> str:
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__", "").startswith(("dp_spark.noise", "numpy")):
        frame = frame.f_back
    return frame.f_globals.get("__name__", "?") if frame is not None else "?"


class RecordingGenerator(np.random.Generator):
    """A Generator that records (method, calling module) of continuous draws."""

    calls: list[tuple[str, str]]


def _recording(name):
    def method(self, *args, **kwargs):
        self.calls.append((name, _caller()))
        return getattr(np.random.Generator, name)(self, *args, **kwargs)

    method.__name__ = name
    return method


for _name in CONTINUOUS:
    setattr(RecordingGenerator, _name, _recording(_name))


@pytest.fixture
def recorder(monkeypatch):
    """Every generator a release makes with make_rng records its continuous draws."""
    calls: list[tuple[str, str]] = []

    def make(seed=None):
        seq = np.random.SeedSequence() if seed is None else np.random.SeedSequence(int(seed))
        gen = RecordingGenerator(np.random.PCG64(seq))
        gen.calls = calls
        return gen

    import dp_spark.noise

    # the one release flow (dp_spark.releases.template.run_release) makes every
    # release's generator with dp_spark.noise.make_rng, imported at call time
    monkeypatch.setattr(dp_spark.noise, "make_rng", make)
    return calls


def assert_no_float_noise_on_counts(calls):
    offending = sorted({(name, module) for name, module in calls if not module.startswith(COMPARISON_ONLY)})
    assert not offending, f"continuous noise drawn outside comparison-only mechanisms: {offending}"


def assert_whole(values, what):
    for value in values:
        assert isinstance(value, (int, np.integer)) or (isinstance(value, float) and value.is_integer()), (
            f"{what}: released value {value!r} is not a whole number")


@pytest.fixture(scope="module")
def people(spark):
    df = spark.range(600).select(F.col("id").alias("person_id"))
    items = F.explode(F.sequence(F.lit(0), (F.col("person_id") % 7).cast("int"))).alias("rank")
    exploded = df.select("person_id", items)
    return exploded.select("person_id", F.concat(F.lit("i"), F.col("rank").cast("string")).alias("item")).cache()


@pytest.fixture(scope="module")
def events(spark):
    items = spark.range(300).select(F.col("id").alias("item"))
    ins = items.select((F.col("item") % 16 + 1).alias("time"), "item", F.lit(1).alias("op"))
    dels = items.where(F.col("item") < 100).select((F.col("item") % 8 + 20).alias("time"), "item",
                                                   F.lit(-1).alias("op"))
    return ins.unionByName(dels).cache()


@pytest.mark.parametrize("method", ["greedy", "matching", "sampling"])
def test_distinct_count_adds_integer_noise(people, recorder, method):
    release = dp_spark.distinct_count(people, epsilon=1.0, max_bound=10, method=method, seed=3)
    assert_whole([release.estimate, release.lower_bound], f"distinct-count {method}")
    assert_no_float_noise_on_counts(recorder)


@pytest.mark.parametrize("method", ["pcr", "bounded"])
def test_count_release_adds_integer_noise(people, recorder, method):
    extra = {"max_items": 4} if method == "bounded" else {"kbar": 20}
    release = dp_spark.count_release(people, rho=1.0, delta=1e-6, method=method, seed=3, **extra)
    assert release.result["items"], "nothing released: the check would be empty"
    assert_whole([row["count"] for row in release.result["items"]], f"count-release {method}")
    assert dict(release.items.dtypes)["count"] == "bigint"
    assert_no_float_noise_on_counts(recorder)


def test_bounded_count_noise_drawn_in_spark_is_integer(monkeypatch):
    """keyed_noisy_counts (what the Spark stage runs per batch) draws from
    per-item generators: record them in process."""
    calls: list[tuple[str, str]] = []
    real = pcr_keyed.item_generator

    def recording_item_generator(item, key, stream):
        gen = RecordingGenerator(real(item, key, stream).bit_generator)
        gen.calls = calls
        return gen

    monkeypatch.setattr("dp_spark.mechanisms.count_release.bounded.item_generator", recording_item_generator)
    items = [f"i{j}" for j in range(200)]
    noisy = keyed_noisy_counts(items, np.arange(200), sigma=3.0, key=noise_key(np.random.default_rng(1)))
    assert noisy.dtype == np.int64 and not np.array_equal(noisy, np.arange(200))
    assert_no_float_noise_on_counts(calls)


@pytest.mark.parametrize("method", ["auto", "adaptive", "bounded", "baseline"])
def test_continual_distinct_adds_integer_noise(events, recorder, method):
    extra = {"max_flippancy": 2} if method == "bounded" else {}
    release = dp_spark.continual_distinct(events, rho=0.5, horizon=32, method=method, seed=3, **extra)
    series = release.series.toPandas()  # the artifact is a Spark DataFrame, one row per step
    assert isinstance(series, pd.DataFrame) and len(series) == 32
    assert_whole([float(x) for x in series["estimate"] if math.isfinite(x)], f"continual {method}")
    assert_no_float_noise_on_counts(recorder)


def test_the_recorder_catches_float_noise_on_a_count(people, recorder, monkeypatch):
    """A deliberately broken count-release (float Gaussian added to the
    released count, as the paper writes it) is caught."""
    from dp_spark.mechanisms.count_release import loop

    monkeypatch.setattr(loop, "discrete_gaussian", lambda sigma, rng: rng.normal(0.0, sigma))
    dp_spark.count_release(people, rho=1.0, delta=1e-6, kbar=20, seed=3)
    with pytest.raises(AssertionError, match="continuous noise drawn outside"):
        assert_no_float_noise_on_counts(recorder)
    assert ("normal", __name__) in recorder  # attributed to the code that asked for it
