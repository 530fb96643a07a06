"""The (person, item) edge table every person-level release starts from (no privacy noise).

:func:`edges` is the one builder (distinct-count, set-union, top-k, count-release), so each schema
check and the null rule are written once. A row whose person or item is null is dropped (a null
person cannot be protected as a person; a null item is not an item); how many were dropped is a
non-private count and is not reported. A column of only nulls (type ``void``) is refused before any
data is read."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark.errors import SchemaError
from dp_spark.sparkjobs import spark_job

PERSON = "person"
ITEM = "item"
#: The edge table's group column: the release's group key, or the constant :data:`UNGROUPED`, so
#: every stage sees one shape (Catalyst prunes the constant where unread: tests/spark/test_edges.py).
GROUP = "group"
#: The group of every row of an ungrouped release.
UNGROUPED = 0

_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_REFUSED = (T.ArrayType, T.MapType, T.StructType, T.BinaryType)


def require_columns(df: DataFrame, *columns: str) -> None:
    """Raise SchemaError unless every named column exists in ``df``."""
    present = list(df.columns)
    missing = [c for c in columns if c not in present]
    if missing:
        raise SchemaError(
            f"column {missing[0]!r} is not in the input; available columns: "
            f"{', '.join(present) or '(none)'}. Set the column name "
            "(person_col= / item_col=, or --person-col / --item-col)."
        )


def _collation(dtype) -> str:
    return str(getattr(dtype, "collation", None) or "UTF8_BINARY").upper()


def require_exact_ids(df: DataFrame, name: str, what: str) -> None:
    """Schema-only check that Spark's equality on column ``name`` is byte equality, as the per-unit
    kernels assume: floats (0.0 equals -0.0) and strings with a non-binary collation ('Bob' equals
    'bob') are refused with a SchemaError. ``what`` names the column's role ("person", "item")."""
    dtype = df.schema[name].dataType
    if isinstance(dtype, (T.FloatType, T.DoubleType)):
        raise SchemaError(
            f"{what} column {name!r} holds floating-point numbers, which are not exact "
            "ids; cast it to a whole-number or string type."
        )
    require_binary_collation(df, name, what)


def require_binary_collation(df: DataFrame, name: str, what: str) -> None:
    """Schema-only: a string column of a non-binary collation is refused with a SchemaError ('Bob'
    equals 'bob' for Spark, not for the kernels' byte comparisons). Other types pass."""
    dtype = df.schema[name].dataType
    if isinstance(dtype, T.StringType) and _collation(dtype) != "UTF8_BINARY":
        raise SchemaError(
            f"{what} column {name!r} has collation {_collation(dtype)}; ids must compare "
            "byte for byte: collate it to UTF8_BINARY (after normalising case) first."
        )


def _normalised(df: DataFrame, name: str, alias: str, *, is_person: bool = False):
    """Integral ids as long, other atomic types as strings (injective for the accepted types);
    nested and binary types refused, and strings of a non-binary collation (Spark's equality would not
    be the kernels' byte equality). For the person column also :func:`require_exact_ids`: otherwise
    one person could be split in two, doubling what one person can change."""
    dtype = df.schema[name].dataType
    if isinstance(dtype, _REFUSED):
        raise SchemaError(
            f"column {name!r} has type {dtype.simpleString()}, which cannot be "
            "used as an id; use a column of strings or integers."
        )
    if is_person:
        require_exact_ids(df, name, "person")
    else:  # Spark would merge 'A' and 'a' where the kernels see two ids: one person's item counted twice
        require_binary_collation(df, name, alias)
    column = F.col(name)
    if isinstance(dtype, _INTEGRAL):
        return column.cast("long").alias(alias)
    if isinstance(dtype, T.StringType):
        return column.alias(alias)
    return column.cast("string").alias(alias)


def key_column(df: DataFrame, name: str, alias: str):
    """Column ``name`` of ``df`` spelled as the edge builder spells a group column
    (:func:`_normalised`), so public keys read from a DataFrame or a file match the rows they name."""
    return _normalised(df, name, alias)


def check_id_columns(df: DataFrame, person_col: str, item_col: str) -> None:
    """Schema-only checks (no data read): both columns exist, differ, and neither is all nulls (type
    ``void``). Raises SchemaError."""
    require_columns(df, person_col, item_col)
    if person_col == item_col:
        raise SchemaError("person and item must be different columns.")
    for name, what in ((person_col, "person"), (item_col, "item")):
        if isinstance(df.schema[name].dataType, T.NullType):
            raise SchemaError(
                f"the {what} column {name!r} holds only nulls (type void), so there is "
                f"nothing to count; choose another {what} column (--{what}-col)."
            )


def edges(df: DataFrame, person_col: str, item_col: str, group_col: str | None = None) -> DataFrame:
    """Columns ``person``, ``item``, ``group`` with null rows dropped (not deduplicated), after
    :func:`check_id_columns` (schema only: call it before spending to check the input without
    reading it). ``group_col`` splits the release into groups (refused like an id column, normalised
    like the item, null rows dropped); None: ``group`` is the constant :data:`UNGROUPED`, which
    Catalyst prunes from every plan that does not read it. NON-PRIVATE intermediate data; never
    collected."""
    check_id_columns(df, person_col, item_col)
    columns = [_normalised(df, person_col, PERSON, is_person=True), _normalised(df, item_col, ITEM)]
    keep = F.col(PERSON).isNotNull() & F.col(ITEM).isNotNull()
    if group_col is None:
        columns.append(F.lit(UNGROUPED).cast("long").alias(GROUP))
    else:
        _check_group_column(df, group_col, person_col, item_col)
        columns.append(_normalised(df, group_col, GROUP))
        keep = keep & F.col(GROUP).isNotNull()
    return df.select(*columns).where(keep)


def person_ids(df: DataFrame, person_col: str) -> DataFrame:
    """Column ``person`` as the edge table spells it, null ids dropped whatever the row's item:
    every person of the input. A size estimate reading it reads the person column alone, not the
    item column the edge table's null rule needs. Adding or removing one person changes its distinct
    persons by at most one, as the edge table's. Schema checks are :func:`edges`'. NON-PRIVATE;
    never collected."""
    return df.select(_normalised(df, person_col, PERSON, is_person=True)).where(F.col(PERSON).isNotNull())


def _check_group_column(df: DataFrame, group_col: str, person_col: str, item_col: str) -> None:
    """Schema-only checks of a group column: it exists, is neither the person nor the item column,
    and has a usable type (:func:`_check_group_type`)."""
    require_columns(df, group_col)
    if group_col in (person_col, item_col):
        raise SchemaError("the group column must differ from the person and item columns.")
    _check_group_type(df, group_col)


def _check_group_type(df: DataFrame, group_col: str) -> None:
    """A group column's type (schema only, before anything is spent): not all nulls; floats and
    non-binary collations refused (:func:`require_exact_ids`: a case-insensitive collation could
    release one person's spelling of a key), and booleans (their keys would be matched as 'True'
    against Spark's 'true')."""
    dtype = df.schema[group_col].dataType
    if isinstance(dtype, T.NullType):
        raise SchemaError(f"the group column {group_col!r} holds only nulls (type void); choose another column.")
    if isinstance(dtype, T.BooleanType):
        raise SchemaError(f"the group column {group_col!r} holds booleans; cast it to a string or an integer first.")
    require_exact_ids(df, group_col, "group")


def group_column(df: DataFrame, group_col: str, other_cols: tuple[str, ...]):
    """The group column of a table that is not a person edge table (the continual release's events):
    the checks and normalisation of :func:`edges`, aliased :data:`GROUP`. Schema only."""
    require_columns(df, group_col)
    if group_col in other_cols:
        raise SchemaError(f"the group column must differ from the {', '.join(other_cols)} columns.")
    _check_group_type(df, group_col)
    return _normalised(df, group_col, GROUP)


def item_type(edge_df: DataFrame) -> T.DataType:
    return edge_df.schema[ITEM].dataType


#: Salt of the public person sample (a constant, not a secret: the sample is a
#: fixed function of the id, which is all the sensitivity argument needs).
PERSON_SAMPLE_SALT = "dp_spark.person_sample"


def count_sampled_persons(edge_df: DataFrame, one_in: int) -> int:
    """NON-PRIVATE: the number of distinct persons p with pmod(xxhash64(salt, p), one_in) = 0, in a
    frame with a ``person`` column (an edge table or :func:`person_ids`).

    Membership depends on the person's own id only, so adding or removing a person changes this
    count by at most 1: sensitivity 1, used only through a noisy mechanism. ``one_in`` times it
    estimates the number of persons (relative standard error about sqrt(one_in / persons)) at a
    fraction of the full count's cost."""
    sample = F.pmod(F.xxhash64(F.lit(PERSON_SAMPLE_SALT), PERSON), F.lit(int(one_in))) == 0
    with spark_job(f"counting the persons of a 1-in-{int(one_in)} hash sample"):
        return int(edge_df.where(sample).agg(F.countDistinct(PERSON).alias("n")).collect()[0]["n"])


def count_persons(edge_df: DataFrame) -> int:
    """NON-PRIVATE: the number of distinct persons. Sensitivity 1 under adding
    or removing a person; only ever used through a noisy mechanism."""
    with spark_job("counting persons"):
        return int(edge_df.agg(F.countDistinct(PERSON).alias("n")).collect()[0]["n"])
