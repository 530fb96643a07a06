"""One plan builder per release: each module has the release's ``Params`` (every parameter's default,
help and public limit; construction runs the checks) and ``plan(params)`` or ``plan(**keywords)``,
returning a frozen :class:`dp_spark.plan.Plan`. Nothing here imports pyspark.
"""

#: Help texts several releases' parameters share (the CLI's --help).
EPSILON_HELP = ("privacy parameter ε spent by the release; from 1e-6 to 50 (below, the noise swamps every "
                "count; above, e^ε bounds nothing)")
RHO_HELP_TAIL = "from 1e-12 to 50 (below, the noise swamps every count; above, nothing is protected)"
PERSON_COL_HELP = "column identifying the person (the privacy unit)"
ITEM_COL_HELP = "column holding the item"
SEED_HELP = "fixed seed for tests and demos ONLY: the output is then not private"
