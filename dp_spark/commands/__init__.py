"""The ``dp-spark`` subcommands, one module each."""

from dp_spark.commands import distinct_count

COMMANDS = {module.NAME: module for module in (distinct_count,)}
