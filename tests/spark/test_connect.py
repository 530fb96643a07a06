"""The distinct-count and set-union releases on Spark Connect (what Databricks notebooks use).

Runs in a subprocess: ``SparkSession.builder.remote("local[2]")`` starts a
local Spark Connect server, where RDDs and SparkContext do not exist, so any
use of them in the library would fail here. Both releases run on one server
(a server's start is most of the test's time).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import jsonschema
import pytest

SCRIPT = textwrap.dedent(
    """
    import json
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.session import SparkSession as ConnectSession
    import dp_spark
    from dp_spark.session import get_session

    spark = SparkSession.builder.remote("local[2]").config("spark.sql.shuffle.partitions", "2").getOrCreate()
    assert isinstance(spark, ConnectSession), type(spark)
    assert get_session() is spark  # the library uses the running Connect session
    rows = [(p, "w%d" % ((p * 7 + k) % 50)) for p in range(60) for k in range(p % 6 + 1)]
    df = spark.createDataFrame(rows, "person_id long, item string")
    out = {}
    for method in ("greedy", "sampling", "matching"):
        out[method] = dp_spark.distinct_count(df, epsilon=1.0, max_bound=8, method=method, seed=1).to_dict()
    from dp_spark.stages import bounded_distinct_counts
    out["counts"] = bounded_distinct_counts(df, "person_id", "item", 8, "greedy", shards=2).tolist()
    words = spark.createDataFrame([(p, "w%d" % ((p * 7 + k) % 40)) for p in range(200) for k in range(p % 6 + 1)],
                                  "person_id long, item string")
    union = dp_spark.set_union(words, epsilon=3.0, delta=1e-3, max_items=4, seed=1)  # policy-gaussian, sharded
    out["set-union"] = [union.released_count, sorted(r["item"] for r in union.items.collect())]
    print("RESULT" + json.dumps(out))
    spark.stop()
    """
)


@pytest.mark.connect
def test_distinct_count_and_set_union_on_spark_connect(tmp_path, report_schema):
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env,
                          timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT"))
    out = json.loads(line[len("RESULT"):])
    for method in ("greedy", "sampling", "matching"):
        jsonschema.validate(out[method], report_schema)
        assert out[method]["result"]["method"] == method and out[method]["privacy"]["epsilon"] == 1.0
    counts = out["counts"]
    assert counts == sorted(counts) and counts[-1] == 50
    size, items = out["set-union"]
    assert size == len(items) > 0 and set(items) <= {f"w{i}" for i in range(40)}
