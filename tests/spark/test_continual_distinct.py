"""The continual-distinct release's seeded cases (every method), run and
pinned by ``test_seeded_values`` and checked for their noise records by
``test_noise_records`` (see tests/spark/seeded.py). Its stage, Python API and
CLI are tested in test_continual_stage.py, streaming in
test_continual_streaming.py. (Seeded runs are for tests only: not private.)"""

from __future__ import annotations

import numpy as np
import pytest

import dp_spark
from dp_spark.accounting import ZCDP, PrivacyFilter
from dp_spark.errors import ParameterError
from dp_spark.plans.continual_distinct import plan as continual_plan
from tests.spark.seeded import EVENTS, nan_to_none

#: case -> (parameters, input kind, the kinds of Release.noise in the order drawn, or None:
#: checked by check_noise_records); every method
SEEDED_CASES = {
    "continual_distinct/bounded": (dict(rho=1.0, horizon=64, method="bounded", max_flippancy=4), "events",
                                   ["binary-tree"]),
    # the same stream and w through the square-root factorized counter (issue 38)
    "continual_distinct/bounded-factorized": (dict(rho=1.0, horizon=64, method="bounded", max_flippancy=4,
                                                   counter="factorized"), "events", ["factorized-counter"]),
    "continual_distinct/baseline": (dict(rho=1.0, horizon=64, method="baseline"), "events", ["discrete-gaussian"]),
    # the sparse vector, then one tree per level the path used
    "continual_distinct/adaptive": (dict(rho=1.0, horizon=64, method="adaptive"), "events", None),
    # at T = 64 no tree beats the recompute baseline: auto spends everything on it
    # (auto with trees: tests/unit/test_noise_records.py)
    "continual_distinct/auto": (dict(rho=1.0, horizon=64, method="auto"), "events", ["discrete-gaussian"]),
    # the noisy choice, the noisy statement of the chosen counter's truncation or staleness, the counter
    "continual_distinct/select": (dict(rho=1.0, horizon=64, method="select"), "events", None),
}


def seeded_artifacts(release):
    """The released series (estimate, std, error bound per step) is pinned beside the values."""
    series = release.series.toPandas()
    return {"series": {c: nan_to_none(series[c].astype(object).tolist()) for c in ("estimate", "std", "error_bound")}}


def check_noise_records(case, release):
    """adaptive: the sparse vector first, then one counter (its level's smaller-bound counter: a
    binary tree or a factorized counter) per flippancy bound the path used, each charged to its
    level's budget step."""
    if case == "continual_distinct/adaptive":
        kinds = [r.kind for r in release.noise]
        counters = ("binary-tree", "factorized-counter")
        assert kinds[0] == "sparse-vector" and all(k in counters for k in kinds[1:]) and len(kinds) > 1
        used = {int(w) for w in release.series.toPandas()["flippancy_bound"].dropna() if int(w) > 0}
        assert [r.parameters["flippancy_bound"] for r in release.noise if r.kind in counters] == sorted(used)
        steps = {s["step"] for s in release.to_dict()["budget_split"]}
        assert all(r.step in steps for r in release.noise)
    if case == "continual_distinct/select":
        choice, statement, counter = release.noise
        assert [r.parameters.get("role") for r in release.noise] == ["choice", "statement", None]
        assert (choice.kind, statement.kind) == ("discrete-gaussian", "discrete-gaussian")
        assert counter.kind in ("factorized-counter", "binary-tree", "discrete-gaussian")
        assert [s["step"] for s in release.to_dict()["budget_split"]] == [r.step for r in release.noise]
    if case == "continual_distinct/bounded-factorized":
        (record,) = release.noise
        assert "factorized" in record.step and record.parameters["flippancy_bound"] == 4
        assert [s["step"] for s in release.to_dict()["budget_split"]] == [record.step]


@pytest.mark.parametrize("change", ["add", "remove"])
def test_factorized_counter_rows_and_bounds_do_not_depend_on_one_item(spark, change, report_schema):
    """Neighbouring inputs (one item's events added or removed): the factorized counter releases
    one row per step (per public key and step when grouped) with the same std and error_bound
    columns (public parameters only), and its refusal with --stream comes before any read or spend
    on either input."""
    import json

    import jsonschema

    if change == "add":
        neighbour = EVENTS + [(3, "new", 1), (9, "new", -1), (20, "new", 1)]
    else:
        neighbour = [e for e in EVENTS if e[1] != "i0"]
        assert len(neighbour) < len(EVENTS)
    kwargs = dict(rho=1.0, horizon=64, method="bounded", max_flippancy=1, counter="factorized", seed=3)
    series, grouped = [], []
    for rows in (EVENTS, neighbour):
        df = spark.createDataFrame(rows, "time long, item string, op int")
        release = dp_spark.continual_distinct(df, **kwargs)
        jsonschema.validate(json.loads(json.dumps(release.to_dict())), report_schema)
        frame = release.series.toPandas()
        assert len(frame) == 64 and release.result["max_std"] == frame["std"].max() == frame["std"].iloc[-1]
        series.append(frame)
        keyed = df.selectExpr("*", "CAST(time % 3 AS STRING) AS grp")
        by_group = dp_spark.continual_distinct(keyed, **kwargs, group_by="grp", groups=["0", "1", "2", "x"],
                                               max_groups=1)
        jsonschema.validate(json.loads(json.dumps(by_group.to_dict())), report_schema)
        assert by_group.parameters["group_budget_factor"] == 2  # w = 1: above the tree's m = 1
        table = by_group.groups.toPandas().sort_values(["grp", "step"])
        assert len(table) == 4 * 64
        grouped.append(table.reset_index(drop=True))
        poisoned = df.selectExpr("time", "item", "CAST(raise_error('read!') AS INT) AS op")
        budget = PrivacyFilter(ZCDP(2.0))
        streamed = continual_plan(**{**kwargs, "seed": None}, stream=True)  # streamed: the BLT counter
        assert streamed.parameters["counter"] == "factorized" and streamed.steps == continual_plan(**kwargs).steps
        with pytest.raises(ParameterError, match="applies only to method 'bounded'"):
            dp_spark.continual_distinct(poisoned, rho=1.0, horizon=64, counter="factorized", budget=budget)
        assert budget.spent.rho == 0.0
    for column in ("std", "error_bound"):
        np.testing.assert_array_equal(series[0][column], series[1][column])
        np.testing.assert_array_equal(grouped[0][column], grouped[1][column])


@pytest.mark.parametrize("change", ["add", "remove"])
def test_select_rows_and_refusals_do_not_depend_on_one_item(spark, change, report_schema):
    """Neighbouring inputs (one item's events added or removed): "select" releases one row per step
    (per public key and step when grouped) on both, its report validates, and it is refused with
    --stream by the plan (before anything is read)."""
    import json

    import jsonschema

    if change == "add":
        neighbour = EVENTS + [(3, "new", 1), (9, "new", -1), (20, "new", 1)]
    else:
        neighbour = [e for e in EVENTS if e[1] != "i0"]
        assert len(neighbour) < len(EVENTS)
    kwargs = dict(rho=1.0, horizon=64, method="select", seed=3)
    for rows in (EVENTS, neighbour):
        df = spark.createDataFrame(rows, "time long, item string, op int")
        release = dp_spark.continual_distinct(df, **kwargs)
        jsonschema.validate(json.loads(json.dumps(release.to_dict())), report_schema)
        assert len(release.series.toPandas()) == 64 and release.result["method"] == "select"
        keyed = df.selectExpr("*", "CAST(time % 3 AS STRING) AS grp")
        by_group = dp_spark.continual_distinct(keyed, **kwargs, group_by="grp", groups=["0", "1", "2", "x"],
                                               max_groups=1)
        assert by_group.parameters["group_budget_factor"] == 2
        assert len(by_group.groups.toPandas()) == 4 * 64
        with pytest.raises(ParameterError, match="batch only"):
            continual_plan(**{**kwargs, "seed": None}, stream=True)


SEEDED_VALUES = {
    'continual_distinct/adaptive': {
        'series': {
            'error_bound': [
                282.5483712259555, 285.5257562125433, 287.0698589970354, 288.0966018468528, 288.86011589896674,
                289.4652697126088, 289.96509381013607, 290.3899993959889, 290.7589932981378, 291.0847239402975,
                291.3760210310124, 291.63928551536293, 291.87930080552917, 292.0997363578786, 292.3034616054959,
                292.4927636880733, 292.669497517978, 292.83518328357786, 292.9910835717852, 293.1382618271521,
                293.27761293153867, 293.4099064860272, 293.5358045922188, 293.65587908265036, 293.77063113291837,
                293.8805005821864, 293.9858741996456, 294.0870951916304, 294.18447058468524, 294.2782735469302,
                294.36874981550915, 294.4561212877389, 294.5405871983352, 294.6223311785261, 294.701516434011,
                294.7782964677129, 294.8528065238898, 294.9251749293967, 294.995518705195, 295.0639437292285,
                295.1305490573092, 295.1954280242635, 295.25866363675345, 295.32033517216576, 295.3805175137015,
                295.43927780953334, 295.496680212387, 295.5527837688218, 295.60764555364835, 295.66131722474717,
                295.71384804392164, 295.7652839680915, 295.8156680019315, 295.86504294708106, 295.9134455556406,
                295.9609129006003, 358.5565844063397, 358.6390858752008, 358.72007623592117, 358.79960867932243,
                358.8777322210333, 358.9544960810463, 359.02994579981, 359.10412351026696,
            ],
            'estimate': [
                5.0, -2.0, 1.0, -2.0, -1.0, 10.0, 16.0, 14.0, 19.0, 17.0, 13.0, 15.0, 13.0, 17.0, 5.0, 12.0, 2.0,
                12.0, 8.0, 21.0, 8.0, 11.0, -1.0, 6.0, 0.0, -6.0, -7.0, 8.0, 13.0, 9.0, 15.0, 7.0, 11.0, 11.0, 18.0,
                16.0, 20.0, 22.0, 19.0, 15.0, 12.0, 11.0, 14.0, 8.0, 11.0, 29.0, 30.0, 32.0, 26.0, 15.0, 31.0, 34.0,
                25.0, 39.0, 36.0, 32.0, 1.0, -10.0, -6.0, -20.0, -30.0, -33.0, -22.0, -17.0,
            ],
            'std': [
                5.507962929201495, 6.158089763621702, 6.495252293769266, 6.719446706558447, 6.886163800912117,
                7.018302148815635, 7.127441228832536, 7.22022147885139, 7.30079313438302, 7.371918041714425,
                7.435524211664013, 7.493009322456572, 7.545417855955301, 7.593551056226079, 7.638035478268085,
                7.679370530419407, 7.717961242029935, 7.754139553797864, 7.788181157861169, 7.8203182626320356,
                7.850746270019692, 7.87963322625184, 7.907123704509288, 7.933342567273276, 7.958399248730329,
                7.982389789951534, 8.005398643915244, 8.027500751433214, 8.048763153279916, 8.069245497074316,
                8.089001440745134, 8.10807943667621, 8.126522988759573, 8.144372193788106, 8.161662688538712,
                8.178427991138864, 8.194697632845582, 8.210499634466524, 8.2258595481112, 8.240800492755719,
                8.255344097729784, 8.269510743157374, 8.283318553956413, 8.296784840738969, 8.30992595462476,
                8.322756557751608, 8.335290658186551, 8.347541149039762, 8.35952049288028, 8.371239969463485,
                8.382710335349406, 8.393941625460252, 8.404943230080837, 8.415724495162225, 8.426293445708511,
                8.436658176791656, 15.249114473636302, 15.267129080087031, 15.284813728552342, 15.30218003351293,
                15.319238697775354, 15.336000468770006, 15.352475290480575, 15.368672362844801,
            ],
        },
        'values': {
            'confidence': 0.95,
            'final_error_bound': 359.10412351026696,
            'final_estimate': -17.0,
            'final_std': 15.368672362844801,
            'flippancy_bound': 2,
            'horizon': 64,
            'method': 'adaptive',
            'notes': [
                'Algorithm 3 (Jain et al. NeurIPS 2023): counters for w = 2^j, j = 0..J (per level the binary tree or the factorized counter, whichever has the smaller noise bound), switched by a sparse vector on the number of items whose flippancy exceeds the current w.',
                'Budget split (ALGORITHMS.md 4.4, not confirmed from the paper): svt_fraction*rho to the sparse vector, the rest equally over the J+1 trees.',
                "error_bound = counter noise bound (+ 1/2 for a factorized counter's rounding) + truncation bound (threshold + sparse-vector accuracy), with probability >= 1 - beta overall.",
            ],
            'released_count': 64,
        },
    },
    'continual_distinct/auto': {
        'series': {
            'error_bound': [
                10.100540232440881, 11.100540232440881, 12.100540232440881, 13.100540232440881, 14.100540232440881,
                10.100540232440881, 11.100540232440881, 12.100540232440881, 13.100540232440881, 14.100540232440881,
                10.100540232440881, 11.100540232440881, 12.100540232440881, 13.100540232440881, 14.100540232440881,
                10.100540232440881, 11.100540232440881, 12.100540232440881, 13.100540232440881, 14.100540232440881,
                10.100540232440881, 11.100540232440881, 12.100540232440881, 13.100540232440881, 14.100540232440881,
                10.100540232440881, 11.100540232440881, 12.100540232440881, 13.100540232440881, 14.100540232440881,
                10.100540232440881, 11.100540232440881, 12.100540232440881, 13.100540232440881, 14.100540232440881,
                10.100540232440881, 11.100540232440881, 12.100540232440881, 13.100540232440881, 14.100540232440881,
                10.100540232440881, 11.100540232440881, 12.100540232440881, 13.100540232440881, 14.100540232440881,
                10.100540232440881, 11.100540232440881, 12.100540232440881, 13.100540232440881, 14.100540232440881,
                10.100540232440881, 11.100540232440881, 12.100540232440881, 13.100540232440881, 14.100540232440881,
                10.100540232440881, 11.100540232440881, 12.100540232440881, 13.100540232440881, 14.100540232440881,
                10.100540232440881, 11.100540232440881, 12.100540232440881, 13.100540232440881,
            ],
            'estimate': [
                -2.0, -2.0, -2.0, -2.0, -2.0, 3.0, 3.0, 3.0, 3.0, 3.0, 8.0, 8.0, 8.0, 8.0, 8.0, 5.0, 5.0, 5.0, 5.0,
                5.0, -1.0, -1.0, -1.0, -1.0, -1.0, 6.0, 6.0, 6.0, 6.0, 6.0, 11.0, 11.0, 11.0, 11.0, 11.0, 7.0, 7.0,
                7.0, 7.0, 7.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 7.0, 7.0, 7.0, 7.0, 7.0, 8.0, 8.0,
                8.0, 8.0, 8.0, 10.0, 10.0, 10.0, 10.0,
            ],
            'std': [
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
            ],
        },
        'values': {
            'confidence': 0.95,
            'final_error_bound': 13.100540232440881,
            'final_estimate': 10.0,
            'final_std': 2.5495097567963922,
            'flippancy_bound': 0,
            'horizon': 64,
            'method': 'auto',
            'notes': [
                "auto: at these public parameters no binary tree's error bound beats the recompute baseline's, so the whole budget goes to the baseline.",
                'error_bound per step: tree noise bound + truncation (threshold + sparse-vector accuracy) at tree steps; noise bound + staleness x max_step_change at baseline steps: the bound assumes the count changes by at most max_step_change per step (default 1, one update per step as in the paper); with several events per step the staleness term can be larger.',
            ],
            'released_count': 64,
        },
    },
    'continual_distinct/baseline': {
        'series': {
            'error_bound': [
                9.016638761228108, 10.016638761228108, 11.016638761228108, 12.016638761228108, 13.016638761228108,
                9.016638761228108, 10.016638761228108, 11.016638761228108, 12.016638761228108, 13.016638761228108,
                9.016638761228108, 10.016638761228108, 11.016638761228108, 12.016638761228108, 13.016638761228108,
                9.016638761228108, 10.016638761228108, 11.016638761228108, 12.016638761228108, 13.016638761228108,
                9.016638761228108, 10.016638761228108, 11.016638761228108, 12.016638761228108, 13.016638761228108,
                9.016638761228108, 10.016638761228108, 11.016638761228108, 12.016638761228108, 13.016638761228108,
                9.016638761228108, 10.016638761228108, 11.016638761228108, 12.016638761228108, 13.016638761228108,
                9.016638761228108, 10.016638761228108, 11.016638761228108, 12.016638761228108, 13.016638761228108,
                9.016638761228108, 10.016638761228108, 11.016638761228108, 12.016638761228108, 13.016638761228108,
                9.016638761228108, 10.016638761228108, 11.016638761228108, 12.016638761228108, 13.016638761228108,
                9.016638761228108, 10.016638761228108, 11.016638761228108, 12.016638761228108, 13.016638761228108,
                9.016638761228108, 10.016638761228108, 11.016638761228108, 12.016638761228108, 13.016638761228108,
                9.016638761228108, 10.016638761228108, 11.016638761228108, 12.016638761228108,
            ],
            'estimate': [
                -2.0, -2.0, -2.0, -2.0, -2.0, 3.0, 3.0, 3.0, 3.0, 3.0, 8.0, 8.0, 8.0, 8.0, 8.0, 5.0, 5.0, 5.0, 5.0,
                5.0, -1.0, -1.0, -1.0, -1.0, -1.0, 6.0, 6.0, 6.0, 6.0, 6.0, 11.0, 11.0, 11.0, 11.0, 11.0, 7.0, 7.0,
                7.0, 7.0, 7.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 7.0, 7.0, 7.0, 7.0, 7.0, 8.0, 8.0,
                8.0, 8.0, 8.0, 10.0, 10.0, 10.0, 10.0,
            ],
            'std': [
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
                2.5495097567963922, 2.5495097567963922, 2.5495097567963922, 2.5495097567963922,
            ],
        },
        'values': {
            'confidence': 0.95,
            'final_error_bound': 12.016638761228108,
            'final_estimate': 10.0,
            'final_std': 2.5495097567963922,
            'flippancy_bound': None,
            'horizon': 64,
            'method': 'baseline',
            'notes': [
                "Baseline for the paper's Theorem 3.10 comparison: periodic recompute (ALGORITHMS.md 4.5, not confirmed from the paper); block=1 is the count at every step as a sensitivity-1 query.",
                'error_bound includes staleness (t - last release step), assuming the distinct count changes by at most 1 per step (one update per step, as in the paper); with several events per step the staleness term can be larger.',
            ],
            'released_count': 64,
        },
    },
    'continual_distinct/bounded': {
        'series': {
            'error_bound': [
                29.647080871428876, 29.647080871428876, 41.92730385314668, 29.647080871428876, 41.92730385314668,
                41.92730385314668, 51.3502503654182, 29.647080871428876, 41.92730385314668, 41.92730385314668,
                51.3502503654182, 41.92730385314668, 51.3502503654182, 51.3502503654182, 59.29416174285775,
                29.647080871428876, 41.92730385314668, 41.92730385314668, 51.3502503654182, 41.92730385314668,
                51.3502503654182, 51.3502503654182, 59.29416174285775, 41.92730385314668, 51.3502503654182,
                51.3502503654182, 59.29416174285775, 51.3502503654182, 59.29416174285775, 59.29416174285775,
                66.29288816294867, 29.647080871428876, 41.92730385314668, 41.92730385314668, 51.3502503654182,
                41.92730385314668, 51.3502503654182, 51.3502503654182, 59.29416174285775, 41.92730385314668,
                51.3502503654182, 51.3502503654182, 59.29416174285775, 51.3502503654182, 59.29416174285775,
                59.29416174285775, 66.29288816294867, 41.92730385314668, 51.3502503654182, 51.3502503654182,
                59.29416174285775, 51.3502503654182, 59.29416174285775, 59.29416174285775, 66.29288816294867,
                51.3502503654182, 59.29416174285775, 59.29416174285775, 66.29288816294867, 59.29416174285775,
                66.29288816294867, 66.29288816294867, 72.6202204980284, 29.647080871428876,
            ],
            'estimate': [
                13.0, -10.0, -13.0, -1.0, 7.0, -3.0, 1.0, 12.0, 12.0, 21.0, 18.0, 15.0, 5.0, 14.0, 26.0, 7.0, 12.0,
                15.0, 18.0, 3.0, 8.0, -12.0, 1.0, 1.0, 5.0, -10.0, -13.0, 15.0, 11.0, 6.0, 2.0, 16.0, 13.0, 6.0,
                10.0, 9.0, 9.0, 13.0, 8.0, 7.0, -2.0, -7.0, -16.0, -7.0, -10.0, -6.0, 11.0, 4.0, 16.0, 14.0, 15.0,
                2.0, 4.0, 1.0, -6.0, 17.0, 11.0, 18.0, 10.0, 27.0, 17.0, 30.0, 25.0, -11.0,
            ],
            'std': [
                7.483314773547883, 7.483314773547883, 10.583005244258363, 7.483314773547883, 10.583005244258363,
                10.583005244258363, 12.961481396815719, 7.483314773547883, 10.583005244258363, 10.583005244258363,
                12.961481396815719, 10.583005244258363, 12.961481396815719, 12.961481396815719, 14.966629547095765,
                7.483314773547883, 10.583005244258363, 10.583005244258363, 12.961481396815719, 10.583005244258363,
                12.961481396815719, 12.961481396815719, 14.966629547095765, 10.583005244258363, 12.961481396815719,
                12.961481396815719, 14.966629547095765, 12.961481396815719, 14.966629547095765, 14.966629547095765,
                16.73320053068151, 7.483314773547883, 10.583005244258363, 10.583005244258363, 12.961481396815719,
                10.583005244258363, 12.961481396815719, 12.961481396815719, 14.966629547095765, 10.583005244258363,
                12.961481396815719, 12.961481396815719, 14.966629547095765, 12.961481396815719, 14.966629547095765,
                14.966629547095765, 16.73320053068151, 10.583005244258363, 12.961481396815719, 12.961481396815719,
                14.966629547095765, 12.961481396815719, 14.966629547095765, 14.966629547095765, 16.73320053068151,
                12.961481396815719, 14.966629547095765, 14.966629547095765, 16.73320053068151, 14.966629547095765,
                16.73320053068151, 16.73320053068151, 18.33030277982336, 7.483314773547883,
            ],
        },
        'values': {
            'confidence': 0.95,
            'final_error_bound': 29.647080871428876,
            'final_estimate': -11.0,
            'final_std': 7.483314773547883,
            'flippancy_bound': 4,
            'horizon': 64,
            'method': 'bounded',
            'notes': [
                'Algorithm 1 (Jain et al. NeurIPS 2023): binary tree with discrete Gaussian noise, sigma^2 = 4*w*L/(2*rho) on the w-truncated difference stream.',
                'error_bound assumes every item flips at most w times; otherwise add the number of items with flippancy above w (not released).',
            ],
            'released_count': 64,
        },
    },
    'continual_distinct/bounded-factorized': {
        'series': {
            'error_bound': [
                15.952931449487842, 17.776902586349586, 18.722832966179052, 19.35182428959953, 19.819559432994648,
                20.190281759605814, 20.49647821438222, 20.756778957476644, 20.982827731897594, 21.18237306861661,
                21.360824121506678, 21.522102163472802, 21.66913755313209, 21.80417823038237, 21.92898203411546,
                22.044950085383366, 22.153218719135936, 22.254719215579737, 22.350225046098668, 22.440387685788256,
                22.525755346818276, 22.60679949329811, 22.683925734248966, 22.75748437910248, 22.82778245225302,
                22.89508940287935, 22.95964216904767, 23.0216510018511, 23.081303988338465, 23.13876847360246,
                23.19419499828848, 23.24771949856308, 23.29946402729225, 23.349541078514118, 23.39805063341549,
                23.445086729180872, 23.49073221758253, 23.535065712733434, 23.578158902660853, 23.620076649085444,
                23.66087963443256, 23.700625036403427, 23.739363705578885, 23.77714420795423, 23.814012417609455,
                23.85000947008118, 23.88517466586986, 23.919544177395366, 23.95315296916772, 23.986032687239895,
                24.018213509807886, 24.049723590468027, 24.0805892742465, 24.110836781788382, 24.14048862774016,
                24.16956752332805, 24.198095006587938, 24.226090852242695, 24.25357392217529, 24.280562266028358,
                24.3070725166449, 24.33312137621617, 24.358724298326084, 24.383895580263776,
            ],
            'estimate': [
                6.0, 0.0, 6.0, 7.0, 8.0, 15.0, 12.0, 7.0, 8.0, 12.0, 10.0, 6.0, 9.0, 6.0, 7.0, 6.0, 10.0, 6.0, -2.0,
                -1.0, 2.0, 2.0, 1.0, -1.0, 1.0, 0.0, -1.0, 2.0, 2.0, 5.0, 8.0, 6.0, 6.0, 3.0, 1.0, -8.0, -3.0, -3.0,
                -3.0, -1.0, -3.0, -11.0, -4.0, -2.0, -3.0, 7.0, 4.0, 0.0, -3.0, -4.0, -10.0, -12.0, -5.0, 2.0, 0.0,
                -5.0, -4.0, -4.0, -3.0, 5.0, -3.0, 3.0, 7.0, 4.0,
            ],
            'std': [
                3.900523991285004, 4.360918396191033, 4.599683717364606, 4.75844943475171, 4.876511962521498,
                4.970087174045508, 5.047375203297807, 5.1130785487574, 5.170136244943499, 5.2205041234114615,
                5.265547526039825, 5.30625623389973, 5.343369908208626, 5.377455958686223, 5.408958087085342,
                5.43822995486471, 5.465558387973726, 5.491178453836343, 5.515285386845422, 5.538043627919382,
                5.559591553050345, 5.580048166006348, 5.599515847861393, 5.618083021342709, 5.635827183462441,
                5.652816346752033, 5.669110317508739, 5.6847621658853384, 5.699819367537098, 5.714324162575615,
                5.728314549448037, 5.7418248402381735, 5.754885842701402, 5.767525951818704, 5.779770404162122,
                5.791642935959015, 5.803164460090961, 5.814354819798365, 5.825232110086122, 5.835812702909184,
                5.846111915313168, 5.8561441797050335, 5.86592233144299, 5.8754586292256805, 5.884764652276776,
                5.893850783749013, 5.902726943607765, 5.91140226224955, 5.919885565178492, 5.928184840276321,
                5.936307704918285, 5.944261265443934, 5.952052171685827, 5.959687042081087, 5.96717155962385,
                5.9745114569275675, 5.9817121704769605, 5.9887786916732555, 5.9957157815048285, 6.002527995939873,
                6.009219533327637, 6.0157946095217865, 6.022257125211004, 6.028610689219898,
            ],
        },
        'values': {
            'confidence': 0.95,
            'final_error_bound': 24.383895580263776,
            'final_estimate': 4.0,
            'final_std': 6.028610689219898,
            'flippancy_bound': 4,
            'horizon': 64,
            'max_std': 6.028610689219898,
            'method': 'bounded',
            'notes': [
                'Algorithm 1 (Jain et al. NeurIPS 2023) with a square-root factorized counter instead of the binary tree: discrete Gaussian noise on the integer strategy R z of the w-truncated difference stream, sigma^2 = B/(2*rho) with B = min(4U(w), V(w)) (Lemmas B, C), an exact integer bound on the l2^2 sensitivity of R z; the estimates are post-processing of the noisy strategy.',
                'std is the exact per-step noise standard deviation bound sigma*sqrt(S(t)) (non-decreasing in t); error_bound = std*sqrt(2 ln(2T/beta)) + 1/2 (the rounding to whole counts).',
                'error_bound assumes every item flips at most w times; otherwise add the number of items with flippancy above w (not released).',
            ],
            'released_count': 64,
        },
    },
    'continual_distinct/select': {
        'series': {
            'error_bound': [
                29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973,
                29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973,
                29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973,
                29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973,
                29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973,
                29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973,
                29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973,
                29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973,
                29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973,
                29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973,
                29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973,
                29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973,
                29.456773609587973, 29.456773609587973, 29.456773609587973, 29.456773609587973,
            ],
            'estimate': [
                3.0, 3.0, 3.0, 3.0, 5.0, 5.0, 5.0, 5.0, 11.0, 11.0, 11.0, 11.0, 3.0, 3.0, 3.0, 3.0, 2.0, 2.0, 2.0,
                2.0, 3.0, 3.0, 3.0, 3.0, 0.0, 0.0, 0.0, 0.0, 9.0, 9.0, 9.0, 9.0, 18.0, 18.0, 18.0, 18.0, 12.0, 12.0,
                12.0, 12.0, 2.0, 2.0, 2.0, 2.0, 4.0, 4.0, 4.0, 4.0, 5.0, 5.0, 5.0, 5.0, 8.0, 8.0, 8.0, 8.0, 9.0,
                9.0, 9.0, 9.0, 10.0, 10.0, 10.0, 10.0,
            ],
            'std': [
                2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015,
                2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015,
                2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015,
                2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015,
                2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015,
                2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015,
                2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015,
                2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015,
                2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015,
                2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015,
                2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015,
                2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015,
                2.9814246808265015, 2.9814246808265015, 2.9814246808265015, 2.9814246808265015,
            ],
        },
        'values': {
            'confidence': 0.95,
            'final_error_bound': 29.456773609587973,
            'final_estimate': 10.0,
            'final_std': 2.9814246808265015,
            'flippancy_bound': None,
            'horizon': 64,
            'method': 'select',
            'notes': [
                'select: one counter chosen privately from the finished stream ran over all steps: the recompute baseline every 4 steps.',
                "error_bound per step: noise bound + the count's largest change within a block (stated from a noisy count); it needs no assumption about the data.",
            ],
            'released_count': 64,
        },
    },
}
