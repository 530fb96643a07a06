"""The grouped edge table and the groups output of a per-group release (issue 24).

Used by the release template (:func:`dp_spark.releases.template.run_release`)
when a release's ``Params`` has ``group_by`` (:class:`dp_spark.plan.GroupParams`):

1. :func:`resolve_keys` — the PUBLIC group keys (``groups=``: a list, a
   one-column Spark DataFrame or a file) as a tuple, read before anything is
   spent; more than :data:`~dp_spark.plan.MAX_PUBLIC_GROUPS` keys are refused
   from the public keys alone (the data is not read).
2. :func:`grouped_edges` — the edge table restricted to those keys (a
   broadcast join that adds each row's group index, the key's position in the
   canonical order of the keys, :func:`canonical_keys`), then :func:`dp_spark.stages.groups.cap_groups` to at most m
   groups per person (with ``max_groups=None`` the release caps after
   choosing m privately). Both are per-person transformations: on add/remove-one-
   person neighbours the results differ in that person's rows only, and that
   person's rows lie in at most m groups. Rows with a null group were dropped
   by the edge builder.
3. :func:`groups_frame` — ``release.groups``: a Spark DataFrame of the
   released per-group values (the group column under its own name, the
   release's per-value columns and each row's error statement), made from
   released values only; :func:`report_groups` — the first
   :data:`~dp_spark.plan.REPORT_GROUPS` of them for the JSON report.

Every key is released, also one with no rows: the keys are public, so
whether a group appears never depends on the data.

Key order: every grouped release sees its keys in ONE canonical order, the
keys in the group column's type sorted (:func:`canonical_keys`), whatever
order a list, a file or a DataFrame gave them in. The group index (the key's
position) is what the releases key their work on — the per-group noise of
top-k, continual-distinct and distinct-count is drawn group by group in
index order, and set-union's and count-release's composite key (group index,
item) feeds their salted hashes — so the output (also a seeded one) depends
on the key SET only, and ``release.groups`` and the report list the groups
in that order.
"""

from __future__ import annotations

import copy
import dataclasses

from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark.errors import ParameterError
from dp_spark.io import read_input
from dp_spark.plan import MAX_PUBLIC_GROUPS, REPORT_GROUPS, set_checked
from dp_spark.stages.edges import GROUP, key_column
from dp_spark.stages.groups import cap_groups

GROUP_INDEX = "group_index"


def _keys_of_frame(frame, group_by: str, what: str) -> tuple:
    """The distinct keys of a PUBLIC one-column frame (or its ``group_by``
    column), sorted (a frame has no order); at most MAX_PUBLIC_GROUPS + 2
    rows reach the driver before a refusal. The empty string is a key like
    any other (released, also in ``release.groups``, ``--groups-output`` and
    the report, where it stays apart from null); a null key is refused,
    naming it, never dropped silently: a CSV's empty field reads as null
    (issue 42 §4)."""
    columns = list(frame.columns)
    if group_by in columns:
        column = group_by
    elif len(columns) == 1:
        column = columns[0]
    else:
        raise ParameterError(f"groups: {what} must have one column, or a column named {group_by!r}; it has "
                             f"{', '.join(columns) or 'none'}.")

    if isinstance(frame.schema[column].dataType, (T.ArrayType, T.MapType, T.StructType, T.BinaryType)):
        raise ParameterError(f"groups: the key column {column!r} of {what} must hold strings or whole numbers.")

    # the edge builder's spelling (Spark's own cast to string for dates, timestamps, decimals, …), so a key
    # matches the rows it names: Python's str() spells a timestamp or a decimal differently
    # one more than the limit, besides a null (public keys)
    rows = frame.select(key_column(frame, column, "k")).distinct().limit(MAX_PUBLIC_GROUPS + 2).collect()
    keys = [r["k"] for r in rows if r["k"] is not None]
    if len(keys) > MAX_PUBLIC_GROUPS:
        raise ParameterError(f"groups: {what} holds more than {MAX_PUBLIC_GROUPS:,} public keys (the limit: the "
                             "driver receives every group's summary and runs each group's mechanism).")
    if len(keys) < len(rows):
        raise ParameterError(f"groups: {what} holds an empty or null key (Spark reads an empty CSV field as "
                             "null, so a blank key cannot be told from a missing one); remove it, or give the "
                             "empty-string key in a Parquet or JSON file or a list, where it is a key of its own.")
    if not keys:
        raise ParameterError(f"groups: {what} holds no key.")
    return tuple(sorted(keys, key=lambda k: (str(type(k)), k)))


def canonical_keys(typed: list) -> tuple:
    """The keys (already in the group column's type: all ints or all
    strings) in the canonical order every grouped release shares: sorted by
    (type name, value) — whole numbers by value, strings by code point (a
    date, timestamp or decimal column's keys are strings, Spark's spelling,
    so they sort as text) (the
    order Spark's ``orderBy`` gives the privately released keys, so those
    keep theirs). Public values only."""
    return tuple(sorted(typed, key=lambda k: (type(k).__name__, k)))


def resolve_keys(spark, groups, group_by: str) -> tuple:
    """The public keys of ``groups=`` as a tuple (a list as given; a
    DataFrame's or a file's keys sorted; :func:`grouped_edges` puts every
    one in the canonical order). Reads only the public input."""
    if isinstance(groups, tuple):
        return groups
    if isinstance(groups, str):
        frame = read_input(spark, groups, "auto", columns=[group_by])
        return _keys_of_frame(frame, group_by, f"the file {groups}")
    return _keys_of_frame(groups, group_by, "the groups DataFrame")


def _typed_keys(keys: tuple, group_type) -> list:
    """The keys in the edge table's group type (long, or string: the edge
    builder's normalisation); a key that is not a whole number for a
    whole-number column is refused (public values)."""
    if isinstance(group_type, T.LongType):
        out = []
        for k in keys:
            try:
                out.append(int(k) if not isinstance(k, float) or k.is_integer() else None)
            except (TypeError, ValueError):
                out.append(None)
            if out[-1] is None:
                raise ParameterError(f"groups: the group column holds whole numbers; the key {k!r} is not one.")
        return out
    return [str(k) for k in keys]


def grouped_edges(plan, edge_df, keys: tuple | None = None, cap: bool = True):
    """(plan, edge table) of a grouped run, before anything is spent: the
    plan with ``params.groups`` resolved to the public key tuple and the
    number of keys in its parameters; the edge table restricted to the keys
    (column ``group_index`` added) and capped to ``max_groups`` groups per
    person. Lazy: only the public keys are read. ``keys``: the keys a
    private key step released (``groups=None``; then after spending, and
    possibly none: the edge table is then empty). ``cap=False``: not capped
    (the release's stage applies the cap itself, ``run_release(caps_in_stage=True)``)."""
    p = plan.params
    spark = edge_df.sparkSession
    keys = resolve_keys(spark, p.groups, p.group_by) if keys is None else tuple(keys)
    group_type = edge_df.schema[GROUP].dataType
    typed = _typed_keys(keys, group_type)
    if len(set(typed)) != len(typed):  # public keys only (released keys are distinct values of the column)
        raise ParameterError("groups: two keys are the same value in the group column's type.")
    typed = list(canonical_keys(typed))  # the group index depends on the key SET only (module doc)

    schema = T.StructType([T.StructField(GROUP, group_type, False), T.StructField(GROUP_INDEX, T.IntegerType(), False)])
    key_df = spark.createDataFrame([(k, i) for i, k in enumerate(typed)], schema)
    restricted = edge_df.join(F.broadcast(key_df), on=GROUP, how="inner")
    # max_groups=None: the release chooses m privately after spending, then caps (its body)
    # public_keys: the table is restricted to the keys, so m >= #keys keeps every row (no window)
    capped = (restricted if p.max_groups is None or not cap
              else cap_groups(restricted, p.max_groups, public_keys=len(typed)))
    params = copy.copy(p)  # the keys were checked (public) or released (private): no re-check, () allowed
    set_checked(params, groups=tuple(typed))
    parameters = {**plan.parameters, "group_keys": len(typed)}
    plan = dataclasses.replace(plan, steps=tuple(plan.split), parameters=parameters, params=params)
    return plan, capped


def groups_frame(spark, plan, group_type, rows: list[dict], columns: list[tuple[str, object]]):
    """``release.groups``: one row per public key, the group column under its
    own name (``plan.params.group_by``), then ``columns`` ((name, Spark
    type) of the release's per-value columns) and ``error``. Released values
    only (≤ MAX_PUBLIC_GROUPS rows, made on the driver)."""
    name = plan.params.group_by
    fields = [T.StructField(name, group_type, False)]
    fields += [T.StructField(c, t, True) for c, t in columns]
    fields.append(T.StructField("error", T.StringType(), False))
    data = [tuple([r["group"], *[r[c] for c, _ in columns], r["error"]]) for r in rows]
    return spark.createDataFrame(data, T.StructType(fields))


def report_groups(rows: list[dict]) -> tuple[list[dict], bool]:
    """The per-group values the JSON report carries: the first
    REPORT_GROUPS rows (the keys' canonical order), and whether more exist (they
    are in ``release.groups`` / ``--groups-output`` only)."""
    return [dict(r) for r in rows[:REPORT_GROUPS]], len(rows) > REPORT_GROUPS
