"""Reference computation of the continual-release summaries from an event list.

This is the pure-numpy definition of what the Spark stage hands the driver for
continual release of distinct counts (Jain, Kalemaj, Raskhodnikova, Sivakumar,
Smith, NeurIPS 2023). It is used by tests, by small jobs, and as the oracle the
Spark stage is checked against. No noise is drawn here: the outputs are exact
and non-private.

Stream semantics (the project's rules; the paper has one update per step and
lets counts go negative, see below):

- Events are ``(time, item, op)`` with ``time`` a step in 1..T and ``op`` = +1
  (insert) or −1 (delete).
- Count of an item: starts at 0; an insert adds 1; a delete subtracts 1 but a
  delete of an item whose count is 0 is ignored, so counts never go below
  zero. (The paper's general turnstile model lets counts go negative; its
  Section 1.1 notes the results also hold in the strict model. Here the strict
  rule is enforced by clamping.)
- Several events in one step are applied in input order within the step; the
  item's existence e_u(t) = [count > 0] is read at the end of the step.
- Flippancy (Definition 1.3): the number of steps t at which the end-of-step
  existence changes, e_u(t) ≠ e_u(t−1), with e_u(0) = 0. An item that is
  inserted and deleted within one step does not flip. Flippancy is therefore at
  most T, and one step can change the distinct count by more than 1.

Truncation rule used for Algorithm 1 with flippancy bound w ("freeze"): the
truncated existence is ẽ_u(t) = e_u(min(t, t_w)) where t_w is the step of u's
w-th flip (t_w = ∞ if u flips fewer than w times). In words: once an item has
flipped w times all its later updates are ignored and its truncated existence
stays frozen at its value after the w-th flip. So ẽ_u has at most w flips
(the property the privacy proof needs), and ẽ_u(t) = e_u(t) whenever u has
flipped at most w times by step t (so the truncation error at t is at most the
number of items with flippancy > w by t — the sparse-vector query). The paper
describes the truncation in prose only ("items are ignored after their
flippancy exceeds w"); "freeze at the w-th flip" is this project's reading and
keeps ≤ w flips for every w (forcing the item to 0 at its (w+1)-th flip would
allow w + 1 flips when w is odd).

Outputs (``StreamSummaries``), for the horizon T and bounds w_j = 2^j,
j = 0..J:
- ``z[t]``: D(t) − D(t−1), the change of the (untruncated) distinct count;
- ``z_truncated[j, t]``: Σ_u ẽ_u(t) − ẽ_u(t−1) for w = w_j;
- ``over_counts[j, t]``: #{u : flippancy of u in steps 1..t > w_j}.
Arrays use 0-based positions: entry ``[t-1]`` is step t.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dp_spark.continual import _checks
from dp_spark.errors import ParameterError

__all__ = [
    "StreamSummaries",
    "ExistenceTable",
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
    """Exact per-step arrays for continual distinct counting (non-private).

    Attributes (T = ``horizon``, J = ``max_level``; position t−1 is step t):
        z: shape (T,), change of the distinct count at each step.
        z_truncated: shape (J+1, T), row j the change of the count of present
            items under flippancy truncation at w = 2^j ("freeze" rule).
        over_counts: shape (J+1, T), row j the number of items whose flippancy
            so far exceeds 2^j (non-decreasing in t).
    The constructor checks shapes and finiteness so the Spark stage can build
    one from collected arrays (integer arrays stay int64, others float64).
    """

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


def _check_events(times: object, items: object, ops: object, horizon: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t = np.asarray(times)
    o = np.asarray(ops)
    it = np.asarray(items)
    if t.ndim != 1 or o.ndim != 1 or it.ndim != 1:
        raise ParameterError("times, items and ops must be 1-d arrays of equal length")
    if not (t.shape[0] == o.shape[0] == it.shape[0]):
        raise ParameterError("times, items and ops must have equal lengths (one entry per event)")
    if t.shape[0] == 0:
        return t.astype(np.int64), o.astype(np.int64), it
    if t.dtype.kind not in "iuf" or (t.dtype.kind == "f" and not np.all(np.isfinite(t) & (t == np.round(t)))):
        raise ParameterError("times must be integer step numbers 1..horizon; map event times to steps first")
    t = t.astype(np.int64)
    if t.min() < 1 or t.max() > horizon:
        raise ParameterError("times must lie in 1..horizon; raise the horizon or drop events outside it")
    if o.dtype.kind not in "iuf" or not np.all((o == 1) | (o == -1)):
        raise ParameterError("ops must be +1 (insert) or -1 (delete)")
    if it.dtype.kind == "f" and not np.all(np.isfinite(it)):
        raise ParameterError("items must not be NaN or infinite; drop or label such events")
    return t, o.astype(np.int64), it


def _default_level(horizon: int, max_level: int | None) -> int:
    top = _checks.log2_exact(horizon)
    if max_level is None:
        return top
    return _checks.integer(max_level, "max_level", 0, top)


def stream_summaries(
    times: object, items: object, ops: object, horizon: int, max_level: int | None = None
) -> StreamSummaries:
    """Compute ``StreamSummaries`` exactly from an event list (vectorised numpy).

    Args:
        times: step of each event, ints in 1..horizon.
        items: item label of each event (any sortable labels).
        ops: +1 (insert) or −1 (delete) per event.
        horizon: T, a power of two.
        max_level: J; bounds w_j = 2^j for j = 0..J. Default log2(T) (then
            w_J = T ≥ any flippancy, so the top row is untruncated).

    Semantics: see the module docstring (clamped counts, in-step input order,
    end-of-step existence, "freeze at the w-th flip" truncation).
    """
    horizon = _checks.horizon(horizon)
    levels = _default_level(horizon, max_level)
    t, o, it = _check_events(times, items, ops, horizon)
    rows = levels + 1
    z = np.zeros(horizon, dtype=np.int64)
    truncated = np.zeros((rows, horizon), dtype=np.int64)
    over = np.zeros((rows, horizon), dtype=np.int64)
    n = t.shape[0]
    if n == 0:
        return StreamSummaries(horizon, levels, z, truncated, over)

    _, item_idx = np.unique(it, return_inverse=True)
    item_idx = item_idx.reshape(-1).astype(np.int64)
    order = np.lexsort((np.arange(n), t, item_idx))  # item, then step, then input order
    item_s, time_s, op_s = item_idx[order], t[order], o[order]

    new_item = np.empty(n, dtype=bool)
    new_item[0] = True
    new_item[1:] = item_s[1:] != item_s[:-1]
    group = np.cumsum(new_item) - 1
    # Per-item running sum S_k of ops, then the count clamped at zero by the
    # reflection identity c_k = S_k − min(0, min_{i<=k} S_i).
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
        return StreamSummaries(horizon, levels, z, truncated, over)
    f_new = np.empty(f_item.shape[0], dtype=bool)
    f_new[0] = True
    f_new[1:] = f_item[1:] != f_item[:-1]
    f_group_start = np.flatnonzero(f_new)
    f_group = np.cumsum(f_new) - 1
    flip_index = np.arange(f_item.shape[0]) - f_group_start[f_group] + 1  # 1-based k-th flip of its item

    def signed_histogram(mask: np.ndarray) -> np.ndarray:
        ups = np.bincount(f_time[mask & f_up], minlength=horizon + 1)
        downs = np.bincount(f_time[mask & ~f_up], minlength=horizon + 1)
        return (ups - downs)[1:].astype(np.int64)

    everything = np.ones(f_item.shape[0], dtype=bool)
    z = signed_histogram(everything)
    for j in range(rows):
        w = 1 << j
        truncated[j] = signed_histogram(flip_index <= w)
        crossing = np.bincount(f_time[flip_index == w + 1], minlength=horizon + 1)[1:]
        over[j] = np.cumsum(crossing)
    return StreamSummaries(horizon, levels, z, truncated, over)


@dataclass(frozen=True)
class ExistenceTable:
    """Dense per-item existence vectors (reference for tests and small data).

    ``items`` are the distinct labels (sorted); ``existence[k, t-1]`` is
    e_u(t) ∈ {0, 1} for u = items[k]; ``flips_so_far[k, t-1]`` is u's flippancy
    over steps 1..t; ``flippancy[k]`` is its flippancy over the whole horizon.
    """

    items: np.ndarray
    existence: np.ndarray
    flips_so_far: np.ndarray
    flippancy: np.ndarray


def existence_and_flippancy(times: object, items: object, ops: object, horizon: int) -> ExistenceTable:
    """Existence vectors and flippancy by a direct event-by-event loop.

    An independent, deliberately simple implementation of the stream semantics
    in the module docstring (pure Python loop over events, O(#items · T)
    memory) so that ``stream_summaries`` can be checked against it. Refuses
    more than 2·10^7 (item, step) cells.
    """
    horizon = _checks.horizon(horizon)
    t, o, it = _check_events(times, items, ops, horizon)
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
        by_step.setdefault(step, []).append(position)  # keeps input order within a step
    item_list = it.tolist()
    op_list = o.tolist()
    for step in range(1, horizon + 1):
        for position in by_step.get(step, []):
            k = index[item_list[position]]
            counts[k] = max(0, counts[k] + op_list[position])
        for k in range(labels.shape[0]):
            existence[k, step - 1] = 1 if counts[k] > 0 else 0
    padded = np.concatenate([np.zeros((labels.shape[0], 1), dtype=np.int8), existence], axis=1)
    flips_so_far = np.cumsum(padded[:, 1:] != padded[:, :-1], axis=1).astype(np.int64)
    flippancy = flips_so_far[:, -1].copy() if horizon else np.zeros(labels.shape[0], dtype=np.int64)
    return ExistenceTable(labels, existence, flips_so_far, flippancy)


def truncate_existence(existence: np.ndarray, flippancy_bound: int) -> np.ndarray:
    """Apply the "freeze at the w-th flip" truncation to dense existence rows.

    Row by row: ẽ(t) = e(min(t, t_w)), t_w the step of the row's w-th flip.
    """
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
