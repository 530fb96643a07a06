"""Imports sit at the top of their module (issue 37 §4), read from the
source with ``ast``: a function-local import hides a dependency from readers
and tools. A function-local import is allowed only when it is

- a lazy load of pyspark (and its Java gateway py4j), pandas or pyarrow: the
  module itself, or a ``dp_spark`` module whose module-level imports reach
  one of them, while the importing module's own module-level imports do not
  (else the import loads nothing new and belongs at the top);
- marked ``# lazy: <why, with the measured cost>`` on its line, and a load
  of scipy (directly or through a ``dp_spark`` module that imports it at its
  top) or of an optional extra (psycopg, ``dp_spark[postgres]``);
- marked ``# cycle: <why>`` on its line (there should be none: move the
  shared thing to the module both need instead).
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "dp_spark"

LAZY = ("pyspark", "py4j", "pandas", "pyarrow")
MARKED_LAZY = ("scipy", "psycopg")



def _module_files() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


FILES = _module_files()


def _targets(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The modules an import statement loads (``from a import b``: ``a.b``
    when that is a module of the package, else ``a``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    assert not node.level, f"{package}: dp_spark imports absolutely, never relatively"
    source = node.module or ""
    return [f"{source}.{a.name}" if f"{source}.{a.name}" in FILES else source for a in node.names]


def _package_of(name: str) -> str:
    return name if FILES[name].name == "__init__.py" else name.rpartition(".")[0]


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


@lru_cache(maxsize=None)
def _top_level_imports(name: str) -> frozenset[str]:
    """The modules ``name`` imports when it is imported: its module-level
    statements (inside if/try/with too), not its functions' bodies nor
    ``if TYPE_CHECKING:`` blocks."""
    tree = ast.parse(FILES[name].read_text(encoding="utf-8"))
    found: set[str] = set()

    def visit(body):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.update(_targets(node, _package_of(name)))
            elif _is_type_checking(node):
                visit(node.orelse)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    visit(getattr(node, field, None) or [])
                if isinstance(node, ast.ExceptHandler):
                    visit(node.body)

    visit(tree.body)
    return frozenset(found)


@lru_cache(maxsize=None)
def _reaches(name: str) -> frozenset[str]:
    """The top-level names of the outside packages importing ``name`` loads
    (through its packages and the dp_spark modules it imports at its top)."""
    seen: set[str] = set()
    outside: set[str] = set()
    parts = name.split(".")
    stack = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    while stack:
        module = stack.pop()
        if module in seen:
            continue
        seen.add(module)
        if module not in FILES:
            top = module.split(".")[0]
            if top == "dp_spark":  # a name, not a module, of a dp_spark package
                continue
            outside.add(top)
            continue
        for target in _top_level_imports(module):
            bits = target.split(".")
            stack.extend(".".join(bits[:i]) for i in range(1, len(bits) + 1))
        if FILES[module].name == "__init__.py" or "." in module:
            stack.extend(".".join(parts_[:i]) for parts_ in [module.split(".")] for i in range(1, len(parts_)))
    return frozenset(outside)


def _function_local_imports(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

    def walk(node, in_function):
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child
            yield from walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    yield from walk(tree, False)


def _allowed(name: str, node: ast.Import | ast.ImportFrom, line: str) -> bool:
    if "# cycle:" in line:
        return True
    tops = {target.split(".")[0] for target in _targets(node, _package_of(name))}
    if tops <= set(LAZY):  # lazy only where the module does not load it at its top already
        return bool(tops - _reaches(name))
    if tops <= set(MARKED_LAZY):
        return "# lazy:" in line
    if tops != {"dp_spark"}:
        return False
    # a dp_spark module: allowed when it loads what the importing module does not load
    loads = set().union(*(_reaches(target) for target in _targets(node, _package_of(name))))
    new = (loads - _reaches(name)) & set(LAZY + MARKED_LAZY)
    if not new:
        return False
    return bool(new & set(LAZY)) or "# lazy:" in line  # Spark code (with what it loads), or a stated reason


def offenders() -> list[str]:
    found = []
    for name, path in FILES.items():
        rel = path.relative_to(ROOT).as_posix()
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in _function_local_imports(path):
            text = " ".join(lines[node.lineno - 1:node.end_lineno])
            if not _allowed(name, node, text):
                found.append(f"{rel}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return found


def test_imports_sit_at_the_top_of_their_module():
    found = offenders()
    assert found == [], ("function-local imports that are no lazy load of pyspark, pandas or pyarrow (nor scipy "
                         "or psycopg marked '# lazy: <why>', nor '# cycle: <why>'); move them to the module's "
                         "top:\n  " + "\n  ".join(found))


def test_the_rule_sees_a_hidden_import_and_accepts_a_lazy_one():
    """The walk's power, on the package's own modules: a stdlib import inside a
    function is refused; pyspark inside one is accepted; a dp_spark module that
    loads pyspark is accepted from a pyspark-free module, not from one that
    loads pyspark already; scipy needs its '# lazy:' reason."""
    def check(module: str, source: str) -> bool:
        return _allowed(module, ast.parse(source).body[0], source)

    assert not check("dp_spark.plan", "import os")
    assert not check("dp_spark.plan", "from dp_spark.errors import ParameterError")
    assert check("dp_spark.plan", "from pyspark.sql import functions as F")
    assert not check("dp_spark.stages.edges", "from pyspark.sql import functions as F")  # loaded at its top
    assert check("dp_spark.plan", "from dp_spark.stages.edges import ITEM")
    assert not check("dp_spark.stages.distinct", "from dp_spark.stages.edges import ITEM")
    assert not check("dp_spark.plan", "from scipy.special import ndtr")
    assert check("dp_spark.plan", "from scipy.special import ndtr  # lazy: costs 200 ms")
    assert check("dp_spark.plan", "import os  # cycle: dp_spark.x needs this module")
    assert "pyspark" in _reaches("dp_spark.stages.edges") and "pyspark" not in _reaches("dp_spark.plan")
