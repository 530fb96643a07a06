"""The note a run prints when its main table is written nowhere
(dp_spark.commands.outputs.missing_output_hint): a grouped run points to
--groups-output, never to --series / --items-output, which it refuses."""

from __future__ import annotations

import pytest

from dp_spark.commands import continual_distinct, count_release, distinct_count, set_union, top_k
from dp_spark.commands.outputs import missing_output_hint

MODULES = [continual_distinct, count_release, distinct_count, set_union, top_k]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_a_grouped_run_without_groups_output_is_told_about_groups_output(module):
    hint = missing_output_hint(module, {"group_by": "country"})
    assert hint is not None and "--groups-output PATH" in hint
    assert "--series" not in hint and "--items-output" not in hint


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_a_grouped_run_with_groups_output_gets_no_note(module):
    assert missing_output_hint(module, {"group_by": "country", "groups_output": "g.parquet"}) is None


def test_ungrouped_notes_are_unchanged():
    assert "--items-output PATH" in missing_output_hint(set_union, {})
    assert "--series PATH" in missing_output_hint(continual_distinct, {})
    assert missing_output_hint(distinct_count, {}) is None
