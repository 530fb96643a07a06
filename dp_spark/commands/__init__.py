"""The ``dp-spark`` subcommands, one module each.

A command module defines NAME, HELP, OPTIONS (a tuple of
:class:`dp_spark.commands.base.Option`), ``validate(opts)`` (checks run before
Spark starts), ``cost(opts)`` (the privacy cost, checked against the budget
before any data is read), ``budget(opts)`` (a PrivacyFilter or None) and
``run(spark, df, opts, budget) -> Release``; optionally ARTIFACT_WRITERS, a
mapping name -> ``writer(release, opts)`` for outputs beside the JSON report
(written before the report, atomically).
"""

import importlib

_MODULES = (
    "distinct_count",
    "top_k",
    "count_release",
    "set_union",
    "continual_distinct",
)

COMMANDS = {}
for _name in _MODULES:
    _module = importlib.import_module(f"dp_spark.commands.{_name}")
    COMMANDS[_module.NAME] = _module
