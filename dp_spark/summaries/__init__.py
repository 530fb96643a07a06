"""Noise-free summaries of the data (pure numpy), used by the Spark stages
and the mechanisms alike; nothing here draws privacy noise or imports pyspark.

- :mod:`.continual_distinct`: flip events and stream summaries of an
  insert/delete stream (the counts the continual trees add noise to).
- :mod:`.continual_chunks`: those flip cells packed one Arrow row per chunk
  of the (step, level) range, and added chunk by chunk (the Spark stage's
  transport; pyarrow, no pyspark).
- :mod:`.packed_arrays`: numpy arrays packed as Arrow binary values, read
  back from the buffers (that transport's, and distinct-count's combine's).
- :mod:`.set_union`: the set-union update policies (count, weighted and
  policy histograms, Gopi et al. 2020): bounded-sensitivity weightings, no noise.
"""
