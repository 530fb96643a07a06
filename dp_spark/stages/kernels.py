"""Sequential kernels behind the distinct-count stages (numpy/scipy, no Spark): the inherently
sequential parts of Knop & Steinke (NeurIPS 2023), which :mod:`dp_spark.stages.distinct` runs inside
shards of persons.

Every function returns a NON-PRIVATE summary. Privacy comes from the bounded sensitivity of these
summaries (proved in the docstrings, checked by property tests) and the mechanism layer's noise."""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow


def greedy_match_rounds(
    indptr: np.ndarray, items: np.ndarray, n_items: int, max_bound: int
) -> np.ndarray:
    """Round in which each item is matched by Algorithm 2's incremental greedy: bit for bit
    :func:`greedy_match_rounds_reference` (definition and sensitivity proof there), computed in
    numpy. NON-PRIVATE.

    Exact, not an approximation. Each round is the lexicographically first greedy matching between
    the round's active persons and the free items, edge priority (person, list position), computed
    in parallel iterations (Blelloch, Fineman and Shun 2012, the locally minimal edge rule) on
    ``(owner, item)`` arrays holding, in order, only the *free* items of the unresolved persons:

    - every unresolved person p proposes x_p, the first item of its free list;
    - h(x) = the smallest unresolved person whose free list holds x;
    - p wins iff h(x_p) == p. Sequentially p gets exactly x_p: no unresolved earlier person can take
      it (none holds it, and items only get used), resolved earlier persons hold their own items,
      and no later person resolved before p took an item p held (p would have been its h). Winners
      take their (distinct) items together; the rest drop the used items and retry. The smallest
      unresolved person always wins, so every iteration makes progress.

    After a round the active persons are those with a free item left, so the next round starts from
    the same arrays minus the used items. Small blocks and rounds switch to the sequential loops
    (thresholds below). Cost per iteration: O(free edges of the active persons)."""
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


# The hybrid's switches, chosen by measurement (benchmarks/greedy_kernel_speed.py --sweep): below
# _SEQUENTIAL_EDGES unresolved edges the sequential loop finishes a block; a round starting with fewer
# than _SEQUENTIAL_ROUND_EDGES edges or _SEQUENTIAL_PERSONS active persons hands the remaining rounds
# to the reference loop (whose pointers move forward once; a numpy round rescans long lists).
_SEQUENTIAL_EDGES = 500
_SEQUENTIAL_ROUND_EDGES = 5_000
_SEQUENTIAL_PERSONS = 1_000
_BLOCK_EDGES = 65_536


def _vector_round(owner, item, used, first_holder, rounds, r) -> None:
    """Round r of the greedy on the free edges ``(owner, item)``, sorted by (owner, list position):
    marks the items taken, with round r. Persons are taken in blocks of about ``_BLOCK_EDGES``
    edges: later persons never change what earlier ones take, so each block is solved exactly after
    the ones before it, without the items they used."""
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

    Persons are ``0..n-1`` in the given (data-independent) order; person ``p`` holds the *distinct*
    items ``items[indptr[p]:indptr[p+1]]`` in a fixed data-independent preference order. In round
    ``r = 1..max_bound`` every person, in order, takes the first item of its list that no earlier
    copy has taken (Knop & Steinke, Algorithm 2, DPApproxDistinctCount): the greedy maximal matching
    of the graph with ``r`` copies of each person, copies visited in (round, person) order.

    Returns int32 of length ``n_items``: the round the item was matched in, 0 if not within
    ``max_bound`` rounds. The number of items with round in ``1..l`` is g_l, the greedy count for
    bound l.

    Sensitivity (the claim the privacy proof needs): adding one person y at any position changes
    every g_l by at most l, never downwards. Step by step, the matched set without y stays a subset
    of the matched set with y and the difference grows by at most one item per copy of y processed
    (a non-y copy either takes the same item or, when its item is in the difference, the next free
    one, which swaps one element of the difference for another). After round l, y has had l copies,
    so 0 <= g'_l - g_l <= l. Cost: O(len(items) + sum_p min(deg_p, max_bound)); each pointer only
    moves forward."""
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
    """Exact DC(D; l) for l = 1..max_bound by maximum flow (Algorithm 1's counts). NON-PRIVATE.

    The edges ``(person_codes[e], item_codes[e])`` must be distinct. DC(D; l) is the largest number
    of distinct items covered when each person keeps at most l of its items: the maximum flow source
    -> person (capacity l) -> item (1) -> sink (1). Sensitivity: it changes by at most l when one
    person is added or removed (that person's flow is at most l). l -> DC(D; l) is non-decreasing
    and concave (a parametric minimum cut is a minimum of affine functions of l), so once flat it
    stays flat: flows stop there and the rest is filled with the last value.

    With ``bounds`` (increasing, within 1..max_bound: the release's candidates) the flow runs at
    those l only, and entry l − 1 holds DC(D; b) for the largest b in ``bounds`` with b <= l (0
    below the first): exact at the bounds, a lower bound elsewhere that still moves by at most b <=
    l between neighbours."""
    out = np.zeros(max_bound, dtype=np.int64)
    if len(person_codes) == 0:
        return out
    source, sink = 0, n_persons + n_items + 1
    n_nodes = n_persons + n_items + 2
    degrees = np.bincount(person_codes, minlength=n_persons)
    # items some person holds: all matched once l >= max degree
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
    # row 0 of the CSR matrix: the source edges, in person order
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
    """Spark's ``xxhash64(col)`` of a LongType column bit for bit (``XXH64.hashLong``, seed 42), as
    int64; tested against Spark."""
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
    """Spark's ``hash(col)`` of a LongType column bit for bit (``Murmur3_x86_32.hashLong``, seed
    42), as int32; tested against Spark."""
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
