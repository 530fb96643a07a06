"""Fit the BLT counter's parameter table, and measure it against the square root.

    .venv/bin/python benchmarks/blt_fit.py fit [--log2-horizons 4 24] [--max-log2-flippancy 12]
        [--buffers 4 5] [--out dp_spark/mechanisms/continual_distinct/_blt_table.py]
    .venv/bin/python benchmarks/blt_fit.py measure [--log2-horizons 12 16 20] [--steps 20000]

``fit``: for each (log2 T, log2 w) and number of buffers n, minimise (√U_r(w) + 2^−K M √T)²·S_ℓ(T)
(the counter's max variance per 1/(2ρ), Lemma D's slack M included, at the parameters quantised onto
the 2^−K grid as the counter uses them) over BLT parameters (d_i ∈ (0, 1), s_i > 0, Σ s_i ≤ 1; sigmoid/softmax parametrisation), r_k = Σ s_i d_i^(k−1),
U_r(w) the item-removal bound of Lemma A (``factorized.removal_bound``; the subset bound is 4U for
w ≥ 4), S_ℓ(T) the estimates' variance factor at the last step — the counter's maximum variance up
to σ² (Dvijotham, McMahan, Pillutla, Steinke, Thakurta 2024 fit the same family to the square root).
Closed forms from :mod:`dp_spark.mechanisms.continual_distinct.blt`; Nelder–Mead then Powell (scipy),
warm-started from the fit at the previous w (or from decays spread over time scales with scales
fitted by NNLS to the square root's coefficients). Writes the committed table module (``--out``).

``measure``: at each T, the max variance (sensitivity bound × S_ℓ(T), the sound dyadic bound the
counter uses, Lemma D's slack included) of the table's BLT against the square root's (real c,
the same Lemmas), at w = 1, 8, 32 under both relations, and the streaming step's cost (µs/step,
min(``--steps``, T) steps of ``BLTCounter.step`` including one exact discrete Gaussian draw, and of its data
side alone) for 4 and 5 buffers.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import optimize

from dp_spark.mechanisms.continual_distinct import blt
from dp_spark.mechanisms.continual_distinct import factorized as fz
from dp_spark.noise.rng import make_rng


def _params(theta: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """d_i = sigmoid(a_i); s = sigmoid(b0)·softmax(b): s_i > 0, Σ s_i < 1."""
    a, b0, b = theta[:n], theta[n], theta[n + 1:]
    d = 1.0 / (1.0 + np.exp(-a))
    e = np.exp(b - b.max())
    return d, (1.0 / (1.0 + np.exp(-b0))) * e / e.sum()


def removal_closed(ds, horizon: int, w: int) -> float:
    """U_r(w) of Lemma A with S_r in closed form."""
    m = min(w, horizon)
    q, rem = divmod(horizon, m)
    total = (m - rem) * blt.strategy_square_sums(ds, q)
    if rem:
        total += rem * blt.strategy_square_sums(ds, q + 1)
    return total


def counter_objective(params: blt.BLTParams, horizon: int, w: int) -> float:
    """(√U_r(w) + 2^−K M √T)²·S_ℓ(T) for dyadic parameters: the counter's max variance per 1/(2ρ)
    with Lemma D's slack, S_r in closed form, S_ℓ by the Gram doubling (float)."""
    unit = float(1 << params.bits)
    slack = params.buffers + sum(g / (unit - dn) for dn, g in zip(params.decays, params.scales) if dn < unit)
    sens = math.sqrt(removal_closed(params, horizon, w)) + slack * math.sqrt(horizon) / unit
    return sens * sens * blt.prefix_square_sums_gram(params, horizon)


def objective(theta: np.ndarray, n: int, horizon: int, w: int) -> float:
    """log of :func:`counter_objective` at the parameters quantised as the counter uses them."""
    d, s = _params(theta, n)
    params = blt.BLTParams.from_floats(d, s, blt.blt_bits(horizon))
    if len(set(params.decays)) < n:
        return 1e9  # coinciding decays: one buffer would do (and the closed form needs distinct modes)
    try:
        value = counter_objective(params, horizon, w)
    except (np.linalg.LinAlgError, ZeroDivisionError, OverflowError):
        return 1e9
    if not (math.isfinite(value) and value > 0):
        return 1e9
    return math.log(value)


def initial(n: int, horizon: int) -> np.ndarray:
    """Decays spread over time scales 2^(log2 T·(i+1)/n), scales by NNLS against c."""
    k = math.log2(horizon)
    d = 1.0 - 2.0 ** (-(np.arange(1, n + 1)) * k / n)
    c = fz.sqrt_coefficients(horizon)
    kk = np.unique(np.round(np.geomspace(1, horizon - 1, min(horizon - 1, 4096))).astype(np.int64))
    basis = d[None, :] ** (kk[:, None] - 1)
    weights = 1.0 / c[kk]
    s, _ = optimize.nnls(basis * weights[:, None], c[kk] * weights)
    s = np.maximum(s, 1e-6)
    if s.sum() >= 1:
        s *= 0.99 / s.sum()
    frac = s.sum()
    return np.concatenate([np.log(d / (1 - d)), [math.log(frac / (1 - frac))], np.log(s / frac)])


def fit(n: int, horizon: int, w: int, theta0: np.ndarray) -> tuple[np.ndarray, float]:
    args = (n, horizon, w)
    best = optimize.minimize(objective, theta0, args=args, method="Nelder-Mead",
                             options={"maxiter": 3000, "xatol": 1e-7, "fatol": 1e-11, "adaptive": True})
    best = optimize.minimize(objective, best.x, args=args, method="Powell",
                             options={"maxiter": 20000, "xtol": 1e-8, "ftol": 1e-12})
    return best.x, math.exp(best.fun)


def sqrt_objective(horizon: int, w: int) -> float:
    c = fz.sqrt_coefficients(horizon)
    return fz.removal_bound(c, horizon, w) * float(fz.partial_square_sums(c)[-1])


def run_fit(args) -> None:
    table: dict[int, dict[tuple[int, int], tuple]] = {}
    lo, hi = args.log2_horizons
    for n in args.buffers:
        entries = {}
        start_w1 = None
        for log_t in range(lo, hi + 1):
            horizon = 1 << log_t
            theta = initial(n, horizon) if start_w1 is None else start_w1
            candidates = [theta, initial(n, horizon)]
            for log_w in range(0, min(log_t, args.max_log2_flippancy) + 1):
                w = 1 << log_w
                t0 = time.perf_counter()
                results = [fit(n, horizon, w, c) for c in candidates]
                theta, value = min(results, key=lambda r: r[1])
                if log_w == 0:
                    start_w1 = theta
                candidates = [theta]
                d, s = _params(theta, n)
                order = np.argsort(d)
                d, s = d[order], s[order]
                q_value = counter_objective(blt.BLTParams.from_floats(d, s, blt.blt_bits(horizon)), horizon, w)
                ratio = q_value / sqrt_objective(horizon, w) if horizon <= 1 << 22 else float("nan")
                entries[(log_t, log_w)] = (tuple(float(v) for v in d), tuple(float(v) for v in s))
                print(f"n={n} T=2^{log_t:<2} w=2^{log_w:<2}: (√U + slack)²·S_l {value:12.6g} (sorted {q_value:12.6g}); "
                      f"/ sqrt {ratio:.5f}; {time.perf_counter() - t0:5.1f}s", flush=True)
        table[n] = entries
    lines = [
        '"""Fitted BLT parameters per (log2 T, log2 w): generated by benchmarks/blt_fit.py (do not edit).',
        "",
        "TABLE[n][(log2 T, log2 w)] = (d, s) for n buffers, fitted to (√U_r(w) + 2^-K M √T)²·S_ℓ(T) (Lemma A's",
        "item-removal bound with Lemma D's slack, times the last step's variance factor) at the parameters",
        ":func:`.blt.table_params` makes of them (quantised onto the 2^-K grid). Public constants: any valid",
        "entry gives the same privacy guarantee.",
        '"""',
        "",
        f"BUFFERS = {max(args.buffers)}",
        "TABLE = {",
    ]
    for n, entries in table.items():
        lines.append(f"    {n}: {{")
        for key, (d, s) in sorted(entries.items()):
            lines.append(f"        {key}: ({tuple(d)!r},")
            lines.append(f"                  {tuple(s)!r}),")
        lines.append("    },")
    lines.append("}")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


def run_measure(args) -> None:
    for log_t in args.log2_horizons:
        horizon = 1 << log_t
        c = fz.sqrt_coefficients(horizon)
        s_c = float(fz.partial_square_sums(c)[-1])
        for w in (1, 8, 32):
            for relation in ("item-removal", "subset"):
                bound = fz.removal_bound(c, horizon, w) if relation == "item-removal" else fz.subset_bound(c, horizon, w)
                sqrt_max = bound * s_c
                for n in (4, 5):
                    params = blt.table_params(horizon, w, buffers=n)
                    sens = blt.sensitivity_bound(params, horizon, w, relation) / 2.0 ** params.bits
                    blt_max = sens * sens * blt.prefix_square_sums_gram(params, horizon)
                    print(f"T=2^{log_t} w={w:<2} {relation:12s} n={n}: BLT max var/(1/2ρ) {blt_max:10.4f}, "
                          f"sqrt {sqrt_max:10.4f}, ratio {blt_max / sqrt_max:.4f}", flush=True)
        for n in (4, 5):
            counter = blt.BLTCounter.for_flippancy(horizon, 0.5, 8, "subset", params=blt.table_params(horizon, 8, n))
            rng = make_rng(1)
            steps = min(args.steps, horizon)
            xs = rng.integers(-1, 2, size=steps).tolist()
            t0 = time.perf_counter()
            for x in xs:
                counter.step(x, rng)
            full = (time.perf_counter() - t0) / steps * 1e6
            data = blt.BLTCounter.for_flippancy(horizon, 0.5, 8, "subset", params=blt.table_params(horizon, 8, n))
            t0 = time.perf_counter()
            for x in xs:
                data.release(data.advance(x))
            side = (time.perf_counter() - t0) / steps * 1e6
            print(f"T=2^{log_t} n={n}: step {full:7.1f} µs (with the exact draw), data+noise side without the draw "
                  f"{side:5.2f} µs", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fit")
    f.add_argument("--log2-horizons", type=int, nargs=2, default=[4, 24])
    f.add_argument("--max-log2-flippancy", type=int, default=12)
    f.add_argument("--buffers", type=int, nargs="+", default=[4, 5])
    f.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "dp_spark" / "mechanisms"
                                        / "continual_distinct" / "_blt_table.py"))
    m = sub.add_parser("measure")
    m.add_argument("--log2-horizons", type=int, nargs="+", default=[12, 16, 20])
    m.add_argument("--steps", type=int, default=20000)
    args = parser.parse_args(argv)
    (run_fit if args.command == "fit" else run_measure)(args)


if __name__ == "__main__":
    sys.exit(main())
