"""The one result type every release returns, and its JSON report.

A reader of the report alone should know what was released, how private it
is and how wrong it may be: the guarantee spent (and how it was split), the
privacy unit and neighbouring relation, the parameters, the released values
with an error statement for each, whether the run was seeded (then it is not
for publication), the library version and the time. Only released (noisy)
values and public parameters ever enter a Release.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from typing import Any

SEEDED_WARNING = (
    "This run used a fixed seed (tests and demos only): its noise is "
    "reproducible, so its output is NOT private and not for publication."
)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def _version() -> str:
    from dp_spark import __version__

    return __version__


@dataclass
class Release:
    """A differentially private release.

    ``values`` holds the released values (JSON-serialisable); ``errors`` one
    error statement per released value; ``artifacts`` outputs too large or not
    JSON-shaped (a Spark DataFrame of released items, a time series), which
    are reachable as attributes but not part of ``to_dict()``. Every key of
    ``values`` and ``artifacts`` is also an attribute: ``release.estimate``.
    """

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
    equivalent: Any = None  # (ε, δ) equivalent of a zCDP guarantee
    artifacts: dict[str, Any] = field(default_factory=dict, repr=False)
    version: str = field(default_factory=_version)
    created: str = field(default_factory=_now)

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails.
        for holder in ("values", "artifacts"):
            store = self.__dict__.get(holder)
            if store is not None and name in store:
                return store[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def to_dict(self) -> dict[str, Any]:
        spent = self.guarantee.to_dict()
        out: dict[str, Any] = {"release": self.name, **self.values}
        if "rho" in spent:
            # Top-level epsilon and delta are always one (ε, δ) pair: for a
            # zCDP guarantee, its (ε, δ) equivalent; the zCDP δ is kept apart.
            out["rho"] = spent["rho"]
            out["zcdp_delta"] = spent.get("delta", 0.0)
            approx = self.equivalent.to_dict() if self.equivalent is not None else {}
            out["epsilon"] = approx.get("epsilon")
            out["delta"] = approx.get("delta")
        else:
            out["epsilon"] = spent.get("epsilon")
            out["delta"] = spent.get("delta", 0.0)
        out.update(
            {
                "guarantee": {
                    **spent,
                    "description": self.guarantee.describe(),
                    **({"approx_dp_equivalent": self.equivalent.to_dict()} if self.equivalent else {}),
                },
                "privacy_unit": self.privacy_unit,
                "neighbouring": self.neighbouring,
                "budget_split": self.budget_split,
                "errors": self.errors,
                "statement": self.statement,
                "parameters": self.parameters,
                "seeded": self.seeded,
                "publishable": not self.seeded,
                "version": self.version,
                "created": self.created,
            }
        )
        if self.seeded:
            out["warning"] = SEEDED_WARNING
        return out

    def to_json(self, indent: int = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    def to_html(self, ledger: dict[str, Any] | None = None, history: list[dict] | None = None) -> str:
        """One self-contained HTML page for a person to read (see
        :mod:`dp_spark.html_report`): released values, privacy spent, the
        error statements and charts of released quantities only. ``ledger``:
        the budget ledger's balance when the run spent from one."""
        from dp_spark.html_report import render

        return render(self, ledger=ledger, history=history)

    def summary(self) -> str:
        """A short human-readable summary (what the CLI prints)."""
        lines = [f"{self.name}: {self.guarantee.describe()}, unit: one {self.privacy_unit}"]
        width = max((len(k) for k in self.values), default=0)
        for key, value in self.values.items():
            shown = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else value
            if isinstance(value, float):
                shown = f"{value:,.4g}"
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
        return "\n".join(lines)


def _scalar(value) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


#: Rows of a released list printed on screen (the rest is in the report).
SCREEN_ROWS = 10


def _listing(value) -> tuple[str, list[str]]:
    """A released list as a head line and up to SCREEN_ROWS rows: a top-k
    ranking as "1. item", counts as "item  count (σ s)", strings as they are."""
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
    head = f"{len(value):,} released" + (f", first {len(rows)} shown (all in the report)" if more else "")
    return head, rows
