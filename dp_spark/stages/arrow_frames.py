"""Spark DataFrames from driver-side Arrow tables of public or released values, at any size. No privacy
noise; NON-PRIVATE outputs.

``spark.createDataFrame(arrow_table)`` makes a table below ``spark.sql.execution.arrow.localRelationThreshold``
(48 MB by default) a ``LocalRelation``: its rows live in the query plan, and every later step on a plan
that holds 10^6 of them walks them — each DataFrame call 40–58 ms instead of 3.5 ms, a grouped
release's join of 2M rows with a 10^6-key table 1.9 s instead of 0.7 s
(benchmarks/results/2026-11-30-key-table.md). :func:`arrow_frame` keeps small tables on that path and
sends a larger one as a few Arrow IPC streams, one row each, decoded by a Python pass
(:func:`_decode`): the plan holds a handful of rows whatever the table's size, on a classic session and on
Spark Connect alike.

Privacy: the path is chosen from ``bound``, a PUBLIC bound on the table's rows given by the caller (the
public key count, or the release's key limit when the keys were chosen privately), never from the
table's own length; nothing here logs, names a job or reads data."""

from __future__ import annotations

import pyarrow as pa

from dp_spark.stages.python_worker import worker_pass

#: Rows up to which a table becomes a LocalRelation (Spark's own path); above, IPC chunks.
LOCAL_ROWS = 20_000
#: Rows per IPC chunk (one row of the chunk table each).
CHUNK_ROWS = 1 << 16
#: The chunk table's column.
_CHUNK = "_arrow_ipc"


def arrow_frame(spark, table: pa.Table, schema, *, bound: int):
    """A DataFrame of ``table``'s rows with the Spark ``schema`` (a StructType whose fields are the
    table's columns, in order). ``bound``: a public bound on ``len(table)`` that picks the path: up to
    :data:`LOCAL_ROWS`, ``spark.createDataFrame(table, schema)``; above, chunks of :data:`CHUNK_ROWS`
    rows as Arrow IPC streams in a small table, decoded on the executors (a bound below the table's
    length is the caller's error; the chunks then follow the length). Lazy either way; the rows and
    their order are ``table``'s (within a chunk, and chunk after chunk)."""
    if bound <= LOCAL_ROWS:
        return spark.createDataFrame(table, schema)
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(schema)
    table = table.cast(arrow_schema)
    streams = [_ipc(batch) for batch in table.to_batches(max_chunksize=CHUNK_ROWS)]
    empty = _ipc(pa.RecordBatch.from_pylist([], schema=arrow_schema))
    streams += [empty] * (-(-bound // CHUNK_ROWS) - len(streams))  # as many chunk rows as the bound's
    chunks = spark.createDataFrame(pa.table({_CHUNK: pa.array(streams, pa.binary())}),
                                   T.StructType([T.StructField(_CHUNK, T.BinaryType(), False)]))
    return chunks.mapInArrow(_decode, schema)


def join_public(frame, table, on, *, broadcast: bool, how: str = "inner"):
    """``frame`` joined with a public ``table`` made by :func:`arrow_frame`: broadcast when ``broadcast``
    (the caller's choice from a public size), else a sort-merge join, said by a hint: Spark estimates a
    chunked table at its chunks' few KB and would broadcast it unasked (10^6 keys in every executor)."""
    from pyspark.sql import functions as F

    return frame.join(F.broadcast(table) if broadcast else table.hint("merge"), on=on, how=how)


def _ipc(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


@worker_pass
def _decode(batches):
    """mapInArrow body of :func:`arrow_frame`: each chunk row's IPC stream, as its record batches (already
    in the frame's Arrow schema)."""
    for batch in batches:
        for stream in batch.column(0).to_pylist():
            yield from pa.ipc.open_stream(stream)
