"""The group keys of a grouped release, held as one Arrow array.

A grouped release's keys are public (given as a list, a one-column DataFrame,
a file or a table) or released by its private key step (a DP output). Either
way the release holds them in canonical order — whole numbers by value,
strings by code point, which is the order of Python's sort of the values and
of Arrow's and Spark's sort of their UTF-8 bytes — so a group's index (its
position) depends on the key SET only, never on how the keys were given or
partitioned. The index keys every per-group draw and the composite
(group index, item) key, so a seeded output depends on the key set only.

:class:`GroupKeys` keeps the O(G) values in one Arrow array on the driver,
never in a Python list or dict; a body reads a key by index, the JSON report
its first keys (:meth:`GroupKeys.head`), and Spark joins the key table built
from the array (:func:`dp_spark.stages.group_items.key_frame`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Iterable, Iterator

from dp_spark.errors import ParameterError

#: Keys a release holding its per-group work in Spark and numpy arrays takes (set-union): the key
#: table is one Arrow array on the driver (about 10 MB at 10^6 short keys) and a Spark join.
MAX_GROUP_KEYS = 1_000_000

#: Keys converted to Python values at a time (iteration, digest).
_CHUNK = 65_536


def json_digest(chunks: Iterable[list]) -> str:
    """sha256 of the JSON list ``[[type name, key], ...]`` of the keys given in ``chunks`` (lists of
    Python values), written compactly (no spaces, UTF-8): the digest of a keyed run's public keys or
    domain (:func:`dp_spark.ledger.budget.keys_digest`), streamed so no whole text is built."""
    digest = hashlib.sha256(b"[")
    first = True
    for chunk in chunks:
        if not chunk:
            continue
        # one encoder call per chunk (the list's JSON without its brackets): the same bytes as one
        # json.dumps per key, about 2.7x faster at 10^6 keys
        text = json.dumps([[type(k).__name__, k] for k in chunk], ensure_ascii=False, separators=(",", ":"))[1:-1]
        digest.update((b"" if first else b",") + text.encode("utf-8"))
        first = False
    digest.update(b"]")
    return "sha256:" + digest.hexdigest()


class GroupKeys(Sequence):
    """Distinct group keys in canonical order (module docstring) in one Arrow array of int64 (a
    whole-number group column) or string values. A read-only sequence of Python values
    (``keys[i]``, ``len(keys)``, iteration in chunks) for bodies that loop over a few keys;
    :attr:`arrow` for those that must not. Public values or DP output only."""

    __slots__ = ("_values",)

    def __init__(self, values) -> None:
        self._values = values

    @classmethod
    def of(cls, values, whole: bool) -> "GroupKeys":
        """The keys of an Arrow array (or a sequence of Python values) in the group column's type —
        int64 when ``whole``, else string (a whole number spelled as Python's ``str``) — distinct and
        sorted. ParameterError for a null, a value that is not a whole number of a whole-number
        column, or two keys that are the same value in that type."""
        import pyarrow as pa  # lazy: the plan layer imports this module
        import pyarrow.compute as pc

        try:
            array = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(list(values))
        except (OverflowError, UnicodeEncodeError, pa.ArrowException) as exc:  # e.g. beyond 64 bits, a lone surrogate
            raise ParameterError(f"groups: a key cannot be held as a whole number of 64 bits or a string "
                                 f"({type(exc).__name__}).") from None
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        if array.null_count:
            raise ParameterError("groups: a key is null.")
        target = pa.int64() if whole else pa.string()
        if array.type != target:
            try:
                array = pc.cast(array, target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                bad = _first_refused(array, target)
                raise ParameterError(f"groups: the group column holds whole numbers; the key {bad!r} is not one."
                                     if whole else f"groups: the key {bad!r} cannot be read as a string.") from None
        if len(pc.unique(array)) != len(array):
            raise ParameterError("groups: two keys are the same value in the group column's type.")
        return cls(array.take(pc.sort_indices(array)))

    @property
    def arrow(self):
        """The keys as one Arrow array (int64 or string), canonical order."""
        return self._values

    @property
    def whole(self) -> bool:
        """True for whole-number keys."""
        import pyarrow as pa

        return pa.types.is_integer(self._values.type)

    def __len__(self) -> int:
        return len(self._values)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self._values[index].to_pylist()
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        return self._values[index].as_py()

    def __iter__(self) -> Iterator:
        for start in range(0, len(self), _CHUNK):
            yield from self._values.slice(start, _CHUNK).to_pylist()

    def head(self, n: int) -> list:
        """The first ``n`` keys as Python values (the JSON report's)."""
        return self._values.slice(0, int(n)).to_pylist()

    def digest(self) -> str:
        """sha256 of the keys' JSON (:func:`json_digest`, chunk by chunk): a keyed run's identity."""
        return json_digest(self._values.slice(start, _CHUNK).to_pylist() for start in range(0, len(self), _CHUNK))

    def __eq__(self, other) -> bool:
        if isinstance(other, GroupKeys):
            return self._values.equals(other._values)
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return f"GroupKeys({len(self):,} {'whole-number' if self.whole else 'string'} keys)"


def _first_refused(array, target):
    """The first value of ``array`` that Arrow does not cast to ``target`` (for the refusal; keys are
    public), searched in chunks."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for start in range(0, len(array), _CHUNK):
        for value in array.slice(start, _CHUNK):
            try:
                pc.cast(pa.array([value.as_py()], array.type), target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return value.as_py()
    return None
