"""The (person, item) shapes the distinct-count's defaults are measured on.

Each shape is a seeded function returning :class:`Shape`: every person's
distinct items (CSR: ``indptr``, ``items`` as dense codes) in a random
order of persons and of each person's items, which is what the Spark stage
gives the greedy (persons and items ordered by a hash: data-independent,
random-looking). Shared by tests/accuracy/test_distinct_count.py and
benchmarks/distinct_count_grid.py (which imports this module), so the tier
and the benchmark measure the same tables.

- ``supplier_prices``: shaped like Knop & Steinke's Table 2 query supplier
  → extended price (TPC-H): persons with about 93 distinct values each,
  nearly all values held by one person (the seed table: 10,000 persons,
  933,900 values);
- ``thousand_items``: persons with 1,000 distinct items each, three in four
  of all items held once (issue 36: 2,000 persons, 1,500,000 items);
- ``tiny``: 1–5 items each from 2,406 popular items: l = 1 already counts
  every item;
- ``heavy_tailed``: Pareto-distributed person sizes (a few persons with
  thousands of items) over Zipf-popular items;
- ``amazon_fashion``: Amazon Fashion 5-core, person = reviewer, item = a
  word of the review text (the seed paper's Table 4; ../shared/data);
- ``movielens``: MovieLens 100K, person = user, item = movie.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.conftest import AMAZON, MOVIELENS


@dataclass(frozen=True)
class Shape:
    name: str
    indptr: np.ndarray
    items: np.ndarray
    n_items: int

    @property
    def persons(self) -> int:
        return len(self.indptr) - 1

    @property
    def pairs(self) -> int:
        return int(self.indptr[-1])

    @property
    def truth(self) -> int:
        """The true number of distinct items (NON-PRIVATE)."""
        return int(np.count_nonzero(np.bincount(self.items, minlength=self.n_items)))

    def greedy_counts(self, max_bound: int) -> np.ndarray:
        """g_l, l = 1..max_bound: Algorithm 2's greedy on one shard, in this
        visiting order (what the release's Spark stage computes)."""
        from dp_spark.stages.kernels import counts_from_rounds, greedy_match_rounds

        rounds = greedy_match_rounds(self.indptr, self.items, self.n_items, max_bound)
        return counts_from_rounds(rounds, max_bound)


def from_pairs(name: str, persons: np.ndarray, items: np.ndarray, seed: int) -> Shape:
    """The shape of (person, item) pairs: deduplicated, persons and each
    person's items in a seeded random order, items as dense codes."""
    rng = np.random.default_rng(seed)
    persons = np.asarray(persons)
    items = np.asarray(items)
    _, person_codes = np.unique(persons, return_inverse=True)
    item_values, item_codes = np.unique(items, return_inverse=True)
    pairs = np.unique(np.stack([person_codes, item_codes], axis=1), axis=0)
    person_rank = rng.permutation(int(pairs[:, 0].max()) + 1)  # visiting order of persons
    item_rank = rng.permutation(len(item_values))  # the public preference order of items
    order = np.lexsort((item_rank[pairs[:, 1]], person_rank[pairs[:, 0]]))
    pairs = pairs[order]
    counts = np.bincount(person_rank[pairs[:, 0]], minlength=len(person_rank))
    indptr = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return Shape(name, indptr, pairs[:, 1].astype(np.int64), len(item_values))


def supplier_prices(persons: int = 10_000, seed: int = 1) -> Shape:
    """About 93 distinct values per person (Poisson), drawn from 10^9
    values: nearly every value held by one person (Knop & Steinke's TPC-H
    supplier → extended price, 933,900 distinct at 10,000 persons)."""
    rng = np.random.default_rng(seed)
    sizes = np.maximum(rng.poisson(93.4, persons), 1)
    owner = np.repeat(np.arange(persons), sizes)
    return from_pairs(f"supplier prices ({persons:,} persons, ~93 each)", owner,
                      rng.integers(0, 10**9, len(owner)), seed)


def thousand_items(persons: int = 2_000, seed: int = 2) -> Shape:
    """1,000 distinct items per person from a universe sized so that the
    items held number 0.75 × persons × 1,000 (issue 36: 1,500,000 of
    2,000 × 1,000)."""
    rng = np.random.default_rng(seed)
    draws = persons * 1_000
    universe = _universe_for(draws, 0.75 * draws)
    owner = np.repeat(np.arange(persons), 1_000)
    items = np.empty(draws, dtype=np.int64)
    for p in range(persons):  # 1,000 distinct per person
        items[p * 1_000:(p + 1) * 1_000] = rng.choice(universe, 1_000, replace=False)
    return from_pairs(f"thousand items ({persons:,} persons, 1,000 each)", owner, items, seed)


def _universe_for(draws: int, distinct: float) -> int:
    """U with U·(1 − e^(−draws/U)) = distinct (uniform draws), by bisection."""
    lo, hi = distinct, 100.0 * draws
    for _ in range(100):
        mid = (lo + hi) / 2
        if mid * (1 - np.exp(-draws / mid)) < distinct:
            lo = mid
        else:
            hi = mid
    return int(round(hi))


def tiny(persons: int = 100_000, seed: int = 25) -> Shape:
    """1–5 items each of 2,406 (the issue-25 tiny-l table): l = 1 is exact."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 6, persons)
    owner = np.repeat(np.arange(persons), sizes)
    return from_pairs(f"tiny l ({persons:,} persons, 1-5 of 2,406 items)", owner,
                      rng.integers(0, 2_406, len(owner)), seed)


def heavy_tailed(persons: int = 20_000, seed: int = 3) -> Shape:
    """Person sizes 1 + Pareto(1.1)·3 capped at 20,000 (median 5, a few
    persons with thousands), items Zipf(1.3)-popular over 2,000,000."""
    rng = np.random.default_rng(seed)
    sizes = np.minimum(1 + (rng.pareto(1.1, persons) * 3).astype(np.int64), 20_000)
    owner = np.repeat(np.arange(persons), sizes)
    items = np.minimum(rng.zipf(1.3, len(owner)), 2_000_000)
    return from_pairs(f"heavy-tailed ({persons:,} persons, Pareto sizes, Zipf items)", owner, items, seed)


def amazon_fashion(seed: int = 4) -> Shape:
    """Amazon Fashion 5-core: reviewer × lower-cased [a-z]+ words of the
    review text (persons without words drop out), read in place."""
    word = re.compile(r"[a-z]+")
    persons, items = [], []
    with gzip.open(AMAZON, "rt", encoding="utf-8") as lines:
        for line in lines:
            review = json.loads(line)
            for w in word.findall(str(review.get("reviewText") or "").lower()):
                persons.append(review["reviewerID"])
                items.append(w)
    return from_pairs("Amazon Fashion (reviewer x word)", np.asarray(persons), np.asarray(items), seed)


def movielens(seed: int = 5) -> Shape:
    """MovieLens 100K: user × movie, read in place."""
    data = np.loadtxt(Path(MOVIELENS) / "u.data", dtype=np.int64, usecols=(0, 1))
    return from_pairs("MovieLens 100K (user x movie)", data[:, 0], data[:, 1], seed)
