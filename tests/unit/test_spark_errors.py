"""One-sentence descriptions of Spark failures, from their conditions and
cause classes only (Spark's own text can quote data values)."""

from dp_spark.sparkjobs import describe_failure, error_class, is_input_failure

MALFORMED = """An error occurred while calling o174.save.
: org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while reading file file:///data/in.csv.  SQLSTATE: KD001
\tat org.apache.spark.sql.errors.QueryExecutionErrors$.cannotReadFilesError(QueryExecutionErrors.scala:856)
Caused by: org.apache.spark.SparkException: [MALFORMED_RECORD_IN_PARSING.WITHOUT_SUGGESTION] Malformed records are detected in record parsing: [SECRET_VALUE,b].
Caused by: org.apache.spark.SparkRuntimeException: [MALFORMED_CSV_RECORD] Malformed CSV record: SECRET_VALUE,b,EXTRA SQLSTATE: KD000
"""

STREAM = """Query [id = 1] terminated with exception: Job aborted.
Caused by: org.apache.spark.SparkException: Job aborted due to stage failure
Caused by: org.apache.spark.api.python.PythonException: Traceback: ValueError: 'alice@example.com'
Caused by: java.lang.OutOfMemoryError: Java heap space
"""


def test_malformed_rows_are_an_input_failure_without_data_values():
    exc = RuntimeError(MALFORMED)
    assert is_input_failure(exc)
    text = describe_failure(exc)
    assert "some rows do not parse" in text and "SECRET" not in text
    assert error_class(exc) == "MALFORMED_CSV_RECORD"


def test_the_innermost_cause_class_names_a_stream_failure():
    exc = RuntimeError(STREAM)
    assert not is_input_failure(exc)
    assert error_class(exc) == "OutOfMemoryError"
    assert describe_failure(exc) == "Spark error OutOfMemoryError"


def test_a_failed_file_is_named_by_its_path():
    exc = RuntimeError("org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while "
                       "reading file file:///data/part-2.csv.  SQLSTATE: KD001")
    assert "'/data/part-2.csv' cannot be read" in describe_failure(exc)
