"""Python passes settle their worker's modules out of the cyclic collector's way
(dp_spark/stages/python_worker.py), and every Python pass in dp_spark does so."""

from __future__ import annotations

import ast
import gc
import pickle
import sys
import types
import weakref
from pathlib import Path

import pytest

from dp_spark.stages import python_worker
from dp_spark.stages.python_worker import settle_imports, worker_pass

PACKAGE = Path(python_worker.__file__).resolve().parents[1]
#: DataFrame methods whose first argument runs on Python workers.
PASS_METHODS = {"mapInArrow", "mapInPandas", "applyInPandas", "applyInArrow", "applyInPandasWithState"}


@pytest.fixture
def fresh(monkeypatch):
    """This process as a worker that never froze; unfrozen afterwards."""
    monkeypatch.setattr(python_worker, "_modules_at_freeze", 0)
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_settle_freezes_once_per_new_module(fresh, monkeypatch):
    assert gc.get_freeze_count() == 0
    assert settle_imports() is True
    frozen = gc.get_freeze_count()
    assert frozen > 1000  # the modules' objects (this test process has imported thousands)
    assert settle_imports() is False  # no module loaded since: nothing done
    assert gc.get_freeze_count() == frozen
    monkeypatch.setitem(sys.modules, "dp_spark_test_new_module", types.ModuleType("dp_spark_test_new_module"))
    assert settle_imports() is True  # a module loaded since: frozen again
    assert settle_imports() is False


def test_settle_collects_garbage_before_it_freezes(fresh):
    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # a reference cycle: only the cyclic collector frees it
    gone = weakref.ref(a)
    del a, b
    assert gone() is not None
    settle_imports()
    assert gone() is None  # collected, not frozen for the worker's life


def test_a_frozen_object_is_still_freed_by_reference_counting(fresh):
    class Box:
        pass

    box = Box()
    gone = weakref.ref(box)
    settle_imports()
    del box
    assert gone() is None


@worker_pass
def wrapped_body(batches, scale):
    """A pass body for the tests below, wrapped as the package's are."""
    for batch in batches:
        yield batch * scale


def test_the_wrapper_settles_first_then_runs_the_body(monkeypatch):
    calls = []
    monkeypatch.setattr(python_worker, "settle_imports", lambda: calls.append("settle"))
    out = wrapped_body([1, 2], scale=3)
    assert calls == ["settle"]  # at the call, before the first batch
    assert list(out) == [3, 6]
    assert wrapped_body.__name__ == "wrapped_body" and wrapped_body.__wrapped__.__name__ == "wrapped_body"


def test_a_wrapped_module_level_body_pickles_by_reference():
    assert wrapped_body.__module__ == __name__  # the wrapper keeps the body's module and qualified name
    payload = pickle.dumps(wrapped_body)  # by reference (module + name), as cloudpickle sends a stage's body
    assert pickle.loads(payload) is wrapped_body
    assert len(payload) < 200


# -- every Python pass of the package is wrapped ----------------------------------------------------------


def _decorated(func: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "worker_pass" for d in func.decorator_list)


def _returns_wrapped(func: ast.FunctionDef) -> bool:
    return any(isinstance(n, ast.Return) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name)
               and n.value.func.id == "worker_pass" for n in ast.walk(func))


def _pass_bodies(tree: ast.Module, elsewhere: dict | None = None):
    """(line, what the pass runs) for every ``.mapInArrow(f, ...)``-like call in the module, ``f``
    resolved through ``partial(...)`` and local names assigned once: a FunctionDef, a call of a
    function (a factory; of this module, else one of ``elsewhere``, the package's functions by name),
    or None (unresolved)."""
    local = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    functions = {**(elsewhere or {}), **local}
    reported = set()
    for scope in [tree, *local.values()]:
        assigned = {}
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                assigned[node.targets[0].id] = node.value
        for node in ast.walk(scope):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in PASS_METHODS and node.args) or node.lineno in reported:
                continue
            reported.add(node.lineno)
            arg, seen = node.args[0], 0
            while seen < 10:
                seen += 1
                if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id == "partial":
                    arg = arg.args[0]
                elif isinstance(arg, ast.Name) and arg.id in assigned and arg.id not in functions:
                    arg = assigned[arg.id]
                else:
                    break
            if isinstance(arg, ast.Name) and arg.id in functions:
                yield node.lineno, ("def", functions[arg.id])
            elif isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id in functions:
                yield node.lineno, ("factory", functions[arg.func.id])
            else:
                yield node.lineno, (None, ast.unparse(node.args[0]))


def _package_passes():
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(PACKAGE.rglob("*.py"))}
    names: dict = {}
    for tree in trees.values():
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                names.setdefault(node.name, []).append(node)
    unique = {name: nodes[0] for name, nodes in names.items() if len(nodes) == 1}
    out = []
    for path, tree in trees.items():
        for line, body in _pass_bodies(tree, unique):
            out.append((f"{path.relative_to(PACKAGE.parent)}:{line}", body))
    return out


def test_every_python_pass_of_the_package_settles_its_worker():
    passes = _package_passes()
    assert len(passes) >= 15  # the walk finds the package's passes (set-union, distinct, continual, top-k, ...)
    unwrapped = []
    for where, (kind, body) in passes:
        if kind == "def" and _decorated(body):
            continue
        if kind == "factory" and _returns_wrapped(body):
            continue
        unwrapped.append((where, kind, getattr(body, "name", body)))
    assert not unwrapped, f"Python passes not wrapped with worker_pass (or not resolvable): {unwrapped}"


def test_the_walk_catches_an_unwrapped_pass():
    source = (
        "from functools import partial\n"
        "@worker_pass\n"
        "def good(batches):\n    yield from batches\n"
        "def bad(batches, n):\n    yield from batches\n"
        "def make():\n    def inner(k, b, s):\n        yield b\n    return inner\n"
        "def stage(df):\n"
        "    kernel = partial(bad, n=1)\n"
        "    df.mapInArrow(good, 's')\n"
        "    df.mapInArrow(kernel, 's')\n"
        "    df.groupBy('x').applyInPandasWithState(make(), 's', 's', 'update', 't')\n"
        "    df.mapInPandas(lambda it: it, 's')\n"
    )
    found = {line: (kind, body if kind is None else body.name) for line, (kind, body) in _pass_bodies(ast.parse(source))}
    assert found == {13: ("def", "good"), 14: ("def", "bad"), 15: ("factory", "make"), 16: (None, "lambda it: it")}
    tree = ast.parse(source)
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert _decorated(functions["good"]) and not _decorated(functions["bad"]) and not _returns_wrapped(functions["make"])
