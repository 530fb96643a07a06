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


# -- small multiples of a grouped release (issue 24) -------------------------------


def _grouped_release(n_groups: int, **values):
    """A grouped distinct-count Release as the release builds it: per-group
    rows, batched noise records per bound (no Spark)."""
    from dp_spark.noise.records import NoiseDraw

    plan = distinct_count_plan(epsilon=1.0, group_by="country", groups=[f"g{i}" for i in range(n_groups)],
                               max_groups=1)
    rows = [{"group": f"g{i}", "estimate": 10 * i + 3, "lower_bound": 10 * i, "bound": 1 if i % 2 else 4}
            for i in range(n_groups)]
    noise = (NoiseDraw("count", "discrete-laplace", scale=2.0, std=2.8, sensitivity=1.0, draws=5,
                       parameters={"bound": 1}),
             NoiseDraw("count", "discrete-laplace", scale=8.0, std=11.3, sensitivity=4.0, draws=5,
                       parameters={"bound": 4}))
    return Release.from_plan(plan, values={"confidence": 0.95, "groups_released": n_groups, "groups": rows,
                                           **values},
                             errors={"groups": "each group's own interval"}, statement="s", seeded=False,
                             budget_split=plan.budget_split(), noise=noise)


def test_a_grouped_release_draws_one_panel_per_group_with_its_own_error():
    from dp_spark.html_report import render

    page = render(_grouped_release(3))
    assert "Per group" in page and page.count('<div class="panel">') == 3
    # each panel's interval is its own bound's record: scale 2 (bound 1) or 8 (bound 4)
    records = _grouped_release(3).noise
    assert f"± {fmt(records[1].half_width(0.05))}" in page  # g0, g2: bound 4
    assert f"± {fmt(records[0].half_width(0.05))}" in page  # g1: bound 1
    assert "g0" in page and "all 3 in the report" in page


def test_many_groups_show_the_largest_by_released_values_first_up_to_the_limit():
    from dp_spark.html_report import SMALL_MULTIPLES, render

    n = SMALL_MULTIPLES + 8
    page = render(_grouped_release(n))
    assert page.count('<div class="panel">') == SMALL_MULTIPLES
    titles = re.findall(r'aria-label="(g\d+): estimate', page)
    assert titles == [f"g{i}" for i in range(n - 1, n - 1 - SMALL_MULTIPLES, -1)]  # largest estimates first
    assert f"the {SMALL_MULTIPLES} largest (by released values) of the {n}" in page


def test_an_ungrouped_page_has_no_small_multiples():
    from dp_spark.html_report import render

    plan = distinct_count_plan(epsilon=1.0)
    release = Release.from_plan(plan, values={"estimate": 5, "lower_bound": 1, "bound": 1, "confidence": 0.95},
                                errors={}, statement="s", seeded=False, budget_split=plan.budget_split())
    assert "Per group" not in render(release)


def test_count_and_item_groups_get_bars_and_lists():
    from dp_spark.html_report import _panels
    from dp_spark.noise.records import NoiseDraw

    plan = distinct_count_plan(epsilon=1.0)
    counts = Release.from_plan(plan, values={"groups": [{"group": "a", "item": "x", "count": 5},
                                                        {"group": "a", "item": "y", "count": 2}]},
                               errors={}, statement="s", seeded=False, budget_split=[],
                               noise=(NoiseDraw("count", "discrete-gaussian", scale=1.0, std=1.0, sensitivity=1.0),))
    (panel,) = _panels(counts, [("a", counts.values["groups"])])
    assert "released values" in panel and "95% noise intervals" in panel
    ranks = Release.from_plan(plan, values={"groups": [{"group": "a", "rank": 2, "item": "y"},
                                                       {"group": "a", "rank": 1, "item": "x"}]},
                              errors={"groups": "ranking error"}, statement="s", seeded=False, budget_split=[])
    (panel,) = _panels(ranks, [("a", ranks.values["groups"])])
    assert panel.index(">x<") < panel.index(">y<") and "ranking error" in panel
