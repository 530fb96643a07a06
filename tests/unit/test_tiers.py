"""The test tiers: tests/unit is pyspark-free, and ``pytest -m <tier>``
selects a tier by its directory (tests/conftest.py).

Statically, no file of tests/unit imports pyspark (or py4j), nor a dp_spark
module that imports it when imported, nor requests the ``spark`` fixture
(or a fixture built on it). Dynamically, ``pytest -m unit --collect-only``
runs in a fresh interpreter where pyspark cannot be imported, and collects
every unit test file and nothing else."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "tests" / "unit"
BLOCKED = ("pyspark", "py4j")
#: conftest files whose fixtures a unit test could request.
CONFTESTS = [REPO / "tests" / "conftest.py", *sorted((REPO / "tests").glob("*/conftest.py"))]


def _module_file(name: str) -> Path | None:
    path = REPO.joinpath(*name.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def _imports(tree: ast.Module, module: str, is_package: bool, everywhere: bool) -> list[tuple[int, str]]:
    """(line, imported name) of the imports in ``tree``; ``everywhere=False``:
    only those run when the module is imported (not in function bodies, not
    under ``if TYPE_CHECKING``). ``from a import b`` yields a and a.b."""
    found: list[tuple[int, str]] = []

    def names(node) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        base = node.module or ""
        if node.level:  # relative: resolve against the importing module's package
            package = module.split(".") if is_package else module.split(".")[:-1]
            package = package[: len(package) - node.level + 1]
            base = ".".join(package + ([node.module] if node.module else []))
        return [base] + [f"{base}.{a.name}" for a in node.names]

    def visit(statements) -> None:
        for node in statements:
            if not everywhere and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if not everywhere and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.extend((node.lineno, n) for n in names(node))
            visit(ast.iter_child_nodes(node))

    visit(tree.body)
    return found


_SCANNED: dict[str, str | None] = {}  # module -> why it imports pyspark (None: it does not)


def _pulls_pyspark(name: str) -> str | None:
    """Why importing ``name`` imports pyspark (a chain of module names), or
    None. dp_spark modules count by their import-time imports (a function
    that imports pyspark when called is the runtime guard's business); test
    helper modules by all their imports (their functions run in the tests)."""
    top = name.split(".")[0]
    if top in BLOCKED:
        return name
    if top not in ("dp_spark", "tests") or name in _SCANNED:
        return _SCANNED.get(name)
    _SCANNED[name] = None  # while scanning: an import cycle back here adds nothing
    parts = name.split(".")
    reasons = [_pulls_pyspark(".".join(parts[:i])) for i in range(1, len(parts))]  # packages run first
    why = next((r for r in reasons if r), None)
    path = _module_file(name)
    if why is None and path is not None:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for _, imported in _imports(tree, name, path.name == "__init__.py", everywhere=top == "tests"):
            found = _pulls_pyspark(imported)
            if found:
                why = f"{name} -> {found}"
                break
    _SCANNED[name] = why
    return why


def _unit_files() -> list[Path]:
    return sorted(UNIT.glob("*.py"))


def test_no_unit_test_imports_pyspark():
    offenders = []
    for path in _unit_files():
        module = f"tests.unit.{path.stem}"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, imported in _imports(tree, module, False, everywhere=True):
            why = _pulls_pyspark(imported)
            if why:
                offenders.append(f"{path.name}:{line}: {why}")
                break
    assert offenders == [], ("tests/unit must not import pyspark; move these tests to tests/spark:\n  "
                             + "\n  ".join(offenders))


def test_the_import_scan_sees_a_pyspark_import_through_dp_spark():
    """The scan's power: a stage module imports pyspark (via its imports)."""
    assert _pulls_pyspark("dp_spark.stages.distinct")
    assert _pulls_pyspark("dp_spark.releases.distinct_count").startswith("dp_spark.releases.distinct_count -> ")
    assert _pulls_pyspark("dp_spark.plans.distinct_count") is None
    assert _pulls_pyspark("dp_spark.mechanisms.distinct_count.bound") is None


def _fixtures(tree: ast.Module) -> dict[str, set[str]]:
    """fixture name -> the fixtures it requests, for the fixtures in ``tree``."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                "fixture" in ast.unparse(d) for d in node.decorator_list):
            out[node.name] = {a.arg for a in node.args.args + node.args.kwonlyargs}
    return out


def _spark_fixtures() -> set[str]:
    """``spark`` and every conftest fixture that (transitively) requests it."""
    requests: dict[str, set[str]] = {}
    for path in CONFTESTS:
        requests.update(_fixtures(ast.parse(path.read_text(encoding="utf-8"))))
    spark = {"spark"}
    while True:
        more = {name for name, wants in requests.items() if wants & spark} - spark
        if not more:
            return spark
        spark |= more


def test_no_unit_test_requests_the_spark_session():
    spark = _spark_fixtures()
    assert {"spark", "unreadable_events"} <= spark  # the scan follows fixtures built on it
    offenders = []
    for path in _unit_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        local = _fixtures(tree)
        for node in ast.walk(tree):
            wanted: set[str] = set()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                wanted = {a.arg for a in node.args.args + node.args.kwonlyargs}
            elif isinstance(node, ast.Call) and "usefixtures" in ast.unparse(node.func):
                wanted = {a.value for a in node.args if isinstance(a, ast.Constant)}
            if wanted & (spark | {n for n, w in local.items() if w & spark}):
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == [], f"unit tests requesting a Spark session (move them to tests/spark): {offenders}"


def _collect(markexpr: str) -> subprocess.CompletedProcess:
    """``pytest -m <markexpr> --collect-only -q`` in a fresh interpreter
    where pyspark cannot be imported."""
    code = ("import sys, pytest\n"
            "from tests.unit.helpers import block_pyspark\n"
            "block_pyspark()\n"
            f"sys.exit(pytest.main(['-q', '-m', {markexpr!r}, '-p', 'no:cacheprovider', '--collect-only']))\n")
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_the_unit_tier_collects_without_pyspark_and_nothing_else():
    result = _collect("unit")
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    collected = [line.split("::")[0] for line in result.stdout.splitlines() if "::" in line]
    assert collected and all(f.startswith("tests/unit/") for f in collected), sorted(set(collected))[:5]
    with_tests = {f"tests/unit/{p.name}" for p in _unit_files() if p.name.startswith("test_")
                  and "\ndef test_" in p.read_text(encoding="utf-8")}
    assert with_tests <= set(collected), with_tests - set(collected)


def test_a_spark_tier_collection_needs_pyspark():
    """The blocked collection's power: the spark tier cannot be collected."""
    result = _collect("spark")
    assert result.returncode != 0 and "pyspark is blocked" in result.stdout + result.stderr


@pytest.mark.parametrize("markexpr, tier, selectable", [
    ("unit", "unit", True),
    ("unit", "spark", False),
    ("not unit", "unit", False),
    ("not unit", "audit", True),
    ("spark and not slow", "spark", True),
    ("spark and not slow", "unit", False),
    ("audit or unit", "audit", True),
    ("connect", "examples", True),  # a test's own marker may make it match
    ("unit and connect", "spark", False),
])
def test_a_tier_directory_is_skipped_only_when_the_expression_cannot_select_it(markexpr, tier, selectable):
    from tests.conftest import _selectable

    assert _selectable(markexpr, tier) is selectable
