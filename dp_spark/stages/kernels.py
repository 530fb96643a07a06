"""Sequential kernels behind the distinct-count stages (numpy/scipy, no Spark).

These are the pieces of Knop & Steinke (NeurIPS 2023) that are inherently
sequential. The Spark stages in :mod:`dp_spark.stages.distinct` run them inside
shards of persons; the tests run them directly on small data.

Nothing here is private: every function computes a NON-PRIVATE summary of the
data. Privacy comes from the bounded sensitivity these summaries have (proved
in the docstrings, checked by property tests) and the noise the mechanism
layer adds afterwards.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow


def greedy_match_rounds(
    indptr: np.ndarray, items: np.ndarray, n_items: int, max_bound: int
) -> np.ndarray:
    """Round in which each item is matched by Algorithm 2's incremental greedy.

    The same function as :func:`greedy_match_rounds_reference` (read its
    docstring for the definition and the sensitivity proof), bit for bit:
    same arguments, same int32 output (round 1..``max_bound``, 0 =
    unmatched), computed in numpy instead of a Python loop. NON-PRIVATE.

    How (exact, not an approximation). Each round is the lexicographically
    first greedy matching between the round's active persons and the free
    items, edge priority (person, position in its list). It is computed in
    parallel iterations (Blelloch, Fineman and Shun 2012, the locally minimal
    edge rule) on ``(owner, item)`` arrays that hold, in person order and list
    order, only the *free* items of the unresolved persons:

    - every unresolved person p proposes x_p, the first item of its free
      list (everything before it in its full list is used);
    - h(x) = the smallest unresolved person whose free list holds x;
    - p wins iff h(x_p) == p. Sequentially p gets exactly x_p: no unresolved
      earlier person can ever take x_p (none holds it, and items only get
      used), resolved earlier persons already hold their own items, and no
      later person resolved before p took an item p held (p would have
      been its h). Winners take their items together (distinct items);
      the rest drop the now-used items and retry. The smallest unresolved
      person always wins, so every iteration makes progress.

    A person whose free list is empty takes nothing now or later. After a
    round, the active persons are exactly those with a free item left, so
    the next round starts from the same arrays minus the used items. When a
    block's unresolved edges fall below ``_SEQUENTIAL_EDGES`` the plain
    sequential loop finishes it (a long dependency chain then costs no numpy
    passes); when a round starts with few edges or few active persons the
    reference loop runs the remaining rounds. The thresholds were chosen by
    ``benchmarks/greedy_kernel_speed.py``.
    Cost per round: O(free edges of the active persons) per iteration.
    """
    indptr = np.asarray(indptr)
    n_persons = len(indptr) - 1
    rounds = np.zeros(n_items, dtype=np.int32)
    if n_persons <= 0 or max_bound < 1 or indptr[-1] == indptr[0]:
        return rounds
    lengths = np.diff(indptr).astype(np.int64)
    owner = np.repeat(np.arange(n_persons, dtype=np.int64), lengths)
    item = np.asarray(items)[int(indptr[0]):int(indptr[-1])].astype(np.int64, copy=False)
    used = np.zeros(n_items, dtype=bool)
    first_holder = np.full(n_items, np.iinfo(np.int64).max, dtype=np.int64)  # scratch for h(x)
    for r in range(1, max_bound + 1):
        if len(owner) < _SEQUENTIAL_ROUND_EDGES or (
            np.count_nonzero(owner[1:] != owner[:-1]) < _SEQUENTIAL_PERSONS
        ):
            _sequential_rounds(owner, item, used, rounds, r, max_bound)
            break
        _vector_round(owner, item, used, first_holder, rounds, r)
        keep = ~used[item]
        owner = owner[keep]
        item = item[keep]
        if len(owner) == 0:
            break
    return rounds


# The hybrid's switches, measured by benchmarks/greedy_kernel_speed.py
# (--sweep): below _SEQUENTIAL_EDGES unresolved edges the sequential loop
# finishes a block; a round that starts with fewer than
# _SEQUENTIAL_ROUND_EDGES edges or _SEQUENTIAL_PERSONS active persons hands
# all remaining rounds to the reference loop (a few long lists: the
# reference's pointers move forward once, a numpy round rescans them).
_SEQUENTIAL_EDGES = 500
_SEQUENTIAL_ROUND_EDGES = 5_000
_SEQUENTIAL_PERSONS = 1_000
_BLOCK_EDGES = 65_536


def _vector_round(owner, item, used, first_holder, rounds, r) -> None:
    """Round r of the greedy on the free edges ``(owner, item)``, sorted by
    (owner, list position): marks the items taken used, with round r.

    The persons are taken in consecutive blocks of about ``_BLOCK_EDGES``
    edges: the greedy restricted to a prefix of the persons is the greedy of
    that prefix (later persons never change what earlier ones take), so each
    block is solved exactly after the blocks before it, and starts without
    the items they used (most of a late block's edges, on popular items)."""
    n = len(owner)
    marks = np.arange(_BLOCK_EDGES, n, _BLOCK_EDGES)
    cuts = np.unique(np.searchsorted(owner, owner[marks], side="left")) if len(marks) else marks
    bounds = [0, *cuts.tolist(), n]
    for a, b in zip(bounds[:-1], bounds[1:]):
        if a == b:
            continue
        block_item = item[a:b]
        free = ~used[block_item]
        _vector_block(owner[a:b][free], block_item[free], used, first_holder, rounds, r)


def _vector_block(owner, item, used, first_holder, rounds, r) -> None:
    """The greedy's round r for a block of persons, given their free edges
    sorted by (owner, list position); ``first_holder`` is scratch, every
    entry above every owner on entry and on exit."""
    sentinel = np.iinfo(np.int64).max
    while len(owner) and len(owner) >= _SEQUENTIAL_EDGES:
        head = np.empty(len(owner), dtype=bool)
        head[0] = True
        np.not_equal(owner[1:], owner[:-1], out=head[1:])
        heads = np.flatnonzero(head)
        proposer = owner[heads]
        proposal = item[heads]
        np.minimum.at(first_holder, item, owner)  # h(x): the smallest holder
        wins = first_holder[proposal] == proposer
        first_holder[item] = sentinel
        taken = proposal[wins]
        used[taken] = True
        rounds[taken] = r
        # Keep the losers' edges whose items are still free.
        segment = np.cumsum(head) - 1
        keep = ~wins[segment]
        keep &= ~used[item]
        owner = owner[keep]
        item = item[keep]
    if len(owner):
        _sequential_round(owner.tolist(), item.tolist(), used, rounds, r)


def _sequential_round(owners: list, item_list: list, used, rounds, r) -> None:
    """The greedy's round r, sequentially, on free edges grouped by owner in
    visiting order: each owner takes its first item not taken before it."""
    taken: list[int] = []
    seen: set[int] = set()
    i = 0
    n = len(owners)
    while i < n:
        p = owners[i]
        while i < n and owners[i] == p:
            x = item_list[i]
            i += 1
            if x not in seen:
                seen.add(x)
                taken.append(x)
                while i < n and owners[i] == p:
                    i += 1
                break
    if taken:
        idx = np.asarray(taken, dtype=np.int64)
        used[idx] = True
        rounds[idx] = r


def _sequential_rounds(owner, item, used, rounds, first_round, max_bound) -> None:
    """Rounds ``first_round..max_bound`` by the reference loop, on the free
    edges ``(owner, item)`` that remain (the persons that hold none are
    inactive, exactly as in the reference)."""
    if len(owner) == 0:
        return
    cuts = np.flatnonzero(np.diff(owner)) + 1
    indptr = np.concatenate(([0], cuts, [len(owner)])).astype(np.int64)
    sub = greedy_match_rounds_reference(indptr, item, len(used), max_bound - first_round + 1)
    hit = sub > 0
    rounds[hit] = sub[hit] + (first_round - 1)
    used[hit] = True


def greedy_match_rounds_reference(
    indptr: np.ndarray, items: np.ndarray, n_items: int, max_bound: int
) -> np.ndarray:
    """Round in which each item is matched by Algorithm 2's incremental greedy.

    Persons are ``0..n-1`` in the given (data-independent) order; person ``p``
    holds the *distinct* items ``items[indptr[p]:indptr[p+1]]``, listed in a
    fixed data-independent preference order. In round ``r = 1..max_bound``
    every person, in order, takes the first item of its list that no earlier
    copy has taken (Knop & Steinke, Algorithm 2, DPApproxDistinctCount). This
    is the greedy maximal matching of the graph that has ``r`` copies of each
    person, visiting copies in (round, person) order.

    Returns an int32 array of length ``n_items``: the round in which the item
    was matched, or 0 if it was not matched within ``max_bound`` rounds. The
    number of items with round in ``1..l`` is g_l, the greedy count for bound l.

    Sensitivity (the claim the privacy proof needs): adding one person y at
    any position changes every g_l by at most l, never downwards. Step by step,
    the matched set without y stays a subset of the matched set with y and the
    difference grows by at most one item per copy of y processed (a non-y copy
    either takes the same item, or, when its item is in the difference, the
    next free one, which swaps one element of the difference for another).
    After round l, y has had l copies, so 0 <= g'_l - g_l <= l.
    Cost: O(len(items) + sum_p min(deg_p, max_bound)); each pointer only
    moves forward.
    """
    starts = indptr[:-1].tolist()
    ends = indptr[1:].tolist()
    item_list = items.tolist()
    used = bytearray(n_items)
    rounds = np.zeros(n_items, dtype=np.int32)
    matched_in_round: list[list[int]] = []
    active = [p for p in range(len(starts)) if starts[p] < ends[p]]
    for _round in range(max_bound):
        taken: list[int] = []
        still = []
        for p in active:
            q = starts[p]
            e = ends[p]
            while q < e and used[item_list[q]]:
                q += 1
            if q < e:
                x = item_list[q]
                used[x] = 1
                taken.append(x)
                q += 1
                if q < e:
                    still.append(p)
            starts[p] = q
        matched_in_round.append(taken)
        active = still
        if not active:
            break
    for r, taken in enumerate(matched_in_round, start=1):
        if taken:
            rounds[np.asarray(taken, dtype=np.int64)] = r
    return rounds


def counts_from_rounds(rounds: np.ndarray, max_bound: int) -> np.ndarray:
    """g_l = #{items matched in a round <= l} for l = 1..max_bound (int64)."""
    rounds = np.asarray(rounds)
    hist = np.bincount(rounds[rounds > 0], minlength=max_bound + 1)[: max_bound + 1]
    return np.cumsum(hist[1:]).astype(np.int64)


def flow_bounded_counts(
    person_codes: np.ndarray,
    item_codes: np.ndarray,
    n_persons: int,
    n_items: int,
    max_bound: int,
    bounds=None,
) -> np.ndarray:
    """Exact DC(D; l) for l = 1..max_bound by maximum flow (Algorithm 1's counts).

    With ``bounds`` (increasing, within 1..max_bound: the release's
    candidates) the flow is computed at those l only, and entry l − 1 holds
    DC(D; b) for the largest b in ``bounds`` with b <= l (0 below the
    first): exact at the bounds, a lower bound elsewhere whose entry still
    moves by at most b <= l between neighbours. The release reads the
    bounds' entries only, so a max_bound of thousands costs a handful of
    flows.

    The edges ``(person_codes[e], item_codes[e])`` must be distinct. DC(D; l)
    is the largest number of distinct items covered when each person keeps at
    most l of its items: the maximum flow source -> person (capacity l) ->
    item (1) -> sink (1). The function l -> DC(D; l) is non-decreasing and
    concave (a parametric minimum cut is a minimum of affine functions of l),
    so once it is flat it stays flat: the flow is recomputed only until then,
    and the remaining entries are filled with the last value.

    Sensitivity: DC(.; l) changes by at most l when one person is added or
    removed (that person's flow is at most l). NON-PRIVATE.
    """
    out = np.zeros(max_bound, dtype=np.int64)
    if len(person_codes) == 0:
        return out
    source, sink = 0, n_persons + n_items + 1
    n_nodes = n_persons + n_items + 2
    degrees = np.bincount(person_codes, minlength=n_persons)
    # Items that some person holds: every one of them is matched once l >= max degree.
    total = int(np.count_nonzero(np.bincount(item_codes, minlength=n_items)))
    rows = np.concatenate([
        np.zeros(n_persons, dtype=np.int64),               # source -> person
        1 + person_codes.astype(np.int64),                 # person -> item
        1 + n_persons + np.arange(n_items, dtype=np.int64),  # item -> sink
    ])
    cols = np.concatenate([
        1 + np.arange(n_persons, dtype=np.int64),
        1 + n_persons + item_codes.astype(np.int64),
        np.full(n_items, sink, dtype=np.int64),
    ])
    caps = np.ones(len(rows), dtype=np.int32)
    graph = csr_matrix((caps, (rows, cols)), shape=(n_nodes, n_nodes))
    graph.sort_indices()
    # Row 0 of the CSR matrix holds the source edges, in person order.
    src = slice(graph.indptr[0], graph.indptr[1])
    src_persons = graph.indices[src] - 1
    previous = -1
    max_degree = int(degrees.max())
    at = list(range(1, max_bound + 1)) if bounds is None else [int(b) for b in bounds]
    if at != sorted(set(at)) or at[0] < 1 or at[-1] > max_bound:
        raise ValueError("bounds must increase within 1..max_bound")
    # DC(.; l) is concave and non-decreasing: equal at two bounds, it is flat from the first on
    for l in at:
        graph.data[src] = np.minimum(degrees[src_persons], l).astype(np.int32)
        value = int(maximum_flow(graph, source, sink, method="dinic").flow_value)
        out[l - 1:] = value
        if value == previous or value == total or l >= max_degree:
            break
        previous = value
    return out


# ------------------------------------------------------------ Spark's hashes of longs, in numpy

_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)


def _rotl64(x, r):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def xxhash64_long(values, seed: int = 42) -> np.ndarray:
    """Spark's ``xxhash64(col)`` of a LongType column, bit for bit
    (``XXH64.hashLong``, Spark's seed 42), as int64: lets the greedy kernel
    compute its person order key from the distinct persons it receives
    instead of receiving it with every row (tested against Spark)."""
    with np.errstate(over="ignore"):
        x = np.asarray(values, dtype=np.int64).view(np.uint64)
        h = np.full(x.shape, np.uint64(seed) + _P5 + np.uint64(8), dtype=np.uint64)
        h ^= _rotl64(x * _P2, 31) * _P1
        h = _rotl64(h, 27) * _P1 + _P4
        h ^= h >> np.uint64(33)
        h *= _P2
        h ^= h >> np.uint64(29)
        h *= _P3
        h ^= h >> np.uint64(32)
    return h.view(np.int64)


_C1 = np.uint32(0xCC9E2D51)
_C2 = np.uint32(0x1B873593)


def _rotl32(x, r):
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _mix_k1(k):
    k = k * _C1
    k = _rotl32(k, 15)
    return k * _C2


def _mix_h1(h, k):
    h = h ^ k
    h = _rotl32(h, 13)
    return h * np.uint32(5) + np.uint32(0xE6546B64)


def murmur3_long(values, seed: int = 42) -> np.ndarray:
    """Spark's ``hash(col)`` of a LongType column, bit for bit
    (``Murmur3_x86_32.hashLong``, seed 42), as int32: the greedy kernel's
    shard of a person, pmod(hash(person), shards), computed on the driver's
    public shard count from the distinct persons (tested against Spark)."""
    with np.errstate(over="ignore"):
        x = np.asarray(values, dtype=np.int64).view(np.uint64)
        low = (x & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        high = (x >> np.uint64(32)).astype(np.uint32)
        h = _mix_h1(np.full(x.shape, np.uint32(seed & 0xFFFFFFFF), dtype=np.uint32), _mix_k1(low))
        h = _mix_h1(h, _mix_k1(high))
        h ^= np.uint32(8)
        h ^= h >> np.uint32(16)
        h *= np.uint32(0x85EBCA6B)
        h ^= h >> np.uint32(13)
        h *= np.uint32(0xC2B2AE35)
        h ^= h >> np.uint32(16)
    return h.view(np.int32)
