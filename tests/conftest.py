"""Shared by every tier: the test tiers, one local[2] SparkSession per test
run, the data locations and the report schema.

A test's tier is its directory: tests/unit (no pyspark), tests/spark (a
local session), tests/cluster (a standalone cluster), tests/audit
(statistical privacy tests), tests/examples (the shipped examples),
tests/accuracy (seeded accuracy of the defaults against the best method we
ship or a closed form). Each
test gets its tier's marker here, so ``pytest -m unit`` runs exactly the
unit tier (and collects nothing else: a tier directory that the ``-m``
expression cannot select is not even imported). Fixtures used by one tier
live in that tier's conftest.py.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import re
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
SHARED_DATA = Path(os.environ.get("DP_SPARK_SHARED_DATA", REPO.parent / "shared" / "data"))
AMAZON = SHARED_DATA / "amazon-fashion-5core" / "AMAZON_FASHION_5.json.gz"
MOVIELENS = SHARED_DATA / "movielens-100k"

#: Every JVM the tests start through spark-submit (the session below, CLI processes, Spark Connect servers,
#: notebooks, Airflow's task) runs the JIT's first tier only: the suite is CPU-bound and its JVMs run many
#: small, different queries, where C2 compilation costs more than it saves (-30 % CPU on a Spark-heavy
#: subset: benchmarks/results/2026-11-30-test-suite-time.md). With the first tier only, the JVM reserves
#: 48 MB for compiled code (240 MB otherwise); a test session's JVM fills that within its first 30 s of
#: releases ("CodeCache is full. Compiler has been disabled."), then runs new code interpreted until a
#: flush makes room and compiling restarts: the reservation is put back to 240 MB (-11 % of the JVM's CPU
#: on the transcript's releases: benchmarks/results/2026-11-30-code-cache.md).
#: spark-class reads SPARK_SUBMIT_OPTS; the JVM prints nothing about either flag (JAVA_TOOL_OPTIONS would
#: write to stderr, which tests read).
JIT_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m")
for _option in JIT_OPTIONS:
    if _option.split("=")[0] not in os.environ.get("SPARK_SUBMIT_OPTS", ""):
        os.environ["SPARK_SUBMIT_OPTS"] = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} {_option}".strip()
del _option

#: The tiers: each is a directory of tests/ and a marker (registered in setup.cfg).
TIERS = ("unit", "spark", "cluster", "audit", "examples", "accuracy")

TEST_CONF = {
    "spark.driver.memory": "2g",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Spark caches 100 compiled (Janino) classes by default; a test worker runs the same query shapes again and
    # again (each release on neighbours and seeds) over a few thousand distinct ones: -7 % of the JVM's CPU on
    # the transcript audit (benchmarks/results/2026-11-30-test-suite-time.md). A cache size only: the same plans.
    "spark.sql.codegen.cache.maxEntries": "4000",
}


# -- tiers ------------------------------------------------------------------------


def tier_of(path) -> str | None:
    """The tier of a test file or directory under tests/, by its directory."""
    try:
        parts = Path(path).resolve().relative_to(TESTS).parts
    except ValueError:
        return None
    return parts[0] if parts and parts[0] in TIERS else None


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    """Mark every test with its directory's tier; a test outside a tier
    directory, or marked with another tier than its directory's, is an error
    (``-m`` would select it wrongly)."""
    for item in items:
        tier = tier_of(item.path)
        if tier is None:
            raise pytest.UsageError(f"{item.nodeid}: every test lives in a tier directory, tests/<{'|'.join(TIERS)}>/")
        others = {m.name for m in item.iter_markers() if m.name in TIERS} - {tier}
        if others:
            raise pytest.UsageError(f"{item.nodeid} is marked {sorted(others)} but lives in tests/{tier}: "
                                    "a test's tier is its directory (move the test instead)")
        item.add_marker(getattr(pytest.mark, tier))
    unit = [i for i, item in enumerate(items) if tier_of(item.path) == "unit"]
    for i, item in zip(unit, _shuffled_unit_tier([items[i] for i in unit])):
        items[i] = item


#: The unit tier runs in a shuffled order (modules shuffled, then the tests
#: inside each module), so a test that passes only after or before another
#: is caught; the order is fixed by this seed, so a failure reproduces. Set
#: DP_SPARK_TEST_ORDER_SEED to try another order, or to "none" for the file order.
ORDER_SEED = os.environ.get("DP_SPARK_TEST_ORDER_SEED", "2026")


def _shuffled_unit_tier(items: list) -> list:
    import random

    if ORDER_SEED.lower() == "none":
        return items
    rng = random.Random(int(ORDER_SEED))
    modules: dict = {}
    for item in items:
        modules.setdefault(item.path, []).append(item)
    order = list(modules)
    rng.shuffle(order)
    out: list = []
    for path in order:
        tests = modules[path]
        rng.shuffle(tests)
        out += tests
    return out


def pytest_report_header(config):
    return f"unit tier order: shuffled with seed {ORDER_SEED} (DP_SPARK_TEST_ORDER_SEED)"



_MARK_NAME = re.compile(r"[\w:+\-.\[\]\\/]+")


def _selectable(markexpr: str, tier: str) -> bool:
    """Whether a test of ``tier`` can match the ``-m`` expression, whatever
    its other markers: the expression is tried with the tier's marker set,
    the other tiers' unset and every combination of the other names. True
    when in doubt (an expression this cannot read)."""
    try:
        from _pytest.mark.expression import Expression

        expression = Expression.compile(markexpr)
    except Exception:  # noqa: BLE001 - pytest reports a bad expression itself
        return True
    names = (expression.idents() if hasattr(expression, "idents")  # pytest >= 9
             else {n for n in _MARK_NAME.findall(markexpr) if n not in ("and", "or", "not")})
    free = sorted(set(names) - set(TIERS))
    if len(free) > 10:
        return True
    for values in itertools.product((False, True), repeat=len(free)):
        set_names = {tier, *itertools.compress(free, values)}
        try:
            if expression.evaluate(lambda name, /, **kwargs: name in set_names):
                return True
        except Exception:  # noqa: BLE001
            return True
    return False


def pytest_ignore_collect(collection_path, config):
    """Do not import a tier directory whose tests ``-m`` cannot select
    (``pytest -m unit`` never imports pyspark)."""
    markexpr = config.getoption("markexpr", default="")
    if not markexpr or collection_path.name not in TIERS or collection_path.parent.resolve() != TESTS:
        return None
    return True if not _selectable(markexpr, collection_path.name) else None


# -- shared fixtures ----------------------------------------------------------------


#: Tests marked ``connect`` start a local Spark Connect server, which listens on the fixed port
#: 15002: under pytest-xdist two workers could start one at once. Each holds this machine-wide lock.
CONNECT_LOCK = Path(tempfile.gettempdir()) / "dp_spark_tests_spark_connect.lock"


@pytest.fixture(autouse=True)
def _one_spark_connect_server_at_a_time(request):
    """Serialises the ``connect`` tests across processes (pytest-xdist workers, other checkouts)."""
    if request.node.get_closest_marker("connect") is None:
        yield
        return
    with open(CONNECT_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def spark():
    from dp_spark.session import get_session

    session = get_session(master="local[2]", conf=TEST_CONF, log_level="ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def report_schema() -> dict:
    """The JSON Schema of release reports shipped in the package."""
    from dp_spark.report import report_schema as load

    return load()


@pytest.fixture(scope="session")
def amazon_path() -> Path:
    if not AMAZON.is_file():
        pytest.fail(f"shared data set missing: {AMAZON} (../shared must sit beside the checkout)")
    return AMAZON
