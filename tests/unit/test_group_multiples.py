"""Small multiples of the grouped releases whose per-value rows are in
result["items"] (top-k, count-release) or not in the report at all
(set-union: a number of released items per group): one panel per group,
with that group's own values, from the report's released rows only."""

from __future__ import annotations

from types import SimpleNamespace

from dp_spark.html_report import _group_section


def fake(values, errors=None):
    return SimpleNamespace(values=values, errors=errors or {"items": "each item's error"},
                           parameters={"group_by": "genre"}, noise=())


def test_top_k_panels_rank_each_groups_own_items():
    release = fake({"groups": [{"group": "drama", "released_count": 2}, {"group": "noir", "released_count": 0}],
                    "items": [{"group": "drama", "rank": 2, "item": "m7"}, {"group": "drama", "rank": 1, "item": "m3"}],
                    "groups_released": 2})
    html = _group_section(release)
    assert "Per group" in html and html.count("<svg") == 2
    drama, noir = html.split("<svg")[1:]
    assert drama.index("m3") < drama.index("m7")  # by rank, not report order
    assert "nothing released in this group" in noir and "m3" not in noir


def test_count_release_panels_draw_each_groups_counts():
    release = fake({"groups": [{"group": "a", "released_count": 1}, {"group": "b", "released_count": 1}],
                    "items": [{"group": "a", "item": "x", "count": 40}, {"group": "b", "item": "y", "count": 9}],
                    "groups_released": 2})
    a, b = _group_section(release).split("<svg")[1:]
    assert ">x<" in a and ">y<" not in a and ">y<" in b


def test_set_union_panels_state_each_groups_number_of_released_items():
    release = fake({"groups": [{"group": "fr", "released_count": 12}, {"group": "de", "released_count": 0}],
                    "groups_released": 2})
    fr, de = _group_section(release).split("<svg")[1:]
    assert "12 items released" in fr and "0 items released" in de
    assert ">1<" not in fr  # no rank badge: a set, not a ranking
