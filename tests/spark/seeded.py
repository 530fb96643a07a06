"""The seeded cases of every release, collected from each release's own test
module (shared by ``test_seeded_values`` and ``test_noise_records``; seeded
runs are for tests only: not private).

Each release ``x-y`` of ``dp_spark.releases.RELEASES`` owns its cases in
``tests/spark/test_x_y.py``:

- ``SEEDED_CASES = {"x_y/<case>": (parameters, input kind, noise kinds)}``:
  its Python keywords (no seed), the demo table it reads (``"persons"`` or
  ``"events"``, built here) and the kinds of ``Release.noise`` in the order
  drawn, or None when the module's ``check_noise_records`` checks them;
- ``SEEDED_VALUES = {"x_y/<case>": {...}}``: the pinned released values,
  a literal this module writes (below);
- optionally ``seeded_artifacts(release) -> dict``: what of its DataFrame
  artifacts is pinned beside ``values``, and
  ``check_noise_records(case, release)``: further checks of the records.

A release without them fails ``test_every_release_has_seeded_cases``,
naming its module. There is no table of the cases here or elsewhere.

Regenerate the pinned values only for a deliberate change of a mechanism,
and say why in the commit: ``PYTHONPATH=<checkout> python -m
tests.spark.seeded [x-y ...]`` (with ``PYTHONPATH`` the checkout whose code
is pinned) runs the cases of the named releases (all by default) and
rewrites the ``SEEDED_VALUES = {...}`` literal of each release's module in
place (found with ``ast``; nothing else in the file changes).
"""

from __future__ import annotations

import ast
import functools
import importlib
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Mapping

SEED = 11

#: 600 persons, 1 to 5 items each from 30, skewed towards item0 (so every release releases something)
PERSONS = [(p, f"item{int(30 * ((p * 37 + j * 11) % 101 / 101) ** 2)}") for p in range(600) for j in range(1 + p % 5)]
#: (time, item, op) updates over 59 steps, items inserted and deleted in turn
EVENTS = [(t, f"i{(t * 5) % 11}", 1 if (t // 11) % 2 == 0 else -1) for t in range(1, 60)]


def seeded_input(spark, kind: str):
    """The demo DataFrame a case reads: ``"persons"`` or ``"events"``."""
    if kind == "persons":
        return spark.createDataFrame(PERSONS, "person_id long, item string")
    if kind == "events":
        return spark.createDataFrame(EVENTS, "time long, item string, op int")
    raise ValueError(f"a seeded case reads 'persons' or 'events', not {kind!r}")


@dataclass(frozen=True)
class SeededCase:
    """One seeded case, as its release's test module states it."""

    name: str
    release: str  # the release's Python name
    module: ModuleType
    parameters: Mapping[str, Any]
    input: str
    kinds: list[str] | None
    pinned: Any  # None when the module pins no value for it (a failure)

    @property
    def check_noise_records(self) -> Callable | None:
        return getattr(self.module, "check_noise_records", None)


def module_name(python_name: str) -> str:
    """The test module that owns a release's seeded cases."""
    return f"tests.spark.test_{python_name}"


def _module(python_name: str) -> ModuleType | None:
    try:
        return importlib.import_module(module_name(python_name))
    except ModuleNotFoundError as err:
        if err.name != module_name(python_name):
            raise
        return None


@functools.lru_cache(maxsize=None)
def _collected() -> tuple[dict[str, SeededCase], tuple[str, ...]]:
    from dp_spark.releases import RELEASES

    return collect(RELEASES.values())


def collect(specs) -> tuple[dict[str, SeededCase], tuple[str, ...]]:
    """The seeded cases of the releases ``specs``, and what their modules lack."""
    cases: dict[str, SeededCase] = {}
    problems: list[str] = []
    for spec in specs:
        py, where = spec.python_name, module_name(spec.python_name)
        module = _module(py)
        table = getattr(module, "SEEDED_CASES", None) if module is not None else None
        if not table:
            problems.append(f"{where} has no SEEDED_CASES" if module is not None else f"no module {where}")
            continue
        values = getattr(module, "SEEDED_VALUES", {})
        for name, (parameters, kind, kinds) in table.items():
            if not name.startswith(f"{py}/"):
                problems.append(f"{where}: case {name!r} is not named {py}/<case>")
                continue
            cases[name] = SeededCase(name, py, module, parameters, kind, kinds, values.get(name))
        if sorted(values) != sorted(table):
            problems.append(f"{where}: SEEDED_VALUES pins {sorted(values)}, SEEDED_CASES has {sorted(table)}")
    return cases, tuple(problems)


def seeded_cases() -> dict[str, SeededCase]:
    """Every release's seeded cases, by name (``release/case``)."""
    return _collected()[0]


def problems() -> tuple[str, ...]:
    """What the releases' test modules lack (each names its module)."""
    return _collected()[1]


@functools.lru_cache(maxsize=None)
def seeded_release(spark, case: str):
    """The seeded release of ``case`` (run once per test session)."""
    import dp_spark

    c = seeded_cases()[case]
    return getattr(dp_spark, c.release)(seeded_input(spark, c.input), **c.parameters, seed=SEED)


def _plain(value):
    """JSON-shaped, floats kept exactly (repr round-trips)."""
    return json.loads(json.dumps(value, default=str))


def nan_to_none(values) -> list:
    """A column's values with NaN as None (as JSON would have them)."""
    return [None if (isinstance(v, float) and math.isnan(v)) else v for v in values]


def released(spark, case: str) -> dict:
    """The seeded release's values, plus what its module pins of its artifacts."""
    c = seeded_cases()[case]
    release = seeded_release(spark, case)
    out = {"values": _plain(release.values)}
    artifacts = getattr(c.module, "seeded_artifacts", None)
    if artifacts is not None:
        out.update(artifacts(release))
    return _plain(out)


# -- regeneration -----------------------------------------------------------

def literal(value, indent: int = 0, width: int = 116) -> str:
    """``value`` (JSON-shaped) as a Python literal: one key per line, lists
    of scalars wrapped, floats by ``repr`` (exact)."""
    pad = " " * (indent + 4)
    one_line = _inline(value)
    if indent + len(one_line) <= width - 16:
        return one_line
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{pad}{k!r}: {literal(v, indent + 4, width)}," for k, v in sorted(value.items())]
        return "{\n" + "\n".join(items) + "\n" + " " * indent + "}"
    if isinstance(value, list):
        if any(isinstance(v, (dict, list)) for v in value):
            return "[\n" + "\n".join(f"{pad}{literal(v, indent + 4, width)}," for v in value) + "\n" + " " * indent + "]"
        lines, line = [], ""
        for text in (repr(v) + "," for v in value):
            if line and len(pad) + len(line) + 1 + len(text) > width:
                lines.append(line)
                line = text
            else:
                line = f"{line} {text}" if line else text
        if line:
            lines.append(line)
        if len(lines) == 1 and indent + len(lines[0]) < width:
            return "[" + lines[0].rstrip(",") + "]"
        return "[\n" + "\n".join(pad + ln for ln in lines) + "\n" + " " * indent + "]"
    return repr(value)


def _inline(value) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_inline(v)}" for k, v in sorted(value.items())) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_inline(v) for v in value) + "]"
    return repr(value)


def rewrite_values(path: Path, values: dict) -> None:
    """Replace the top-level ``SEEDED_VALUES = ...`` of ``path`` by ``values``
    (appended when the module has none)."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    new = f"SEEDED_VALUES = {literal(values)}\n"
    for node in ast.parse(text).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == "SEEDED_VALUES" for t in targets):
            lines[node.lineno - 1:node.end_lineno] = [new]
            break
    else:
        lines.append(("\n\n" if text.endswith("\n") else "\n\n\n") + new)
    path.write_text("".join(lines), encoding="utf-8")


def regenerate(names: list[str]) -> None:
    from dp_spark.releases import RELEASES
    from dp_spark.session import get_session
    from tests.conftest import TEST_CONF

    session = get_session(master="local[2]", conf=TEST_CONF, log_level="ERROR")
    for name in names or list(RELEASES):
        py = RELEASES[name].python_name
        module = _module(py)
        if module is None or not getattr(module, "SEEDED_CASES", None):
            raise SystemExit(f"{module_name(py)} has no SEEDED_CASES to run")
        values = {case: released(session, case) for case in sorted(module.SEEDED_CASES)}
        rewrite_values(Path(module.__file__), values)
        print(f"{module.__file__}: {len(values)} cases pinned")


if __name__ == "__main__":  # regenerate (see the module docstring)
    regenerate(sys.argv[1:])
