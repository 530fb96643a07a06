"""Each release's public settings: method names, defaults, limits and the
checks on them, in one module per release.

They are facts the Spark stages (:mod:`dp_spark.stages`), the mechanisms
(:mod:`dp_spark.mechanisms`) and the plans (:mod:`dp_spark.plans`) all need,
so they live below all three: a lower layer never imports ``plans`` (issue 23,
``tests/unit/test_layers.py``). Nothing here imports pyspark or draws noise;
the plans re-export these names.
"""
