"""The one result type every release returns, and its JSON report.

A reader of the report alone should know what was released, how private it is and how wrong it may be: the
guarantee spent (and its split), the privacy unit and neighbouring relation, the parameters, the released
values with an error statement for each, whether the run was seeded (then not for publication), the library
version and the time. Only released (noisy) values and public parameters ever enter a Release.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any

from dp_spark import __version__
from dp_spark.accounting.costs import cost_from_dict
from dp_spark.errors import InputError
from dp_spark.formatting import fmt
from dp_spark.html_report import render
from dp_spark.io import write_dataframe_atomic
from dp_spark.noise.records import NoiseDraw, noise_from_dicts, noise_to_dicts
from dp_spark.plan import FORMAT_VERSION, privacy_document
from dp_spark.releases import RELEASES

SEEDED_WARNING = (
    "This run used a fixed seed (tests and demos only): its noise is "
    "reproducible, so its output is NOT private and not for publication."
)


def report_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``Release.to_dict()``:
    ``dp_spark/schemas/release.schema.json``, whose ``release`` is any
    well-formed name, narrowed here to the names of the registry."""
    schema = json.loads(files("dp_spark").joinpath("schemas/release.schema.json").read_text(encoding="utf-8"))
    schema["properties"]["release"]["enum"] = list(RELEASES)
    return schema


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def _version() -> str:
    return __version__


@dataclass(frozen=True)
class Release:
    """A differentially private release (frozen): what every ``dp_spark.<release>(df, ...)`` returns.

    ``privacy``: the guarantee spent (with its (ε, δ) equivalent for zCDP) and the privacy unit;
    ``budget_split``: its split between the release's steps; ``statement``: the guarantee and the error in
    words; ``parameters``: the public parameters; ``seeded``: True for a fixed-seed run (NOT private, not
    for publication); ``result`` (also ``values``): the released values, JSON-shaped; ``errors``: one error
    statement per released value, made from ``noise``, the record of every privacy draw
    (:class:`~dp_spark.noise.records.NoiseDraw`: public values only). A ``result`` key named ``noise``
    (set-union's noise kind) is read as ``result["noise"]``. ``artifacts``: outputs too large for the
    report, as Spark DataFrames (``items``, ``series``; :meth:`write`). Every key of ``artifacts`` and
    ``result`` is also an attribute (an artifact first): ``release.estimate``, ``release.items``."""

    name: str
    privacy_unit: str
    neighbouring: str
    guarantee: Any  # an accounting cost: PureDP, ApproxDP or ZCDP
    parameters: dict[str, Any]
    values: dict[str, Any]
    errors: dict[str, str]
    statement: str
    seeded: bool
    budget_split: list[dict[str, Any]] = field(default_factory=list)
    #: One record per privacy draw (or batch of identical draws), in order; ``step``: a ``budget_split`` label.
    noise: tuple[NoiseDraw, ...] = ()
    equivalent: Any = None  # (ε, δ) equivalent of a zCDP guarantee
    artifacts: dict[str, Any] = field(default_factory=dict, repr=False)
    version: str = field(default_factory=_version)
    created: str = field(default_factory=_now)
    #: Set on a release replayed from the ledger's record (run key, budget, step, release time, outputs):
    #: its values are the recorded ones; no data was read and no noise drawn.
    replay: dict[str, Any] | None = None

    def __getattr__(self, name: str) -> Any:
        for holder in ("artifacts", "values"):
            store = self.__dict__.get(holder)
            if store is not None and name in store:
                return store[name]
        if self.__dict__.get("replay") is not None and name in ("items", "series", "groups"):
            raise AttributeError(
                f"{self.__dict__.get('name')} was replayed from the ledger's record (run key "
                f"{self.replay['run_key']!r}), which holds its report, not its {name!r} DataFrame; "
                "read the released values from .result.")
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    @property
    def result(self) -> dict[str, Any]:
        """The released values (the report's ``result``)."""
        return self.values

    @property
    def privacy(self) -> dict[str, Any]:
        """What was spent: the guarantee's kind, amounts and description, the (ε, δ) equivalent of a zCDP
        guarantee, and the privacy unit."""
        return privacy_document(self.guarantee, self.equivalent, self.privacy_unit, self.neighbouring)

    def to_dict(self) -> dict[str, Any]:
        """The versioned JSON report (schema: ``dp_spark/schemas/release.schema.json``)."""
        out: dict[str, Any] = {
            "release": self.name,
            "version": FORMAT_VERSION,
            "library": {"name": "dp_spark", "version": self.version},
            "created": self.created,
            "privacy": self.privacy,
            "parameters": self.parameters,
            "result": self.values,
            "errors": self.errors,
            "budget_split": self.budget_split,
            "noise": noise_to_dicts(self.noise),
            "statement": self.statement,
            "seeded": self.seeded,
            "publishable": not self.seeded,
        }
        if self.seeded:
            out["warning"] = SEEDED_WARNING
        if self.replay is not None:
            out["replay"] = dict(self.replay)
        return out

    @classmethod
    def from_record(cls, record: dict[str, Any], replay: dict[str, Any] | None = None) -> "Release":
        """The Release whose JSON report is ``record`` (as the ledger recorded it), values unchanged;
        ``replay`` says where it was recorded. No ``artifacts`` (DataFrames are not recorded); a record
        without ``noise`` loads with no noise records."""
        privacy = record["privacy"]
        equivalent = privacy.get("approx_dp_equivalent")
        return cls(
            name=record["release"], privacy_unit=privacy["privacy_unit"], neighbouring=privacy["neighbouring"],
            guarantee=cost_from_dict(privacy), parameters=record["parameters"], values=record["result"],
            errors=record["errors"], statement=record["statement"], seeded=record["seeded"],
            budget_split=record["budget_split"], noise=noise_from_dicts(record.get("noise")),
            equivalent=None if equivalent is None else cost_from_dict(equivalent),
            version=record["library"]["version"], created=record["created"], replay=replay,
        )

    def write(self, name: str, path: str, format: str = "parquet", overwrite: bool = False) -> None:
        """Write the artifact ``name`` (``items``, ``series``) to ``path`` (``parquet``, ``csv`` or
        ``json``) atomically, marked not for publication when seeded. An existing ``path`` is refused unless
        ``overwrite``."""
        if name not in self.artifacts:
            raise InputError(f"{self.name} has no artifact {name!r}; it has: {', '.join(self.artifacts) or 'none'}.")
        if os.path.exists(path) and not overwrite:
            raise InputError(f"{path} already exists; pass overwrite=True to replace it.")
        write_dataframe_atomic(self.artifacts[name], path, format, seeded=self.seeded, overwrite=overwrite)

    @classmethod
    def from_plan(cls, plan, *, values: dict[str, Any], errors: dict[str, str], statement: str,
                  seeded: bool, budget_split: list[dict[str, Any]], parameters: dict[str, Any] | None = None,
                  artifacts: dict[str, Any] | None = None, guarantee: Any = None,
                  noise=()) -> "Release":
        """The release of ``plan`` (:class:`dp_spark.plan.Plan`): its name, unit, guarantee and parameters,
        with the released values. ``parameters`` adds released choices (e.g. the shards a noisy count
        chose); ``noise``: the mechanism's records, a record named after a plan step getting that step's
        budget-split label."""
        labels = {s.name: s.label for s in plan.split if s.name is not None}
        return cls(
            name=plan.release, privacy_unit=plan.privacy_unit, neighbouring=plan.neighbouring,
            guarantee=plan.guarantee if guarantee is None else guarantee,
            parameters={**plan.parameters, **(parameters or {})}, values=values, errors=errors,
            statement=statement, seeded=seeded, budget_split=budget_split, equivalent=plan.equivalent,
            noise=tuple(r.at(labels[r.step]) if r.step in labels else r for r in noise),
            artifacts=dict(artifacts or {}),
        )

    def to_json(self, indent: int = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    def to_html(self, ledger: dict[str, Any] | None = None, history: list[dict] | None = None) -> str:
        """One self-contained HTML page (:mod:`dp_spark.html_report`) of released quantities only.
        ``ledger``: the budget ledger's balance when the run spent from one."""
        return render(self, ledger=ledger, history=history)

    def summary(self) -> str:
        """A short human-readable summary (what the CLI prints)."""
        lines = [f"{self.name}: {self.guarantee.describe()}, unit: one {self.privacy_unit}"]
        width = max((len(k) for k in self.values), default=0)
        for key, value in self.values.items():
            shown = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else value
            if isinstance(value, float):
                shown = fmt(value)
            listed: list[str] = []
            if isinstance(value, (list, dict)):
                shown, listed = _listing(value)
            lines.append(f"  {key:<{width}}  {shown}")
            lines.extend(f"  {'':<{width}}    {row}" for row in listed)
            if key in self.errors:
                lines.append(f"  {'':<{width}}    {self.errors[key]}")
        lines.append(self.statement)
        if self.seeded:
            lines.append("WARNING: " + SEEDED_WARNING)
        if self.replay is not None:
            lines.append(f"Replayed unchanged from the ledger (run key {self.replay['run_key']!r}, released "
                         f"{self.replay['released']}): no data read, no new noise.")
        return "\n".join(lines)


def _scalar(value) -> str:
    if isinstance(value, float):
        return fmt(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


#: Rows of a released list printed on screen (the rest is in the report).
SCREEN_ROWS = 10


def _listing(value) -> tuple[str, list[str]]:
    """A released list as a head line and up to SCREEN_ROWS rows: a ranking as "1. item", counts as "item
    count (σ s)", strings as they are."""
    if not value:
        return "none", []
    if isinstance(value, dict):
        if len(value) <= SCREEN_ROWS and all(isinstance(v, (int, float, str, bool)) or v is None
                                             for v in value.values()):
            return ", ".join(f"{k}: {_scalar(v)}" for k, v in value.items()), []
        return f"{len(value)} entries (see the report)", []
    rows = []
    for i, entry in enumerate(value[:SCREEN_ROWS]):
        if isinstance(entry, dict) and "count" in entry:
            rank = entry.get("rank", i + 1)
            rows.append(f"{rank:>3}. {entry.get('item')}  {entry['count']:,} (σ {entry.get('sigma', 0):.3g})")
        elif isinstance(entry, dict) and "item" in entry:
            rows.append(f"{entry.get('rank', i + 1):>3}. {entry['item']}")
        else:
            rows.append(str(entry))
    more = len(value) - len(rows)
    head = f"{len(value):,} released" + (f", first {len(rows)} shown (all in the JSON report)" if more else "")
    return head, rows
