"""No exact (non-private) value may reach stdout, stderr, logs, reports or
written artifacts, in any of the five releases.

The data plant sentinel values that are unlikely to occur by chance:

- person table (distinct-count, set-union, top-k, count-release): exactly
  7,919 persons, 104,729 distinct items, 109,731 rows, and one item
  ("hot") held by exactly 5,003 persons (every other item by one person);
- event table (continual-distinct): 7,919 items inserted, 2,006 of them
  deleted later (9,925 events), 5,913 present at the end.

Each release runs through its Python API (all five) and through the CLI
entry function ``dp_spark.cli.main`` in process (count-release and
continual-distinct), with stdout and stderr captured at the file-descriptor
level (the JVM's output included) and every log record of the "dp_spark"
logger at DEBUG. The JSON report, the written items / series files and the
released DataFrames are searched too. A sentinel counts as found when it
appears as a whole number ("7919", "7,919", "7919.0"; not "7919.4", a noisy
value that happens to start with the same digits) or as an equal number in
JSON or in a table. ``test_the_check_catches_a_planted_leak`` shows the
search finds a deliberate leak (a log call and a print in a monkeypatched
stage function).
"""

from __future__ import annotations

import json
import logging
import math
import re

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

import dp_spark
from dp_spark import cli
from dp_spark.releases import RELEASES

PERSONS, DISTINCT, HOT, ROWS = 7_919, 104_729, 5_003, 109_731
ITEMS_IN, ITEMS_OUT = 7_919, 2_006
EVENTS, FINAL = ITEMS_IN + ITEMS_OUT, ITEMS_IN - ITEMS_OUT
PERSON_SENTINELS = (PERSONS, DISTINCT, HOT, ROWS)
EVENT_SENTINELS = (ITEMS_IN, ITEMS_OUT, EVENTS, FINAL)
SEED = 7


# ------------------------------------------------------------------ searching

def _pattern(value: int) -> re.Pattern:
    digits = str(value)
    grouped = f"{value:,}"
    return re.compile(rf"(?<![\d.])(?:{re.escape(digits)}|{re.escape(grouped)})(?:\.0+)?(?!\d|[.,]\d)")


def text_leaks(text: str, sentinels) -> list[int]:
    return [v for v in sentinels if _pattern(v).search(text)]


def json_leaks(payload, sentinels) -> list[int]:
    found = set()

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                walk(k)
                walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
        elif isinstance(x, bool) or x is None:
            return
        elif isinstance(x, (int, float)):
            found.update(v for v in sentinels if math.isfinite(x) and x == v)
        else:
            found.update(text_leaks(str(x), sentinels))

    walk(payload)
    return sorted(found)


def frame_leaks(frame: pd.DataFrame, sentinels) -> list[int]:
    found = set(text_leaks(" ".join(map(str, frame.columns)), sentinels))
    for column in frame.columns:
        values = frame[column].dropna().tolist()
        found.update(json_leaks(values, sentinels))
    return sorted(found)


def file_leaks(path, sentinels) -> list[int]:
    if path.is_dir() or str(path).endswith(".parquet"):
        found = frame_leaks(pd.read_parquet(path), sentinels)
        for side in path.glob("*") if path.is_dir() else []:
            if side.is_file() and not side.name.endswith(".parquet") and not side.name.endswith(".crc"):
                found += text_leaks(side.read_text(errors="replace"), sentinels)
        return sorted(set(found))
    if str(path).endswith(".csv"):
        return frame_leaks(pd.read_csv(path), sentinels)
    return text_leaks(path.read_text(errors="replace"), sentinels)


# ------------------------------------------------------------------ capturing

@pytest.fixture
def dp_logs(caplog, monkeypatch):
    """Every record of the "dp_spark" logger at DEBUG, also after the CLI
    reconfigures that logger (it replaces its handlers and stops propagation)."""
    logger = logging.getLogger("dp_spark")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    logger.setLevel(logging.DEBUG)
    logger.addHandler(caplog.handler)
    caplog.handler.setLevel(logging.DEBUG)
    real = cli._configure_logging

    def configure(opts):
        real(opts)
        logger.setLevel(logging.DEBUG)
        logger.addHandler(caplog.handler)

    monkeypatch.setattr(cli, "_configure_logging", configure)
    yield caplog
    logger.handlers[:], logger.level, logger.propagate = saved


def captured_leaks(capfd, dp_logs, sentinels) -> dict[str, list[int]]:
    out, err = capfd.readouterr()
    logs = "\n".join(r.getMessage() for r in dp_logs.records)
    return {"stdout": text_leaks(out, sentinels), "stderr": text_leaks(err, sentinels),
            "logs": text_leaks(logs, sentinels)}


def assert_clean(leaks: dict[str, list[int]]) -> None:
    dirty = {where: found for where, found in leaks.items() if found}
    assert not dirty, f"exact values found: {dirty}"


# ------------------------------------------------------------------ data

@pytest.fixture(scope="module")
def people(spark):
    """7,919 persons; person p holds 13 unique items (14 for p < 1,781) and
    "hot" if p < 5,003: 104,728 unique items + hot = 104,729 distinct items."""
    persons = spark.range(PERSONS).select(F.col("id").alias("person_id"))
    n_unique = F.when(F.col("person_id") < 1_781, 14).otherwise(13)
    unique = persons.select("person_id", F.explode(F.sequence(F.lit(1), n_unique)).alias("j")).select(
        "person_id", F.concat(F.lit("u"), F.col("person_id").cast("string"), F.lit("_"),
                              F.col("j").cast("string")).alias("item"))
    hot = persons.where(F.col("person_id") < HOT).select("person_id", F.lit("hot").alias("item"))
    return unique.unionByName(hot).cache()


@pytest.fixture(scope="module")
def events(spark):
    """7,919 items inserted at steps 1..32; items < 2,006 deleted at steps 40..55."""
    items = spark.range(ITEMS_IN).select(F.col("id").alias("item"))
    ins = items.select((F.col("item") % 32 + 1).alias("time"), "item", F.lit(1).alias("op"))
    dels = items.where(F.col("item") < ITEMS_OUT).select(
        (F.col("item") % 16 + 40).alias("time"), "item", F.lit(-1).alias("op"))
    return ins.unionByName(dels).cache()


def test_the_data_plant_the_sentinels(people, events):
    assert people.count() == ROWS
    assert people.select("person_id").distinct().count() == PERSONS
    assert people.select("item").distinct().count() == DISTINCT
    assert people.where(F.col("item") == "hot").count() == HOT
    assert events.count() == EVENTS


# ------------------------------------------------------------------ the releases

def _run_api(name, people, events):
    """The release's registry example (``ReleaseSpec.example``) on the
    sentinel tables: every release runs, none needs an entry here."""
    spec = RELEASES[name]
    table = {"persons": people, "events": events}[spec.example.input]
    return getattr(dp_spark, spec.python_name)(table, **spec.example.parameters, seed=SEED)


def _artifact_frames(release):
    for name, value in release.artifacts.items():
        if isinstance(value, pd.DataFrame):
            yield name, value
        elif hasattr(value, "toPandas"):
            yield name, value.toPandas()  # released items only (small)


@pytest.mark.parametrize("name", list(RELEASES))
def test_api_releases_leak_nothing(name, people, events, capfd, dp_logs):
    sentinels = EVENT_SENTINELS if name == "continual-distinct" else PERSON_SENTINELS
    capfd.readouterr()
    release = _run_api(name, people, events)
    print(release.summary())  # what a user would print
    leaks = captured_leaks(capfd, dp_logs, sentinels)
    leaks["report"] = json_leaks(json.loads(release.to_json()), sentinels)
    assert release.noise, "the release recorded no noise draws"
    leaks["noise records"] = json_leaks([r.to_dict() for r in release.noise], sentinels)
    leaks["error statements"] = text_leaks(" ".join(release.errors.values()), sentinels)
    for artifact, frame in _artifact_frames(release):
        leaks[f"artifact {artifact}"] = frame_leaks(frame, sentinels)
    assert_clean(leaks)
    assert dp_logs.records, "the release logged nothing: the log channel was not exercised"


def test_cli_count_release_leaks_nothing(tmp_path, people, capfd, dp_logs):
    data, report, items = tmp_path / "people.parquet", tmp_path / "r.json", tmp_path / "items.parquet"
    people.write.parquet(str(data))
    capfd.readouterr()
    code = cli.main(["count-release", "--input", str(data), "--rho", "0.5", "--kbar", "50", "--seed", str(SEED),
                     "--verbose", "--output", str(report), "--items-output", str(items)])
    leaks = captured_leaks(capfd, dp_logs, PERSON_SENTINELS)
    assert code == 0
    leaks["report"] = json_leaks(json.loads(report.read_text()), PERSON_SENTINELS)
    leaks["items file"] = file_leaks(items, PERSON_SENTINELS)
    assert_clean(leaks)


def test_cli_continual_distinct_leaks_nothing(tmp_path, events, capfd, dp_logs):
    data, report, series = tmp_path / "events.parquet", tmp_path / "r.json", tmp_path / "series.csv"
    events.write.parquet(str(data))
    capfd.readouterr()
    code = cli.main(["continual-distinct", "--input", str(data), "--rho", "0.5", "--horizon", "64",
                     "--seed", str(SEED), "--verbose", "--output", str(report), "--series", str(series)])
    leaks = captured_leaks(capfd, dp_logs, EVENT_SENTINELS)
    assert code == 0
    leaks["report"] = json_leaks(json.loads(report.read_text()), EVENT_SENTINELS)
    # The estimates are the true counts plus a discrete Gaussian of σ ~ 2 at this horizon: a draw of 0 shows the
    # true count (probability ~0.2 per release; select's block baseline reuses a release for B steps). Every other
    # column must be clean, and the estimates must carry noise.
    frame = pd.read_csv(series)
    leaks["series file"] = frame_leaks(frame.drop(columns=["estimate"]), EVENT_SENTINELS)
    assert frame["estimate"].ne(FINAL).sum() >= len(frame) // 2
    assert_clean(leaks)


def test_the_check_catches_a_planted_leak(people, capfd, dp_logs, monkeypatch):
    """A deliberate leak (the exact top count, logged at DEBUG and printed)
    in a monkeypatched stage function is found in the logs and on stdout."""
    from dp_spark.stages import item_counts

    real = item_counts.top_item_counts

    def leaky(edge_df, kbar):
        top = real(edge_df, kbar)
        logging.getLogger("dp_spark.stages.item_counts").debug("top count %d", int(np.max(top.counts)))
        print(f"persons holding the top item: {int(np.max(top.counts)):,}")
        return top

    monkeypatch.setattr(item_counts, "top_item_counts", leaky)
    capfd.readouterr()
    dp_spark.count_release(people, rho=0.5, delta=1e-6, kbar=50, seed=SEED)
    leaks = captured_leaks(capfd, dp_logs, PERSON_SENTINELS)
    assert leaks["logs"] == [HOT] and leaks["stdout"] == [HOT]
    assert json_leaks({"released": float(HOT)}, PERSON_SENTINELS) == [HOT]
    assert text_leaks("estimate 5,003.0", PERSON_SENTINELS) == [HOT]
    assert text_leaks("estimate 5003.4, persons 17919, 0.7919", PERSON_SENTINELS) == []


# ------------------------------------------------------------------ grouped (issue 24)

def _grouped_people(people):
    """The person table with a group column: "even" / "odd" person ids."""
    parity = F.when(F.col("person_id") % 2 == 0, "even").otherwise("odd")
    return people.withColumn("parity", parity)


def _group_sentinels(table) -> tuple[int, ...]:
    """The exact per-group values (persons, rows, distinct items of each
    group): non-private, so none may appear anywhere, besides the table's."""
    rows = table.groupBy("parity").agg(F.countDistinct("person_id").alias("p"), F.count("*").alias("r"),
                                       F.countDistinct("item").alias("d")).collect()
    values = tuple(int(r[c]) for r in rows for c in ("p", "r", "d"))
    assert all(v >= 1000 for v in values)  # whole numbers unlikely to occur by chance
    return PERSON_SENTINELS + values


def assert_grouped_release_clean(release, capfd, dp_logs, sentinels) -> None:
    """A grouped release's API outputs hold no sentinel: its printed summary
    and the logs, the JSON report, the noise records, the error statements
    and every row of release.groups."""
    print(release.summary())
    leaks = captured_leaks(capfd, dp_logs, sentinels)
    leaks["report"] = json_leaks(json.loads(release.to_json()), sentinels)
    leaks["noise records"] = json_leaks([r.to_dict() for r in release.noise], sentinels)
    leaks["error statements"] = text_leaks(" ".join(release.errors.values()), sentinels)
    leaks["groups"] = frame_leaks(release.groups.toPandas(), sentinels)
    assert_clean(leaks)


def assert_grouped_cli_clean(tmp_path, table, argv, capfd, dp_logs, sentinels) -> None:
    """The same grouped release on the command line (``argv``: the release
    and its flags; the input, the public keys even/odd/none and the outputs
    are added here) exits 0 and holds no sentinel in its logs, its report or
    its --groups-output."""
    data, keys, report, out = (tmp_path / "input.parquet", tmp_path / "keys.csv", tmp_path / "r.json",
                               tmp_path / "groups.parquet")
    table.write.parquet(str(data))
    keys.write_text("parity\neven\nodd\nnone\n")
    capfd.readouterr()
    code = cli.main([*argv, "--input", str(data), "--groups", str(keys), "--verbose", "--output", str(report),
                     "--groups-output", str(out)])
    leaks = captured_leaks(capfd, dp_logs, sentinels)
    assert code == 0
    leaks["report"] = json_leaks(json.loads(report.read_text()), sentinels)
    leaks["groups file"] = file_leaks(out, sentinels)
    assert_clean(leaks)


def test_grouped_distinct_count_leaks_nothing(tmp_path, people, capfd, dp_logs):
    table = _grouped_people(people)
    sentinels = _group_sentinels(table)
    capfd.readouterr()
    release = dp_spark.distinct_count(table, epsilon=1.0, max_bound=4, group_by="parity",
                                      groups=["even", "odd", "none"], max_groups=1, seed=SEED)
    assert_grouped_release_clean(release, capfd, dp_logs, sentinels)
    assert release.result["groups_released"] == 3

    assert_grouped_cli_clean(tmp_path, table, ["distinct-count", "--epsilon", "1", "--max-bound", "4", "--group-by",
                                               "parity", "--max-groups", "1", "--seed", str(SEED)],
                             capfd, dp_logs, sentinels)


def test_grouped_distinct_count_with_private_keys_leaks_nothing(people, capfd, dp_logs):
    """groups omitted: the keys chosen by a set-union on the group column;
    nothing non-private (per-group persons, rows, distinct items) in the
    output, the logs, the noise records or the error statements."""
    table = _grouped_people(people)
    sentinels = _group_sentinels(table)
    capfd.readouterr()
    release = dp_spark.distinct_count(table, epsilon=1.0, max_bound=4, group_by="parity", max_groups=1, seed=SEED)
    assert_grouped_release_clean(release, capfd, dp_logs, sentinels)
    assert release.result["group_keys_released"] == release.result["groups_released"]


GROUPED_ONE_MECHANISM = {  # issue 24: one mechanism on the composite key (group, item)
    "set-union": (dp_spark.set_union, dict(epsilon=1.0, delta=1e-6, max_items=4),
                  ["--epsilon", "1", "--delta", "1e-6", "--max-items", "4"]),
    "count-release": (dp_spark.count_release, dict(rho=0.5, delta=1e-6, kbar=20),
                      ["--rho", "0.5", "--delta", "1e-6", "--kbar", "20"]),
}


@pytest.mark.parametrize("name", sorted(GROUPED_ONE_MECHANISM))
def test_grouped_set_union_and_count_release_leak_nothing(name, tmp_path, people, capfd, dp_logs):
    function, kwargs, flags = GROUPED_ONE_MECHANISM[name]
    table = _grouped_people(people)
    sentinels = _group_sentinels(table)
    capfd.readouterr()
    release = function(table, **kwargs, group_by="parity", groups=["even", "odd", "none"], seed=SEED)
    assert_grouped_release_clean(release, capfd, dp_logs, sentinels)
    assert release.result["groups_released"] == 3

    assert_grouped_cli_clean(tmp_path, table, [name, *flags, "--group-by", "parity", "--max-groups", "1", "--seed",
                                               str(SEED)], capfd, dp_logs, sentinels)


def _grouped_events(events):
    """The event table with a group column: "even" / "odd" items (one group per item)."""
    return events.withColumn("parity", F.when(F.col("item") % 2 == 0, "even").otherwise("odd"))


def _event_group_sentinels(table) -> tuple[int, ...]:
    """The exact per-group values (items inserted, deleted, events, present at
    the end): non-private, so none may appear anywhere."""
    rows = table.groupBy("parity").agg(
        F.countDistinct("item").alias("items"), F.sum(F.when(F.col("op") < 0, 1).otherwise(0)).alias("out"),
        F.count("*").alias("events")).collect()
    values = []
    for r in rows:
        values += [int(r["items"]), int(r["out"]), int(r["events"]), int(r["items"]) - int(r["out"])]
    assert all(v >= 1000 for v in values)  # whole numbers unlikely to occur by chance
    return EVENT_SENTINELS + tuple(values)


#: The grouped continual run's seed: its counts have noise of std 4 (ρ/2 per
#: group), so a recompute equals a plateaued true count (a sentinel, e.g. an
#: 8-step plateau at the 3,959 odd items) with probability ≈ 0.1 by chance;
#: seeds 7, 10 and 11 do so, 8 and 9 do not (measured). A chance hit is not a
#: leak, but the search cannot tell, so the run uses a seed without one.
GROUPED_CONTINUAL_SEED = 8


def test_grouped_continual_distinct_leaks_nothing(tmp_path, events, capfd, dp_logs):
    table = _grouped_events(events)
    sentinels = _event_group_sentinels(table)
    capfd.readouterr()
    release = dp_spark.continual_distinct(table, rho=0.5, horizon=64, group_by="parity",
                                          groups=["even", "odd", "none"], max_groups=1, seed=GROUPED_CONTINUAL_SEED)
    assert_grouped_release_clean(release, capfd, dp_logs, sentinels)
    assert release.result["groups_released"] == 3

    assert_grouped_cli_clean(tmp_path, table, ["continual-distinct", "--rho", "0.5", "--horizon", "64", "--group-by",
                                               "parity", "--max-groups", "1", "--seed", str(GROUPED_CONTINUAL_SEED)],
                             capfd, dp_logs, sentinels)


def test_grouped_top_k_leaks_nothing(tmp_path, people, capfd, dp_logs):
    """Grouped top-k (issue 24): besides the table's sentinels, the per-group
    sizes and each group's count of the shared "hot" item (NON-PRIVATE) appear
    nowhere: API (report, records, errors, release.groups) and CLI (logs,
    report, --groups-output)."""
    table = _grouped_people(people)
    hot = tuple(int(r["n"]) for r in table.where(F.col("item") == "hot").groupBy("parity").agg(
        F.countDistinct("person_id").alias("n")).collect())
    assert all(v >= 1000 for v in hot)
    sentinels = _group_sentinels(table) + hot
    capfd.readouterr()
    release = dp_spark.top_k(table, epsilon=1.0, delta=1e-6, k=3, kbar=50, group_by="parity",
                             groups=["even", "odd", "none"], max_groups=1, seed=SEED)
    assert_grouped_release_clean(release, capfd, dp_logs, sentinels)
    assert release.result["groups_released"] == 3

    assert_grouped_cli_clean(tmp_path, table, ["top-k", "--epsilon", "1", "--delta", "1e-6", "--k", "3", "--kbar", "50",
                                               "--group-by", "parity", "--max-groups", "1", "--seed", str(SEED)],
                             capfd, dp_logs, sentinels)
