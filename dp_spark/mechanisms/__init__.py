"""The mechanism layer: every privacy-noise draw of dp_spark, in pure numpy.

One package per release, named after it, holds that release's mechanisms:

- :mod:`.distinct_count`: bound selection with the Generalized Exponential
  Mechanism and the discrete Laplace count (Knop & Steinke 2023).
- :mod:`.set_union`: the noisy thresholds of the set-union histograms
  (Gopi et al. 2020; the update policies, which draw no noise, are in
  :mod:`dp_spark.summaries.set_union`).
- :mod:`.top_k`: :mod:`~.top_k.joint`, :mod:`~.top_k.peeling`,
  :mod:`~.top_k.unknown_domain` and the default's choice, :mod:`~.top_k.auto`.
- :mod:`.count_release`: Private Count Release and the contribution-bounding
  baseline (Rogers et al.).
- :mod:`.continual_distinct`: binary tree mechanisms, sparse vector and the
  online counter (Jain, Kalemaj, Raskhodnikova, Sivakumar, Smith 2023).

:mod:`.exponential` holds the exponential mechanism, report-noisy-max and
permute-and-flip that several releases build on. Nothing here imports pyspark
(``tests/unit/test_pyspark_free.py`` proves it); the Spark stages
(:mod:`dp_spark.stages`) import nothing from here.
"""
