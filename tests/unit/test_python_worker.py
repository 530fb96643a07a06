"""Python passes settle their worker's modules out of the cyclic collector's way
(dp_spark/stages/python_worker.py), and every Python pass in dp_spark does so."""

from __future__ import annotations

import ast
import gc
import inspect
import pickle
import sys
import types
import weakref
from pathlib import Path

import pytest

from dp_spark.stages import python_worker
from dp_spark.stages.python_worker import settle_imports, worker_pass

PACKAGE = Path(python_worker.__file__).resolve().parents[1]
#: DataFrame methods and UDF constructors whose first argument runs on Python workers.
PASS_METHODS = {"mapInArrow", "mapInPandas", "applyInPandas", "applyInArrow", "applyInPandasWithState",
                "mapPartitions", "pandas_udf", "udf"}


@pytest.fixture
def fresh(monkeypatch):
    """This process as a reused worker that never froze; unfrozen afterwards."""
    monkeypatch.setenv(python_worker.REUSE_ENV, "1")
    monkeypatch.setattr(python_worker, "_modules_at_freeze", 0)
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_settle_freezes_once_per_new_module(fresh, monkeypatch):
    # counted by the calls to gc.freeze: the frozen count itself can fall between two reads (a frozen
    # object freed by another thread of this process leaves the permanent generation)
    freezes = []
    real_freeze = gc.freeze
    monkeypatch.setattr(gc, "freeze", lambda: (freezes.append(1), real_freeze())[1])
    assert gc.get_freeze_count() == 0
    assert settle_imports() is True
    assert gc.get_freeze_count() > 1000  # the modules' objects (this test process has imported thousands)
    assert len(freezes) == 1
    assert settle_imports() is False  # no module loaded since: nothing done
    assert len(freezes) == 1
    monkeypatch.setitem(sys.modules, "dp_spark_test_new_module", types.ModuleType("dp_spark_test_new_module"))
    assert settle_imports() is True  # a module loaded since: frozen again
    assert len(freezes) == 2
    assert settle_imports() is False
    assert len(freezes) == 2


def test_settle_does_nothing_where_workers_are_not_reused(fresh, monkeypatch):
    """No SPARK_REUSE_WORKER (a worker used once, the simple worker, a driver calling a body):
    nothing collects after each task, so a freeze would only cost."""
    monkeypatch.delenv(python_worker.REUSE_ENV)
    assert settle_imports() is False
    assert gc.get_freeze_count() == 0


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


def test_the_wrapper_keeps_the_bodys_arity():
    """PySpark's grouped passes (applyInPandas / applyInArrow) choose (table) or (key, table) from
    ``inspect.getfullargspec(f).args``, which does not follow ``__wrapped__``."""
    assert inspect.getfullargspec(wrapped_body).args == ["batches", "scale"]

    def one(table):
        return table

    def two(key, table):
        return key, table

    assert inspect.getfullargspec(worker_pass(one)).args == ["table"]
    assert inspect.getfullargspec(worker_pass(two)).args == ["key", "table"]


def test_a_wrapped_module_level_body_pickles_by_reference():
    assert wrapped_body.__module__ == __name__  # the wrapper keeps the body's module and qualified name
    payload = pickle.dumps(wrapped_body)  # by reference (module + name), as cloudpickle sends a stage's body
    assert pickle.loads(payload) is wrapped_body
    assert len(payload) < 200


# -- every Python pass of the package is wrapped ----------------------------------------------------------


def _is(node, name: str) -> bool:
    """``node`` names ``name`` (``name`` or ``module.name``)."""
    return (isinstance(node, ast.Name) and node.id == name) or (isinstance(node, ast.Attribute) and node.attr == name)


def _decorated(func: ast.FunctionDef) -> bool:
    return any(_is(d, "worker_pass") for d in func.decorator_list)


def _own_nodes(scope):
    """The nodes of ``scope`` (a module or a function), not descending into nested functions, lambdas
    or classes (their own scopes)."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


def _returns_wrapped(func: ast.FunctionDef) -> bool:
    """Every ``return`` of the factory returns ``worker_pass(...)``."""
    returns = [n for n in _own_nodes(func) if isinstance(n, ast.Return)]
    return bool(returns) and all(isinstance(n.value, ast.Call) and _is(n.value.func, "worker_pass") for n in returns)


def _pass_bodies(tree: ast.Module, elsewhere: dict | None = None):
    """(line, what the pass runs) for every ``.mapInArrow(f, ...)``-like call in the module (``f``
    positional or ``func=`` / ``f=``), ``f`` resolved through ``partial(...)`` and the names assigned
    in the call's own scope: a FunctionDef, a call of a function (a factory; of this module, else one of
    ``elsewhere``, the package's functions by name), or None (unresolved)."""
    local = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    functions = {**(elsewhere or {}), **local}
    scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]
    for scope in scopes:
        nodes = list(_own_nodes(scope))
        assigned = {n.targets[0].id: n.value for n in nodes if isinstance(n, ast.Assign)
                    and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)}
        for node in nodes:
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else \
                node.func.id if isinstance(node.func, ast.Name) else None
            if name not in PASS_METHODS:
                continue
            given = node.args[:1] or [k.value for k in node.keywords if k.arg in ("func", "f")]
            if not given:
                yield node.lineno, (None, ast.unparse(node))
                continue
            arg, seen = given[0], 0
            while seen < 10:
                seen += 1
                if isinstance(arg, ast.Call) and _is(arg.func, "partial") and arg.args:
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
                yield node.lineno, (None, ast.unparse(given[0]))


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
        "    F.pandas_udf(bad, 'string')\n"
        "    df.mapInArrow(func=functools.partial(good, n=2), schema='s')\n"
        "def other(df):\n"
        "    kernel = good\n"
        "    df.mapInArrow(kernel, 's')\n"
    )
    found = {line: (kind, body if kind is None else body.name) for line, (kind, body) in _pass_bodies(ast.parse(source))}
    assert found == {13: ("def", "good"), 14: ("def", "bad"), 15: ("factory", "make"), 16: (None, "lambda it: it"), 17: ("def", "bad"),
                     18: ("def", "good"), 21: ("def", "good")}  # each scope's own `kernel`
    tree = ast.parse(source)
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert _decorated(functions["good"]) and not _decorated(functions["bad"]) and not _returns_wrapped(functions["make"])
