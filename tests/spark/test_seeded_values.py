"""Seeded released values are pinned: for every release and method, a fixed
seed gives the values its own test module pins (``SEEDED_VALUES`` in
``tests/spark/test_<release>.py``, beside its ``SEEDED_CASES``), first
computed on ``main`` before the noise records (issue 23, "noise as data")
were added. A refactor of how noise is recorded or reported must not change
what is drawn or released. (Seeded runs are for tests only: not private.)

The cases are collected through ``dp_spark.releases.RELEASES``
(tests/spark/seeded.py), so a new release adds its cases to its own module,
not here. Regenerate only for a deliberate change of a mechanism, and say why
in the commit: ``PYTHONPATH=<checkout> python -m tests.spark.seeded [x-y ...]``
rewrites the named releases' ``SEEDED_VALUES`` in place.
"""

from __future__ import annotations

import importlib

import pytest

from tests.spark.seeded import collect, problems, released, seeded_cases


def test_every_release_has_seeded_cases():
    """Every release in RELEASES has seeded cases in its own test module, each pinned."""
    from dp_spark.releases import RELEASES

    assert problems() == ()
    assert {case.release for case in seeded_cases().values()} == {spec.python_name for spec in RELEASES.values()}
    assert all(case.pinned is not None for case in seeded_cases().values())


def test_a_release_without_seeded_cases_fails_naming_its_module():
    from dp_spark.releases import RELEASES, Example, ReleaseSpec

    new = ReleaseSpec("new-release", privacy_unit="person", chart=None, example=Example("persons", epsilon=1.0))
    assert collect([new]) == ({}, ("no module tests.spark.test_new_release",))
    seeded_api = ReleaseSpec("api-shape", privacy_unit="person", chart=None, example=Example("persons", epsilon=1.0))
    assert collect([seeded_api]) == ({}, ("tests.spark.test_api_shape has no SEEDED_CASES",))
    cases, none = collect([RELEASES["top-k"]])
    assert none == () and sorted(cases) == sorted(c for c in seeded_cases() if c.startswith("top_k/"))


def test_the_seeded_cases_run_every_method():
    """Each release's cases run every ``method`` its Params allows."""
    import dataclasses

    from dp_spark.releases import RELEASES

    for spec in RELEASES.values():
        params = importlib.import_module(f"dp_spark.plans.{spec.python_name}").Params
        choices = next(f for f in dataclasses.fields(params) if f.name == "method").metadata["choices"]
        run = {c.parameters["method"] for c in seeded_cases().values() if c.release == spec.python_name}
        assert run == set(choices), spec.name


@pytest.mark.parametrize("case", sorted(seeded_cases()))
def test_seeded_values_are_the_pinned_ones(spark, case):
    assert released(spark, case) == seeded_cases()[case].pinned
