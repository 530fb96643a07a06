"""The top-k release: which k items have the most distinct persons, in order.

Person-level DP; neighbouring tables differ by adding or removing one person
(all of its rows). The Spark stage (:mod:`dp_spark.stages.item_counts`)
reduces the table to per-item counts of distinct persons (each person adds at
most 1 to any count, all counts move the same way) — over a public domain
(one count per domain item, items absent from the data count 0) or, without
one, the k̄+1 largest counts. The driver then runs one mechanism of
:mod:`dp_spark.mechanisms.top_k` (ALGORITHMS.md sections 3 and 5.1):

==================  =============================================  ==================
mechanism           paper / algorithm                              guarantee
==================  =============================================  ==================
``joint``           Gillenwater et al. ICML 2022, Algorithm 1      ε-DP
                    (joint exponential mechanism, exact sampler)
``pnf-joint``       same paper, joint permute-and-flip             ε-DP
``pnf-peel``        k rounds of permute-and-flip at ε/k            ε-DP
``cdp-peel``        Durfee & Rogers 2019 one-shot Gumbel top-k,    (ε, δ)-DP
                    CDP accounting (Gillenwater et al. Lemma 4.2)   (ε-DP if δ = 0)
``unknown-domain``  Unknown Domain Gumbel (Durfee & Rogers 2019;   (ε, δ)-DP
                    Rogers 2024 Algorithm 1, Theorem 4)
==================  =============================================  ==================

``pnf-joint`` is numerically safe for every input here: its MaxExpo draws are
evaluated from ln E − ln m in a form accurate for any group size (see
``dp_spark.mechanisms.top_k._max_exponential``), so the paper's overflow for
large k does not occur; should a draw ever come out non-finite it refuses with
a ParameterError naming ``joint`` instead of sampling a wrong distribution.

All but ``unknown-domain`` need a public domain fixed before seeing the data:
using the items observed in the data as the domain is not private (whether
an item appears at all can depend on one person). ``auto`` (the default;
:mod:`dp_spark.mechanisms.top_k.auto`) is ``unknown-domain`` without a domain;
with one it picks, per call, the mechanism with the smallest predicted error:
with δ = 0 only pure mechanisms are allowed and it is ``joint`` (decided from
public parameters, nothing spent on the choice); with δ > 0 it spends 5% of ε
on noisy counts at ranks 1, k and 4k, predicts the median ℓ∞ error of
``joint`` and ``cdp-peel`` on them, and runs the better one with the other
95% (and δ). The budget split shows both parts.

Parameters have public upper limits checked before any data is read
(:data:`MAX_K`, :data:`MAX_KBAR`, :data:`MAX_DOMAIN`, :data:`MAX_JOINT_ENTRIES`).

Only the ordered items are released (no counts). The error statement of each
mechanism is a bound E, holding with probability at least 95%, on
max_i (c_(i) − c_{s_i}) (the ℓ∞ error of the paper's experiments), computed
from public parameters only: "each released item's true count is within E of
the count at its rank". It is compared with the largest count a user could
expect — ``persons`` if the user gives it (public), else auto's noisy count
at rank 1 (already paid for) — and a warning is released when E is more than
:data:`WARN_FRACTION` of it.
"""

from __future__ import annotations

import logging
import math
import numbers

from dp_spark.accounting import ApproxDP, PrivacyFilter, PureDP, ZCDP
from dp_spark.errors import ParameterError
from dp_spark.noise import make_rng
from dp_spark import checks
from dp_spark.report import Release
from dp_spark.mechanisms.top_k import (
    cdp_peel_epsilon_per_step,
    cdp_peel_top_k,
    joint_top_k,
    pnf_joint_top_k,
    pnf_peel_top_k,
    unknown_domain_calibration,
    unknown_domain_gumbel,
    unknown_domain_threshold,
)
from dp_spark.mechanisms.top_k.auto import AUTO_SHARE, AutoChoice, choose_mechanism
from dp_spark.stages import item_counts as stage

log = logging.getLogger(__name__)

RELEASE = "top-k"
MECHANISMS = ("auto", "joint", "pnf-joint", "pnf-peel", "cdp-peel", "unknown-domain")
DOMAIN_MECHANISMS = ("joint", "pnf-joint", "pnf-peel", "cdp-peel")
CONFIDENCE = 0.95
DEFAULT_KBAR = 1000
# Public upper limits, checked before any data is read.
MAX_K = 1000  # k items are ranked; the joint samplers' work grows as d·k
MAX_KBAR = 100_000  # unknown-domain collects kbar + 1 (item, count) rows to the driver
MAX_DOMAIN = 10_000_000  # one count per domain item is collected to the driver
MAX_JOINT_ENTRIES = 10**9  # joint / pnf-joint may sweep all d·k entries of their matrix
WARN_FRACTION = 0.1  # warn when the error bound exceeds this share of the largest count

_NAMES = {
    "joint": "the joint exponential mechanism (Gillenwater et al. 2022, Algorithm 1)",
    "pnf-joint": "joint permute-and-flip (Gillenwater et al. 2022)",
    "pnf-peel": "peeling permute-and-flip (k rounds at ε/k)",
    "cdp-peel": "one-shot Gumbel top-k with CDP accounting (Durfee & Rogers 2019)",
    "unknown-domain": "Unknown Domain Gumbel (Durfee & Rogers 2019; Rogers 2024, Algorithm 1)",
}


def _delta(value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterError(f"delta must be a number; got {value!r}.")
    x = float(value)
    if not (0.0 <= x < 1.0):
        raise ParameterError(f"delta must be >= 0 and below 1; got {value!r}.")
    return x


def method_of(method, mechanism) -> str:
    """``method`` is the new name of ``mechanism`` (kept as an alias); giving
    both with different values is refused."""
    if method is None:
        return mechanism
    if mechanism not in (None, "auto") and mechanism != method:
        raise ParameterError(
            f"method={method!r} and mechanism={mechanism!r} disagree; give only method "
            "(mechanism is its old name)."
        )
    return method


def resolve_mechanism(mechanism: str, has_domain: bool) -> str:
    """``auto`` stays ``auto`` with a public domain (the choice is made on the
    driver, :mod:`dp_spark.mechanisms.top_k.auto`) and is ``unknown-domain``
    without one; refuses a domain mechanism without a domain (ParameterError)."""
    if mechanism not in MECHANISMS:
        raise ParameterError(f"mechanism must be one of {', '.join(MECHANISMS)}; got {mechanism!r} "
                             "(method= is its new name).")
    if mechanism == "auto":
        return "auto" if has_domain else "unknown-domain"
    if mechanism in DOMAIN_MECHANISMS and not has_domain:
        raise ParameterError(
            f"mechanism {mechanism!r} needs a public domain (domain= / --domain PATH: the list "
            "of possible items, fixed before seeing the data). Treating the items observed in "
            "the data as the domain is not differentially private, because whether an item "
            "appears at all can depend on one person. Give a domain, or use mechanism "
            "'unknown-domain', which needs none."
        )
    return mechanism


def _limit(value: int, name: str, limit: int, why: str) -> int:
    if value > limit:
        raise ParameterError(f"{name}={value:,} is above the limit of {limit:,}: {why}. Lower {name}.")
    return value


def validate(k, epsilon, delta, mechanism, has_domain: bool, kbar=None, seed=None):
    """Parameter checks that need no data (also used by the CLI before Spark
    starts). Returns (k, epsilon, delta, resolved mechanism, kbar, seed)."""
    k = _limit(checks.whole(k, "k"), "k", MAX_K,
               "top-k ranks k items and the joint samplers' time grows as d·k")
    epsilon = checks.positive(epsilon, "epsilon")
    delta = _delta(delta)
    resolved = resolve_mechanism(mechanism, has_domain)
    if resolved == "unknown-domain" and delta == 0.0:
        reason = "no public domain was given, so mechanism 'auto' uses" if mechanism == "auto" else "mechanism"
        raise ParameterError(
            f"{reason} 'unknown-domain', which needs delta > 0 (e.g. delta=1e-6); "
            "or give a public domain for pure ε-DP with 'joint'."
        )
    if kbar is None:
        kbar = max(DEFAULT_KBAR, 2 * k)
    kbar = _limit(checks.whole(kbar, "kbar"), "kbar", MAX_KBAR,
                  "unknown-domain collects kbar + 1 item counts to the driver")
    if resolved == "unknown-domain" and k > kbar:
        raise ParameterError(f"k={k} is larger than kbar={kbar}; raise kbar to at least k.")
    seed = checks.seed(seed)
    return k, epsilon, delta, resolved, kbar, seed


def check_domain_size(size: int, k: int, mechanism: str) -> None:
    """Public limits on the domain (its size is public), before data is read."""
    _limit(size, "the domain size", MAX_DOMAIN, "one count per domain item is collected to the driver")
    if k > size:
        raise ParameterError(f"k={k} is larger than the domain ({size} items); lower k or extend the domain.")
    if mechanism in ("joint", "pnf-joint", "auto") and size * k > MAX_JOINT_ENTRIES:
        raise ParameterError(
            f"domain size × k = {size * k:,} is above the limit of {MAX_JOINT_ENTRIES:,} for the joint "
            "mechanisms (they may sweep every entry of a k × d matrix); lower k, shrink the domain, "
            "or use method 'cdp-peel' or 'pnf-peel'."
        )


def guarantee_of(mechanism: str, epsilon: float, delta: float):
    """The privacy cost a top-k release spends (known before reading data).
    ``auto`` with δ > 0 is charged (ε, δ) whichever mechanism it then picks."""
    if mechanism in ("cdp-peel", "unknown-domain", "auto") and delta > 0:
        return ApproxDP(epsilon, delta)
    return PureDP(epsilon)


def _gumbel_gap(scale: float, n: int, beta: float) -> float:
    """With probability >= 1 − β, max − min of n Gumbel(scale) draws is at most this."""
    big = math.log(2.0 * n / beta)
    return scale * (big + math.log(big))


def error_bound(mechanism: str, k: int, epsilon: float, delta: float, size: int,
                beta: float = 1.0 - CONFIDENCE) -> float:
    """A bound B (public: parameters only) with P[max_i (c_(i) − c_{s_i}) <= B] >= 1 − β.

    joint / pnf-joint: the exponential mechanism's (and permute-and-flip's)
    utility bound (2/ε)(ln(d!/(d−k)!) + ln(1/β)); pnf-peel: every round's
    exponential noise (scale k/ε) stays below (k/ε)·ln(dk/β); cdp-peel and
    unknown-domain: the spread of ``size`` Gumbel draws. ``size`` is d, or k̄
    for unknown-domain.
    """
    if mechanism in ("joint", "pnf-joint"):
        log_sequences = math.lgamma(size + 1) - math.lgamma(size - k + 1)
        return 2.0 / epsilon * (log_sequences + math.log(1.0 / beta))
    if mechanism == "pnf-peel":
        return k / epsilon * math.log(size * k / beta)
    if mechanism == "cdp-peel":
        return _gumbel_gap(1.0 / cdp_peel_epsilon_per_step(epsilon, delta, k), size, beta)
    eps_item = unknown_domain_calibration(epsilon, delta, k)[0]
    return _gumbel_gap(1.0 / eps_item, size, beta)


def _domain_items(domain, item_col: str):
    """A public domain given as a Spark DataFrame: collect its item column
    (the domain is public data, not the private table)."""
    if hasattr(domain, "columns") and hasattr(domain, "sparkSession"):
        columns = list(domain.columns)
        column = item_col if item_col in columns else (columns[0] if len(columns) == 1 else None)
        if column is None:
            raise ParameterError(
                f"the domain DataFrame has no column {item_col!r} and more than one column; "
                "select the item column."
            )
        return [row[0] for row in domain.select(column).collect()]
    return domain


def top_k(
    df,
    k: int,
    epsilon: float,
    delta: float = 0.0,
    mechanism: str = "auto",
    domain=None,
    person_col: str = "person_id",
    item_col: str = "item",
    seed: int | None = None,
    *,
    method: str | None = None,
    kbar: int | None = None,
    persons: int | None = None,
    budget: PrivacyFilter | None = None,
    ledger=None,
) -> Release:
    """Release the k items with the most distinct persons, in rank order.

    Person-level privacy (add or remove one person with all rows). Guarantee:
    ε-DP for ``joint``, ``pnf-joint``, ``pnf-peel``, ``cdp-peel`` with δ = 0
    and ``auto`` with δ = 0 (then ``joint``); (ε, δ)-DP for ``cdp-peel`` and
    ``auto`` with δ > 0 (a 5% share of ε on the private choice, the rest on
    the chosen mechanism) and for ``unknown-domain`` (the default without a
    domain; δ/2 for its threshold, δ/2 for the zCDP conversion). See the
    module docstring for the algorithms.

    ``method`` names the mechanism (``mechanism`` is its older name, kept as an
    alias). ``domain``: the public list of possible items (a list/array/Series,
    or a Spark DataFrame of public items with the item column); items of the
    data outside it are never released, items of it absent from the data
    count 0. ``kbar``: for ``unknown-domain``, how many of the largest counts
    are collected (default max(1000, 2k)). ``persons``: optional public number
    (or upper bound) of persons, only used to judge the error bound.
    ``budget``: an optional shared PrivacyFilter, spent before any data is
    read. ``seed``: tests and demos only (the release is then marked not for
    publication). Rows with a null person or item are dropped.

    Returns a Release whose ``items`` value lists {"rank", "item"} in order
    (fewer than k, with ``bottom`` true, when Unknown Domain Gumbel returns
    ⊥) and whose ``items_df`` artifact is the same as a Spark DataFrame.
    """
    from dp_spark.io import spark_frame

    df = spark_frame(df, "df")  # a pandas DataFrame is converted; other types refused
    from dp_spark.ledger import budget_or_ledger

    budget = budget_or_ledger(budget, ledger)  # ledger=: a persisted budget (dp_spark.ledger)
    given = method_of(method, mechanism)
    k, epsilon, delta, mechanism, kbar, seed = validate(
        k, epsilon, delta, given, domain is not None, kbar, seed
    )
    if persons is not None:
        persons = checks.whole(persons, "persons")
    edge_df = stage.edge_table(df, person_col, item_col)  # schema only, no data read
    integral = stage.integral_items(edge_df)
    items = None
    if domain is not None:
        items = stage.normalise_domain(_domain_items(domain, item_col), integral)
        check_domain_size(len(items), k, mechanism)
    cost = guarantee_of(mechanism, epsilon, delta)
    if budget is not None:
        budget.spend(cost, label=RELEASE)  # refuses before any data is read
    rng = make_rng(seed)

    bottom, choice = None, None
    if mechanism == "unknown-domain":
        chosen, bottom = _unknown_domain(edge_df, items, k, epsilon, delta, kbar, rng)
        size = kbar
    else:
        log.info("top-k: counting persons per domain item (%d items)", len(items))
        counts = stage.domain_item_counts(edge_df, items)
        if mechanism == "auto":
            choice = choose_mechanism(counts, k, epsilon, delta, rng, AUTO_SHARE)
            mechanism = choice.mechanism
        log.info("top-k: selecting with %s", mechanism)
        eps_sel = choice.epsilon_selection if choice is not None else epsilon
        indices = _select(mechanism, counts, k, eps_sel, delta, rng)
        del counts  # non-private; nothing below may use it
        chosen = [items[int(i)] for i in indices]
        size = len(items)

    return _release(df, chosen, bottom, k, epsilon, delta, mechanism, given, kbar, size,
                    None if items is None else len(items), integral, person_col, item_col, seed, cost,
                    choice, persons)


def _select(mechanism, counts, k, epsilon, delta, rng):
    """Indices chosen by a public-domain mechanism (see the module table)."""
    if mechanism == "joint":
        return joint_top_k(counts, k, epsilon, rng)
    if mechanism == "pnf-joint":
        return pnf_joint_top_k(counts, k, epsilon, rng)
    if mechanism == "pnf-peel":
        return pnf_peel_top_k(counts, k, epsilon, rng)
    return cdp_peel_top_k(counts, k, epsilon, delta, rng)


def _unknown_domain(edge_df, items, k, epsilon, delta, kbar, rng):
    """(chosen items, bottom) by Unknown Domain Gumbel over the k̄ + 1 largest counts."""
    if items is not None:
        log.info("top-k: counting persons per domain item (%d items)", len(items))
        top = stage.top_of_domain(items, stage.domain_item_counts(edge_df, items), kbar)
    else:
        log.info("top-k: collecting the %d largest item counts", kbar + 1)
        top = stage.top_item_counts(edge_df, kbar)
    eps_item, delta_threshold, _ = unknown_domain_calibration(epsilon, delta, k)
    result = unknown_domain_gumbel(top.counts, k, eps_item, delta_threshold, kbar, rng, top.next_count)
    chosen = [top.items[i] for i in result.indices]
    del top  # non-private
    return chosen, result.bottom


def _budget_split(mechanism, k, epsilon, delta, kbar, cost, choice: AutoChoice | None) -> list:
    """The parts of the budget; for auto, the same steps whatever it picks."""
    if choice is not None:
        if choice.epsilon_choice == 0.0:
            return [{"step": "selection: auto with delta = 0 is the joint exponential mechanism "
                             "(a choice from public parameters; nothing spent on it)", **cost.to_dict()}]
        return [
            {"step": "auto: noisy counts at ranks 1, k and 4k (Laplace) to predict each mechanism's "
                     "error", **PureDP(choice.epsilon_choice).to_dict()},
            {"step": "selection with the mechanism auto chose (values.mechanism: joint is ε-DP, "
                     "cdp-peel (ε, δ)-DP; δ is charged either way)",
             **ApproxDP(choice.epsilon_selection, delta).to_dict()},
        ]
    if mechanism == "unknown-domain":
        eps_item, d_thr, d_conv = unknown_domain_calibration(epsilon, delta, k)
        zcdp = ZCDP(k * eps_item**2 / 8.0, d_thr)
        return [{
            "step": (f"selection: Unknown Domain Gumbel, per-item ε' = {eps_item:.6g}, threshold δ "
                     f"= {d_thr:g}, kbar = {kbar} ({zcdp.describe()}), converted to (ε, δ)-DP "
                     f"with δ' = {d_conv:g}"),
            **cost.to_dict(),
            "zcdp": zcdp.to_dict(),
        }]
    if mechanism == "cdp-peel":
        return [{"step": (f"selection: one-shot Gumbel top-k, per-step ε' = "
                          f"{cdp_peel_epsilon_per_step(epsilon, delta, k):.6g}"), **cost.to_dict()}]
    return [{"step": f"selection: {_NAMES[mechanism]}", **cost.to_dict()}]


def _error_texts(mechanism, k, eps_sel, delta, kbar, size, persons, choice) -> tuple[dict, float, str | None]:
    """(errors, the public ℓ∞ bound E, a warning or None). The warning compares
    E with the largest count a user could expect: ``persons`` (public) or
    auto's noisy count at rank 1 (paid for by auto's share)."""
    bound = error_bound(mechanism, k, eps_sel, delta, size)
    errors = {"items": (
        f"with probability >= {CONFIDENCE:.0%}, each released item's true count is within "
        f"{bound:,.1f} of the count at its rank (the i-th released item is held by at most "
        f"{bound:,.1f} fewer persons than the true i-th most common item; {_NAMES[mechanism]})")}
    reference, what = None, None
    if persons is not None:
        reference, what = float(persons), f"the {persons:,} persons given as persons="
    elif choice is not None and "top_count" in choice.predicted:
        reference = max(float(choice.predicted["top_count"]), 1.0)
        what = f"a noisy estimate ({reference:,.0f}) of the largest count, from auto's share of ε"
    warning = None
    if reference is not None and bound > WARN_FRACTION * reference:
        warning = (f"the error bound {bound:,.1f} is more than {WARN_FRACTION:.0%} of {what}: the "
                   "released ranking may hold items far from the true top k; raise epsilon or lower k")
    return errors, bound, warning


def _release(df, chosen, bottom, k, epsilon, delta, mechanism, given, kbar, size, domain_size,
             integral, person_col, item_col, seed, cost, choice=None, persons=None) -> Release:
    rows = [{"rank": i + 1, "item": item} for i, item in enumerate(chosen)]
    eps_sel = choice.epsilon_selection if choice is not None else epsilon
    errors, bound, warning = _error_texts(mechanism, k, eps_sel, delta, kbar, size, persons, choice)
    values = {"items": rows, "k": k, "returned": len(rows), "mechanism": mechanism,
              "error_bound": round(bound, 1), "error_warning": warning}
    if choice is not None:
        values["auto_predicted_error"] = {m: choice.predicted.get(m) for m in ("joint", "cdp-peel")}
    if mechanism == "unknown-domain":
        values["bottom"] = bool(bottom)
    has_domain = domain_size is not None
    if has_domain:
        values["domain_size"] = domain_size
    if warning is not None:
        log.warning("top-k: %s", warning)
    if mechanism == "unknown-domain":
        eps_item, d_thr, _ = unknown_domain_calibration(epsilon, delta, k)
        threshold = unknown_domain_threshold(eps_item, d_thr, kbar)
        errors["bottom"] = (
            f"true when fewer than k items cleared the noisy threshold (about {threshold:,.0f} "
            "persons above the (kbar+1)-th largest count): then only the items that cleared it "
            "are released"
        )
    split = _budget_split(mechanism, k, epsilon, delta, kbar, cost, choice)
    statement = (
        f"Person-level {cost.describe()}: the output would be almost as likely if any one person "
        f"(every row with the same {person_col}) were removed or added. Released: the "
        f"{len(rows)} {item_col} values held by the most distinct persons, in order"
        + (", from the public domain" if has_domain else "")
        + f", chosen by {_NAMES[mechanism]}"
        + (" (picked by auto)" if choice is not None else "") + "; no counts are released."
    )
    parameters = {
        "k": k,
        "epsilon": epsilon,
        "delta": delta,
        "mechanism": given,
        "method": given,
        "mechanism_used": mechanism,
        "person_col": person_col,
        "item_col": item_col,
        "domain": f"{domain_size} public items" if has_domain else None,
        "persons": persons,
    }
    if mechanism == "unknown-domain":
        parameters["kbar"] = kbar
    return Release(
        name=RELEASE,
        privacy_unit="person",
        neighbouring=f"add or remove one person (all rows sharing a {person_col} value)",
        guarantee=cost,
        parameters=parameters,
        values=values,
        errors=errors,
        statement=statement,
        seeded=seed is not None,
        budget_split=split,
        artifacts={"items_df": _items_df(df.sparkSession, rows, integral)},
    )


def _items_df(spark, rows, integral):
    """The released (rank, item) rows as a Spark DataFrame."""
    import pandas as pd
    from pyspark.sql import types as T

    item_type = T.LongType() if integral else T.StringType()
    schema = T.StructType([T.StructField("rank", T.IntegerType(), False),
                           T.StructField("item", item_type, False)])
    pdf = pd.DataFrame({"rank": pd.Series([r["rank"] for r in rows], dtype="int32"),
                        "item": pd.Series([r["item"] for r in rows], dtype=object)})
    return spark.createDataFrame(pdf, schema)
