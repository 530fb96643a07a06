"""One module per release: glue a Spark stage's summary to a mechanism and
return a :class:`dp_spark.report.Release`. The only layer that knows both."""
