"""The grouped edge table and the groups output of a per-group release.

Used by :func:`dp_spark.releases.template.run_release` for ``Params`` with
``group_by`` (:class:`dp_spark.plan.GroupParams`): :func:`resolve_keys` reads
the PUBLIC keys before anything is spent (more than the release's limit,
``Params.MAX_KEYS``, refused from the keys alone);
:func:`grouped_edges` restricts the edge table to them and caps each person
to m groups (:func:`dp_spark.stages.groups.cap_groups`). Both are per-person
transformations: add/remove-one-person neighbours differ in that person's
rows only, which lie in at most m groups. :func:`report_groups` shapes the
report's first groups (each release builds its ``release.groups`` frame from
Spark or Arrow arrays of released values).

Every key is released, also one with no rows: whether a group appears never
depends on the data. All releases key their work on the keys' canonical
order (:class:`dp_spark.keys.GroupKeys`: per-group noise drawn in index order, the
composite (group index, item) key hashed), so the output, also a seeded one,
depends on the key SET only.
"""

from __future__ import annotations

import copy
import dataclasses

from pyspark.sql import types as T

from dp_spark.errors import ParameterError
from dp_spark.io import read_input
from dp_spark.keys import GroupKeys
from dp_spark.plan import REPORT_GROUPS, keys_limit_reason, set_checked
from dp_spark.stages.edges import GROUP, key_column
from dp_spark.stages.group_items import join_keys, key_frame
from dp_spark.stages.groups import cap_groups

GROUP_INDEX = "group_index"


def _keys_of_frame(frame, group_by: str, what: str, limit: int):
    """The distinct keys of a PUBLIC one-column frame (or its ``group_by`` column) as an Arrow array
    (collected with ``toArrow``, never as Rows), at most ``limit``; the empty string is a key, a null
    key (a CSV's empty field) is refused."""
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

    # the edge builder's spelling (Spark's cast to string), so a key matches the rows it names;
    # one more than the limit, besides a null
    keys = frame.select(key_column(frame, column, "k")).distinct().limit(int(limit) + 2).toArrow().column("k")
    valid = len(keys) - keys.null_count
    if valid > limit:
        raise ParameterError(f"groups: {what} holds more than {limit:,} public keys, this release's limit "
                             f"({keys_limit_reason(limit)}).")
    if keys.null_count:
        raise ParameterError(f"groups: {what} holds an empty or null key (Spark reads an empty CSV field as "
                             "null, so a blank key cannot be told from a missing one); remove it, or give the "
                             "empty-string key in a Parquet or JSON file or a list, where it is a key of its own.")
    if not valid:
        raise ParameterError(f"groups: {what} holds no key.")
    return keys


def resolve_keys(spark, groups, group_by: str, limit: int):
    """The public keys of ``groups=``: a tuple or :class:`~dp_spark.keys.GroupKeys` as given, or a
    DataFrame's or a file's distinct keys as an Arrow array (at most ``limit``). Reads only the
    public input."""
    if isinstance(groups, (tuple, GroupKeys)):
        return groups
    if isinstance(groups, str):
        frame = read_input(spark, groups, "auto", columns=[group_by])
        return _keys_of_frame(frame, group_by, f"the file {groups}", limit)
    return _keys_of_frame(groups, group_by, "the groups DataFrame", limit)


def grouped_edges(plan, edge_df, keys=None, cap: bool = True):
    """(plan, edge table) of a grouped run: the plan with ``params.groups``
    resolved to the keys (:class:`~dp_spark.keys.GroupKeys`; their number in
    its parameters); the edge table restricted to the keys (``group_index``
    added) and capped to ``max_groups`` per person. Lazy; only the public keys
    are read. ``keys``: those a private key step released (possibly none: an
    empty table). ``cap=False``: not capped (``run_release(caps_in_stage=True)``)."""
    p = plan.params
    spark = edge_df.sparkSession
    limit = type(p).MAX_KEYS
    given = resolve_keys(spark, p.groups, p.group_by, limit) if keys is None else keys
    group_type = edge_df.schema[GROUP].dataType
    typed = given if isinstance(given, GroupKeys) else GroupKeys.of(given, isinstance(group_type, T.LongType))
    if len(typed) > limit:  # a list is checked by the plan, a frame above; released keys are truncated
        raise ParameterError(f"groups: {len(typed):,} keys; at most {limit:,} ({keys_limit_reason(limit)}).")

    bound = len(typed) if keys is None else limit  # released keys: the public limit, not their number
    restricted = join_keys(edge_df, key_frame(spark, typed, group_type, bound=bound), GROUP, bound)
    # max_groups=None: the body caps after choosing m; m >= #keys keeps every row (no window)
    capped = (restricted if p.max_groups is None or not cap
              else cap_groups(restricted, p.max_groups, public_keys=len(typed) if keys is None else None))
    params = copy.copy(p)  # the keys were checked (public) or released (private): no re-check, () allowed
    set_checked(params, groups=typed)
    parameters = {**plan.parameters, "group_keys": len(typed)}
    plan = dataclasses.replace(plan, steps=tuple(plan.split), parameters=parameters, params=params)
    return plan, capped


def report_groups(rows: list[dict]) -> tuple[list[dict], bool]:
    """The first REPORT_GROUPS rows for the JSON report (canonical key order),
    and whether more exist."""
    return [dict(r) for r in rows[:REPORT_GROUPS]], len(rows) > REPORT_GROUPS

