"""The HTML report: built from Release fields only (no Spark action while it
renders), self-contained, one chart per release kind, readable in a real
browser (headless Chromium screenshot is not blank), and written by
``dp-spark ... --report-html``."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

from dp_spark.html_report import render, top_k_error_bound, write_html
from dp_spark.releases import RELEASES
from dp_spark.report import _listing

REPO = Path(__file__).resolve().parents[2]


def _gallery():
    spec = importlib.util.spec_from_file_location("report_gallery", REPO / "examples" / "report_gallery.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def releases(spark):
    return _gallery().demo_releases(spark, rows=8_000, seed=3)


@pytest.fixture
def no_spark_actions(monkeypatch, releases):
    """Any Spark action (which could read data) fails while this is active,
    except on continual-distinct's ``series`` artifact: a DataFrame of the
    released rows built on the driver (one per step), which reads no input."""
    from pyspark.sql import DataFrame

    released = {id(r.artifacts["series"]) for r in releases.values() if "series" in r.artifacts}

    def refusing(real):
        def refuse(self, *args, **kwargs):
            if id(self) in released:
                return real(self, *args, **kwargs)
            raise AssertionError("the HTML report ran a Spark action")

        return refuse

    classes = [DataFrame]
    try:  # pyspark >= 4: the DataFrames a session builds are this subclass, which overrides the actions
        from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

        classes.append(ClassicDataFrame)
    except ImportError:
        pass
    for cls in classes:
        for action in ("collect", "count", "toPandas", "take", "head", "first", "toLocalIterator", "show"):
            monkeypatch.setattr(cls, action, refusing(getattr(cls, action)))


def test_the_no_spark_actions_guard_refuses_an_action(spark, no_spark_actions):
    """The guard itself: an action on a session's DataFrame fails while it is on."""
    with pytest.raises(AssertionError, match="ran a Spark action"):
        spark.range(3).collect()
    with pytest.raises(AssertionError, match="ran a Spark action"):
        spark.range(3).count()


def test_the_gallery_covers_every_release(releases):
    assert list(releases) == list(RELEASES)


def _chart_caption(name, release) -> str | None:
    """The caption of the chart the release's spec names, as the page shows it."""
    from html import escape

    from dp_spark import html_report

    made = getattr(html_report, RELEASES[name].chart)(release, None)
    return None if made is None else escape(made[1])


def test_every_release_renders_from_its_fields_only(releases, no_spark_actions):
    for name, release in releases.items():
        page = render(release)
        assert page == render(release)  # a function of the Release alone
        charted = RELEASES[name].chart is not None
        caption = _chart_caption(name, release) if charted else None
        assert not charted or caption, f"{name}: its chart drew nothing for the gallery's release"
        assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == int(charted), name
        assert not charted or f"{caption}</figcaption></figure>" in page, name
        assert release.guarantee.describe() in page and "NOT private" in page, name
        # Self-contained: no script, no stylesheet or image fetched from anywhere.
        assert "<script" not in page and not re.search(r"""(src|href)\s*=""", page), name
        assert "No budget ledger was used" in page


def test_released_values_are_on_the_page(releases, no_spark_actions):
    dc = render(releases["distinct-count"])
    v = releases["distinct-count"].values
    assert f"{v['estimate']:,}" in dc and f"{v['lower_bound']:,}" in dc
    top = render(releases["top-k"])
    for row in releases["top-k"].values["items"]:
        assert f">{row['item']}<" in top
    assert re.search(r"held by at most [\d,.]+</text>", top) and "the same error bound holds at every rank" in top
    counts = render(releases["count-release"])
    assert all(f"{r['count']:,}" in counts for r in releases["count-release"].values["items"][:25])
    su = render(releases["set-union"])
    assert f"{releases['set-union'].values['released_count']:,}" in su


def test_set_union_history_and_ledger_hook(releases, no_spark_actions):
    release = releases["set-union"]
    document = release.to_dict()
    earlier = {**document, "created": "2026-01-01T00:00:00+00:00",
               "result": {**document["result"], "released_count": 4321}}
    page = render(release, history=[earlier], ledger={"budget": "daily", "remaining": {"epsilon": 7.5}})
    assert "2026-01-01T00:00:00+00:00" in page and "4,321" in page and page.count("<rect") >= 2
    assert "Budget ledger after this run" in page and "epsilon: 7.5" in page


def test_release_to_html_and_atomic_write(releases, tmp_path, no_spark_actions):
    release = releases["continual-distinct"]
    assert release.to_html() == render(release)
    target = tmp_path / "sub" / "report.html"
    write_html(target, release)
    assert target.read_text(encoding="utf-8") == render(release)
    assert [p.name for p in target.parent.iterdir()] == ["report.html"]  # no temporary left


def _old_discrete_laplace_half_width(scale: float, beta: float) -> int:
    """The computation html_report made itself before the noise records
    (issue 23), kept here to show the records give the same intervals."""
    import math

    m = scale * math.log(2.0 / (beta * (1.0 + math.exp(-1.0 / scale))))
    return max(0, math.ceil(m) - 1)


def _old_top_k_error_bound(release):
    """html_report's top-k bound before the noise records: recomputed from
    the release's parameters and its last budget step's ε."""
    from dp_spark.mechanisms.top_k.peeling import cdp_peel_epsilon_per_step
    from dp_spark.mechanisms.top_k.unknown_domain import unknown_domain_calibration
    from dp_spark.noise.records import gumbel_gap
    import math

    v, p = release.values, release.parameters
    size = int(p.get("kbar") if v.get("method") == "unknown-domain" else v.get("domain_size"))
    k, eps, delta = int(v["k"]), float(release.budget_split[-1].get("epsilon", p["epsilon"])), float(p.get("delta") or 0)
    if v["method"] in ("joint", "pnf-joint"):
        return 2.0 / eps * (math.lgamma(size + 1) - math.lgamma(size - k + 1) + math.log(1.0 / 0.05))
    if v["method"] == "pnf-peel":
        return k / eps * math.log(size * k / 0.05)
    if v["method"] == "cdp-peel":
        return gumbel_gap(1.0 / cdp_peel_epsilon_per_step(eps, delta, k), size, 0.05)
    return gumbel_gap(1.0 / unknown_domain_calibration(eps, delta, k)[0], size, 0.05)


def test_the_charts_intervals_come_from_the_noise_records_and_equal_the_old_computation(releases):
    import math

    counted = releases["distinct-count"]
    v = counted.values
    record = counted.noise[-1]
    assert record.kind == "discrete-laplace" and record.scale == v["noise_scale"]
    half = record.half_width(1.0 - v["confidence"])
    assert half == _old_discrete_laplace_half_width(v["noise_scale"], 1.0 - v["confidence"])
    assert f"estimate ± {half:,}" in render(counted) or f"estimate ± {half}" in render(counted)
    top = releases["top-k"]
    # the records hold the scales the samplers draw (1/ε rounded up), so the bound
    # may exceed the old one (from 1/ε rounded to nearest) in its last bits only
    assert math.isclose(top_k_error_bound(top), _old_top_k_error_bound(top), rel_tol=1e-15)
    assert top_k_error_bound(top) >= _old_top_k_error_bound(top)


def test_screen_listing_shows_the_ranking():
    head, rows = _listing([{"rank": i + 1, "item": f"w{i}"} for i in range(12)])
    assert head.startswith("12 released") and rows[0].strip() == "1. w0" and len(rows) == 10
    head, rows = _listing([{"item": "a", "count": 1200, "sigma": 3.5}])
    assert head == "1 released" and rows == ["  1. a  1,200 (σ 3.5)"]


def test_cli_writes_the_html_report_and_prints_the_ranking(spark, tmp_path, capsys):
    from dp_spark.cli import main

    domain = tmp_path / "domain.txt"
    domain.write_text("\n".join(f"w{i}" for i in range(50)) + "\n")
    page, report = tmp_path / "top.html", tmp_path / "top.json"
    code = main(["top-k", "--rows", "5000", "--k", "5", "--domain", str(domain), "--seed", "2",
                 "--output", str(report), "--report-html", str(page)])
    out, err = capsys.readouterr()
    assert code == 0, err
    ranking = [line.strip() for line in out.splitlines() if re.match(r"\s+\d\. w\d+$", line)]
    items = [row["item"] for row in json.loads(report.read_text())["result"]["items"]]
    assert ranking == [f"{i + 1}. {item}" for i, item in enumerate(items)]
    assert "entries (see the report)" not in out
    assert page.is_file() and "HTML report written to" in out and all(f">{i}<" in page.read_text() for i in items)


@pytest.fixture(scope="module")
def grouped(spark):
    return _gallery().grouped_demo(spark, rows=8_000, seed=3)


def test_the_grouped_page_draws_small_multiples_from_the_report_rows_only(grouped, no_spark_actions):
    """Issue 24: one panel per group (the largest by released values first,
    at most SMALL_MULTIPLES), each with its error statement; no Spark action
    (the groups come from the report's rows, not release.groups)."""
    from dp_spark.html_report import SMALL_MULTIPLES

    release = grouped["distinct-count-grouped"]
    page = render(release)
    rows = release.values["groups"]
    assert len(rows) == len(_gallery().GROUPED_KEYS) > SMALL_MULTIPLES
    assert page.count('<div class="panel">') == SMALL_MULTIPLES
    shown = re.findall(r'aria-label="([^"]+): estimate with its interval"', page)
    largest = [r["group"] for r in sorted(rows, key=lambda r: -r["estimate"])[:SMALL_MULTIPLES]]
    assert sorted(shown) == sorted(largest)
    assert [next(r["estimate"] for r in rows if r["group"] == g) for g in shown] == \
        sorted((r["estimate"] for r in rows if r["group"] in shown), reverse=True)
    assert page.count("with probability 95%") >= SMALL_MULTIPLES and "NOT private" in page


def test_screenshots_are_not_blank(releases, grouped, tmp_path):
    gallery = _gallery()
    if gallery.chromium() is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install -y chromium; .ci/run installs it)")
    from tests.png_pixels import read_png

    pages = gallery.write_pages({**releases, **grouped}, tmp_path)
    for name, page in pages.items():
        png = tmp_path / f"{name}.png"
        gallery.screenshot(page, png, width=900, height=900)
        width, height, pixels = read_png(png)
        colours = len(set(pixels))
        ink = sum(1 for p in pixels if p != (255, 255, 255)) / len(pixels)
        assert (width, height) == (900, 900), name
        assert colours >= 100 and ink >= 0.05, f"{name}: {colours} colours, {ink:.1%} non-white"


def test_help_groups_the_flags_and_shows_no_empty_defaults(capsys):
    from dp_spark.cli import main

    with pytest.raises(SystemExit):
        main(["top-k", "--help"])
    text = capsys.readouterr().out
    for heading in ("input:", "release:", "output and run:"):
        assert heading in text
    assert "(default: None)" not in text and "--report-html PATH" in text and "--epsilon X" in text


def test_the_grouped_page_shows_every_groups_size_distribution_and_the_largest_of_all(grouped, no_spark_actions):
    """Issue 40: with result["group_sizes"] (every group's released size, summarised in the release)
    the page adds the histogram of all groups and the largest groups of all, not only of the report's
    first rows; no Spark action."""
    import dataclasses

    import numpy as np

    from dp_spark.group_sizes import size_summary

    release = grouped["distinct-count-grouped"]
    keys = [f"g{i:06d}" for i in range(100_000)]  # far more groups than the report's rows
    sizes = np.arange(100_000) % 997
    summary = size_summary(keys, sizes, "estimate")
    page = render(dataclasses.replace(release, values={**release.values, "group_sizes": summary}))
    assert "All 100,000 groups by estimate" in page and "The largest groups of all by estimate" in page
    assert all(f"<td>{r['group']}</td>" in page for r in summary["largest"])
    assert 'aria-label="groups by estimate"' in page or "groups by estimate" in page
    assert "All 100,000 groups" not in render(release)  # nothing without the summary
