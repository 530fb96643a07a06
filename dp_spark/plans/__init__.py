"""One plan builder per release (``dp_spark.plans.<release>.plan``).

Each module has the release's ``Params`` (a frozen dataclass: every
parameter's name, default, help and public limit; constructing one checks
every value with :mod:`dp_spark.checks`) and ``plan(params)`` (also
``plan(**keywords)``, which builds the ``Params`` first), returning a frozen :class:`dp_spark.plan.Plan`:
the guarantee, its split between steps, what will be released. The Python
API, the CLI (also ``--dry-run``) and the jobs all call these, so no check,
cost or budget split is written twice. Nothing here imports pyspark.
"""

#: Help texts several releases' parameters share (the CLI's --help).
EPSILON_HELP = ("privacy parameter ε spent by the release; from 1e-6 to 50 (below, the noise swamps every "
                "count; above, e^ε bounds nothing)")
RHO_HELP_TAIL = "from 1e-12 to 50 (below, the noise swamps every count; above, nothing is protected)"
PERSON_COL_HELP = "column identifying the person (the privacy unit)"
ITEM_COL_HELP = "column holding the item"
SEED_HELP = "fixed seed for tests and demos ONLY: the output is then not private"
