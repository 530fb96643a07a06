"""Seeded released values are pinned: for every release and method, a fixed
seed gives the values recorded in ``seeded_values.json``, which were computed
on ``main`` before the noise records (issue 23, "noise as data") were added.
A refactor of how noise is recorded or reported must not change what is drawn
or released. (Seeded runs are for tests only: not private.)

Regenerate only for a deliberate change of a mechanism, and say why in the
commit: ``PYTHONPATH=<checkout> python tests/spark/test_seeded_values.py``
(with ``PYTHONPATH`` a checkout of the code to pin: ``main`` for these).
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import pytest

PINNED = Path(__file__).with_name("seeded_values.json")

#: 600 persons, 1 to 5 items each from 30, skewed towards item0 (so every release releases something)
PERSONS = [(p, f"item{int(30 * ((p * 37 + j * 11) % 101 / 101) ** 2)}") for p in range(600) for j in range(1 + p % 5)]
EVENTS = [(t, f"i{(t * 5) % 11}", 1 if (t // 11) % 2 == 0 else -1) for t in range(1, 60)]
DOMAIN = [f"item{i}" for i in range(32)]

#: case name -> (release's Python name, its parameters, input kind); every method of every release
CASES = {
    "distinct_count/greedy-auto-shards": ("distinct_count", dict(epsilon=1.0, method="greedy", max_bound=8), "persons"),
    "distinct_count/greedy-2-shards": ("distinct_count", dict(epsilon=1.0, method="greedy", max_bound=8, shards=2),
                                       "persons"),
    "distinct_count/matching": ("distinct_count", dict(epsilon=1.0, method="matching", max_bound=8), "persons"),
    "distinct_count/sampling": ("distinct_count", dict(epsilon=1.0, method="sampling", max_bound=8), "persons"),
    "top_k/auto-no-domain": ("top_k", dict(epsilon=2.0, delta=1e-6, k=3, method="auto", kbar=10), "persons"),
    "top_k/auto-domain": ("top_k", dict(epsilon=2.0, delta=1e-6, k=3, method="auto", domain=DOMAIN), "persons"),
    "top_k/auto-domain-pure": ("top_k", dict(epsilon=2.0, k=3, method="auto", domain=DOMAIN), "persons"),
    "top_k/auto-domain-choice": ("top_k", dict(epsilon=0.2, delta=1e-6, k=3, method="auto", domain=DOMAIN), "persons"),
    "top_k/joint": ("top_k", dict(epsilon=2.0, k=3, method="joint", domain=DOMAIN), "persons"),
    "top_k/pnf-joint": ("top_k", dict(epsilon=2.0, k=3, method="pnf-joint", domain=DOMAIN), "persons"),
    "top_k/pnf-peel": ("top_k", dict(epsilon=2.0, k=3, method="pnf-peel", domain=DOMAIN), "persons"),
    "top_k/cdp-peel": ("top_k", dict(epsilon=2.0, delta=1e-6, k=3, method="cdp-peel", domain=DOMAIN), "persons"),
    "top_k/unknown-domain": ("top_k", dict(epsilon=2.0, delta=1e-6, k=3, method="unknown-domain", kbar=10),
                             "persons"),
    "count_release/pcr": ("count_release", dict(rho=2.0, delta=1e-6, method="pcr", kbar=10), "persons"),
    "count_release/bounded": ("count_release", dict(rho=2.0, delta=1e-6, method="bounded", max_items=3), "persons"),
    "count_release/bounded-threshold": ("count_release", dict(rho=2.0, delta=1e-6, method="bounded", max_items=3,
                                                              count_threshold=True), "persons"),
    **{f"set_union/{m}": ("set_union", dict(epsilon=2.0, delta=1e-5, method=m, max_items=3), "persons")
       for m in ("count", "weighted-laplace", "weighted-gaussian", "policy-laplace", "policy-gaussian")},
    **{f"continual_distinct/{m}": ("continual_distinct", dict(rho=1.0, horizon=64, method=m,
                                                             **({"max_flippancy": 4} if m == "bounded" else {})),
                                   "events")
       for m in ("auto", "adaptive", "bounded", "baseline")},
}


def _input(spark, kind):
    if kind == "persons":
        return spark.createDataFrame(PERSONS, "person_id long, item string")
    return spark.createDataFrame(EVENTS, "time long, item string, op int")


def _plain(value):
    """JSON-shaped, floats kept exactly (repr round-trips)."""
    return json.loads(json.dumps(value, default=str))


@functools.lru_cache(maxsize=None)
def seeded_release(spark, case: str):
    """The seeded release of ``case`` (run once per test session)."""
    import dp_spark

    name, parameters, kind = CASES[case]
    return getattr(dp_spark, name)(_input(spark, kind), **parameters, seed=11)


def released(spark, case: str) -> dict:
    """The seeded release's values, plus its DataFrame artifact's rows."""
    name = CASES[case][0]
    release = seeded_release(spark, case)
    out = {"values": _plain(release.values)}
    if name == "set_union":
        out["items"] = sorted(r["item"] for r in release.items.collect())
    if name == "continual_distinct":
        series = release.series.toPandas()
        out["series"] = {c: [None if (isinstance(v, float) and math.isnan(v)) else v
                             for v in series[c].astype(object).tolist()]
                         for c in ("estimate", "std", "error_bound")}
    return _plain(out)


def test_every_release_has_pinned_cases():
    from dp_spark.releases import RELEASES

    assert {case.split("/")[0] for case in CASES} == {spec.python_name for spec in RELEASES.values()}
    assert sorted(json.loads(PINNED.read_text(encoding="utf-8"))) == sorted(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_seeded_values_are_the_pinned_ones(spark, case):
    pinned = json.loads(PINNED.read_text(encoding="utf-8"))
    assert released(spark, case) == pinned[case]


if __name__ == "__main__":  # regenerate (see the module docstring)
    from dp_spark.session import get_session
    from tests.conftest import TEST_CONF

    session = get_session(master="local[2]", conf=TEST_CONF, log_level="ERROR")
    PINNED.write_text(json.dumps({c: released(session, c) for c in sorted(CASES)}, indent=1, sort_keys=True) + "\n",
                      encoding="utf-8")
