"""Each release's public settings (method names, defaults, limits and their
checks), one module per release. They live below the stages, mechanisms and
plans that all need them (``tests/unit/test_layers.py``); nothing here
imports pyspark or draws noise; the plans re-export these names."""
