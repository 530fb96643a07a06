"""The ``dp-spark`` subcommands, one module each.

A command module defines NAME, HELP, OPTIONS (a tuple of
:class:`dp_spark.commands.base.Option`, named as the Python API's
parameters), PLAN (``"dp_spark.plans.<release>:plan"``, which checks every
release parameter and gives the cost and its split: the CLI builds the same
plan as the API, before Spark starts) and RELEASE (the API function, called
with the options it takes). Optionally: ``validate(opts)`` for options of the
command line only, ``complete(opts)`` for defaults that depend on other
options (before anything else), ``plan_options(opts)`` to fill demo defaults before the
plan, ``load_table(spark, opts)``, ``run(spark, df, opts, budget)`` where the
call is not the plain API call, and ARTIFACT_WRITERS, a mapping name ->
``writer(release, opts)`` for outputs beside the JSON report (written before
the report, atomically). Budgets (``--budget-*``, ``--ledger``) are built in
:mod:`dp_spark.cli` for every command alike.
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
