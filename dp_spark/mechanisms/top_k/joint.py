"""Joint exponential mechanism for top-k and its permute-and-flip variant.

Gillenwater, Joseph, Munoz Medina and Ribero, "A Joint Exponential Mechanism for
Differentially Private Top-k" (ICML 2022): Algorithm 1 (:func:`joint_top_k`),
sampled exactly in O(d·k·log k + d·log d) time and O(d·k) space, and
Appendix D (:func:`pnf_joint_top_k`), sampled exactly too (its exponential
noise read bit by bit and bounded, :mod:`dp_spark.noise.max_exponential`);
both ε-DP for counts of distinct persons (sensitivity 1, monotone). Counts
are private: no message quotes one.
"""

from __future__ import annotations

import bisect
import decimal
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterator

import numpy as np
from numpy.typing import ArrayLike

from dp_spark.accounting.exact import ratio_down
from dp_spark.mechanisms.top_k._common import as_counts, check_int, check_positive, check_rng
from dp_spark.noise.max_exponential import FIRST_BITS, FLOAT_ERROR, exact_bounds, float_bounds
from dp_spark.noise.weighted import (LUMP_DEPTH as _LUMP, ZERO_WEIGHT, bernoulli_scaled_exp, class_totals,
                                     directed_contexts, dyadic_exponents, exact_decimal, locate, propose)

# D~[i, j] = c_(i) - c_(j) + (d(k-i-1) + j + 1)/(2dk), 0-based i < k, j < d,
# c_(0) >= ... >= c_(d-1) (ALGORITHMS.md 3.2). The tie term lies in (0, 1/2]
# and differs for every entry, so D~ is ordered as the exact integer
#     key(i, j) = (c_(i) - c_(j))·dk + d(k-i-1) + j
# (never formed in floating point, where the tie term would round away). Rows
# increase in j, columns decrease in i, so the entries of row i below x are
# the columns [0, n_i(x)), found by binary search (:func:`_row_counts`): the
# d·k entries are streamed in ascending order, block by block, without
# materialising the k×d matrix, each block sorted by merging k row pieces.

_DOUBLE_MAX = float(np.finfo(np.float64).max)

#: Entries per streamed block of D~; the running sum of logs is re-anchored
#: exactly at every block start.
_BLOCK = 1 << 17


@dataclass
class _JointPrep:
    perm: np.ndarray  # perm[j] = original index of the item at sorted position j
    cs: np.ndarray  # counts sorted non-increasingly (int64)
    neg: np.ndarray  # -cs (ascending), for binary searches
    row_tie: np.ndarray  # d(k-1-i) for i < k (int64)
    k: int
    d: int
    int_keys: bool  # whether block keys fit in int64 (else sort (diff, tie) pairs)


def _joint_prepare(c: np.ndarray, k: int) -> _JointPrep:
    """Step 1: sort the counts (stable, descending; ties by original index)."""
    d = c.shape[0]
    perm = np.argsort(-c, kind="stable")
    cs = c[perm]
    spread = int(cs[0]) - int(cs[-1])
    return _JointPrep(
        perm=perm,
        cs=cs,
        neg=-cs,
        row_tie=d * (k - 1 - np.arange(k, dtype=np.int64)),
        k=k,
        d=d,
        int_keys=(2 * spread + 2) * d * k < 2**62,
    )


def _row_counts(prep: _JointPrep, x: int) -> np.ndarray:
    """n_i(x) = #{j : key(i, j) < x} for every row i (int64 array of length k)."""
    big_d, t = divmod(x, prep.d * prep.k)  # key < x  <=>  (diff, tie) < (big_d, t)
    bound = big_d - prep.cs[: prep.k]  # diff_ij < big_d  <=>  -c_(j) < big_d - c_(i)
    lo = np.searchsorted(prep.neg, bound, side="left")
    hi = np.searchsorted(prep.neg, bound, side="right")
    # within the columns with diff == big_d (j in [lo, hi)), tie < t <=> j < t - d(k-1-i)
    return np.clip(t - prep.row_tie, lo, hi)


def _key(prep: _JointPrep, i: int, j: int) -> int:
    return (int(prep.cs[i]) - int(prep.cs[j])) * prep.d * prep.k + int(prep.row_tie[i]) + j


def _block_bounds(prep: _JointPrep) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (a, b): block = columns [a_i, b_i) of every row i; exactly _BLOCK
    entries per block (the last may be smaller), blocks in ascending order.
    Block ends are found by binary search on the integer key."""
    k, d = prep.k, prep.d
    total = d * k
    lo_key = _key(prep, k - 1, 0)  # smallest entry
    end_key = _key(prep, 0, d - 1) + 1  # one past the largest entry
    a = np.zeros(k, dtype=np.int64)
    done = 0
    while done < total:
        target = done + _BLOCK
        if target >= total:
            b = np.full(k, d, dtype=np.int64)
        else:
            # smallest x with sum_i n_i(x) >= target; keys are distinct integers,
            # so the sum equals target there
            lo, hi = lo_key, end_key
            while lo < hi:
                mid = (lo + hi) // 2
                if int(_row_counts(prep, mid).sum()) >= target:
                    hi = mid
                else:
                    lo = mid + 1
            b = _row_counts(prep, lo)
            lo_key = lo
        yield a, b
        done = int(b.sum())
        a = b


def _joint_entry_blocks(prep: _JointPrep) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Steps 4-5 of ALGORITHMS.md 3.2: yield, block by block in ascending D~
    order, ``(rows, cols, floor_diff, log_count)`` for every entry
    (:func:`_block_entries`)."""
    for a, b in _block_bounds(prep):
        yield _block_entries(prep, a, b)


def _block_entries(prep: _JointPrep, a: np.ndarray,
                   b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The entries of one block (columns [a_i, b_i) of every row i), in
    ascending D~ order: ``(rows, cols, floor_diff, log_count)``.

    For entry e = D~[r, j]: m(e) = prod_{i != r} (n_i(e) - i) (paper Lemma
    3.7), n_i(e) the entries of row i below e, m(e) = 0 when a factor is
    <= 0. Sweeping in ascending order (n_r = j just before (r, j)), with
    S = sum_i ln(max(n_i - i, 1)): every row other than r is positive iff k
    diagonal entries are passed (k - 1 when j == r; j < r is never valid);
    ln m(e) = S - ln(j - r) (0 when j == r); passing (r, j) adds
    ln((j + 1 - r)/(j - r)) to S. S is recomputed exactly at every block
    start, so rounding stays within one block, and a block's values depend
    on its bounds only (the exact sampler recomputes a block it proposes
    from). O(B log k) time, O(d + B) memory for a block of B entries.
    """
    k, d, cs = prep.k, prep.d, prep.cs
    dk = d * k
    row_index = np.arange(k, dtype=np.int64)
    sizes = b - a
    size = int(sizes.sum())
    rows = np.repeat(row_index, sizes)
    starts = np.cumsum(sizes) - sizes
    cols = a[rows] + (np.arange(size, dtype=np.int64) - starts[rows])
    floor_diff = cs[rows] - cs[cols]
    if prep.int_keys:
        key = floor_diff * dk + prep.row_tie[rows] + cols
        order = np.argsort(key, kind="stable")
    else:  # count spreads near 2**62/(dk): sort the exact (diff, tie) pairs
        order = np.lexsort((prep.row_tie[rows] + cols, floor_diff))
    rows, cols, floor_diff = rows[order], cols[order], floor_diff[order]

    jr = cols - rows
    is_diag = jr == 0
    positive = jr > 0
    diag_before = int(np.count_nonzero(a > row_index)) + np.cumsum(is_diag) - is_diag
    valid = np.where(positive, diag_before == k, is_diag & (diag_before == k - 1))
    anchor = float(np.sum(np.log(np.maximum(a - row_index, 1).astype(np.float64))))
    jr_f = np.where(positive, jr, 1).astype(np.float64)
    own = np.where(positive, np.log(jr_f), 0.0)
    inc = np.where(positive, np.log1p(1.0 / jr_f), 0.0)
    s_before = anchor + (np.cumsum(inc) - inc)
    log_count = np.where(valid, s_before - own, -np.inf)
    return rows, cols, floor_diff, log_count


def _entry_count(prep: _JointPrep, r: int, j: int) -> int:
    """m(e) for e = D~[r, j], exactly (Python int): prod_{i != r} (n_i(e) - i),
    0 when a factor is <= 0 (paper Lemma 3.7; :func:`_block_entries`)."""
    n = _row_counts(prep, _key(prep, r, j))
    m = 1
    for i, n_i in enumerate(n.tolist()):
        if i == r:
            continue
        if n_i - i <= 0:
            return 0
        m *= n_i - i
    return m


def _joint_sequence(prep: _JointPrep, r_star: int, j_star: int, rng: np.random.Generator) -> np.ndarray:
    """Step 7: a uniform sequence among those whose largest D~ entry is
    D~[r*, j*]: row r* takes j*, every other row i (increasing) a uniform
    column of [0, n_i) not yet taken (nested prefixes with i taken: n_i - i
    choices). O(k log d + k²)."""
    k = prep.k
    n = _row_counts(prep, _key(prep, r_star, j_star))
    if int(n[r_star]) != j_star:  # pragma: no cover
        raise RuntimeError("joint sampler: inconsistent entry (internal error)")
    taken = [j_star]  # kept sorted
    seq = np.empty(k, dtype=np.int64)
    seq[r_star] = j_star
    for i in range(k):
        if i == r_star:
            continue
        n_i = int(n[i])
        if sum(1 for u in taken if u < n_i) != i or n_i - i <= 0:  # pragma: no cover
            raise RuntimeError("joint sampler: inconsistent entry group (internal error)")
        t = int(rng.integers(n_i - i))
        for u in taken:  # map t to the t-th column of [0, n_i) not yet taken
            if u <= t:
                t += 1
            else:
                break
        seq[i] = t
        bisect.insort(taken, t)
    return seq


def _check_joint_args(counts, k, epsilon, sensitivity):
    c = as_counts(counts, integral=True)
    k = check_int(k, "k", 1, c.shape[0], " (the number of items in counts)")
    eps = check_positive(epsilon, "epsilon")
    sens = check_positive(sensitivity, "sensitivity")
    return c, k, eps, sens


@dataclass(frozen=True)
class JointLogWeights:
    """Exact log-weights of the joint mechanism's entry groups (tests/audits),
    indexed by the entries of D~ in ascending order: entry ``p`` stands for
    the length-k sequences whose largest entry is ``D~[rows[p], cols[p]]``,
    ``log_count[p]`` their log number (-inf: none), utility
    ``-floor_diff[p]``, ``log_weight[p] = log_count[p] -
    epsilon*floor_diff[p]/(2*sensitivity)``; ``perm[j]``: the original index
    at sorted position j."""

    perm: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    floor_diff: np.ndarray
    log_count: np.ndarray
    log_weight: np.ndarray

    def log_probability(self) -> np.ndarray:
        """Normalised log-probability of each entry group under the mechanism."""
        finite = np.isfinite(self.log_weight)
        top = float(np.max(self.log_weight[finite]))
        total = top + math.log(float(np.sum(np.exp(self.log_weight[finite] - top))))
        return self.log_weight - total


def joint_top_k_log_weights(
    counts: ArrayLike, k: int, epsilon: float, sensitivity: float = 1
) -> JointLogWeights:
    """Every entry group's exact log-weight in :func:`joint_top_k`, for
    comparison with a brute-force exponential mechanism. Depends on the
    private counts: never release it."""
    c, k, eps, sens = _check_joint_args(counts, k, epsilon, sensitivity)
    prep = _joint_prepare(c, k)
    parts = list(_joint_entry_blocks(prep))
    rows = np.concatenate([p[0] for p in parts])
    cols = np.concatenate([p[1] for p in parts])
    floor_diff = np.concatenate([p[2] for p in parts])
    log_count = np.concatenate([p[3] for p in parts])
    log_weight = log_count - ratio_down(eps, 2.0 * sens) * floor_diff.astype(np.float64)
    return JointLogWeights(prep.perm, rows, cols, floor_diff, log_count, log_weight)


def joint_top_k(
    counts: ArrayLike,
    k: int,
    epsilon: float,
    rng: np.random.Generator,
    sensitivity: float = 1,
) -> np.ndarray:
    """ε-DP top-k by the joint exponential mechanism (exact sampler).

    Gillenwater, Joseph, Munoz Medina, Ribero, "A Joint Exponential Mechanism
    for Differentially Private Top-k", ICML 2022, Algorithm 1 (ALGORITHMS.md
    3.2). Outputs a length-k sequence s of distinct items with probability
    proportional to ``exp(epsilon * u(s) / (2 * sensitivity))``, where
    ``u(s) = -max_i (c_(i) - c_{s_i})`` and ``c_(1) >= ... >= c_(d)`` are the
    sorted counts.

    Guarantee: ε-DP (exponential mechanism, McSherry-Talwar) when one person
    moves every count by at most ``sensitivity`` (default 1: distinct-person
    counts; 2 for swap neighbours), so u moves by at most that too (paper
    Lemma 3.1). The domain (the items behind ``counts``, absent ones counting
    0) must be public and fixed in advance.

    Exact sampling (paper Sec. 3.1, without its floating-point Gumbel draws):
    sort the counts; sweep D~ (with the paper's data-independent tie term, as
    exact integers) in ascending blocks to get ln m(e), the log number of
    sequences whose largest entry is e (Lemma 3.7); choose an entry with
    probability exactly ∝ m(e)·exp(−ε·floor(e)/(2Δ)) by rejection from a
    dyadic envelope (:mod:`dp_spark.noise.weighted`: the doubles ln m(e) only
    place entries in envelope classes; the acceptance compares uniform words
    with the exact integer m(e) and exp of the exact rational
    c·floor(e)); draw a sequence uniformly from its group. Memory O(d + block
    size + blocks·k). The sweep stops early, still exactly, once the unswept
    entries' weight (each at most (d!/(d−k)!)·exp(−ε·floor/(2Δ))) is far
    below the heaviest seen: they form one envelope class, swept only when a
    proposal falls in it (:class:`_JointChoice`).

    ``counts``: non-negative whole numbers, one per item (length d);
    1 <= k <= d; ε > 0. Returns k distinct int64 indices in rank order.
    """
    c, k, eps, sens = _check_joint_args(counts, k, epsilon, sensitivity)
    rng = check_rng(rng)
    prep = _joint_prepare(c, k)
    coef = ratio_down(eps, 2.0 * sens)  # ε/(2Δ) rounded down: never sharper than ε allows
    r_star, j_star = _JointChoice(prep, coef).draw(rng)
    seq = _joint_sequence(prep, r_star, j_star, rng)
    return prep.perm[seq].astype(np.int64)


#: Stop the sweep once the rest's total log-weight is this far below the
#: heaviest entry seen (the rest stays a proposal class, swept on demand).
_TAIL_MARGIN = 40.0


class _JointChoice:
    """The joint mechanism's entry choice, exactly: P[e] ∝ m(e)·exp(−c·floor(e)).

    One sweep records, per block, its bounds and how many valid entries fall
    in each dyadic exponent E (``w <= 2^E``; :func:`dyadic_exponents`);
    the envelope classes are then fixed against the heaviest E. A proposal
    names a (block, class, rank): the block is recomputed from its bounds
    (the same doubles, so the same classes) and the entry accepted against
    its class with the exact weight (:func:`_entry_count`, c·floor(e)). The
    unswept rest, if the sweep stopped early, is one more class of all its
    entries (zero-weight ones included: they are rejected), each under the
    bound ln(d!/(d−k)!) − c·floor_last; a proposal there continues the sweep.
    """

    def __init__(self, prep: _JointPrep, coef: float):
        self.prep, self.coef, self.coef_q = prep, coef, Fraction(coef)
        log_sequences = math.lgamma(prep.d + 1) - math.lgamma(prep.d - prep.k + 1)
        self.bounds = _block_bounds(prep)
        self.blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self.rest_blocks: list[tuple[np.ndarray, np.ndarray, int]] = []
        self.first: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        head_max, swept, total = -np.inf, 0, prep.d * prep.k
        self.rest_exponent, self.rest_size = None, 0
        for a, b in self.bounds:
            rows, cols, floor_diff, log_count = _block_entries(prep, a, b)
            log_weight = self._log_weight(log_count, floor_diff)
            e_all = dyadic_exponents(log_weight)
            if not self.blocks:  # the first block's entries are kept (never recomputed)
                self.first = (rows, cols, floor_diff, e_all)
            e = e_all[e_all != ZERO_WEIGHT]
            values, counts = np.unique(e, return_counts=True)
            self.blocks.append((a, b, values, counts))
            swept += rows.shape[0]
            if e.shape[0]:
                head_max = max(head_max, float(np.max(log_weight)))
            # every later entry has floor >= this block's last floor and m <= d!/(d-k)!
            bound = log_sequences - coef * float(floor_diff[-1])
            if swept < total and bound < head_max - _TAIL_MARGIN:
                self.rest_exponent = int(dyadic_exponents(np.array([bound]))[0])
                self.rest_size = total - swept
                break
        tops = [int(v[-1]) for _, _, v, _ in self.blocks if v.shape[0]]
        if self.rest_exponent is not None:
            tops.append(self.rest_exponent)
        self.top = max(tops)
        self.parts: list[tuple[int, int]] = []  # (block index or -1 for the rest, class)
        self.totals: list[int] = []
        for index, (_, _, values, counts) in enumerate(self.blocks):
            if not values.shape[0]:
                continue
            # the block's exponents, ascending, into classes max(E, top − depth): lumped ones merge
            classes, first = np.unique(np.maximum(values, self.top - _LUMP), return_index=True)
            held = np.add.reduceat(counts, first)
            for cls, total_cls in zip(classes.tolist(), class_totals(classes, held, self.top)):
                self.parts.append((index, cls))
                self.totals.append(total_cls)
        if self.rest_exponent is not None:
            cls_rest = max(self.rest_exponent, self.top - _LUMP)
            self.parts.append((-1, cls_rest))
            self.totals.append(self.rest_size << (cls_rest - (self.top - _LUMP)))

    def _log_weight(self, log_count: np.ndarray, floor_diff: np.ndarray) -> np.ndarray:
        return log_count - self.coef * floor_diff.astype(np.float64)

    def _rest_entry(self, position: int) -> tuple[int, int, int]:
        """The ``position``-th unswept entry (sweep order): (row, column, floor).
        The bounds of the blocks swept for it are kept (O(k) each); only the
        block holding it is recomputed."""
        start = 0
        for a, b, size in self.rest_blocks:
            if position < start + size:
                rows, cols, floor_diff, _ = _block_entries(self.prep, a, b)
                i = position - start
                return int(rows[i]), int(cols[i]), int(floor_diff[i])
            start += size
        for a, b in self.bounds:
            self.rest_blocks.append((a, b, int((b - a).sum())))
            if position < start + self.rest_blocks[-1][2]:
                return self._rest_entry(position)
            start += self.rest_blocks[-1][2]
        raise RuntimeError("joint sampler: proposal past the last entry (internal error)")  # pragma: no cover

    def draw(self, rng: np.random.Generator) -> tuple[int, int]:
        """(r*, j*): the chosen entry D~[r*, j*]."""
        while True:
            part, offset = propose(self.totals, rng)
            index, cls = self.parts[part]
            if index >= 0:
                if index == 0:
                    rows, cols, floor_diff, e = self.first
                else:
                    a, b = self.blocks[index][:2]
                    rows, cols, floor_diff, log_count = _block_entries(self.prep, a, b)
                    e = dyadic_exponents(self._log_weight(log_count, floor_diff))
                at, shift = locate(e, self.top, cls, offset)
                r, j, floor = int(rows[at]), int(cols[at]), int(floor_diff[at])
            else:
                r, j, floor = self._rest_entry(offset >> (cls - (self.top - _LUMP)))
                shift = cls
            if bernoulli_scaled_exp(_entry_count(self.prep, r, j), self.coef_q * floor, shift, rng):
                return r, j


def pnf_joint_top_k(
    counts: ArrayLike,
    k: int,
    epsilon: float,
    rng: np.random.Generator,
    sensitivity: float = 1,
) -> np.ndarray:
    """ε-DP top-k by the joint permute-and-flip mechanism (PNF-Joint), sampled exactly.

    Gillenwater et al. (ICML 2022), Appendix D (ALGORITHMS.md 3.3):
    permute-and-flip over length-k sequences with ``u(s) = -max_i (c_(i) -
    c_{s_i})``, as report-noisy-max with ``Exp(rate epsilon/(2*sensitivity))``
    noise (Ding et al. 2021). Sequences are grouped by their largest D~ entry
    as in :func:`joint_top_k`; a group of m competes with the largest of m
    Exp(1) variables, then a sequence is drawn uniformly inside the winner.

    Exact sampling, where the paper draws floating-point exponentials: each
    group's noise is Y = −ln(1 − U^(1/m)) for a uniform U read bit by bit
    (:mod:`dp_spark.noise.max_exponential`), and the winner is decided only
    when proven bounds of every group's score Y − c·floor(e) (c = ε/(2Δ)
    rounded down) separate it from the rest: doubles bound all groups from
    U's first 53 bits and ln m(e) (:func:`_pnf_contenders`); the few groups
    the doubles cannot separate go on with more bits of their U and Python
    ``decimal`` bounds computed from the exact integer m(e) and the exact
    rational c·floor(e) until one is left (:func:`_pnf_settle`). So the
    output is the argmax of the idealised mechanism's scores: no
    floating-point noise (the doubles only bound; they hold when numpy's
    log/exp are within 2^-36 relative, over 10⁵ units of their documented
    error).

    Guarantee: ε-DP (McKenna & Sheldon 2020, with the non-monotone rate
    ε/(2Δ)) when one person moves every count by at most ``sensitivity``.
    Public domain. Args and return value as :func:`joint_top_k`.
    """
    c, k, eps, sens = _check_joint_args(counts, k, epsilon, sensitivity)
    rng = check_rng(rng)
    prep = _joint_prepare(c, k)
    coef = ratio_down(eps, 2.0 * sens)  # the noise rate ε/(2Δ) rounded down: more noise, never less
    r_star, j_star = _pnf_settle(prep, coef, _pnf_contenders(prep, coef, rng), rng)
    seq = _joint_sequence(prep, r_star, j_star, rng)
    return prep.perm[seq].astype(np.int64)


@dataclass
class _Contender:
    """An entry group still in the running: D~[row, col], its floor, U's bits read so far (``word``
    of ``bits`` bits) and its score's bounds."""

    row: int
    col: int
    floor: int
    word: int
    bits: int
    lo: float | decimal.Decimal
    hi: float | decimal.Decimal


def _log_count_error(prep: _JointPrep) -> float:
    """A bound on |ln m(e) − log_count| for every valid entry of :func:`_block_entries`: its sum
    S of at most k + _BLOCK non-negative terms (logs, each within FLOAT_ERROR relative) in
    doubles, S <= ln(d!/(d−k)!) (every partial sum is at most the full one), recursive summation
    within (terms)·u·S, the own term ln(j − r) <= ln d."""
    log_sequences = (math.lgamma(prep.d + 1) - math.lgamma(prep.d - prep.k + 1)) * (1 + 2.0**-20) + 1.0
    return FLOAT_ERROR * ((prep.k + _BLOCK + 8) * log_sequences + math.log(prep.d) + 1.0)


def _pnf_contenders(prep: _JointPrep, coef: float, rng: np.random.Generator) -> list[_Contender]:
    """The entry groups whose score the doubles cannot prove below another's: one sweep of D~,
    each valid entry's U given its first 53 bits (one uniform integer, in sweep order), scores
    bounded by :func:`~dp_spark.noise.max_exponential.float_bounds` minus c·floor (within
    FLOAT_ERROR relative); kept while their upper bound reaches the best lower bound seen."""
    count_error = _log_count_error(prep)
    best_lo = -math.inf
    kept: list[_Contender] = []

    def scores(lm, words, shift, upper):
        y = float_bounds(lm, words, count_error, upper)
        if upper:  # c·floor past the largest double (a huge ε): that double is below it, still an upper bound
            shift = np.minimum(shift, _DOUBLE_MAX)
        with np.errstate(invalid="ignore", over="ignore"):
            score = y - shift
            pad = FLOAT_ERROR * (np.abs(y) + shift + np.abs(score))
            return np.where(np.isfinite(y), score + pad if upper else score - pad, y)  # lower: −inf past it

    for rows, cols, floor_diff, log_count in _joint_entry_blocks(prep):
        idx = np.flatnonzero(np.isfinite(log_count))
        if idx.size == 0:
            continue
        words = rng.integers(0, 1 << FIRST_BITS, size=idx.size, dtype=np.int64)
        with np.errstate(over="ignore"):
            lm, shift = log_count[idx], coef * floor_diff[idx].astype(np.float64)
        hi = scores(lm, words, shift, True)
        top = int(np.argmax(hi))
        best_lo = max(best_lo, float(scores(lm[top:top + 1], words[top:top + 1], shift[top:top + 1], False)[0]))
        near = np.flatnonzero(hi >= best_lo)
        if near.size == 0:
            continue
        lo = scores(lm[near], words[near], shift[near], False)
        best_lo = max(best_lo, float(np.max(lo)))
        kept = [c for c in kept if c.hi >= best_lo]
        for p, low in zip(near.tolist(), lo.tolist()):
            if hi[p] >= best_lo:
                at = int(idx[p])
                kept.append(_Contender(int(rows[at]), int(cols[at]), int(floor_diff[at]), int(words[p]),
                                       FIRST_BITS, low, float(hi[p])))
    if not kept:  # pragma: no cover
        raise RuntimeError("pnf-joint sampler: no entry with positive count (internal error)")
    return kept


#: Decimal digits of the first exact round, and how many more each further round.
_PNF_DIGITS = 40
_PNF_MORE_DIGITS = 30


def _pnf_settle(prep: _JointPrep, coef: float, kept: list[_Contender],
                rng: np.random.Generator) -> tuple[int, int]:
    """The winner among the contenders, exactly: while more than one remains, bound each score
    with ``decimal`` (:func:`~dp_spark.noise.max_exponential.exact_bounds` with the exact m(e),
    minus the exact rational c·floor(e), rounded outward), drop those whose upper bound is below
    the best lower bound, and give the rest 64 more bits of U and more digits. Ends with
    probability 1 (ties of the continuous scores have probability 0)."""
    digits = _PNF_DIGITS
    coef_q = Fraction(coef)
    counts = {}
    while len(kept) > 1:
        down, up = directed_contexts(digits)
        for c in kept:
            if (c.row, c.col) not in counts:
                counts[(c.row, c.col)] = _entry_count(prep, c.row, c.col)
            m = counts[(c.row, c.col)]
            if m < 1:  # pragma: no cover
                raise RuntimeError("pnf-joint sampler: an empty entry group competes (internal error)")
            y_lo, y_hi = exact_bounds(m, c.word, c.bits, digits)
            shift = exact_decimal(coef_q * c.floor)
            c.lo, c.hi = down.subtract(y_lo, shift), up.subtract(y_hi, shift)
        best = max(c.lo for c in kept)
        kept = [c for c in kept if c.hi >= best]
        if len(kept) > 1:
            for c in kept:
                c.word = (c.word << 64) | int(rng.integers(0, 2**64 - 1, dtype=np.uint64, endpoint=True))
                c.bits += 64
            digits += _PNF_MORE_DIGITS
    return kept[0].row, kept[0].col
