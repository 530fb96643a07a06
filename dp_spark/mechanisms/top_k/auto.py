"""Top-k mechanism choice: ``method="auto"`` (driver side, numpy only).

No top-k mechanism is best everywhere: the joint mechanism is strongest for
small k and wide gaps between the top counts, CDP-Peel (an (ε, δ) method) for
larger k on flat profiles, until its noise reaches the size of the counts
(Gillenwater et al., ICML 2022, Section 4; benchmarks/topk_accuracy.py).
Whenever ``auto`` picks a joint mechanism it runs PNF-Joint (paper Appendix
D; permute-and-flip is never worse in expected utility, McKenna & Sheldon
2020, Theorem 2), or Joint (which stops early) past ``PNF_JOINT_MAX_ENTRIES``
entries d·k. PNF-Peel is never chosen (the joint mechanisms match or beat it).

1. From public parameters alone, spending nothing: a joint mechanism when
   δ = 0 (CDP-Peel is not available) or k ≤ ``SMALL_K_PER_EPSILON``·ε (where
   a private share would cost more than the choice can win).
2. Otherwise a public share ``AUTO_SHARE`` of ε (ε₀) buys the largest count
   c_(1) and the k-th largest c_(k), each plus discrete Laplace noise of
   scale 2/ε₀ (:func:`noisy_rank_counts`; pure ε₀-DP): T₁ and T_k. With
   ε₁ = ε − ε₀ the joint mechanism is chosen if its utility bound
   2·k·ln d / ε₁ (paper Theorem 3.3 without the ln 1/β term) is at most
   ``JOINT_BOUND_FRACTION``·T_k, or if CDP-Peel's noise scale ln d / ε' (the
   typical maximum of d Gumbel variables of scale 1/ε') is at least
   ``CDP_NOISE_FRACTION``·T₁ (CDP-Peel close to random even at the top);
   else if its modelled median error on the power law through (1, T₁) and
   (k, T_k) (:func:`model_errors`) is at most ``JOINT_ERROR_FRACTION`` times
   CDP-Peel's; otherwise CDP-Peel. Everything after the noisy counts is
   post-processing.

Guarantee: the choice is ε₀-DP (0-DP in case 1) and the chosen mechanism runs
with ε₁ (pure) or (ε₁, δ) (CDP-Peel); by basic composition ``auto`` is
(ε, δ)-DP whichever is chosen (δ is charged even when a pure mechanism is
chosen: the choice is not known before the data is read), ε-DP when δ = 0.
The model and constants are measured, not proven optimal: chosen by
measurement, see benchmarks/topk_auto_fit.py, benchmarks/results/2026-11-29-topk-auto.md
and benchmarks/results/2026-11-29-from-docstrings.md.
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

__all__ = ["AUTO_SHARE", "CDP_NOISE_FRACTION", "JOINT_BOUND_FRACTION", "JOINT_ERROR_FRACTION", "PNF_JOINT_MAX_ENTRIES",
           "SMALL_K_PER_EPSILON", "AutoChoice", "auto_anchor_ranks", "auto_share", "choice_stream", "choose_mechanism",
           "error_scales", "model_errors", "noisy_rank_counts", "public_choice", "rule_pick"]

#: share of ε spent on the private choice when one is needed (case 2); chosen
#: by measurement (module docstring)
AUTO_SHARE = 0.05
#: k ≤ this·ε: a joint mechanism, chosen from public parameters (case 1)
SMALL_K_PER_EPSILON = 10.0
#: joint when its utility bound 2·k·ln d/ε₁ is at most this share of the noisy k-th count
JOINT_BOUND_FRACTION = 1.0
#: joint when CDP-Peel's noise scale ln d/ε' is at least this share of the noisy top count
CDP_NOISE_FRACTION = 0.8
#: joint when its modelled median error is at most this share of CDP-Peel's (:func:`model_errors`)
JOINT_ERROR_FRACTION = 0.8
#: the error grid of :func:`model_errors` (points from 0 to the noisy top count)
MODEL_GRID = 400
#: pnf-joint sweeps all d·k entries (no early stop); past this, joint runs instead
PNF_JOINT_MAX_ENTRIES = 2 * 10**7


@dataclass(frozen=True)
class AutoChoice:
    """What ``auto`` decided: ``epsilon_choice`` spent on the choice (0 when
    public parameters sufficed), ``epsilon_selection`` left for the chosen
    mechanism; ``predicted``: the noisy counts at ranks 1 and k (``top_count``,
    ``kth_count``) and the public error scales (:func:`error_scales`), empty
    when nothing was spent; ``noise``: the choice's draw records."""

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
    """The share of ε ``auto`` spends on its choice (public parameters only):
    AUTO_SHARE in case 2, else 0; the plan charges it whatever is chosen."""
    return AUTO_SHARE if _needs_data(k, epsilon, delta) else 0.0


def auto_anchor_ranks(k: int, d: int) -> np.ndarray:
    """The public ranks (1-based) whose counts the choice estimates: 1 and k
    (just 1 when k = 1; k ≤ d)."""
    return np.array(sorted({1, int(k)}), dtype=np.int64)


def noisy_rank_counts(counts: ArrayLike, ranks: np.ndarray, epsilon: float,
                      rng: np.random.Generator) -> np.ndarray:
    """ε-DP noisy values of the sorted counts c_(r) at the given public ranks.

    One person moves every count by at most 1 in the same direction, so each
    integer order statistic moves by 0 or 1 and m of them by at most m in ℓ1:
    exact discrete Laplace noise of scale m/ε on each
    (:func:`dp_spark.noise.discrete_laplace`, the geometric mechanism) is
    ε-DP. The counts must be whole numbers.
    """
    c = as_counts(counts, integral=True).astype(np.int64)
    eps = check_positive(epsilon, "epsilon")
    rng = check_rng(rng)
    m = len(ranks)
    top = np.sort(c)[::-1]
    scale = ratio_up(m, eps)  # m/ε rounded up: more noise, never less
    return (top[np.asarray(ranks) - 1] + discrete_laplace(scale, rng, size=m)).astype(np.float64)


def choice_stream(rng: np.random.Generator) -> np.random.Generator:
    """The generator of the choice's noise: a child spawned from ``rng``
    (spawning does not advance ``rng``), so the chosen mechanism then draws
    what it would draw run alone with ``rng`` (for the tests' and benchmark's
    common random numbers; privacy needs only independence). A generator that
    cannot spawn is used as it is."""
    rng = check_rng(rng)
    try:
        return rng.spawn(1)[0]
    except (TypeError, AttributeError):  # a bit generator without a spawnable SeedSequence
        return rng


def error_scales(k: int, epsilon: float, delta: float, d: int) -> dict:
    """The public error scales of case 2 at the selection's (epsilon, delta)
    on d items: ``joint`` = 2·k·ln d/ε, ``cdp-peel`` = ln d/ε' (module docstring)."""
    log_d = math.log(max(int(d), 1))
    return {"joint": 2.0 * k * log_d / epsilon,
            "cdp-peel": log_d / cdp_peel_epsilon_per_step(epsilon, delta, k)}


def model_errors(top: float, kth: float, k: int, epsilon: float, delta: float, d: int) -> dict:
    """Modelled median ℓ∞ errors of the joint mechanism and CDP-Peel at the
    selection's (epsilon, delta), from the two noisy counts alone
    (post-processing).

    The profile is the power law through the two points, c(r) = T₁·r^(−s),
    s = ln(T₁/T_k)/ln k (T's at least 1, T_k at most T₁; s = 1 when k = 1),
    over the d ranks. For errors t on a grid of :data:`MODEL_GRID` points in
    [0, T₁], with n_i(t) = #{r : c(r) ≥ c(i) − t}:

    * ``joint``: N(t) = Π_i (n_i(t) − i + 1) sequences have error at most t
      (paper Lemma 3.7); error t gets mass ∝ (N(t) − N(t⁻))·exp(−ε·t/2)
      (Theorem 3.3); the median.
    * ``cdp-peel``: peeling with exponential mechanisms at ε' (Durfee & Rogers
      2019, Lemma 4.2): round i puts mass
      Σ_{r ≥ i, c(r) < c(i) − t} e^{ε'·c(r)} / Σ_{r ≥ i} e^{ε'·c(r)} on an
      error above t; the t where the product over k rounds of one minus that
      reaches 1/2.

    A model, not a bound (benchmarks/topk_auto_fit.py measures the choice)."""
    top = max(float(top), 1.0)
    kth = min(max(float(kth), 1.0), top)
    s = max(math.log(top / kth) / math.log(k), 1e-3) if k > 1 else 1.0
    c = top * np.arange(1, d + 1, dtype=np.float64) ** -s
    t = np.linspace(0.0, top, MODEL_GRID)
    eps_step = cdp_peel_epsilon_per_step(epsilon, delta, k)
    tail = np.logaddexp.accumulate((eps_step * c)[::-1])[::-1]  # log Σ_{r' ≥ r} e^{ε'·c(r')}
    log_n = np.zeros(MODEL_GRID)  # ln N(t)
    log_in = np.zeros(MODEL_GRID)  # ln P[CDP-Peel's error ≤ t]
    for lo in range(0, k, 4096):  # ranks in chunks: GRID × chunk floats at a time
        i = np.arange(lo + 1, min(k, lo + 4096) + 1, dtype=np.float64)
        level = c[lo:lo + len(i)][None, :] - t[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            log_rank = np.log(top / level) / s
        n = np.where(level > 0, np.floor(np.exp(np.minimum(log_rank, math.log(d + 1.0)))), d)
        n = np.minimum(n, d)
        log_n += np.sum(np.log(np.maximum(n - i[None, :] + 1.0, 1.0)), axis=1)
        beyond = np.maximum(n, i[None, :]).astype(np.int64)  # 0-based index of the first rank below c(i) − t
        log_out = np.where(beyond < d, tail[np.minimum(beyond, d - 1)], -np.inf) - tail[(i - 1).astype(np.int64)]
        log_in += np.sum(np.log1p(-np.minimum(np.exp(log_out), 1.0 - 1e-12)), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.log1p(-np.exp(np.minimum(np.concatenate([[-np.inf], log_n[:-1]]) - log_n, 0.0)))
    log_mass = np.where(np.arange(MODEL_GRID) == 0, log_n, log_n + step) - epsilon / 2.0 * t
    mass = np.exp(log_mass - np.max(log_mass))
    joint = float(t[np.searchsorted(np.cumsum(mass), 0.5 * np.sum(mass))])
    reached = log_in >= math.log(0.5)
    return {"joint": joint, "cdp-peel": float(t[np.argmax(reached)]) if reached.any() else top}


def _private_pick(top, kth, k: int, epsilon: float, delta: float, d: int, joint_bound_fraction: float,
                  cdp_noise_fraction: float, joint_error_fraction: float) -> np.ndarray:
    """Case 2: whether the joint mechanism is chosen (post-processing of the noisy counts)."""
    top, kth = np.maximum(top, 1.0), np.maximum(kth, 1.0)
    scales = error_scales(k, epsilon, delta, d)
    joint = (scales["joint"] <= joint_bound_fraction * kth) | (scales["cdp-peel"] >= cdp_noise_fraction * top)
    for index in np.flatnonzero(~joint):
        model = model_errors(top.flat[index], kth.flat[index], k, epsilon, delta, d)
        joint.flat[index] = model["joint"] <= joint_error_fraction * model["cdp-peel"]
    return joint


def rule_pick(top, kth, k: int, epsilon: float, delta: float, d: int, share: float = AUTO_SHARE, *,
              small_k_per_epsilon: float = SMALL_K_PER_EPSILON, joint_bound_fraction: float = JOINT_BOUND_FRACTION,
              cdp_noise_fraction: float = CDP_NOISE_FRACTION,
              joint_error_fraction: float = JOINT_ERROR_FRACTION) -> tuple[np.ndarray, float]:
    """The rule of :func:`choose_mechanism` with its constants as arguments
    (for benchmarks/topk_auto_fit.py): (the mechanism name per pair of noisy
    counts ``top``, ``kth``; the share of ε spent, 0 when public parameters
    suffice)."""
    top = np.atleast_1d(np.asarray(top, dtype=np.float64))
    kth = np.atleast_1d(np.asarray(kth, dtype=np.float64))
    if float(delta) == 0.0 or k <= small_k_per_epsilon * float(epsilon):
        return np.full(top.shape, _joint_kind(k, d)), 0.0
    joint = _private_pick(top, kth, k, remainder(epsilon, epsilon * share), delta, d, joint_bound_fraction,
                          cdp_noise_fraction, joint_error_fraction)
    return np.where(joint, _joint_kind(k, d), "cdp-peel"), share


def choose_mechanism(counts: ArrayLike, k: int, epsilon: float, delta: float,
                     rng: np.random.Generator, share: float | None = None) -> AutoChoice:
    """Choose the top-k mechanism for ``auto`` (module docstring).

    Case 1: the counts are not read, 0-DP, ``epsilon_choice`` = 0. Otherwise
    releases only the choice (and ``predicted``) under ε₀-DP,
    ε₀ = ``share``·ε (default AUTO_SHARE): the discrete Laplace mechanism on
    (c_(1), c_(k)) (:func:`noisy_rank_counts`), then post-processing. The
    caller runs the chosen mechanism with ``epsilon_selection`` (and ``delta``
    for cdp-peel).
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
    joint = _private_pick(np.array([top]), np.array([kth]), k, eps1, dlt, d, JOINT_BOUND_FRACTION, CDP_NOISE_FRACTION,
                          JOINT_ERROR_FRACTION)[0]
    pick = _joint_kind(k, d) if joint else "cdp-peel"
    m = len(auto_anchor_ranks(k, d))
    scale = ratio_up(m, eps0)  # as noisy_rank_counts draws it
    record = NoiseDraw("choice", "discrete-laplace", scale=scale, std=discrete_laplace_std(scale),
                       sensitivity=float(m), draws=m,
                       target="the counts at ranks 1 and k (auto's choice)")
    return AutoChoice(pick, eps0, eps1, {"top_count": top, "kth_count": kth, **scales}, (record,))


def auto_top_k(counts: ArrayLike, k: int, epsilon: float, delta: float,
               rng: np.random.Generator, share: float | None = None) -> tuple[np.ndarray, AutoChoice]:
    """(ε, δ)-DP top-k (ε-DP when δ = 0) by the mechanism
    :func:`choose_mechanism` picks: (indices in rank order, choice)."""
    choice = choose_mechanism(counts, k, epsilon, delta, rng, share)
    eps_sel = choice.epsilon_selection
    if choice.method == "joint":
        return joint_top_k(counts, k, eps_sel, rng), choice
    if choice.method == "pnf-joint":
        return pnf_joint_top_k(counts, k, eps_sel, rng), choice
    return cdp_peel_top_k(counts, k, eps_sel, delta, rng), choice
