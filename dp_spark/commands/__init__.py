"""The ``dp-spark`` subcommands, one module each.

A command module defines ``COMMAND``, a :class:`dp_spark.commands.base.Command`:
its name, help, options (named as the Python API's parameters; a release's
come from its ``Params``) and its optional hooks as typed fields. Its
release is the entry of :data:`dp_spark.releases.RELEASES` with that name:
the CLI builds the release's plan (``spec.plan``, which checks every release
parameter and gives the cost and its split, as the API does, before Spark
starts) once, and runs the release on that plan (``spec.run(plan, df,
budget=...)``). Budgets (``--budget-*``, ``--ledger``) are built in
:mod:`dp_spark.cli` for every command alike.
"""

from dp_spark.commands import continual_distinct, count_release, distinct_count, set_union, top_k
from dp_spark.releases import RELEASES

#: ``dp-spark <release>`` -> its :class:`~dp_spark.commands.base.Command`, in RELEASES' order.
COMMANDS = {c.name: c for c in (distinct_count.COMMAND, top_k.COMMAND, count_release.COMMAND, set_union.COMMAND,
                                continual_distinct.COMMAND)}
if list(COMMANDS) != list(RELEASES):
    raise ImportError(f"the commands {list(COMMANDS)} are not the releases {list(RELEASES)}, in that order")
