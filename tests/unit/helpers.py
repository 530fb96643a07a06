"""Helpers of the unit tier that other test files (and tiers) share. Nothing
here imports pyspark: tests/spark may import these, never the reverse."""

from __future__ import annotations

import importlib.abc
import sys

import numpy as np

from dp_spark.releases import RELEASES

#: Modules the unit tier never imports (pyspark and its Java gateway).
BLOCKED = ("pyspark", "py4j")


class PysparkBlocker(importlib.abc.MetaPathFinder):
    """An import hook under which ``import pyspark`` (or py4j) fails."""

    def find_spec(self, name, path=None, target=None):
        if name in BLOCKED or name.startswith(tuple(f"{b}." for b in BLOCKED)):
            raise ImportError(f"{name} is blocked: tests/unit is pyspark-free (Spark tests live in tests/spark)")
        return None


def block_pyspark() -> PysparkBlocker:
    """Install a :class:`PysparkBlocker` first on ``sys.meta_path`` (remove
    it again with ``sys.meta_path.remove``)."""
    blocker = PysparkBlocker()
    sys.meta_path.insert(0, blocker)
    return blocker


def pyspark_loaded() -> bool:
    return any(m == b or m.startswith(b + ".") for m in sys.modules for b in BLOCKED)


# -- distinct-count reference counts ------------------------------------------------


def exact_counts(persons: dict, max_bound: int) -> np.ndarray:
    """DC(D; l), l = 1..max_bound, of ``persons`` (id -> set of items) by the
    driver's max-flow kernel: the reference the Spark stages are checked against."""
    from dp_spark.stages.kernels import flow_bounded_counts

    pairs = sorted({(p, x) for p, u in persons.items() for x in u})
    if not pairs:
        return np.zeros(max_bound, dtype=np.int64)
    pc = {p: i for i, p in enumerate(sorted({p for p, _ in pairs}))}
    ic = {x: i for i, x in enumerate(sorted({x for _, x in pairs}))}
    return flow_bounded_counts(
        np.array([pc[p] for p, _ in pairs]), np.array([ic[x] for _, x in pairs]),
        len(pc), len(ic), max_bound,
    )


# -- ledger races ---------------------------------------------------------------------


def slow_reads():
    """Hold each ledger transaction open 0.3 s after reading the budget's
    state, so two workers' check-then-record steps overlap unless the budget
    is locked."""
    import time

    from dp_spark.ledger.ledger import Ledger

    original = Ledger._state

    def slow(self, cur, name):
        state = original(self, cur, name)
        time.sleep(0.3)
        return state

    Ledger._state = slow


def race_for_budget(where, budget: str, label: str, barrier, results):
    """One racing worker (a spawned process): open the ledger at ``where``
    (a path or URL), wait for the other worker, then try to spend ε = 0.6
    from ``budget``; puts "won", "refused" or "error <type>" on ``results``."""
    from dp_spark.accounting import PureDP
    from dp_spark.errors import BudgetExceededError
    from dp_spark.ledger import open_ledger

    led = open_ledger(where)
    slow_reads()
    barrier.wait()
    try:
        led.budget(budget).spend(PureDP(0.6), label)
        results.put("won")
    except BudgetExceededError:
        results.put("refused")
    except Exception as exc:  # noqa: BLE001 - e.g. a lock error: reported, fails the test
        results.put(f"error {type(exc).__name__}")


# -- Spark session stand-ins ------------------------------------------------------------


class FakeSession:
    """A stand-in SparkSession with a fixed ``conf`` (no JVM, no pyspark)."""

    def __init__(self, conf):
        self._conf = conf
        self.conf = self

    def get(self, key, default=None):
        return self._conf.get(key, default)

    @property
    def sparkContext(self):  # noqa: N802
        raise RuntimeError("no context")


# -- the command line in process ----------------------------------------------------------

#: dp-spark's own progress lines on stderr (not errors).
PROGRESS = ("dp-spark: reading ", "dp-spark: no --input", *(f"dp-spark: {name}: " for name in RELEASES))


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """``dp_spark.cli.main(argv)`` in process: (exit code, stdout, stderr),
    argparse's own exits (bad flag values, choices) included."""
    from dp_spark.cli import main

    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(err: str, fragment: str = "") -> None:
    """Exactly one line besides dp-spark's own progress lines: the error,
    naming ``fragment``; no stack trace (Python or Java)."""
    lines = [line for line in err.strip().splitlines() if not line.startswith(PROGRESS)]
    assert len(lines) == 1 and lines[0].startswith("dp-spark") and ": error: " in lines[0], err
    assert fragment in lines[0], err
    assert "Traceback" not in err and "at org.apache" not in err and "Py4J" not in err, err


def assert_refused_keeping_outputs(capsys, tmp_path, command: str, argv, fragment: str) -> None:
    """``dp-spark command *argv`` with an earlier report and items folder in
    place (and --overwrite) must be refused: exit 2, one error line naming
    ``fragment``, no stack trace, and both earlier outputs untouched."""
    import json

    report_path, items_path = tmp_path / "r.json", tmp_path / "items.parquet"
    report_path.write_text('{"release": "distinct-count", "version": "2.0", "earlier": true}')  # an earlier dp_spark report
    items_path.mkdir()
    (items_path / "keep.txt").write_text("earlier")
    (items_path / "_DP_SPARK_OUTPUT").write_text("an earlier dp_spark output\n")
    code, out, err = run_cli(capsys, command, *argv, "--output", str(report_path),
                             "--items-output", str(items_path), "--overwrite")
    assert code == 2, err
    assert fragment in err, err
    assert len([line for line in err.splitlines() if "error" in line.lower()]) == 1, err
    assert "Traceback" not in err and "at org.apache" not in err
    assert json.loads(report_path.read_text()) == {"release": "distinct-count", "version": "2.0", "earlier": True}
    assert (items_path / "keep.txt").read_text() == "earlier"
