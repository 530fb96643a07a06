"""Small inline SVG charts for the HTML report (no plotting dependency). Every function takes released
(noisy) values and public parameters only and returns one ``<svg>`` element as a string; nothing here reads
data.
"""

from __future__ import annotations

import math
from html import escape
from typing import Sequence

from dp_spark.formatting import fmt

WIDTH = 760
INK = "#1f2933"
MUTED = "#7b8794"
ACCENT = "#2563eb"
BAND = "#bfdbfe"
WARN = "#d97706"
GRID = "#e4e7eb"


def ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values covering [low, high]."""
    span = high - low
    if not span > 0:
        span = abs(high) or 1.0
    step = 10 ** math.floor(math.log10(span / count))
    for factor in (1, 2, 5, 10):
        if span / (step * factor) <= count:
            step *= factor
            break
    start = math.ceil(low / step) * step
    return [start + i * step for i in range(int((high - start) / step + 1e-9) + 1)]


class _Scale:
    """Linear map from data [low, high] to pixels [a, b]."""

    def __init__(self, low: float, high: float, a: float, b: float):
        if not high > low:
            pad = abs(low) * 0.1 or 1.0
            low, high = low - pad, high + pad
        self.low, self.high, self.a, self.b = low, high, a, b

    def __call__(self, x: float) -> float:
        return self.a + (x - self.low) / (self.high - self.low) * (self.b - self.a)


def _svg(height: int, body: list[str], title: str, width: int = WIDTH, font_size: int = 12) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}" '
        f'font-family="system-ui, sans-serif" font-size="{font_size}">'
        f"<title>{escape(title)}</title>{''.join(body)}</svg>"
    )


def _text(x, y, text, anchor="start", color=INK, size=12, weight="normal") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" fill="{color}" '
            f'font-size="{size}" font-weight="{weight}">{escape(str(text))}</text>')


def _line(x1, y1, x2, y2, color=INK, width=1.0, dash=None) -> str:
    extra = f' stroke-dasharray="{dash}"' if dash else ""
    return (f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
            f'stroke="{color}" stroke-width="{width}"{extra}/>')


def _rect(x, y, w, h, color, opacity=1.0) -> str:
    return (f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0.0):.1f}" height="{max(h, 0.0):.1f}" '
            f'fill="{color}" fill-opacity="{opacity}"/>')


def _x_axis(scale: _Scale, y: float, low: float, high: float) -> list[str]:
    out = [_line(scale.a, y, scale.b, y, MUTED)]
    for t in ticks(low, high):
        x = scale(t)
        out += [_line(x, y, x, y + 4, MUTED), _text(x, y + 16, fmt(t), "middle", MUTED)]
    return out


def interval_plot(estimate: float, low: float, high: float, lower_bound: float | None,
                  interval_label: str, bound_label: str) -> str:
    """A number line: the estimate, its interval [low, high], and a one-sided lower bound (an arrow)."""
    points = [estimate, low, high] + ([lower_bound] if lower_bound is not None else [])
    lo, hi = min(points), max(points)
    pad = (hi - lo) * 0.08 or abs(hi) * 0.05 or 1.0
    lo, hi = lo - pad, hi + pad
    scale = _Scale(lo, hi, 40, WIDTH - 40)
    body = _x_axis(scale, 130, lo, hi)
    y = 50
    body += [_rect(scale(low), y - 9, scale(high) - scale(low), 18, BAND),
             _line(scale(low), y - 12, scale(low), y + 12, ACCENT, 2),
             _line(scale(high), y - 12, scale(high), y + 12, ACCENT, 2),
             f'<circle cx="{scale(estimate):.1f}" cy="{y}" r="6" fill="{ACCENT}"/>',
             _text(scale(estimate), y - 18, f"estimate {fmt(estimate)}", "middle", INK, 13, "bold"),
             _text(WIDTH / 2, y + 30, interval_label, "middle", MUTED)]
    if lower_bound is not None:
        x = scale(lower_bound)
        body += [_line(x, 90, x, 110, WARN, 2), _line(x, 100, WIDTH - 42, 100, WARN, 2, "5,4"),
                 f'<path d="M{WIDTH - 42},95 L{WIDTH - 34},100 L{WIDTH - 42},105 Z" fill="{WARN}"/>',
                 _text(x + 6, 94, f"{bound_label} {fmt(lower_bound)}", "start", WARN)]
    return _svg(150, body, "estimate with its interval")


def ranking_plot(items: Sequence[str], error_bound: float | None) -> str:
    """The released ranking, rank 1 on top. The error bound is one number for every rank, so it is drawn
    once, as a bracket beside the list (equal bars per rank would look like equal counts)."""
    rows = len(items)
    height = 40 + 26 * max(rows, 1)
    body = [_text(20, 22, "rank", "start", MUTED), _text(70, 22, "released item", "start", MUTED)]
    for i, item in enumerate(items):
        y = 40 + 26 * i
        shade = 1.0 - 0.5 * i / max(rows, 1)
        body += [_rect(16, y, 40, 20, ACCENT, shade), _text(36, y + 14, i + 1, "middle", "#ffffff", 12, "bold"),
                 _text(70, y + 14, _clip(str(item), 38))]
    if items and error_bound is not None and math.isfinite(error_bound):
        top, bottom, x = 40, 40 + 26 * (rows - 1) + 20, 360
        body += [_line(x, top, x, bottom, WARN, 2), _line(x, top, x - 8, top, WARN, 2),
                 _line(x, bottom, x - 8, bottom, WARN, 2)]
        middle = (top + bottom) / 2
        lines = ["the same error bound holds at every rank:",
                 f"each released item is held by at most {fmt(round(error_bound, 1))}",
                 "fewer persons than the true item of its rank"]
        for n, line in enumerate(lines):
            body.append(_text(x + 14, middle - 12 + 16 * n, line, "start", WARN if n == 1 else MUTED,
                              13 if n == 1 else 12, "bold" if n == 1 else "normal"))
    if not items:
        body.append(_text(70, 54, "no item was released", "start", MUTED))
    return _svg(height, body, "released top-k ranking")


def _clip(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, cut in the middle (long names often differ at the end)."""
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    return text[:head] + "…" + text[len(text) - (limit - 1 - head):]


def bar_plot(labels: Sequence[str], values: Sequence[float], errors: Sequence[float] | None,
             value_label: str) -> str:
    """Horizontal bars (one per label) with optional ± error whiskers."""
    rows = len(labels)
    height = 50 + 22 * max(rows, 1)
    errs = list(errors) if errors is not None else [0.0] * rows
    hi = max([v + e for v, e in zip(values, errs)] + [1.0])
    lo = min([0.0] + [v - e for v, e in zip(values, errs)])
    scale = _Scale(lo, hi * 1.05, 220, WIDTH - 70)
    body = [_text(220, 16, value_label, "start", MUTED)]
    for i, (label, value, err) in enumerate(zip(labels, values, errs)):
        y = 26 + 22 * i
        body += [_text(212, y + 13, _clip(str(label), 30), "end"),
                 _rect(scale(0), y + 2, scale(value) - scale(0), 14, ACCENT, 0.85),
                 _text(scale(value + err) + 4, y + 13, fmt(value), "start", MUTED, 11)]
        if err > 0:
            body += [_line(scale(value - err), y + 9, scale(value + err), y + 9, INK, 1.5),
                     _line(scale(value - err), y + 4, scale(value - err), y + 14, INK, 1.5),
                     _line(scale(value + err), y + 4, scale(value + err), y + 14, INK, 1.5)]
    body += _x_axis(scale, 30 + 22 * max(rows, 1), lo, hi * 1.05)
    return _svg(height + 10, body, value_label)


def series_plot(steps: Sequence[int], estimates: Sequence[float], bands: Sequence[float],
                band_label: str) -> str:
    """A released series with a ± band, and beneath it the band's half-width per step on its own axis from 0
    (on the series' scale a narrow band would be thinner than the line). Infinite widths (no bound at a
    step) are left out."""
    if not steps:
        return _svg(60, [_text(40, 34, "no step was released yet", "start", MUTED)], "released series")
    finite = [(s, e, b) for s, e, b in zip(steps, estimates, bands) if math.isfinite(b)]
    ys = [e for e in estimates] + [e + b for _, e, b in finite] + [e - b for _, e, b in finite]
    x = _Scale(min(steps), max(steps), 60, WIDTH - 20)
    y = _Scale(min(ys), max(ys), 250, 20)
    body = [_line(60, y(t), WIDTH - 20, y(t), GRID) for t in ticks(y.low, y.high)]
    body += [_text(54, y(t) + 4, fmt(t), "end", MUTED) for t in ticks(y.low, y.high)]
    if finite:
        upper = " ".join(f"{x(s):.1f},{y(e + b):.1f}" for s, e, b in finite)
        lower = " ".join(f"{x(s):.1f},{y(e - b):.1f}" for s, e, b in reversed(finite))
        body.append(f'<polygon points="{upper} {lower}" fill="{BAND}" fill-opacity="0.8" stroke="{BAND}"/>')
    line = " ".join(f"{x(s):.1f},{y(e):.1f}" for s, e in zip(steps, estimates))
    body.append(f'<polyline points="{line}" fill="none" stroke="{ACCENT}" stroke-width="1.6"/>')
    body += _x_axis(x, 260, x.low, x.high)
    body += [_text(WIDTH / 2, 292, "step", "middle", MUTED),
             _rect(70, 8, 14, 10, BAND), _text(90, 17, band_label, "start", MUTED)]
    if not finite:
        return _svg(300, body, "released series with its error band")
    # The band's half-width by step, on its own axis from 0.
    top, base = 330, 420
    width_max = max(b for _, _, b in finite)
    w = _Scale(0.0, width_max * 1.1 or 1.0, base, top)
    body += [_text(60, top - 10, "half-width of the band (± around the estimate), by step", "start", MUTED)]
    body += [_line(60, w(t), WIDTH - 20, w(t), GRID) for t in ticks(0.0, w.high, 3)]
    body += [_text(54, w(t) + 4, fmt(t), "end", MUTED) for t in ticks(0.0, w.high, 3)]
    area = " ".join(f"{x(s):.1f},{w(b):.1f}" for s, _, b in finite)
    body.append(f'<polygon points="{x(finite[0][0]):.1f},{base} {area} {x(finite[-1][0]):.1f},{base}" '
                f'fill="{BAND}" stroke="{ACCENT}" stroke-width="1"/>')
    body.append(_line(60, base, WIDTH - 20, base, MUTED))
    return _svg(430, body, "released series with its error band")


def thin(n: int, limit: int = 4096) -> list[int]:
    """Indices 0..n-1 up to ``limit`` of them; beyond, ``limit`` evenly spaced ones (first and last kept)."""
    if n <= limit:
        return list(range(n))
    step = (n - 1) / (limit - 1)  # > 1, so the rounded indices are distinct
    return [int(round(i * step)) for i in range(limit)]


#: Size of one small multiple (a panel per group of a grouped release).
PANEL_WIDTH = 250


def _panel(height: int, body: list[str], title: str) -> str:
    return _svg(height, body, title, PANEL_WIDTH, 11)


def mini_interval(title: str, estimate: float, half: float | None, lower_bound: float | None, low: float,
                  high: float) -> str:
    """One group's released estimate on an axis [low, high] shared by every panel, with its ± ``half`` noise
    interval and lower bound (a tick)."""
    scale = _Scale(low, high, 12, PANEL_WIDTH - 12)
    body = [_text(12, 16, _clip(title, 34), "start", INK, 12, "bold"),
            _text(PANEL_WIDTH - 12, 16, fmt(estimate), "end", ACCENT, 12, "bold"),
            _line(scale.a, 58, scale.b, 58, MUTED)]
    body += [_text(scale.a, 72, fmt(low), "start", MUTED, 10), _text(scale.b, 72, fmt(high), "end", MUTED, 10)]
    y = 38
    if half is not None and math.isfinite(half):
        body += [_rect(scale(estimate - half), y - 7, scale(estimate + half) - scale(estimate - half), 14, BAND),
                 _line(scale(estimate - half), y - 9, scale(estimate - half), y + 9, ACCENT, 1.5),
                 _line(scale(estimate + half), y - 9, scale(estimate + half), y + 9, ACCENT, 1.5)]
    body.append(f'<circle cx="{scale(estimate):.1f}" cy="{y}" r="4.5" fill="{ACCENT}"/>')
    if lower_bound is not None:
        x = scale(lower_bound)
        body += [_line(x, 50, x, 58, WARN, 2), _line(x, 54, scale.b, 54, WARN, 1.5, "4,3")]
    return _panel(80, body, f"{title}: estimate with its interval")


def mini_bars(title: str, labels: Sequence[str], values: Sequence[float], errors: Sequence[float] | None,
              high: float) -> str:
    """One group's released values as small bars on a shared scale [0, high], with optional ± whiskers."""
    rows = len(labels)
    errs = list(errors) if errors is not None else [0.0] * rows
    scale = _Scale(0.0, high or 1.0, 96, PANEL_WIDTH - 36)
    body = [_text(12, 16, _clip(title, 34), "start", INK, 12, "bold")]
    for i, (label, value, err) in enumerate(zip(labels, values, errs)):
        y = 24 + 16 * i
        body += [_text(90, y + 10, _clip(str(label), 14), "end", INK, 10),
                 _rect(scale(0), y + 2, scale(max(value, 0.0)) - scale(0), 10, ACCENT, 0.85),
                 _text(scale(max(value, 0.0) + err) + 3, y + 10, fmt(value), "start", MUTED, 9)]
        if err > 0:
            body.append(_line(scale(max(value - err, 0.0)), y + 7, scale(value + err), y + 7, INK, 1.2))
    if not labels:
        body.append(_text(12, 36, "nothing released in this group", "start", MUTED, 10))
    return _panel(30 + 16 * max(rows, 1), body, f"{title}: released values")


def mini_list(title: str, items: Sequence[str], note: str | None = None) -> str:
    """One group's released items in released order; ``note``: a line of text instead (e.g. a set-union
    group's number of released items)."""
    body = [_text(12, 16, _clip(title, 34), "start", INK, 12, "bold")]
    if note is not None:
        body.append(_text(12, 36, _clip(note, 40), "start", INK, 10))
        return _panel(46, body, f"{title}: {note}")
    for i, item in enumerate(items):
        y = 24 + 16 * i
        body += [_rect(12, y + 1, 18, 12, ACCENT, 1.0 - 0.5 * i / max(len(items), 1)),
                 _text(21, y + 11, i + 1, "middle", "#ffffff", 9, "bold"), _text(36, y + 11, _clip(str(item), 30),
                                                                                 "start", INK, 10)]
    if not items:
        body.append(_text(12, 36, "nothing released in this group", "start", MUTED, 10))
    return _panel(30 + 16 * max(len(items), 1), body, f"{title}: released items")
