"""The package's layers, read from the source with ``ast`` (issue 23).

Every ``import`` statement of every ``dp_spark`` module counts, at module
level and inside functions (a function-local import still ties two modules
together; it only hides the tie until the function runs), and so do imports
under ``if TYPE_CHECKING:``.  ``from a.b import c`` is an import of the
module ``a.b.c`` when that is a module, else of ``a.b``.  Imports by string
(``importlib.import_module``) are not statements and are not seen: the
package's lazy exports (``dp_spark/__init__``, ``dp_spark.commands``,
``dp_spark.streaming``) and the ``"module:name"`` call paths use them on
purpose, to reach *down* from the top.

Three rules:

1. ``dp_spark.stages`` and ``dp_spark.mechanisms`` (the layers that compute),
   and what they stand on (``settings``, ``summaries``, ``noise``,
   ``accounting``), import nothing from the layers that decide what to
   compute and present it: ``plans``, ``plan``, ``releases``, ``report``,
   ``html_report``, ``commands``, ``cli`` (nor ``streaming``, ``ledger``).
2. No import cycle among ``dp_spark`` modules.
3. No ``_private`` name is imported from another module.  A package may use
   its own private modules (``mechanisms/top_k/_common.py`` is shared by the
   modules of ``mechanisms/top_k`` and by nothing else): a ``_module`` is
   private to its package, a ``_name`` to its module.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "dp_spark"

LOWER = ("dp_spark.stages", "dp_spark.mechanisms", "dp_spark.settings", "dp_spark.summaries", "dp_spark.noise",
         "dp_spark.accounting")
UPPER = ("dp_spark.plans", "dp_spark.plan", "dp_spark.releases", "dp_spark.report", "dp_spark.html_report",
         "dp_spark.commands", "dp_spark.cli", "dp_spark.streaming", "dp_spark.ledger")


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package: dotted name -> file (a package is its __init__)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def is_package(name: str, files: dict[str, Path]) -> bool:
    return files[name].name == "__init__.py"


def within(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def imports_of(name: str, files: dict[str, Path]) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every import statement of a module."""
    tree = ast.parse(files[name].read_text(encoding="utf-8"), filename=str(files[name]))
    package = name if is_package(name, files) else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "dp_spark":
                    found.append((alias.name, None, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != "dp_spark":
                continue
            for alias in node.names:
                child = f"{source}.{alias.name}"
                if child in files:
                    found.append((child, None, node.lineno))
                else:
                    found.append((source, alias.name, node.lineno))
    return found


def import_graph(files: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name in files:
        for target, _, _ in imports_of(name, files):
            if target in files and target != name:
                graph[name].add(target)
    return graph


def layer_violations(files: dict[str, Path]) -> list[str]:
    return [f"{files[name].relative_to(ROOT)}:{line} imports {target}"
            for name in files if within(name, LOWER)
            for target, _, line in imports_of(name, files) if within(target, UPPER)]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def cycle_path(graph: dict[str, set[str]], component: list[str]) -> str:
    """One cycle through a component, for the failure message."""
    members = set(component)
    start = component[0]
    path, seen = [start], {start}
    node = start
    while True:
        nxt = sorted(n for n in graph[node] if n in members)
        back = [n for n in nxt if n == start]
        if back and len(path) > 1:
            return " -> ".join(path + [start])
        fresh = [n for n in nxt if n not in seen]
        if not fresh:
            loop_to = next(n for n in nxt if n in seen)
            return " -> ".join(path[path.index(loop_to):] + [loop_to])
        node = fresh[0]
        path.append(node)
        seen.add(node)


def private_imports(files: dict[str, Path]) -> list[str]:
    bad = []
    for name in files:
        own_package = name if is_package(name, files) else name.rpartition(".")[0]
        for target, imported, line in imports_of(name, files):
            where = f"{files[name].relative_to(ROOT)}:{line}"
            private_modules = [part for part in target.split(".") if part.startswith("_") and part != "__init__"]
            if private_modules:
                home = target[:target.index("." + private_modules[0])]
                if not within(own_package, [home]):
                    bad.append(f"{where} imports the private module {target}")
            if imported and imported.startswith("_") and not imported.startswith("__") and target != name:
                bad.append(f"{where} imports the private name {target}.{imported}")
    return bad


FILES = module_files()

#: Private names still imported across modules, each with who changes it.
#: ``_rows`` (the --rows option's converter) lives in ``commands/base.py`` and
#: is used by ``commands/continual_distinct.py``; both files are being
#: rewritten by other parts of issue 23 (the registry and the typed
#: parameters), which rename it or derive the option; drop the entry then.
PENDING_PRIVATE: set = set()


def test_the_walk_sees_every_kind_of_import():
    """The checks read function-local and relative imports too (a check that sees nothing passes)."""
    graph = import_graph(FILES)
    assert len(FILES) > 50
    # module level
    assert "dp_spark.errors" in graph["dp_spark.stages.edges"]
    # ``from dp_spark import checks`` is the module dp_spark.checks
    assert "dp_spark.checks" in graph["dp_spark.stages.distinct"]
    # function-local: the lazy export of the stages package
    assert "dp_spark.stages.distinct" in graph["dp_spark.stages"]


def test_lower_layers_import_no_upper_layer():
    assert layer_violations(FILES) == []


def test_no_import_cycle():
    graph = import_graph(FILES)
    assert [cycle_path(graph, c) for c in cycles(graph)] == []


def test_no_private_name_crosses_modules():
    found = [re.sub(r":\d+ ", " ", line) for line in private_imports(FILES)]  # without line numbers
    assert sorted(set(found) - PENDING_PRIVATE) == []


@pytest.mark.parametrize("source, rule", [
    ("from dp_spark.plans.distinct_count import MAX_SHARDS\n", "layer"),
    ("def f():\n    from dp_spark.report import Release\n", "layer"),
    ("from ..releases import top_k\n", "layer"),
    ("from dp_spark.io import _local\n", "private"),
])
def test_the_checks_catch_a_planted_import(tmp_path, source, rule):
    """Each rule fails on a module that breaks it, module-level or function-local, absolute or relative."""
    package = tmp_path / "dp_spark"
    for name in ("plans/distinct_count.py", "report.py", "releases/top_k.py", "io.py", "stages/probe.py",
                 "plans/__init__.py", "releases/__init__.py", "stages/__init__.py", "__init__.py"):
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).touch()
    (package / "stages/probe.py").write_text(source)
    files = module_files(package)
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        if rule == "layer":
            assert layer_violations(files)
        else:
            assert private_imports(files)
    finally:
        ROOT = saved


def test_the_cycle_check_finds_a_function_local_cycle(tmp_path):
    package = tmp_path / "dp_spark"
    package.mkdir()
    (package / "__init__.py").touch()
    (package / "a.py").write_text("from dp_spark import b\n")
    (package / "b.py").write_text("def f():\n    from dp_spark.a import x\n")
    graph = import_graph(module_files(package))
    assert [cycle_path(graph, c) for c in cycles(graph)] == ["dp_spark.a -> dp_spark.b -> dp_spark.a"]
