"""The ``dp-spark`` subcommands: one per release of :data:`dp_spark.releases.RELEASES`.

A :class:`dp_spark.commands.base.Command` holds a subcommand's name, help,
options (named as the Python API's parameters; a release's come from its
``Params``) and its optional hooks as typed fields. A release without hooks
gets :func:`~dp_spark.commands.params.default_command`, built from its spec
and ``Params``; one with hooks has a module here defining ``COMMAND``. The
CLI builds the release's plan (``spec.plan``, which checks every release
parameter and gives the cost and its split, as the API does, before Spark
starts) once, and runs the release on that plan (``spec.run(plan, df,
budget=...)``). Budgets (``--budget-*``, ``--ledger``) are built in
:mod:`dp_spark.cli` for every command alike.
"""

from dp_spark.commands import continual_distinct, count_release, distinct_count, set_union, top_k
from dp_spark.commands.params import default_command
from dp_spark.releases import RELEASES

_OWN = {c.name: c for c in (distinct_count.COMMAND, top_k.COMMAND, count_release.COMMAND, set_union.COMMAND,
                            continual_distinct.COMMAND)}
if set(_OWN) - set(RELEASES):
    raise ImportError(f"the commands {sorted(set(_OWN) - set(RELEASES))} are no release of RELEASES")

#: ``dp-spark <release>`` -> its :class:`~dp_spark.commands.base.Command`, in RELEASES' order.
COMMANDS = {name: _OWN.get(name) or default_command(spec) for name, spec in RELEASES.items()}
