"""One self-contained HTML page per release, for a person to read.

``render(release)`` builds the page from the fields of a :class:`~dp_spark.report.Release` only (released
values, error statements, the guarantee and its split, noise records, public parameters): no true
(non-private) value can reach it, because a Release never holds one. Every interval drawn is a noise
record's tail (:meth:`dp_spark.noise.records.NoiseDraw.half_width`); this module computes no noise tail
itself. Charts are inline SVG (:mod:`dp_spark.svg_plots`), one per release kind (:data:`_CHARTS`); the page
loads nothing. ``write_html(path, release)`` writes it atomically.

A grouped release (``result["groups"]``, rows with a ``group`` field) also gets small multiples: one panel
per group of the report's rows (no Spark action from the page), each with its error statement from the noise
records; at most :data:`SMALL_MULTIPLES`, the largest by released values first. With ``result["group_sizes"]``
(:func:`dp_spark.group_sizes.size_summary`: every group's released size, summarised in the release)
the section adds the distribution of all groups' sizes and the largest groups of all, however many keys.
"""

from __future__ import annotations

import math
import os
from html import escape
from typing import Any, Mapping, Sequence

from dp_spark import svg_plots as plots
from dp_spark import io
from dp_spark.marking import HTML_MARKER
from dp_spark.releases import RELEASES
from dp_spark.svg_plots import fmt

#: Rows of a released list shown in tables and charts (the rest is in the JSON report).
MAX_ROWS = 25
#: Small multiples of a grouped release: at most this many groups get a
#: panel (the largest by released values first when there are more).
SMALL_MULTIPLES = 12
#: Rows drawn in one group's panel (a ranking or a list of counts).
PANEL_ROWS = 8

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;color:#1f2933;background:#f5f7fa;margin:0}
main{max-width:820px;margin:0 auto;padding:24px 28px 40px;background:#fff;min-height:100vh}
h1{font-size:24px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #e4e7eb;padding-bottom:4px}
.sub{color:#7b8794;font-size:13px}.statement{background:#eff6ff;border-left:4px solid #2563eb;padding:10px 14px;margin:14px 0}
.warning{background:#fef3c7;border-left:4px solid #d97706;padding:10px 14px;margin:14px 0;font-weight:600}
table{border-collapse:collapse;width:100%;font-size:13px;margin:6px 0}td,th{text-align:left;padding:4px 8px;border-bottom:1px solid #e4e7eb;vertical-align:top;overflow-wrap:anywhere}td.num,table.list th{white-space:nowrap;overflow-wrap:normal}
th{color:#52606d;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}.err{color:#52606d;font-size:12px}
.big{font-size:30px;font-weight:700}.cards{display:flex;gap:14px;flex-wrap:wrap}.card{border:1px solid #e4e7eb;border-radius:8px;padding:10px 14px;min-width:150px}
.card .k{color:#7b8794;font-size:12px}figure{margin:8px 0}figcaption{color:#52606d;font-size:12px}
h3{font-size:14px;margin:16px 0 4px}table.list{width:auto;min-width:50%;max-width:100%}table.values th{width:22%}table.values td{width:28%}
table.kv th{width:22%}
.multiples{display:grid;grid-template-columns:repeat(auto-fill,minmax(250px,1fr));gap:12px}
.panel{border:1px solid #e4e7eb;border-radius:8px;padding:4px}.panel p{margin:2px 8px 6px;color:#52606d;font-size:11px}
"""


def render(release, ledger: Mapping[str, Any] | None = None,
           history: Sequence[Mapping[str, Any]] | None = None) -> str:
    """The HTML page of ``release``. ``ledger``: the budget ledger's balance after this run (default: the
    report's "ledger" key or the Release's "ledger" artifact); ``history``: earlier JSON reports of the same
    release (set-union charts their item counts)."""
    report = release.to_dict()
    if ledger is None:  # the hook for a ledger-aware run: its report key or Release artifact
        ledger = report.get("ledger") or release.artifacts.get("ledger")
    grouped, chart = _group_section(release), _chart(release, history)
    sections = [
        _header(release, report),
        _section("At a glance", chart) if chart or not grouped else "",  # a grouped page: its small multiples
        grouped,
        _section("Released values", _values_table(release) + _released_lists(release) + _errors(release)),
        _section("Privacy spent", _privacy(release, report) + _ledger(ledger)),
        _section("Parameters", _mapping_table(release.parameters)),
    ]
    title = f"dp_spark {release.name} release"

    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">{HTML_MARKER}"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{escape(title)}</title><style>{_CSS}</style></head>"
            f"<body><main>{''.join(sections)}</main></body></html>\n")


def write_html(path: str | os.PathLike, release, ledger=None, history=None) -> None:
    """Write the page to a local ``path`` atomically."""
    io.write_text_atomic(path, render(release, ledger=ledger, history=history))


def _section(title: str, body: str) -> str:
    return f"<section><h2>{escape(title)}</h2>{body}</section>"


def _header(release, report) -> str:
    out = [f"<h1>{escape(release.name)}</h1>",
           f"<div class=\"sub\">dp_spark {escape(release.version)} · created {escape(release.created)} · "
           f"privacy unit: one {escape(release.privacy_unit)} · {escape(release.guarantee.describe())}</div>"]
    if release.seeded:
        out.append(f"<div class=\"warning\">{escape(report.get('warning', 'Seeded run: not private.'))}</div>")
    out.append(f"<div class=\"statement\">{escape(release.statement)}</div>")
    cards = [(k, v) for k, v in release.values.items() if _is_number(v)][:4]
    if cards:
        out.append("<div class=\"cards\">" + "".join(
            f"<div class=\"card\"><div class=\"k\">{escape(k)}</div><div class=\"big\">{escape(fmt(v))}</div></div>"
            for k, v in cards) + "</div>")
    return "".join(out)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value is not None


def _values_table(release) -> str:
    rows = []
    for key, value in release.values.items():
        if _is_list_of_rows(value):
            continue  # a released list: shown as its own table below
        shown = "; ".join(map(str, value)) if isinstance(value, list) else fmt(value)
        error = release.errors.get(key, "")
        rows.append(f"<tr><th>{escape(key)}</th><td>{escape(shown)}</td><td class=\"err\">{escape(error)}</td></tr>")
    return "<table class=\"values\">" + "".join(rows) + "</table>"


def _released_lists(release) -> str:
    out = []
    for key, value in release.values.items():
        if not _is_list_of_rows(value):
            continue
        columns = list(value[0])
        head = "".join(f"<th>{escape(c)}</th>" for c in columns)
        body = "".join("<tr>" + "".join(_cell(r.get(c)) for c in columns) + "</tr>" for r in value[:MAX_ROWS])
        more = (f"<p class=\"sub\">{len(value) - MAX_ROWS:,} more rows in the JSON report.</p>"
                if len(value) > MAX_ROWS else "")
        out.append(f"<h3>{escape(key)} ({len(value):,} released)</h3><table class=\"list\"><tr>{head}</tr>{body}</table>{more}")
    return "".join(out)


def _cell(value) -> str:
    css = ' class="num"' if _is_number(value) else ""
    return f"<td{css}>{escape(fmt(value))}</td>"


def _errors(release) -> str:
    """Error statements of released values not shown in the values table."""
    shown = {k for k, v in release.values.items() if not _is_list_of_rows(v)}
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>"
                   for k, v in release.errors.items() if k not in shown)
    return f"<h3>How wrong the lists may be</h3><table class=\"kv\">{rows}</table>" if rows else ""


def _is_list_of_rows(value) -> bool:
    return isinstance(value, list) and bool(value) and isinstance(value[0], dict)


def _privacy(release, report) -> str:
    spent = [("guarantee", release.guarantee.describe()), ("privacy unit", release.privacy_unit),
             ("neighbouring data sets", release.neighbouring)]
    if release.equivalent is not None:
        spent.append(("(ε, δ) equivalent", release.equivalent.describe()))
    spent.append(("publishable", "no: seeded run" if release.seeded else "yes"))
    table = "<table>" + "".join(f"<tr><th>{escape(k)}</th><td>{escape(str(v))}</td></tr>" for k, v in spent)
    split = "".join(
        f"<tr><td>{escape(str(part.get('step', '')))}</td><td>{escape(_cost_text(part))}</td></tr>"
        for part in release.budget_split)
    return table + "</table><h3>How the budget was split</h3><table><tr><th>step</th><th>spent</th></tr>" \
        + split + "</table>"


def _cost_text(part: Mapping[str, Any]) -> str:
    names = {"epsilon": "ε", "delta": "δ", "rho": "ρ"}
    return ", ".join(f"{names[k]} = {fmt(part[k])}" for k in ("epsilon", "delta", "rho") if k in part)


def _ledger(ledger: Mapping[str, Any] | None) -> str:
    if not ledger:
        return "<p class=\"sub\">No budget ledger was used for this run.</p>"
    return "<h3>Budget ledger after this run</h3>" + _mapping_table(ledger)


def _mapping_table(mapping: Mapping[str, Any]) -> str:
    rows = "".join(f"<tr><th>{escape(str(k))}</th><td>{escape(_plain(v))}</td></tr>" for k, v in mapping.items())
    return f"<table class=\"kv\">{rows}</table>"


def _plain(value) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_plain(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return "; ".join(_plain(v) for v in value)
    return fmt(value)


def _group_rows(release) -> dict:
    """The report's per-group rows by group key, in report order (released values only)."""
    rows = release.values.get("groups")
    if not _is_list_of_rows(rows) or "group" not in rows[0]:
        return {}
    items = release.values.get("items")
    if _is_list_of_rows(items) and "group" in items[0]:
        # top-k, count-release: the per-value rows are in result["items"]; a group without any keeps a panel
        out: dict = {row["group"]: [] for row in rows}
        for item in items:
            out.setdefault(item["group"], []).append(item)
        return out
    out = {}
    for row in rows:
        out.setdefault(row["group"], []).append(row)
    return out


def _group_size(rows: list[dict]) -> float:
    """A group's size by its RELEASED values: the sum of its estimates or counts, else its number of rows."""
    for column in ("estimate", "count", "released_count"):
        values = [r[column] for r in rows if _is_number(r.get(column))]
        if values:
            return float(sum(values))
    return float(len(rows))


def _group_section(release) -> str:
    """Small multiples of a grouped release (module doc); '' when not grouped."""
    groups = _group_rows(release)
    if not groups:
        return ""
    ordered = list(groups.items())
    many = len(ordered) > SMALL_MULTIPLES
    if many:  # the largest first, by released values only (stable: ties keep the report's order)
        ordered = sorted(ordered, key=lambda kv: -_group_size(kv[1]))[:SMALL_MULTIPLES]
    released = release.values.get("groups_released", len(groups))
    by = release.parameters.get("group_by", "group")
    panels = _panels(release, ordered)
    intro = (f"<p class=\"sub\">One chart per {escape(str(by))} group: "
             + (f"the {len(ordered)} largest (by released values) of the {len(groups):,} in the report"
                if many else f"all {len(ordered):,} in the report")
             + (f"; {released:,} groups were released in all (every one in release.groups / --groups-output)"
                if _is_number(released) and released > len(groups) else "")
             + ". Each panel states its own error.</p>")
    return _section("Per group", _sizes(release) + intro + "<div class=\"multiples\">" + "".join(panels) + "</div>")


def _sizes(release) -> str:
    """The distribution of every group's released size and the largest groups of all
    (``result["group_sizes"]``, released values only); '' without it."""
    sizes = release.values.get("group_sizes")
    if not isinstance(sizes, Mapping) or not sizes.get("counts"):
        return ""
    edges, counts, measure = sizes["edges"], sizes["counts"], str(sizes.get("measure", "size"))
    labels = [f"{fmt(a)} to {fmt(b)}" if b - a > 1 else fmt(a) for a, b in zip(edges, edges[1:])]
    chart = plots.bar_plot(labels, [float(c) for c in counts], None, f"groups by {measure}")
    largest = "".join(f"<tr><td>{escape(str(r['group']))}</td><td>{escape(fmt(r['size']))}</td></tr>"
                      for r in sizes.get("largest", []))
    return (f"<p class=\"sub\">All {int(sizes['groups']):,} groups by {escape(measure)} (bins from "
            "released values; ranges include their lower end):</p>" + chart
            + f"<p class=\"sub\">The largest groups of all by {escape(measure)}:</p>"
            + f"<table><tr><th>group</th><th>{escape(measure)}</th></tr>{largest}</table>")


def _panels(release, ordered) -> list[str]:
    confidence = float(release.values.get("confidence", 0.95))
    first = next((rows[0] for _, rows in ordered if rows), {})
    out = []
    if "estimate" in first:
        points = []
        drawn = []
        for key, rows in ordered:
            row = rows[0]
            record = (_group_record(release, row, "discrete-laplace")  # noise="laplace"
                      or _group_record(release, row, "discrete-gaussian"))  # noise="gaussian"
            half = record.half_width(1.0 - confidence) if record is not None else None
            drawn.append((key, row, record, half))
            points += [row["estimate"] - (half or 0), row["estimate"] + (half or 0)]
            if _is_number(row.get("lower_bound")):
                points.append(row["lower_bound"])
        low, high = min(points + [0.0]), max(points + [1.0])
        for key, row, record, half in drawn:
            svg = plots.mini_interval(str(key), row["estimate"], half, row.get("lower_bound"), low, high)
            if record is None:
                text = release.errors.get("groups", "")
            else:
                text = (f"estimate {fmt(row['estimate'])} ± {fmt(half)} with probability {confidence:.0%} "
                        f"({record.kind} noise of scale {fmt(record.scale)}"
                        + (f", at most {fmt(row['bound'])} items per person" if "bound" in row else "")
                        + f"); the true value is at least {fmt(row.get('lower_bound'))} with probability >= "
                        f"{confidence:.0%}")
            out.append(_panel_html(svg, text))
    elif "count" in first:
        high = max([float(r["count"]) for _, rows in ordered for r in rows[:PANEL_ROWS]] + [1.0])
        for key, rows in ordered:
            shown = rows[:PANEL_ROWS]
            records = [_group_record(release, r, "discrete-gaussian") for r in shown]
            whiskers = [r.half_width(0.05) if r is not None else 0.0 for r in records]
            svg = plots.mini_bars(str(key), [str(r.get("item", r.get("step", ""))) for r in shown],
                                  [float(r["count"]) for r in shown], whiskers, high * 1.1)
            known = [r for r in records if r is not None]
            text = (f"whiskers: 95% noise intervals ({known[0].describe()})" if known
                    else release.errors.get("groups", ""))
            out.append(_panel_html(svg, text + _more(rows)))
    else:
        for key, rows in ordered:
            ranked = [r for r in rows if "item" in r]
            items = [str(r["item"]) for r in sorted(ranked, key=lambda r: r.get("rank") or 0)[:PANEL_ROWS]]
            note = None
            if not ranked and rows and _is_number(rows[0].get("released_count")):  # set-union: a number per group
                note = f"{fmt(rows[0]['released_count'])} items released (all in release.groups)"
            out.append(_panel_html(plots.mini_list(str(key), items, note),
                                   release.errors.get("groups") or release.errors.get("items", "") + _more(rows)))
    return out


def _more(rows) -> str:
    return f" ({len(rows) - PANEL_ROWS:,} more rows in the report)" if len(rows) > PANEL_ROWS else ""


def _panel_html(svg: str, text: str) -> str:
    return f"<div class=\"panel\">{svg}<p>{escape(text)}</p></div>"


def _group_record(release, row: Mapping[str, Any], kind: str):
    """The noise record of one group's released value: among the records of ``kind``, the one whose
    parameters match the row's fields (e.g. its ``bound``); the only one if there is one; else None."""
    records = [r for r in release.noise if r.kind == kind]
    matching = [r for r in records if any(k in row for k in r.parameters)
                and all(row.get(k) == v for k, v in r.parameters.items() if k in row)]
    if matching:
        return matching[0]
    return records[0] if len(records) == 1 else None


def _chart(release, history) -> str:
    maker = _CHARTS.get(release.name)
    if maker is None:
        return ""
    made = maker(release, history)
    if made is None:
        return ""
    svg, caption = made
    return f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>"


def _noise_of(release, kind: str) -> list:
    """The release's noise records of ``kind``, in the order drawn."""
    return [r for r in release.noise if r.kind == kind]


def _distinct_count_chart(release, history):
    v = release.values
    counted = _noise_of(release, "discrete-laplace")
    if not _is_number(v.get("estimate")) or not counted:
        return None
    confidence = float(v.get("confidence", 0.95))
    half = counted[-1].half_width(1.0 - confidence)  # the count's draw: the last discrete Laplace one
    svg = plots.interval_plot(
        v["estimate"], v["estimate"] - half, v["estimate"] + half, v.get("lower_bound"),
        f"{confidence:.0%} noise interval: estimate ± {fmt(half)}",
        f"lower bound ({confidence:.0%}):")
    caption = (f"The blue interval holds, with probability {confidence:.0%}, the number of distinct items "
               f"when each person keeps at most {fmt(v.get('bound'))} items (that number never exceeds the "
               f"true count). The true count is at least the orange lower bound with probability "
               f"{confidence:.0%}.")
    return svg, caption


def _top_k_chart(release, history):
    items = [str(r["item"]) for r in release.values.get("items", [])]
    bound = top_k_error_bound(release)
    caption = ("The released items in rank order; no counts are released. "
               + (f"With probability 95% every released i-th item is held by at most {fmt(round(bound, 1))} "
                  "fewer persons than the true i-th most common item: one bound for every rank (the orange "
                  "bracket)."
                  if bound is not None else release.errors.get("items", "")))
    return plots.ranking_plot(items, bound), caption


def top_k_error_bound(release, confidence: float = 0.95) -> float | None:
    """The top-k error bound: the selection's (last) noise record's bound; None without records."""
    if not release.noise:
        return None
    bound = release.noise[-1].half_width(1.0 - confidence)
    return bound if math.isfinite(bound) else None


def _count_release_chart(release, history):
    rows = release.values.get("items") or []
    shown = rows[:MAX_ROWS]
    counted = _noise_of(release, "discrete-gaussian")  # one per released count (pcr), or one for all (bounded)
    if len(counted) == 1:
        counted = counted * len(rows)
    whiskers = [r.half_width(0.05) for r in counted[:len(shown)]] if len(counted) == len(rows) else None
    svg = plots.bar_plot([str(r["item"]) for r in shown], [float(r["count"]) for r in shown],
                         whiskers, "released count ± 95% noise interval" if whiskers else "released count")
    caption = (f"The first {len(shown)} of {len(rows):,} released counts"
               + (", each with a whisker holding its discrete Gaussian noise with probability at least 95% "
                  "(the smallest integer at least Φ⁻¹(0.975)·σ ≈ 1.96σ)." if whiskers else "."))
    return svg, caption


def _continual_chart(release, history):
    series = release.artifacts.get("series")
    if series is not None and hasattr(series, "toPandas"):
        series = series.toPandas()  # one row per step: the horizon, a public size
    if series is None or not hasattr(series, "columns"):
        return None
    keep = plots.thin(len(series))
    picked = series.iloc[keep]
    confidence = release.values.get("confidence", 0.95)
    svg = plots.series_plot([int(s) for s in picked["step"]], [float(e) for e in picked["estimate"]],
                            [float(b) for b in picked["error_bound"]],
                            f"estimate ± error bound ({confidence:.0%}, all steps at once)")
    caption = (f"The released estimate at each of {len(series):,} steps; the band holds the true number of "
               f"present items at every step simultaneously with probability {confidence:.0%}. The lower "
               "panel draws the band's half-width by step (on the upper panel's scale it can be thinner than "
               "the line)"
               + ("; every step is drawn." if len(keep) == len(series)
                  else f"; {len(keep):,} of the {len(series):,} steps are drawn, evenly spaced."))
    return svg, caption


def _set_union_chart(release, history):
    runs = [(str(h.get("created", f"run {i + 1}")), (h.get("result") or {}).get("released_count"))
            for i, h in enumerate(history or []) if h.get("release") == release.name]
    runs.append(("this run", release.values.get("released_count")))
    runs = [(label, n) for label, n in runs if _is_number(n)]
    if not runs:
        return None
    svg = plots.bar_plot([label for label, _ in runs], [float(n) for _, n in runs], None, "items released")
    caption = ("The number of items each set-union run released (the released set's exact size; only the "
               "items' identities are released, never their weights).")
    return svg, caption


#: Release name -> its chart, as each release's spec names it (a missing function fails on import).
_CHARTS = {name: globals()[spec.chart] for name, spec in RELEASES.items() if spec.chart is not None}
