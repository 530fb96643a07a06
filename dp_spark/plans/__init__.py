"""One plan builder per release (``dp_spark.plans.<release>.plan``).

Each takes the release's parameters by name, checks every one (with
:mod:`dp_spark.checks`), and returns a frozen :class:`dp_spark.plan.Plan`:
the guarantee, its split between steps, what will be released. The Python
API, the CLI (also ``--dry-run``) and the jobs all call these, so no check,
cost or budget split is written twice. Nothing here imports pyspark.
"""
