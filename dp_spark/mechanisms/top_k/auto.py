"""Top-k mechanism choice: ``method="auto"`` (driver side, numpy only).

No single top-k mechanism is best everywhere. Gillenwater et al. (ICML 2022,
Section 4) find that the joint mechanism "always obtains the strongest
performance for small k" and beats CDP-Peel (an (ε, δ) method) wherever the
gaps between the top counts are large, while CDP-Peel wins for larger k on
flat count profiles. Measured on MovieLens 100K and Amazon Fashion words
(benchmarks/topk_accuracy.py, issue 14): the joint mechanism's ℓ∞ error
jumps to a plateau of "random items" once k is past a data-dependent point,
where CDP-Peel's error grows smoothly until its own noise reaches the size of
the counts, after which CDP-Peel is random from the first rank and the joint
mechanism (which still gets the widest-gapped top items) is better again.

``auto`` decides as follows, and runs the permute-and-flip form of the joint
mechanism, PNF-Joint (paper Appendix D), whenever it picks a joint mechanism:
permute-and-flip is never worse than the exponential mechanism in expected
utility (McKenna & Sheldon 2020, Theorem 2). PNF-Joint sweeps all d·k
entries (no early stop), so past ``PNF_JOINT_MAX_ENTRIES`` the exponential
form (Joint, which stops early) runs instead. PNF-Peel is never chosen: the
joint mechanisms match or beat it (paper Section 4) in every benchmark cell
within 1.25×; it can win at small k on tiny counts (a synthetic profile with
a top count of 80), where every mechanism's error is most of the count.

1. From public parameters alone, spending nothing on the choice: the joint
   mechanism when δ = 0 (CDP-Peel is not available) or when
   k ≤ ``SMALL_K_PER_EPSILON``·ε (every benchmark cell there is won or tied
   by a joint mechanism, at errors of 0 to a few tens of persons, where a private
   share would cost more than the choice can win).
2. Otherwise a public share ``AUTO_SHARE`` of ε (ε₀) buys two noisy
   statistics, the largest count c_(1) and the k-th largest c_(k), each plus
   discrete Laplace noise of scale 2/ε₀ (:func:`noisy_rank_counts` at ranks 1
   and k, the exact sampler :func:`dp_spark.noise.discrete_laplace` on the
   integer order statistics; pure ε₀-DP): T₁ and T_k. With the rest ε₁ = ε − ε₀ it compares two
   public error scales with them (:func:`error_scales`):

   * the joint mechanism's utility bound 2·k·ln d / ε₁ (paper Theorem 3.3
     without the ln 1/β term): if it is at most ``JOINT_BOUND_FRACTION``·T_k
     the joint mechanism's noise is small against the counts it must rank
     and it is chosen;
   * else CDP-Peel's noise scale ln d / ε' (the typical maximum of d Gumbel
     variables of scale 1/ε', ε' its per-step ε): if it is at least
     ``CDP_NOISE_FRACTION``·T₁ CDP-Peel is close to random even at the top
     and the joint mechanism (which still gets the widest-gapped top items)
     is chosen; otherwise CDP-Peel.

   Everything after the noisy counts is post-processing.

Guarantee: the choice is ε₀-DP (0-DP in case 1) and the chosen mechanism
runs with ε₁ (the pure mechanisms) or (ε₁, δ) (CDP-Peel); by basic
composition ``auto`` is (ε, δ)-DP whichever is chosen (δ is charged even
when a pure mechanism is chosen: the choice is not known before the data is
read), and ε-DP when δ = 0. The thresholds were fitted on the two benchmark
data sets and checked on synthetic steep, flat and small-count profiles
(measured, not proven optimal); see benchmarks/topk_accuracy.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from dp_spark.accounting.exact import ratio_up, remainder
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.top_k._common import as_counts, check_delta, check_int, check_positive, check_rng
from dp_spark.mechanisms.top_k.joint import joint_top_k, pnf_joint_top_k
from dp_spark.mechanisms.top_k.peeling import cdp_peel_epsilon_per_step, cdp_peel_top_k
from dp_spark.noise.discrete import discrete_laplace
from dp_spark.noise.records import NoiseDraw
from dp_spark.noise.tails import discrete_laplace_std

__all__ = ["AUTO_SHARE", "CDP_NOISE_FRACTION", "JOINT_BOUND_FRACTION", "PNF_JOINT_MAX_ENTRIES",
           "SMALL_K_PER_EPSILON", "AutoChoice", "auto_anchor_ranks", "auto_share", "choice_stream", "choose_mechanism",
           "error_scales", "noisy_rank_counts", "public_choice"]

#: share of ε spent on the private choice when one is needed (case 2): discrete Laplace
#: scale 2/(0.05·ε) = 40/ε persons on each noisy count. Measured on the
#: benchmark's 30 cells (common random numbers, seeds 0 and 1, 201 and 101
#: trials): over shares {5%, 10%} × JOINT_BOUND_FRACTION {0.6 … 1.5} ×
#: CDP_NOISE_FRACTION {0.6 … 1.2}, these values (5%, 1.0, 0.8) have the most
#: cells within 1.25× by median and by mean; 10% loses more to the smaller
#: selection ε than it gains in the choice.
AUTO_SHARE = 0.05
#: k ≤ this·ε: a joint mechanism, chosen from public parameters (case 1)
SMALL_K_PER_EPSILON = 10.0
#: joint when its utility bound 2·k·ln d/ε₁ is at most this share of the noisy k-th count
JOINT_BOUND_FRACTION = 1.0
#: joint when CDP-Peel's noise scale ln d/ε' is at least this share of the noisy top count
CDP_NOISE_FRACTION = 0.8
#: pnf-joint sweeps all d·k entries (no early stop); past this, joint runs instead
PNF_JOINT_MAX_ENTRIES = 2 * 10**7


@dataclass(frozen=True)
class AutoChoice:
    """What ``auto`` decided. ``epsilon_choice`` was spent on the choice (0
    when public parameters sufficed); ``epsilon_selection`` is left for the
    chosen mechanism. ``predicted`` holds the noisy counts at ranks 1 and k
    (``top_count``, ``kth_count``: whole numbers, as floats) and the two public error scales compared with it
    (``joint``, ``cdp-peel``; see :func:`error_scales`); DP as
    post-processing of the noisy count; empty when nothing was spent.
    ``noise``: the record of the choice's discrete Laplace draws (none when nothing
    was spent)."""

    method: str
    epsilon_choice: float
    epsilon_selection: float
    predicted: dict
    noise: tuple = ()


def _joint_kind(k: int, d: int | None) -> str:
    """The joint mechanism auto runs: pnf-joint unless d·k is past
    PNF_JOINT_MAX_ENTRIES (public: k and the domain size)."""
    return "pnf-joint" if d is None or d * k <= PNF_JOINT_MAX_ENTRIES else "joint"


def _needs_data(k: int, epsilon: float, delta: float) -> bool:
    """Whether the choice needs the data (public parameters only)."""
    return float(delta) > 0.0 and k > SMALL_K_PER_EPSILON * float(epsilon)


def public_choice(k: int, epsilon: float, delta: float, domain_size: int | None = None) -> str | None:
    """The mechanism ``auto`` runs when public parameters suffice (case 1 of
    the module docstring), else None (the choice needs the data)."""
    return None if _needs_data(k, epsilon, delta) else _joint_kind(k, domain_size)


def auto_share(k: int, epsilon: float, delta: float, domain_size: int | None = None) -> float:
    """The share of ε that ``auto`` spends on its private choice, from public
    parameters only: 0 when δ = 0 or k ≤ SMALL_K_PER_EPSILON·ε (the choice
    needs no data), else AUTO_SHARE. The plan charges it as its own step
    whatever the choice turns out to be."""
    return AUTO_SHARE if _needs_data(k, epsilon, delta) else 0.0


def auto_anchor_ranks(k: int, d: int) -> np.ndarray:
    """The public ranks (1-based) whose counts the choice estimates: 1 and k
    (just 1 when k = 1; k ≤ d)."""
    return np.array(sorted({1, int(k)}), dtype=np.int64)


def noisy_rank_counts(counts: ArrayLike, ranks: np.ndarray, epsilon: float,
                      rng: np.random.Generator) -> np.ndarray:
    """ε-DP noisy values of the sorted counts c_(r) at the given public ranks.

    Adding or removing one person moves every count by at most 1 in the same
    direction, so every (integer) order statistic c_(r) moves by an integer
    0 or 1, and the vector of m of them by at most m in ℓ1. Discrete Laplace
    noise of scale m/ε on each (P[x] ∝ exp(−|x|·ε/m) over the integers, the
    project's exact sampler :func:`dp_spark.noise.discrete_laplace`, no
    floating-point draw) is the geometric mechanism: ε-DP for integer
    statistics of ℓ1 sensitivity m. The counts must be whole numbers.
    """
    c = as_counts(counts, integral=True).astype(np.int64)
    eps = check_positive(epsilon, "epsilon")
    rng = check_rng(rng)
    m = len(ranks)
    top = np.sort(c)[::-1]
    scale = ratio_up(m, eps)  # m/ε rounded up: more noise, never less
    return (top[np.asarray(ranks) - 1] + discrete_laplace(scale, rng, size=m)).astype(np.float64)


def choice_stream(rng: np.random.Generator) -> np.random.Generator:
    """The generator the private choice draws its noise from: a child spawned
    from ``rng``'s seed sequence (independent of ``rng``'s own stream, which
    spawning does not advance), so the chosen mechanism then draws from
    ``rng`` exactly what it would draw run alone with it. Privacy does not
    depend on this (any independent noise will do); it makes ``auto`` with a
    given generator the chosen mechanism at ε₁ with the same draws, which the
    tests and the accuracy benchmark's common random numbers use. A generator
    whose seed sequence cannot spawn is used as it is."""
    rng = check_rng(rng)
    try:
        return rng.spawn(1)[0]
    except (TypeError, AttributeError):  # a bit generator without a spawnable SeedSequence
        return rng


def error_scales(k: int, epsilon: float, delta: float, d: int) -> dict:
    """The two public error scales the choice compares with the noisy top
    count, at the selection's (epsilon, delta) on a domain of d items:
    ``joint`` = 2·k·ln d/ε (the joint mechanism's utility bound, paper
    Theorem 3.3 without its ln 1/β term) and ``cdp-peel`` = ln d/ε' (the
    typical maximum of d Gumbel variables of scale 1/ε', ε' CDP-Peel's
    per-step ε). Public parameters only."""
    log_d = math.log(max(int(d), 1))
    return {"joint": 2.0 * k * log_d / epsilon,
            "cdp-peel": log_d / cdp_peel_epsilon_per_step(epsilon, delta, k)}


def choose_mechanism(counts: ArrayLike, k: int, epsilon: float, delta: float,
                     rng: np.random.Generator, share: float | None = None) -> AutoChoice:
    """Choose the top-k mechanism for ``auto`` (see the module docstring).

    When public parameters suffice (δ = 0 or k ≤ SMALL_K_PER_EPSILON·ε) the
    counts are not read and nothing is spent: 0-DP, ``epsilon_choice`` = 0.
    Otherwise releases only the choice (with the noisy top count and the
    public error scales in ``predicted``) under ε₀-DP, ε₀ = ``share``·ε
    (default AUTO_SHARE, which is :func:`auto_share` here): the discrete Laplace
    mechanism on (c_(1), c_(k)) (ℓ1 sensitivity 2 for distinct-person
    counts, see :func:`noisy_rank_counts`) followed by post-processing. The caller must
    run the chosen mechanism with ``epsilon_selection`` (and ``delta`` for
    cdp-peel).
    """
    eps = check_positive(epsilon, "epsilon")
    dlt = check_delta(delta, allow_zero=True)
    c = as_counts(counts, integral=True)
    d = c.shape[0]
    k = check_int(k, "k", 1, d, " (the number of items in counts)")
    public = public_choice(k, eps, dlt, d)
    if public is not None:
        return AutoChoice(public, 0.0, eps, {})
    share = AUTO_SHARE if share is None else share
    if not (0.0 < float(share) < 0.5):
        raise ParameterError("share must lie in (0, 0.5); it is the part of ε spent on the choice")
    eps0 = eps * float(share)
    eps1 = remainder(eps, eps0)  # ε − ε₀ rounded down: ε₀ + ε₁ <= ε exactly
    noisy = noisy_rank_counts(c, auto_anchor_ranks(k, d), eps0, choice_stream(rng))
    del c  # non-private: nothing below may use it
    top, kth = float(noisy[0]), float(noisy[-1])  # ranks 1 and k (the same one when k = 1)
    scales = error_scales(k, eps1, dlt, d)
    if (scales["joint"] <= JOINT_BOUND_FRACTION * max(kth, 1.0)
            or scales["cdp-peel"] >= CDP_NOISE_FRACTION * max(top, 1.0)):
        pick = _joint_kind(k, d)
    else:
        pick = "cdp-peel"
    m = len(auto_anchor_ranks(k, d))
    scale = ratio_up(m, eps0)  # as noisy_rank_counts draws it
    record = NoiseDraw("choice", "discrete-laplace", scale=scale, std=discrete_laplace_std(scale),
                       sensitivity=float(m), draws=m,
                       target="the counts at ranks 1 and k (auto's choice)")
    return AutoChoice(pick, eps0, eps1, {"top_count": top, "kth_count": kth, **scales}, (record,))


def auto_top_k(counts: ArrayLike, k: int, epsilon: float, delta: float,
               rng: np.random.Generator, share: float | None = None) -> tuple[np.ndarray, AutoChoice]:
    """(ε, δ)-DP top-k (ε-DP when δ = 0) with the mechanism chosen by
    :func:`choose_mechanism`: ε₀ on the choice, ε − ε₀ (and δ, for
    cdp-peel) on the selection, basic composition. Returns (indices in rank
    order, choice)."""
    choice = choose_mechanism(counts, k, epsilon, delta, rng, share)
    eps_sel = choice.epsilon_selection
    if choice.method == "joint":
        return joint_top_k(counts, k, eps_sel, rng), choice
    if choice.method == "pnf-joint":
        return pnf_joint_top_k(counts, k, eps_sel, rng), choice
    return cdp_peel_top_k(counts, k, eps_sel, delta, rng), choice
