"""The ``dp-spark`` subcommands, one module each.

A command module defines NAME, HELP, OPTIONS (a tuple of
:class:`dp_spark.commands.base.Option`, named as the Python API's
parameters). Its release is the entry of :data:`dp_spark.releases.RELEASES`
named NAME: the CLI builds the release's plan (``spec.plan``, which checks
every release parameter and gives the cost and its split, as the API does,
before Spark starts) once, and runs the release on that plan
(``spec.run(plan, df, budget=...)``). Optionally: ``validate(opts)`` for options of the
command line only, ``complete(opts)`` for defaults that depend on other
options (before anything else), ``plan_options(opts)`` to fill demo defaults before the
plan, ``load_table(spark, opts)``, ``run(spark, plan, df, opts, budget)`` where the
call is not the plain ``spec.run(plan, df, budget=...)``, and ARTIFACT_WRITERS, a mapping name ->
``writer(release, opts)`` for outputs beside the JSON report (written before
the report, atomically). Budgets (``--budget-*``, ``--ledger``) are built in
:mod:`dp_spark.cli` for every command alike.
"""

from dp_spark.releases import RELEASES

#: ``dp-spark <release>`` -> its command module (``dp_spark.commands.<python name>``),
#: one per entry of RELEASES, in its order.
COMMANDS = {name: spec.command for name, spec in RELEASES.items()}
for _name, _module in COMMANDS.items():
    if _module.NAME != _name:
        raise ImportError(f"{_module.__name__}.NAME is {_module.NAME!r}, not its release's name {_name!r}")
