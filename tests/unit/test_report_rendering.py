"""What the report shows a person (issue 22, "What a newcomer stumbles on"):
numbers without scientific notation, the top-k error bound drawn once (not
as equal bars, which read as equal counts), a continual chart that draws
every step it says it draws and makes its error band visible, long item
names that neither overflow nor become indistinguishable. No Spark."""

from __future__ import annotations

import re

import pytest

from dp_spark import svg_plots as plots
from dp_spark.formatting import fmt
from dp_spark.plans.distinct_count import plan as distinct_count_plan
from dp_spark.report import Release


@pytest.mark.parametrize("value, shown", [
    (15244.0, "15,244"), (15243.7, "15,244"), (1524.4, "1,524"), (49.8, "49.8"), (7.55, "7.55"),
    (0.12345, "0.1235"), (3.0, "3"), (1e-6, "1e-06"), (2.5e7, "25,000,000"), (12, "12"),
])
def test_numbers_are_shown_without_scientific_notation_where_a_person_counts(value, shown):
    assert fmt(value) == shown


def test_the_cli_summary_prints_a_large_estimate_in_full():
    plan = distinct_count_plan(epsilon=1.0)
    release = Release.from_plan(plan, values={"final_estimate": 15243.7, "noise_std": 7.55}, errors={},
                                statement="s", seeded=False, budget_split=plan.budget_split())
    summary = release.summary()
    assert "15,244" in summary and "e+" not in summary


def test_the_top_k_error_bound_is_drawn_once_not_as_one_bar_per_rank():
    svg = plots.ranking_plot([f"w{i}" for i in range(10)], 112.2)
    warn_lines = re.findall(rf'<line [^>]*stroke="{plots.WARN}"', svg)
    assert len(warn_lines) == 3  # one bracket: its spine and two ends (was 3 per rank)
    assert "112.2" in svg and "every rank" in svg
    assert len(re.findall(rf'<line [^>]*stroke="{plots.WARN}"', plots.ranking_plot(["a"], None))) == 0


@pytest.mark.parametrize("n, limit", [(1024, 4096), (1024, 800), (10**6, 4096), (4097, 4096)])
def test_thinning_draws_exactly_what_the_caption_counts(n, limit):
    kept = plots.thin(n, limit)
    assert len(kept) == min(n, limit) == len(set(kept))  # was 799 of 1,024 for limit 800
    assert kept[0] == 0 and kept[-1] == n - 1 and kept == sorted(kept)


def test_the_default_continual_horizon_is_drawn_whole():
    assert plots.thin(1024) == list(range(1024))


def test_the_series_chart_draws_the_band_width_on_its_own_axis():
    steps = list(range(1, 1025))
    estimates = [10_000.0 + 5 * s for s in steps]
    bands = [40.0 + (s % 16) for s in steps]
    svg = plots.series_plot(steps, estimates, bands, "band")
    assert svg.count("<polygon") == 2 and "half-width of the band" in svg
    # the lower panel's scale runs from 0 to about the largest width, so the band is tall there
    points = re.findall(r'<polygon points="([^"]*)"', svg)[1].split()
    ys = [float(p.split(",")[1]) for p in points]
    assert max(ys) - min(ys) > 60  # the widths fill the lower panel (on the upper one: about 2 px)
    only_infinite = plots.series_plot([1, 2], [5.0, 6.0], [float("inf")] * 2, "band")
    assert only_infinite.count("<polygon") == 0


def test_long_labels_keep_their_distinct_ends():
    names = [("an-item-name-that-goes-on-and-on-without-any-space-" * 3) + str(i) for i in range(3)]
    clipped = [plots._clip(n, 30) for n in names]
    assert len(set(clipped)) == 3 and all(len(c) == 30 for c in clipped)


def test_report_tables_wrap_long_values_instead_of_overflowing():
    from dp_spark.html_report import render

    plan = distinct_count_plan(epsilon=1.0)
    long = "x" * 400
    release = Release.from_plan(plan, values={"items": [{"item": long, "count": 3}]}, errors={},
                                statement="s", seeded=False, budget_split=plan.budget_split())
    page = render(release)
    assert "overflow-wrap:anywhere" in page and long in page
