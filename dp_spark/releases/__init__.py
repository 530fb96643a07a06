"""One module per release: glue a Spark stage's summary to a mechanism and
return a :class:`dp_spark.report.Release`. The only layer that knows both.

:data:`RELEASES` is the one list of the releases: release name (as the
command line says it) -> its :class:`ReleaseSpec`. Everything that lists the
releases reads it: the lazy exports of :mod:`dp_spark`
(``dp_spark.distinct_count``, ...), the ``dp-spark`` subcommands
(:data:`dp_spark.commands.COMMANDS`), ``jobs/release.py``, the HTML
report's charts, the report schema's ``release`` names and the tests' case
tables (``tests/unit/test_registry.py`` checks that each agrees).

A release named ``x-y`` lives in files named by its Python name ``x_y``:
``dp_spark/releases/x_y.py`` (the function ``x_y(df, *, ...)``, which builds
the plan and calls ``run(plan, df, ...)``: the release's body run through
the one flow of :mod:`dp_spark.releases.template`) and
``dp_spark/plans/x_y.py`` (``Params`` and ``plan(...)``). Its subcommand is
built from this spec and its ``Params`` unless it has hooks of its own
(``dp_spark/commands/x_y.py``). The spec resolves them on first use, so
importing this module (and so ``import dp_spark``) imports neither pyspark
nor any release.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping


@dataclass(frozen=True)
class Example:
    """A small seeded demo of a release: what every table that runs each
    release (the API-shape, no-leak and bad-input tests, the report
    gallery, the Airflow DAG's budget choice) reads, so a new release adds
    one line here instead of an entry in each. ``input``: the demo table it
    reads, ``"persons"`` (person_id, item) or ``"events"`` (time, item, op);
    ``parameters``: its Python keywords (privacy parameter and ``method``
    included; no ``seed``, no budget), which are also its CLI flags."""

    input: str
    parameters: Mapping[str, Any]

    def __init__(self, input: str, **parameters: Any):
        if input not in ("persons", "events"):
            raise ValueError(f"an example reads 'persons' or 'events', not {input!r}")
        object.__setattr__(self, "input", input)
        object.__setattr__(self, "parameters", MappingProxyType(dict(parameters)))

    @property
    def zcdp(self) -> bool:
        """Whether the release is charged in ρ-zCDP (its privacy parameter is ``rho``)."""
        return "rho" in self.parameters

    def argv(self) -> list[str]:
        """The parameters as ``dp-spark`` flags (``--max-bound 4``)."""
        out: list[str] = []
        for name, value in self.parameters.items():
            out += [f"--{name.replace('_', '-')}", str(value)]
        return out


@dataclass(frozen=True)
class ReleaseSpec:
    """What the rest of dp_spark knows about one release."""

    #: The release's name as the command line, the JSON report and the
    #: ledger say it, e.g. ``"distinct-count"``.
    name: str
    #: Whose data one unit of privacy protects (``Release.privacy_unit``).
    privacy_unit: str
    #: The HTML report's chart: the name of a function
    #: ``(release, history) -> (svg, caption) | None`` in
    #: :mod:`dp_spark.html_report`, or None for a release drawn without a
    #: chart (a decision written here, never an omission elsewhere).
    chart: str | None
    #: Its small seeded demo (:class:`Example`), run by every table of the
    #: tests and examples that runs each release.
    example: Example
    #: One line saying what it releases (``dp-spark --help``).
    help: str | None = None
    #: The Spark DataFrames it returns beside its report
    #: (``Release.artifacts``; the CLI writes ``items`` with
    #: ``--items-output``, ``series`` with ``--series``).
    artifacts: tuple[str, ...] = ()

    @property
    def python_name(self) -> str:
        """The Python name: the function ``dp_spark.<python_name>`` and its
        module, plan, command and job file names (``distinct_count``)."""
        return self.name.replace("-", "_")

    @property
    def module(self) -> str:
        """The module holding the release function."""
        return f"dp_spark.releases.{self.python_name}"

    @property
    def function(self):
        """The release function ``dp_spark.releases.<python_name>.<python_name>``
        (imports it, and so pyspark, on first use)."""
        return getattr(importlib.import_module(self.module), self.python_name)

    @property
    def plan_function(self):
        """The plan builder ``dp_spark.plans.<python_name>.plan`` (no pyspark)."""
        return importlib.import_module(f"dp_spark.plans.{self.python_name}").plan

    @property
    def params(self) -> type:
        """Its typed parameters ``dp_spark.plans.<python_name>.Params`` (no pyspark)."""
        return importlib.import_module(f"dp_spark.plans.{self.python_name}").Params

    def run(self, plan, df, **keywords: Any):
        """Run the release on a plan already built (``spec.plan(...)``; the
        CLI builds it once, for its dry run and budget check):
        ``dp_spark.releases.<python_name>.run(plan, df, budget=..., ...)``,
        the one release flow of :mod:`dp_spark.releases.template`."""
        if plan.release != self.name:
            raise ValueError(f"a plan of {plan.release!r} cannot run the release {self.name!r}")
        return importlib.import_module(self.module).run(plan, df, **keywords)

    def plan(self, **parameters: Any):
        """The release's frozen :class:`~dp_spark.plan.Plan` from its parameters (no Spark)."""
        return self.plan_function(**parameters)

    # The parameters each call takes, by name (the CLI flags, YAML keys and
    # Python parameters are the same names). Read from the functions'
    # signatures today; typed parameters can back these two alone.

    def release_parameters(self) -> tuple[str, ...]:
        """The keyword parameters of the release function (not ``df``)."""
        return _keywords(self.function, skip=("df",))

    def plan_parameters(self) -> tuple[str, ...]:
        """The keyword parameters of the plan builder."""
        return _keywords(self.plan_function)


def _keywords(function, skip=()) -> tuple[str, ...]:
    return tuple(n for n in inspect.signature(function).parameters if n not in skip)


def _registry(*specs: ReleaseSpec) -> Mapping[str, ReleaseSpec]:
    registry = {spec.name: spec for spec in specs}
    if len(registry) != len(specs):
        raise ValueError("two releases share a name")
    return MappingProxyType(registry)


#: Every release, in the order the command line, README and report list them.
RELEASES: Mapping[str, ReleaseSpec] = _registry(
    ReleaseSpec("distinct-count", privacy_unit="person", chart="_distinct_count_chart",
                example=Example("persons", epsilon=1.0, method="greedy", max_bound=4),
                help="differentially private count of distinct items, with a lower bound"),
    ReleaseSpec("top-k", privacy_unit="person", chart="_top_k_chart", artifacts=("items",),
                example=Example("persons", epsilon=1.0, delta=1e-6, k=3, method="auto"),
                help="differentially private top-k items by number of distinct persons"),
    ReleaseSpec("count-release", privacy_unit="person", chart="_count_release_chart", artifacts=("items",),
                example=Example("persons", rho=0.5, delta=1e-6, method="pcr", kbar=20),
                help="differentially private item counts near a target relative error (Private Count Release)"),
    ReleaseSpec("set-union", privacy_unit="person", chart="_set_union_chart", artifacts=("items",),
                example=Example("persons", epsilon=1.0, delta=1e-6, method="policy-gaussian", max_items=4),
                help="differentially private set union: release as many items as possible (partition selection)"),
    ReleaseSpec("continual-distinct", privacy_unit="item", chart="_continual_chart", artifacts=("series",),
                example=Example("events", rho=0.5, horizon=64, method="auto"),
                help="differentially private number of present items at every step of an insert/delete stream"),
)
