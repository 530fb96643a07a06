"""Reference computation of the continual-release summaries from an event list.

The pure-numpy definition of what the Spark stage hands the driver for continual release of distinct
counts (Jain, Kalemaj, Raskhodnikova, Sivakumar, Smith, NeurIPS 2023): used by tests, small jobs,
and as the oracle the Spark stage is checked against. No noise is drawn; the outputs are exact and
NON-PRIVATE.

Stream semantics (the project's rules; the paper has one update per step and lets counts go
negative):

- Events are ``(time, item, op)``, ``time`` a step in 1..T, ``op`` = +1 (insert) or −1 (delete).
- An item's count starts at 0; an insert adds 1; a delete subtracts 1, but a delete at count 0 is
  ignored, so counts never go below zero (the strict turnstile model, for which the paper's Section
  1.1 notes its results also hold).
- Several events in one step are applied in the order of an optional ``order`` key (the raw event
  time); equal keys (or no key): inserts first, then deletes. Equivalently, an item's events at one
  instant change its count by their net sum, clamped at zero. Input order never matters: the result
  is a function of the multiset of events. Existence e_u(t) = [count > 0] is read at the end of the
  step.
- Flippancy (Definition 1.3): the number of steps t with e_u(t) ≠ e_u(t−1), e_u(0) = 0. An item
  inserted and deleted within one step does not flip; flippancy is at most T, and one step can
  change the distinct count by more than 1.

Truncation for Algorithm 1 with flippancy bound w ("freeze"): ẽ_u(t) = e_u(min(t, t_w)), t_w the
step of u's w-th flip (∞ if fewer). Once an item has flipped w times its later updates are ignored.
So ẽ_u has at most w flips (the property the privacy proof needs), and ẽ_u(t) = e_u(t) while u has
flipped at most w times, so the truncation error at t is at most the number of items with flippancy
> w by t (the sparse-vector query). The paper states the truncation in prose only ("items are
ignored after their flippancy exceeds w"); freezing at the w-th flip is this project's reading and
keeps ≤ w flips for every w (forcing the item to 0 at its (w+1)-th flip would allow w + 1 flips when
w is odd).

Kernels shared with the Spark stage, which runs them on hash shards of items: :func:`flip_events`,
:func:`flip_cells` (flips summed per (step, level), level = the smallest j with k <= 2^j) and
:func:`summaries_from_cells`. An item's flips depend on its own events only, so cells of disjoint
item sets add up.

Outputs (:class:`StreamSummaries`) for the horizon T and bounds w_j = 2^j, j = 0..J (entry ``[t-1]``
is step t):

- ``z[t]``: D(t) − D(t−1), the change of the (untruncated) distinct count;
- ``z_truncated[j, t]``: Σ_u ẽ_u(t) − ẽ_u(t−1) for w = w_j;
- ``over_counts[j, t]``: #{u : flippancy of u in steps 1..t > w_j}."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dp_spark import checks as _checks
from dp_spark.errors import ParameterError

__all__ = [
    "StreamSummaries",
    "ExistenceTable",
    "FlipEvents",
    "flip_events",
    "flip_cells",
    "flip_level",
    "count_after",
    "summaries_from_cells",
    "stream_summaries",
    "existence_and_flippancy",
    "truncate_existence",
    "summaries_from_existence",
]

# Refuse the dense reference beyond this many (item, step) cells.
_DENSE_LIMIT = 20_000_000


def _numeric(values: object, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """int64 if integer-valued input, else float64; checks shape and finiteness."""
    array = np.asarray(values)
    if array.dtype.kind in "iub":
        array = array.astype(np.int64, copy=False)
    else:
        try:
            array = array.astype(np.float64, copy=False)
        except (TypeError, ValueError):
            raise ParameterError(f"{name} must be an array of numbers") from None
        if not np.all(np.isfinite(array)):
            raise ParameterError(f"{name} must contain only finite numbers")
    if array.shape != shape:
        raise ParameterError(
            f"{name} must have shape {shape} (rows: max_level + 1, columns: horizon), got {array.shape}"
        )
    return array


@dataclass(frozen=True)
class StreamSummaries:
    """Exact per-step arrays for continual distinct counting (NON-PRIVATE).

    T = ``horizon``, J = ``max_level``; position t−1 is step t. ``z`` (T,): change of the distinct
    count. ``z_truncated`` (J+1, T): row j the change under truncation at w = 2^j. ``over_counts``
    (J+1, T): row j the number of items whose flippancy so far exceeds 2^j. The constructor checks
    shapes and finiteness (integer arrays stay int64, others float64)."""

    horizon: int
    max_level: int
    z: np.ndarray
    z_truncated: np.ndarray
    over_counts: np.ndarray

    def __post_init__(self) -> None:
        horizon = _checks.horizon(self.horizon)
        max_level = _checks.integer(self.max_level, "max_level", 0, _checks.log2_exact(horizon))
        rows = max_level + 1
        z = _numeric(self.z, "z", (horizon,))
        truncated = _numeric(self.z_truncated, "z_truncated", (rows, horizon))
        over = _numeric(self.over_counts, "over_counts", (rows, horizon))
        object.__setattr__(self, "horizon", horizon)
        object.__setattr__(self, "max_level", max_level)
        object.__setattr__(self, "z", z)
        object.__setattr__(self, "z_truncated", truncated)
        object.__setattr__(self, "over_counts", over)

    @property
    def flippancy_bounds(self) -> np.ndarray:
        """The bounds w_j = 2^j, j = 0..J, one per row of the truncated arrays."""
        return 1 << np.arange(self.max_level + 1, dtype=np.int64)

    def level_of(self, flippancy_bound: int) -> int:
        """Row index j of the bound w = 2^j (w must be one of ``flippancy_bounds``)."""
        w = _checks.integer(flippancy_bound, "flippancy_bound", 1)
        if w & (w - 1) or w > (1 << self.max_level):
            raise ParameterError(
                f"flippancy_bound must be a power of two at most 2^max_level = {1 << self.max_level}, got {w}"
            )
        return _checks.log2_exact(w)


def _check_order(order: object, n: int) -> np.ndarray | None:
    if order is None:
        return None
    key = np.asarray(order)
    if key.ndim != 1 or key.shape[0] != n:
        raise ParameterError("order must be a 1-d array with one entry per event")
    if key.dtype.kind not in "iuf" or (key.dtype.kind == "f" and not np.all(np.isfinite(key))):
        raise ParameterError("order must hold finite numbers (e.g. the raw event times)")
    return key


def _check_events(
    times: object, items: object, ops: object, horizon: int, order: object = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    t = np.asarray(times)
    o = np.asarray(ops)
    it = np.asarray(items)
    if t.ndim != 1 or o.ndim != 1 or it.ndim != 1:
        raise ParameterError("times, items and ops must be 1-d arrays of equal length")
    if not (t.shape[0] == o.shape[0] == it.shape[0]):
        raise ParameterError("times, items and ops must have equal lengths (one entry per event)")
    key = _check_order(order, t.shape[0])
    if t.shape[0] == 0:
        return t.astype(np.int64), o.astype(np.int64), it, key
    if t.dtype.kind not in "iuf" or (t.dtype.kind == "f" and not np.all(np.isfinite(t) & (t == np.round(t)))):
        raise ParameterError("times must be integer step numbers 1..horizon; map event times to steps first")
    t = t.astype(np.int64)
    if t.min() < 1 or t.max() > horizon:
        raise ParameterError("times must lie in 1..horizon; raise the horizon or drop events outside it")
    if o.dtype.kind not in "iuf" or not np.all((o == 1) | (o == -1)):
        raise ParameterError("ops must be +1 (insert) or -1 (delete)")
    if it.dtype.kind == "f" and not np.all(np.isfinite(it)):
        raise ParameterError("items must not be NaN or infinite; drop or label such events")
    return t, o.astype(np.int64), it, key


def _default_level(horizon: int, max_level: int | None) -> int:
    top = _checks.log2_exact(horizon)
    if max_level is None:
        return top
    return _checks.integer(max_level, "max_level", 0, top)


@dataclass(frozen=True)
class FlipEvents:
    """Every flip of every item's end-of-step existence (NON-PRIVATE).

    Parallel arrays, one entry per flip, sorted by (item, step):
    ``item`` the item's code, ``time`` the step of the flip, ``up`` True if
    the item became present (False: absent), ``index`` k: this is the item's
    k-th flip (1-based), i.e. its running flippancy after this step.
    """

    item: np.ndarray
    time: np.ndarray
    up: np.ndarray
    index: np.ndarray


def _item_step_op_sort(item_idx: np.ndarray, t: np.ndarray, o: np.ndarray) -> np.ndarray:
    """The permutation of ``np.lexsort((-o, t, item_idx))`` as one stable argsort of a packed int64
    key (item, step, delete bit) when it fits in 63 bits (chosen by measurement:
    benchmarks/results/2026-11-23-speed-all-1824.md), else the lexsort."""
    if item_idx.min() >= 0 and t.min() >= 0:
        step_bits = int(t.max()).bit_length()
        if int(item_idx.max()).bit_length() + step_bits + 1 <= 63:
            key = (item_idx << (step_bits + 1)) | (t << 1) | (o < 0)
            return np.argsort(key, kind="stable")
    return np.lexsort((-o, t, item_idx))


def flip_events(times: object, item_codes: object, ops: object, order: object = None) -> FlipEvents:
    """All flips of a validated event list (vectorised numpy, O(n log n)).

    ``times``: step of each event (>= 1); ``item_codes``: integer item codes (equal codes, same
    item); ``ops``: +1 / −1; ``order``: optional key ordering one step's events (ties and None:
    inserts first). Semantics: the module docstring. Inputs are assumed checked
    (:func:`stream_summaries` and the Spark stage check them)."""
    t = np.asarray(times, dtype=np.int64)
    item_idx = np.asarray(item_codes, dtype=np.int64)
    o = np.asarray(ops, dtype=np.int64)
    n = t.shape[0]
    empty = np.zeros(0, dtype=np.int64)
    if n == 0:
        return FlipEvents(empty, empty, np.zeros(0, dtype=bool), empty)
    # by item, step, order key, inserts first (lexsort's last key is the primary one)
    if order is None:
        sort = _item_step_op_sort(item_idx, t, o)
    else:
        sort = np.lexsort((-o, np.asarray(order), t, item_idx))
    item_s, time_s, op_s = item_idx[sort], t[sort], o[sort]

    new_item = np.empty(n, dtype=bool)
    new_item[0] = True
    new_item[1:] = item_s[1:] != item_s[:-1]
    group = np.cumsum(new_item) - 1
    # per-item running sum S_k of ops; the clamped count is c_k = S_k − min(0, min_{i<=k} S_i)
    total = np.cumsum(op_s)
    start_index = np.flatnonzero(new_item)
    before = np.where(start_index > 0, total[start_index - 1], 0)
    running = total - before[group]
    big = 2 * n + 2  # > 2·max|S|: keeps each item's running minimum separate
    shifted = running - group * big
    group_min = np.minimum.accumulate(shifted) + group * big
    count = running - np.minimum(group_min, 0)
    present = count > 0

    # end-of-step existence: last event of each (item, step) run
    last = np.empty(n, dtype=bool)
    last[-1] = True
    last[:-1] = (item_s[1:] != item_s[:-1]) | (time_s[1:] != time_s[:-1])
    e_item, e_time, e_val = item_s[last], time_s[last], present[last]
    first_of_item = np.empty(e_item.shape[0], dtype=bool)
    first_of_item[0] = True
    first_of_item[1:] = e_item[1:] != e_item[:-1]
    previous = np.empty_like(e_val)
    previous[0] = False
    previous[1:] = e_val[:-1]
    previous[first_of_item] = False
    flips = e_val != previous

    f_item, f_time, f_up = e_item[flips], e_time[flips], e_val[flips]
    if f_item.shape[0] == 0:
        return FlipEvents(empty, empty, np.zeros(0, dtype=bool), empty)
    f_new = np.empty(f_item.shape[0], dtype=bool)
    f_new[0] = True
    f_new[1:] = f_item[1:] != f_item[:-1]
    f_group_start = np.flatnonzero(f_new)
    f_group = np.cumsum(f_new) - 1
    flip_index = np.arange(f_item.shape[0]) - f_group_start[f_group] + 1
    return FlipEvents(f_item, f_time, f_up, flip_index.astype(np.int64))


def count_after(count: int, ops: object, order: object = None) -> int:
    """An item's count after applying ``ops`` to ``count`` (the streaming form, used per item and
    micro-batch by ``dp_spark.streaming``): :func:`flip_events`' rule."""
    o = np.asarray(ops, dtype=np.int64)
    if order is None:
        sequence = o[np.argsort(-o, kind="stable")]
    else:
        sequence = o[np.lexsort((-o, np.asarray(order)))]
    value = _checks.integer(count, "count", 0)
    for op in sequence.tolist():
        value = max(0, value + op)
    return value


def flip_level(flip_index: object, max_level: int) -> np.ndarray:
    """Level of the k-th flip: the smallest j with k <= 2^j, capped at J + 1. A flip of level l
    counts in the truncated stream of every w_j = 2^j with j >= l, in none when l = J + 1. Scalars
    or arrays."""
    k = np.asarray(flip_index, dtype=np.int64)
    level = np.zeros(k.shape, dtype=np.int64)
    for j in range(int(max_level) + 1):
        level += k > (1 << j)
    return level


def flip_cells(
    flips: FlipEvents, max_level: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Flips summed per (step, level): the sparse form of :class:`StreamSummaries`.

    Parallel arrays ``(step, level, delta, cross)`` over the non-empty cells, level in 0..J+1
    (:func:`flip_level`): ``delta`` up-flips minus down-flips, ``cross`` the flips with k =
    2^(level−1) + 1 (items whose flippancy first exceeds 2^(level−1) at that step). Cells of
    disjoint item sets add up."""
    J = _checks.integer(max_level, "max_level", 0)
    width = J + 2
    k = flips.index
    level = flip_level(k, J)
    delta = np.where(flips.up, 1, -1).astype(np.int64)
    km1 = k - 1
    cross = ((k >= 2) & ((km1 & (km1 - 1)) == 0) & (km1 <= (1 << J))).astype(np.int64)
    key = flips.time.astype(np.int64) * width + level
    cells, inverse = np.unique(key, return_inverse=True)
    inverse = inverse.reshape(-1)
    delta_sum = np.bincount(inverse, weights=delta, minlength=cells.shape[0]).astype(np.int64)
    cross_sum = np.bincount(inverse, weights=cross, minlength=cells.shape[0]).astype(np.int64)
    return cells // width, cells % width, delta_sum, cross_sum


def summaries_from_cells(
    step: object, level: object, delta: object, cross: object, horizon: int, max_level: int | None = None
) -> StreamSummaries:
    """:class:`StreamSummaries` from (step, level, delta, cross) cells (:func:`flip_cells`);
    repeated cells are added. z = Σ_levels delta; z_truncated[j] = Σ_{level <= j} delta;
    over_counts[j] = running sum over steps of cross at level j + 1."""
    horizon = _checks.horizon(horizon)
    levels = _default_level(horizon, max_level)
    width = levels + 2
    arrays = []
    for name, values in (("step", step), ("level", level), ("delta", delta), ("cross", cross)):
        array = np.asarray(values)
        if array.ndim != 1 or (array.shape[0] and array.dtype.kind not in "iu"):
            raise ParameterError(f"{name} must be a 1-d array of integers")
        arrays.append(array.astype(np.int64, copy=False))
    s, lev, d, c = arrays
    if not (s.shape[0] == lev.shape[0] == d.shape[0] == c.shape[0]):
        raise ParameterError("step, level, delta and cross must have equal lengths (one entry per cell)")
    if s.shape[0] and (s.min() < 1 or s.max() > horizon or lev.min() < 0 or lev.max() >= width):
        raise ParameterError("cells must have step in 1..horizon and level in 0..max_level+1")
    per_level = np.zeros((width, horizon), dtype=np.int64)
    crossings = np.zeros((width, horizon), dtype=np.int64)
    flat = lev * horizon + (s - 1)  # a 1-d ufunc.at is faster than a 2-d index pair
    np.add.at(per_level.reshape(-1), flat, d)
    np.add.at(crossings.reshape(-1), flat, c)
    z = per_level.sum(axis=0)
    # running sums row by row: contiguous adds, faster than cumsum along axis 0
    # (benchmarks/results/2026-11-26-continual-packed-chunks.md)
    truncated = per_level[: levels + 1]
    for j in range(1, levels + 1):
        np.add(truncated[j], truncated[j - 1], out=truncated[j])
    over = crossings[1:]
    for row in over:
        np.cumsum(row, out=row)
    return StreamSummaries(horizon, levels, z, truncated, over)


def stream_summaries(
    times: object,
    items: object,
    ops: object,
    horizon: int,
    max_level: int | None = None,
    order: object = None,
) -> StreamSummaries:
    """:class:`StreamSummaries` of an event list, exactly (vectorised numpy).

    ``times``: steps in 1..horizon; ``items``: any sortable labels; ``ops``: +1 / −1; ``horizon``:
    T, a power of two; ``max_level``: J (default log2(T): the top row untruncated); ``order``:
    optional numbers ordering one step's events (ties and None: inserts first). Semantics: the
    module docstring."""
    horizon = _checks.horizon(horizon)
    levels = _default_level(horizon, max_level)
    t, o, it, key = _check_events(times, items, ops, horizon, order)
    if t.shape[0] == 0:
        empty = np.zeros(0, dtype=np.int64)
        return summaries_from_cells(empty, empty, empty, empty, horizon, levels)
    _, item_idx = np.unique(it, return_inverse=True)
    flips = flip_events(t, item_idx.reshape(-1), o, key)
    return summaries_from_cells(*flip_cells(flips, levels), horizon, levels)


@dataclass(frozen=True)
class ExistenceTable:
    """Dense per-item existence vectors (reference for tests and small data): ``items`` the sorted
    distinct labels; ``existence[k, t-1]`` = e_u(t) for u = items[k]; ``flips_so_far[k, t-1]`` u's
    flippancy over steps 1..t; ``flippancy[k]`` over the whole horizon."""

    items: np.ndarray
    existence: np.ndarray
    flips_so_far: np.ndarray
    flippancy: np.ndarray


def existence_and_flippancy(
    times: object, items: object, ops: object, horizon: int, order: object = None
) -> ExistenceTable:
    """Existence vectors and flippancy by a deliberately simple event-by-event loop (O(#items · T)
    memory): the independent implementation :func:`stream_summaries` and the Spark stage are checked
    against. Refuses more than 2·10^7 (item, step) cells."""
    horizon = _checks.horizon(horizon)
    t, o, it, key = _check_events(times, items, ops, horizon, order)
    labels = np.unique(it) if it.shape[0] else np.asarray([], dtype=it.dtype)
    if labels.shape[0] * horizon > _DENSE_LIMIT:
        raise ParameterError(
            "existence_and_flippancy is a dense reference for small streams; "
            "use stream_summaries for this many items and steps"
        )
    index = {label: k for k, label in enumerate(labels.tolist())}
    existence = np.zeros((labels.shape[0], horizon), dtype=np.int8)
    counts = [0] * labels.shape[0]
    by_step: dict[int, list[int]] = {}
    for position, step in enumerate(t.tolist()):
        by_step.setdefault(step, []).append(position)
    item_list = it.tolist()
    op_list = o.tolist()
    key_list = [0] * len(op_list) if key is None else key.tolist()
    for step in range(1, horizon + 1):
        # within a step: by the order key, then inserts (+1) before deletes (−1)
        for position in sorted(by_step.get(step, []), key=lambda p: (key_list[p], -op_list[p])):
            k = index[item_list[position]]
            counts[k] = max(0, counts[k] + op_list[position])
        for k in range(labels.shape[0]):
            existence[k, step - 1] = 1 if counts[k] > 0 else 0
    padded = np.concatenate([np.zeros((labels.shape[0], 1), dtype=np.int8), existence], axis=1)
    flips_so_far = np.cumsum(padded[:, 1:] != padded[:, :-1], axis=1).astype(np.int64)
    flippancy = flips_so_far[:, -1].copy() if horizon else np.zeros(labels.shape[0], dtype=np.int64)
    return ExistenceTable(labels, existence, flips_so_far, flippancy)


def truncate_existence(existence: np.ndarray, flippancy_bound: int) -> np.ndarray:
    """The "freeze at the w-th flip" truncation of dense existence rows: ẽ(t) = e(min(t, t_w))."""
    w = _checks.integer(flippancy_bound, "flippancy_bound", 1)
    e = np.asarray(existence, dtype=np.int8)
    if e.ndim != 2:
        raise ParameterError("existence must be a 2-d array (items × steps)")
    out = e.copy()
    if e.shape[1] == 0:
        return out
    padded = np.concatenate([np.zeros((e.shape[0], 1), dtype=np.int8), e], axis=1)
    flips = np.cumsum(padded[:, 1:] != padded[:, :-1], axis=1)
    for k in np.flatnonzero(flips[:, -1] > w):
        t_w = int(np.argmax(flips[k] >= w))
        out[k, t_w + 1 :] = e[k, t_w]
    return out


def summaries_from_existence(table: ExistenceTable, max_level: int | None = None) -> StreamSummaries:
    """``StreamSummaries`` computed from dense existence rows (test oracle)."""
    horizon = _checks.horizon(table.existence.shape[1])
    levels = _default_level(horizon, max_level)

    def diff_of_total(rows: np.ndarray) -> np.ndarray:
        total = rows.sum(axis=0, dtype=np.int64)
        return np.diff(np.concatenate(([0], total)))

    z = diff_of_total(table.existence)
    truncated = np.stack(
        [diff_of_total(truncate_existence(table.existence, 1 << j)) for j in range(levels + 1)]
    )
    over = np.stack(
        [(table.flips_so_far > (1 << j)).sum(axis=0, dtype=np.int64) for j in range(levels + 1)]
    )
    return StreamSummaries(horizon, levels, z, truncated, over)
