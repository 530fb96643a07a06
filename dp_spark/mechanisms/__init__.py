"""The mechanism layer: every privacy-noise draw of dp_spark, in pure numpy.

One package per release: :mod:`.distinct_count` (Knop & Steinke 2023),
:mod:`.set_union` (Gopi et al. 2020), :mod:`.top_k` (joint, peeling,
unknown-domain and ``auto``), :mod:`.count_release` (Rogers) and
:mod:`.continual_distinct` (Jain, Kalemaj, Raskhodnikova, Sivakumar, Smith
2023). :mod:`.exponential` holds the exponential mechanism, report-noisy-max
and permute-and-flip; :mod:`.groups` the group cap's choice and per-group
scales. Nothing here imports pyspark (``tests/unit/test_pyspark_free.py``);
the Spark stages import nothing from here.
"""
