"""The sequential kernels of the distinct-count stages, without Spark.

Sensitivity claims (each DC(l) moves by at most l when one person is added or
removed) are checked by property tests on random neighbouring data sets, for
the greedy (single sequence and sharded), exact flow and sampling counts.
"""

from __future__ import annotations

import contextlib
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_bipartite_matching

from dp_spark.stages import kernels
from dp_spark.stages.kernels import counts_from_rounds, greedy_match_rounds, greedy_match_rounds_reference
from tests.unit.helpers import exact_counts

# ----------------------------------------------------------------- helpers

def _greedy_shard(persons: dict, order, max_bound: int) -> dict:
    """item -> round for one shard; persons visited in ``order``, each
    person's items in ascending order (a fixed, data-independent order)."""
    ids = [p for p in order if persons[p]]
    items = sorted({x for p in ids for x in persons[p]})
    code = {x: i for i, x in enumerate(items)}
    lists = [sorted(persons[p]) for p in ids]
    indptr = np.cumsum([0] + [len(l) for l in lists])
    flat = np.array([code[x] for l in lists for x in l], dtype=np.int64)
    rounds = greedy_match_rounds(indptr, flat, len(items), max_bound)
    return {items[i]: int(r) for i, r in enumerate(rounds) if r > 0}


def sharded_greedy(persons: dict, max_bound: int, shards: int) -> np.ndarray:
    """Sharded Algorithm 2 as the Spark stage runs it: shard = id mod P,
    persons in id order, items ascending, combine by min round."""
    best: dict = {}
    for s in range(shards):
        members = {p: u for p, u in persons.items() if p % shards == s}
        for x, r in _greedy_shard(members, sorted(members), max_bound).items():
            best[x] = min(r, best.get(x, r))
    return counts_from_rounds(np.array(list(best.values()) or [0]), max_bound)


def matching_counts_independent(persons: dict, max_bound: int) -> np.ndarray:
    """DC(D; l) by Hopcroft-Karp on the l-copy graph (the reference code's way)."""
    pairs = sorted({(p, x) for p, u in persons.items() for x in u})
    out = np.zeros(max_bound, dtype=np.int64)
    if not pairs:
        return out
    pc = {p: i for i, p in enumerate(sorted({p for p, _ in pairs}))}
    ic = {x: i for i, x in enumerate(sorted({x for _, x in pairs}))}
    rows = np.array([pc[p] for p, _ in pairs])
    cols = np.array([ic[x] for _, x in pairs])
    for l in range(1, max_bound + 1):
        r = np.concatenate([rows + k * len(pc) for k in range(l)])
        c = np.tile(cols, l)
        g = csr_matrix((np.ones(len(r)), (r, c)), shape=(l * len(pc), len(ic)))
        match = maximum_bipartite_matching(g, perm_type="column")
        out[l - 1] = int(np.count_nonzero(match >= 0))
    return out


def brute_force_counts(persons: dict, max_bound: int) -> np.ndarray:
    """max over restrictions |v_i| <= l of |union v_i|, by enumeration."""
    lists = [sorted(u) for u in persons.values() if u]
    out = []
    for l in range(1, max_bound + 1):
        choices = [list(itertools.combinations(u, min(l, len(u)))) for u in lists]
        out.append(max((len(set().union(*pick)) for pick in itertools.product(*choices)), default=0))
    return np.array(out, dtype=np.int64)


persons_strategy = st.dictionaries(
    keys=st.integers(0, 30),
    values=st.sets(st.integers(0, 25), min_size=1, max_size=8),
    max_size=12,
)

# ----------------------------------------------------------------- examples

def test_greedy_hand_worked_example():
    # Persons in order 0, 1, 2; items ascending.
    # round 1: p0 takes 1, p1 wants 1 (taken) -> 2, p2 wants 1, 2 -> 3
    # round 2: p0 wants 2 (taken), 3 (taken) -> none, exhausted;
    #          p1 takes 3? taken -> exhausted; p2 takes 4
    persons = {0: {1, 2, 3}, 1: {1, 2, 3}, 2: {1, 2, 3, 4}}
    got = _greedy_shard(persons, [0, 1, 2], 5)
    assert got == {1: 1, 2: 1, 3: 1, 4: 2}
    assert sharded_greedy(persons, 5, 1).tolist() == [3, 4, 4, 4, 4]
    assert exact_counts(persons, 5).tolist() == [3, 4, 4, 4, 4]


def test_greedy_can_be_worse_than_exact():
    # p0 takes a (its first), leaving p1 (who only has a) unmatched in round 1.
    persons = {0: {"a", "b"}, 1: {"a"}}
    assert _greedy_shard(persons, [0, 1], 1) == {"a": 1}
    assert exact_counts(persons, 1).tolist() == [2]


def test_counts_from_rounds():
    assert counts_from_rounds(np.array([0, 1, 1, 3, 5, 0]), 4).tolist() == [2, 2, 3, 3]


def test_flow_stops_early_but_fills_the_tail():
    persons = {p: {p, p + 100} for p in range(5)}
    assert exact_counts(persons, 50).tolist() == [5] + [10] * 49


@settings(max_examples=60, deadline=None)
@given(persons_strategy, st.integers(1, 6))
def test_flow_equals_independent_matching(persons, max_bound):
    assert exact_counts(persons, max_bound).tolist() == matching_counts_independent(persons, max_bound).tolist()


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(st.integers(0, 6), st.sets(st.integers(0, 7), min_size=1, max_size=4), max_size=4),
    st.integers(1, 4),
)
def test_flow_equals_brute_force(persons, max_bound):
    assert exact_counts(persons, max_bound).tolist() == brute_force_counts(persons, max_bound).tolist()


@settings(max_examples=100, deadline=None)
@given(persons_strategy, st.integers(1, 8), st.integers(1, 5))
def test_greedy_never_exceeds_exact_and_is_a_half_approximation(persons, max_bound, shards):
    exact = exact_counts(persons, max_bound)
    single = sharded_greedy(persons, max_bound, 1)
    sharded = sharded_greedy(persons, max_bound, shards)
    assert np.all(single <= exact) and np.all(sharded <= exact)
    assert np.all(2 * single >= exact)  # a maximal matching is >= half a maximum one
    assert np.all(np.diff(sharded) >= 0)


# ------------------------------------------------------ sensitivity (add/remove)

def _check_neighbour(counts_fn, persons, extra_items, new_id, max_bound):
    with_y = dict(persons)
    with_y[new_id] = set(extra_items)
    before = counts_fn(persons)
    after = counts_fn(with_y)
    bounds = np.arange(1, max_bound + 1)
    diff = after - before
    assert np.all(diff >= 0), "adding a person must not lower any count"
    assert np.all(diff <= bounds), "adding a person moved DC(l) by more than l"


neighbour_args = (
    persons_strategy,
    st.sets(st.integers(0, 30), min_size=1, max_size=12),
    st.integers(0, 40),
    st.integers(1, 8),
)


@settings(max_examples=150, deadline=None)
@given(*neighbour_args, st.integers(1, 4))
def test_sharded_greedy_sensitivity(persons, extra, new_id, max_bound, shards):
    persons = {p: u for p, u in persons.items() if p != new_id}
    _check_neighbour(lambda d: sharded_greedy(d, max_bound, shards), persons, extra, new_id, max_bound)


@settings(max_examples=100, deadline=None)
@given(*neighbour_args)
def test_exact_sensitivity(persons, extra, new_id, max_bound):
    persons = {p: u for p, u in persons.items() if p != new_id}
    _check_neighbour(lambda d: exact_counts(d, max_bound), persons, extra, new_id, max_bound)


def sampling_counts(persons: dict, max_bound: int, salt: int) -> np.ndarray:
    """The sampling baseline: each person keeps its l items of smallest
    salted hash; combine by min rank, as the Spark stage does."""
    best: dict = {}
    for p, u in persons.items():
        ranked = sorted(u, key=lambda x: (hash((salt, p, x)), x))
        for rank, x in enumerate(ranked[:max_bound], start=1):
            best[x] = min(rank, best.get(x, rank))
    return counts_from_rounds(np.array(list(best.values()) or [0]), max_bound)


@settings(max_examples=100, deadline=None)
@given(*neighbour_args, st.integers(0, 2**30))
def test_sampling_sensitivity(persons, extra, new_id, max_bound, salt):
    persons = {p: u for p, u in persons.items() if p != new_id}
    _check_neighbour(lambda d: sampling_counts(d, max_bound, salt), persons, extra, new_id, max_bound)


def test_sensitivity_test_can_fail():
    """A count without a per-person bound (the plain distinct count) must be
    caught by the same neighbour check."""
    persons = {0: {1}}
    with pytest.raises(AssertionError):
        _check_neighbour(
            lambda d: np.full(2, len(set().union(*d.values()))), persons, {5, 6, 7}, 9, 2
        )


def test_greedy_worst_case_single_person_adds_exactly_l():
    # A person holding many fresh items adds exactly min(l, |u|) at bound l.
    persons = {p: {p} for p in range(5)}
    before = sharded_greedy(persons, 4, 1)
    after = sharded_greedy({**persons, 99: set(range(100, 110))}, 4, 1)
    assert (after - before).tolist() == [1, 2, 3, 4]


# ------------------------------------------- the vectorised greedy equals the loop

def _random_lists(rng, shape: str, n_persons: int, n_items: int):
    """(indptr, items) of ``n_persons`` distinct-item lists, each sorted by a
    random item key, in one of several shapes of degrees and popularity."""
    if shape == "power":        # heavy-tailed activity, Zipf-popular items
        degrees = np.minimum(rng.zipf(1.6, n_persons), n_items)
    elif shape == "degree1":    # every person holds one item
        degrees = np.ones(n_persons, dtype=np.int64)
    elif shape == "huge":       # one person holds most of the domain
        degrees = rng.integers(1, 4, n_persons)
        if n_persons:
            degrees[rng.integers(n_persons)] = max(1, (3 * n_items) // 4)
    elif shape == "empty":      # many persons hold nothing
        degrees = np.where(rng.random(n_persons) < 0.6, 0, rng.integers(1, 12, n_persons))
    elif shape == "contended":  # few items, everybody wants them
        degrees = rng.integers(1, 6, n_persons)
    else:
        raise ValueError(shape)
    degrees = np.minimum(degrees, n_items).astype(np.int64)
    owner = np.repeat(np.arange(n_persons, dtype=np.int64), degrees)
    if shape == "degree1":
        drawn = rng.integers(0, n_items, len(owner))
    else:                       # Zipf(1.05) popularity over the items
        weights = np.cumsum(1.0 / np.arange(1, n_items + 1) ** 1.05)
        drawn = np.minimum(np.searchsorted(weights, rng.random(len(owner)) * weights[-1]), n_items - 1)
    if shape == "huge" and n_persons:  # the huge person's items: distinct, not Zipf
        big = int(np.argmax(degrees))
        mine = owner == big
        drawn[mine] = rng.permutation(n_items)[: int(degrees[big])]
    key = rng.permutation(n_items)   # the list order: a random key per item
    pairs = np.unique(owner * n_items + key[drawn])  # distinct, sorted by (person, key)
    person = pairs // n_items
    items = np.argsort(key)[pairs - person * n_items]  # back from key to item
    indptr = np.zeros(n_persons + 1, dtype=np.int64)
    np.cumsum(np.bincount(person, minlength=n_persons), out=indptr[1:])
    return indptr, items.astype(np.int64)


# Threshold settings: numpy all the way (one block, or many tiny blocks),
# an early hand-over to the sequential loops, and the defaults.
_MODES = {
    "vector": dict(_SEQUENTIAL_EDGES=1, _SEQUENTIAL_ROUND_EDGES=0, _SEQUENTIAL_PERSONS=0, _BLOCK_EDGES=10**9),
    "blocks": dict(_SEQUENTIAL_EDGES=1, _SEQUENTIAL_ROUND_EDGES=0, _SEQUENTIAL_PERSONS=0, _BLOCK_EDGES=7),
    "hybrid": dict(_SEQUENTIAL_EDGES=9, _SEQUENTIAL_ROUND_EDGES=40, _SEQUENTIAL_PERSONS=5, _BLOCK_EDGES=60),
    "default": {},
}


def _set_mode(monkeypatch, mode: str) -> None:
    for name, value in _MODES[mode].items():
        monkeypatch.setattr(kernels, name, value)


@contextlib.contextmanager
def _thresholds(mode: str):
    """The thresholds of ``mode`` for the duration of a block (for
    hypothesis tests, where a function-scoped monkeypatch does not reset
    between examples)."""
    saved = {name: getattr(kernels, name) for name in _MODES[mode]}
    try:
        for name, value in _MODES[mode].items():
            setattr(kernels, name, value)
        yield
    finally:
        for name, value in saved.items():
            setattr(kernels, name, value)


def _assert_same(indptr, items, n_items, max_bound):
    want = greedy_match_rounds_reference(indptr, items, n_items, max_bound)
    got = greedy_match_rounds(indptr, items, n_items, max_bound)
    assert got.dtype == np.int32 and got.shape == (n_items,)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode", ["vector", "blocks", "hybrid"])
@pytest.mark.parametrize("shape", ["power", "degree1", "huge", "empty", "contended"])
@pytest.mark.parametrize("seed", range(6))
def test_vectorised_greedy_equals_reference_small(monkeypatch, mode, shape, seed):
    rng = np.random.default_rng([seed, len(shape)])
    _set_mode(monkeypatch, mode)
    for n_persons in (0, 1, 2, 7, 60, 400):
        n_items = 12 if shape == "contended" else int(rng.integers(5, 300))
        indptr, items = _random_lists(rng, shape, n_persons, n_items)
        max_degree = int(np.diff(indptr).max(initial=0))
        for max_bound in sorted({1, 2, 3, max(1, max_degree), max_degree + 4}):
            _assert_same(indptr, items, n_items, max_bound)


@pytest.mark.parametrize("mode", ["vector", "blocks", "default"])
@pytest.mark.parametrize("shape", ["power", "degree1", "huge", "empty"])
@pytest.mark.parametrize("seed", range(2))
def test_vectorised_greedy_equals_reference_large(monkeypatch, mode, shape, seed):
    rng = np.random.default_rng([seed, 99, len(shape)])
    _set_mode(monkeypatch, mode)
    n_items = 30_000 if shape != "degree1" else 8_000   # degree1: contention
    indptr, items = _random_lists(rng, shape, 20_000, n_items)
    for max_bound in (1, 5, 100):
        _assert_same(indptr, items, n_items, max_bound)


def test_vectorised_greedy_unused_items_offset_indptr_and_int32():
    """Items nobody holds stay 0; an indptr that does not start at 0 and
    int32 inputs give the reference's answer."""
    rng = np.random.default_rng(5)
    indptr, items = _random_lists(rng, "power", 3_000, 2_000)
    padded = np.concatenate([np.array([7, 7, 7], dtype=np.int64), items])
    for n_items in (2_000, 50_000):
        want = greedy_match_rounds_reference(indptr + 3, padded, n_items, 20)
        assert np.count_nonzero(want) > 0
        np.testing.assert_array_equal(greedy_match_rounds(indptr + 3, padded, n_items, 20), want)
        np.testing.assert_array_equal(
            greedy_match_rounds(indptr.astype(np.int32), items.astype(np.int32), n_items, 20), want
        )
    assert greedy_match_rounds(np.array([0]), np.empty(0, np.int64), 4, 3).tolist() == [0, 0, 0, 0]
    assert greedy_match_rounds(np.array([0, 2]), np.array([1, 3]), 4, 0).tolist() == [0, 0, 0, 0]


def test_default_thresholds_use_the_vectorised_path(monkeypatch):
    """The large equality tests at default thresholds go through numpy, not
    only the sequential fallbacks (else they would test the loop twice)."""
    calls = []
    real = kernels._vector_block

    def spy(owner, *args):
        calls.append(len(owner))
        return real(owner, *args)

    monkeypatch.setattr(kernels, "_vector_block", spy)
    indptr, items = _random_lists(np.random.default_rng(0), "power", 20_000, 30_000)
    _assert_same(indptr, items, 30_000, 100)
    assert len(calls) > 1 and max(calls) >= kernels._BLOCK_EDGES // 2


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 15), max_size=6, unique=True), max_size=25),
    st.integers(1, 8),
    st.sampled_from(["vector", "blocks", "hybrid"]),
)
def test_vectorised_greedy_equals_reference_property(lists, max_bound, mode):
    indptr = np.cumsum([0] + [len(l) for l in lists]).astype(np.int64)
    items = np.array([x for l in lists for x in l], dtype=np.int64)
    with _thresholds(mode):
        _assert_same(indptr, items, 16, max_bound)


@settings(max_examples=150, deadline=None)
@given(*neighbour_args, st.integers(1, 4), st.sampled_from(["vector", "blocks"]))
def test_sharded_greedy_sensitivity_on_the_numpy_path(persons, extra, new_id, max_bound, shards, mode):
    """The sensitivity property with the numpy iterations doing all the work
    (at default thresholds these small inputs go to the loop)."""
    persons = {p: u for p, u in persons.items() if p != new_id}
    with _thresholds(mode):
        _check_neighbour(lambda d: sharded_greedy(d, max_bound, shards), persons, extra, new_id, max_bound)
