"""The note a run prints when its main table is written nowhere
(dp_spark.commands.outputs.missing_output_hint): a grouped run points to
--groups-output, never to --series / --items-output, which it refuses."""

from __future__ import annotations

import pytest

from dp_spark.commands import COMMANDS
from dp_spark.commands.outputs import missing_output_hint

#: The commands of the grouped releases (a release without group_by has no grouped run).
MODULES = [c for c in COMMANDS.values() if any(o.name == "group_by" for o in c.options)]
continual_distinct, count_release, distinct_count, set_union = (
    COMMANDS[n] for n in ("continual-distinct", "count-release", "distinct-count", "set-union"))


@pytest.mark.parametrize("module", MODULES, ids=lambda c: c.name)
def test_a_grouped_run_without_groups_output_is_told_about_groups_output(module):
    hint = missing_output_hint(module, {"group_by": "country"})
    assert hint is not None and "--groups-output PATH" in hint
    assert "--series" not in hint and "--items-output" not in hint


@pytest.mark.parametrize("module", MODULES, ids=lambda c: c.name)
def test_a_grouped_run_with_groups_output_gets_no_note(module):
    assert missing_output_hint(module, {"group_by": "country", "groups_output": "g.parquet"}) is None


def test_ungrouped_notes_are_unchanged():
    assert "--items-output PATH" in missing_output_hint(set_union, {})
    assert "--series PATH" in missing_output_hint(continual_distinct, {})
    assert missing_output_hint(distinct_count, {}) is None


def test_a_long_released_list_without_a_report_names_the_flags_that_keep_it():
    """Issue 42 §1: count-release without --output charged, printed "242
    released, first 10 shown (all in the report)" and wrote no report: 232
    counts gone, unannounced. The note says how many and which flag keeps them."""
    from types import SimpleNamespace

    release = SimpleNamespace(values={"items": [{"item": str(i), "count": 5} for i in range(242)], "released": 242})
    hint = missing_output_hint(count_release, {}, release)
    assert hint is not None and "242 items were released and only the first 10 are shown" in hint
    assert "--output PATH" in hint and "--items-output PATH" in hint
    assert missing_output_hint(count_release, {"output": "r.json"}, release) is None
    assert missing_output_hint(count_release, {"items_output": "i.parquet"}, release) is None
    short = SimpleNamespace(values={"items": [{"item": "a", "count": 5}]})
    assert missing_output_hint(count_release, {}, short) is None
