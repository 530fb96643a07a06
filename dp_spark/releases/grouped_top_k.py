"""Grouped top-k (issue 24): the k items with the most distinct persons in
every public key of ``group_by``, in rank order, person-level DP in all, in
one Spark pass.

Run by :func:`dp_spark.top_k` with ``group_by=``, ``groups=`` (the public
keys) and ``max_groups=`` m, after the release template restricted the edge
table to the public keys and capped every person to at most m of their
groups (:mod:`dp_spark.releases.groups`; a per-person transformation).

Guarantee (the plan's split, :mod:`dp_spark.plans.top_k`):

0. ``max_groups=None``: ε/20 chooses m in 1..M (M = the number of public
   keys) by GEM over Σ_p min(|G_p|, m) (sensitivity m), then caps
   (:mod:`dp_spark.releases.group_cap`, shared with the grouped
   distinct-count). m is released; the rest runs conditioned on it.
1. Spark stage (no noise), one pass: per (group, item) the distinct persons
   (:func:`dp_spark.stages.item_counts.grouped_item_counts`), then, without
   a public item domain, the k̄+1 largest per group by a window
   (:func:`~dp_spark.stages.item_counts.grouped_top_item_counts`: at most
   G·(k̄+1) rows reach the driver), or, with one, every domain item's count
   per group (:func:`~dp_spark.stages.item_counts.grouped_domain_item_counts`:
   G·d numbers). Adding or removing one person y moves each (group, item)
   count by at most 1, all in the same direction, and only in the ≤ m groups
   y keeps after the cap (tests/spark/test_grouped_top_k.py checks it on
   random neighbours): within a group, the histogram the ungrouped
   mechanisms assume.
2. Per group, the ungrouped mechanism on that group's counts at ε'/m (and
   δ/m for ``cdp-peel`` and ``unknown-domain``), ε' the rest of ε after step
   0: the joint exponential mechanism (Gillenwater et al. 2022, Algorithm 1),
   ``pnf-joint``, ``pnf-peel`` (ε'/m-DP each), ``cdp-peel`` ((ε'/m,
   δ/m)-DP), or Unknown Domain Gumbel ((ε'/m, δ/m)-DP, Rogers 2024
   Theorem 4; the default without a domain). ``auto`` with a domain runs
   the pure joint mechanism auto picks from public parameters (no private
   choice per group). One person changes the counts of at most m groups, so
   by basic composition over them (parallel composition: the other groups'
   inputs do not change) the grouped release is (ε', δ)-DP (ε'-DP for the
   pure mechanisms), (ε, δ)-DP with step 0. m = 1 gives every group the
   full ε' (and δ).

With ``noise="gaussian"`` (asked for by name; the plan's
:func:`~dp_spark.plans.top_k._gaussian_plan`) the release is instead ρ-zCDP
with ρ = ε²/2, the zCDP level pure ε-DP implies (a weaker guarantee than
ε-DP; the report states ρ and its (ε, δ') equivalent): step 0 spends the
same share of ρ, GEM's exponential mechanism run at √(8ρ_cap) (ε-bounded
range, so ρ_cap-zCDP, Cesar & Rogers 2021); step 2 runs in every group a
bounded-range mechanism at ρ'/m (:mod:`dp_spark.mechanisms.top_k.zcdp`:
the joint exponential mechanism at ε_g = √(8ρ'/m), or one-shot Gumbel top-k,
the default, at ε' = √(8ρ'/(m·k)) per round; Durfee & Rogers 2019 for
their bounded range), so a person's ≤ m groups compose to ρ' and the
release to ρ_cap + ρ' = ρ (adaptive zCDP composition, Bun & Steinke 2016).
The √m scaling (ε_g ∝ 1/√m instead of 1/m) is what zCDP composition buys
when persons are in many groups. Keys chosen privately (``groups=None``) are
refused before anything is read (an (ε, δ) step has no sound ρ-zCDP form).

Only the ordered items of every group are released (no counts). Each
group's error statement is the ungrouped one at the group's ε'/m: with
probability >= 95% each released item's true count in its group is within E
of the group's count at that rank; all G groups' at once with probability
>= 1 − G·5% (union bound). Every public key is released, also one without
rows (its items are then the mechanism's pick among zero counts, or none
with ⊥ for unknown-domain).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from pyspark.sql import types as T

from dp_spark.accounting.exact import exact, ratio_down, sqrt_down
from dp_spark.mechanisms.top_k.error import CONFIDENCE, selection_noise
from dp_spark.mechanisms.top_k.grouped import group_share, grouped_domain_top_k, grouped_unknown_domain
from dp_spark.mechanisms.top_k.zcdp import grouped_zcdp_top_k, zcdp_selection_noise
from dp_spark.plan import Plan
from dp_spark.plans.top_k import NAMES
from dp_spark.releases.group_cap import CHOSEN, choose_and_cap
from dp_spark.releases.groups import groups_frame, report_groups
from dp_spark.report import Release
from dp_spark.stages import item_counts as stage
from dp_spark.stages.edges import GROUP

log = logging.getLogger(__name__)

#: The per-value columns of ``release.groups`` (besides the group column and ``error``).
GROUP_COLUMNS = ("rank", "item")


@dataclass(frozen=True)
class _Group:
    """One group's released items (rank order) and whether ⊥ was appended."""

    items: list
    bottom: bool | None = None


def body(plan: Plan, edge_df, rng, local) -> Release:
    """Stage, mechanism and report of the grouped release (module doc)."""
    p = plan.params
    keys, m = p.groups, p.max_groups
    n_groups = len(keys)
    noise, how = [], {}
    if m is None:  # logged before the branch below: whether a private key step released a key is not shown
        log.info("top-k: choosing the group cap privately")
    if m is None and not keys:  # a private key step released no key: no cap to choose, nothing drawn
        m = 1
    if m is None:
        m, edge_df, drawn = choose_and_cap(edge_df, n_groups, _cap_epsilon(plan, p.gaussian), rng)
        noise.append(drawn)
        how = {"max_groups": m, "max_groups_chosen": CHOSEN}
    mechanism = p.mechanism
    if p.gaussian:
        return _gaussian_body(plan, edge_df, rng, local, keys, m, noise, how)
    epsilon_sel = plan.split.epsilon("selection")
    # ε'/m and δ/m rounded down: m groups' shares never sum above (ε', δ) (basic composition)
    epsilon_group, delta_group = group_share(epsilon_sel, p.delta, m)
    items = p.domain if p.domain_size is not None else None
    # the step's line names public parameters only (never the number of keys, which a private key step draws),
    # and is logged whether or not any key was released
    if items is None:
        log.info("top-k: collecting the %d largest item counts of every group", p.kbar + 1)
    else:
        log.info("top-k: counting persons per domain item (%d items) in every group", len(items))
    # no key (a private key step released none): the same Spark pass, on the then empty table, and no draw
    # (zero groups), so the Spark jobs before the record do not show whether any key was released
    released = _select(edge_df, mechanism, items, n_groups, p.k, epsilon_sel, p.delta, m, p.kbar, rng)
    size = p.kbar if mechanism == "unknown-domain" else len(items)
    record = selection_noise(mechanism, p.k, epsilon_group, delta_group, size)
    record = dataclasses.replace(record, target=f"in each of the {n_groups:,} groups: {record.target}",
                                 **({} if keys else {"draws": 0}))
    how = {**how, "epsilon_per_group": epsilon_group, "delta_per_group": delta_group, "method_per_group": mechanism}
    return _report(plan, keys, m, released, mechanism, how, local, edge_df, [*noise, record], items)


def _cap_epsilon(plan: Plan, gaussian: bool) -> float:
    """The ε of the group cap's GEM: the step's ε, or under zCDP √(8ρ_cap)
    rounded down (an exponential mechanism: ε-bounded range, so
    ε²/8-zCDP, Cesar & Rogers 2021)."""
    if gaussian:
        return sqrt_down(8 * exact(plan.split.cost("max_groups").rho))
    return plan.split.epsilon("max_groups")


def _gaussian_body(plan: Plan, edge_df, rng, local, keys, m, noise, how) -> Release:
    """Step 2 under ρ-zCDP (module doc): the same Spark pass as the pure
    form with a public domain, then every group's bounded-range selection at
    ρ'/m (:func:`~dp_spark.mechanisms.top_k.zcdp.grouped_zcdp_top_k`)."""
    p = plan.params
    mechanism, items, n_groups = p.mechanism, p.domain, len(keys)
    rho = plan.split.cost("selection").rho
    log.info("top-k: counting persons per domain item (%d items) in every group", len(items))
    # no key (a private key step cannot run under zCDP, but zero keys stay handled): zero groups, no draw
    counts = stage.grouped_domain_item_counts(edge_df, items, n_groups)  # NON-PRIVATE
    picked, epsilon = grouped_zcdp_top_k(mechanism, counts, p.k, rho, m, rng)
    del counts  # non-private; nothing below may use it
    released = [_Group([items[int(i)] for i in indices]) for indices in picked]
    record = zcdp_selection_noise(mechanism, p.k, epsilon, len(items))
    record = dataclasses.replace(record, target=f"in each of the {n_groups:,} groups: {record.target}",
                                 **({} if keys else {"draws": 0}))
    per = "epsilon_per_round_per_group" if mechanism == "cdp-peel" else "epsilon_per_group"
    how = {**how, per: epsilon, "rho_per_group": ratio_down(rho, m), "method_per_group": mechanism}
    return _report(plan, keys, m, released, mechanism, how, local, edge_df, [*noise, record], items)


def _select(edge_df, mechanism, items, n_groups, k, epsilon, delta, m, kbar, rng) -> list[_Group]:
    """The one Spark pass, then the mechanism per group on the driver
    (:mod:`dp_spark.mechanisms.top_k.grouped`: each group at (ε/m, δ/m))."""
    if items is None:  # the step was logged by the caller (public parameters only)
        tops = stage.grouped_top_item_counts(edge_df, n_groups, kbar)  # NON-PRIVATE
        counts = None
    else:
        counts = stage.grouped_domain_item_counts(edge_df, items, n_groups)  # NON-PRIVATE
        tops = ([stage.top_of_domain(items, counts[g], kbar) for g in range(n_groups)]
                if mechanism == "unknown-domain" else None)
    # the mechanism per group, on the driver (no Spark work)
    if mechanism == "unknown-domain":
        results = grouped_unknown_domain(tops, k, epsilon, delta, kbar, m, rng)
        out = [_Group([top.items[i] for i in r.indices], r.bottom) for top, r in zip(tops, results)]
    else:
        picked = grouped_domain_top_k(mechanism, counts, k, epsilon, delta, m, rng)
        out = [_Group([items[int(i)] for i in indices]) for indices in picked]
    del tops, counts  # non-private; nothing below may use them
    return out


def _report(plan: Plan, keys, m, released, mechanism, how, local, edge_df, noise, items) -> Release:
    p = plan.params
    n = len(keys)
    record = noise[-1]
    bound = record.half_width(1.0 - CONFIDENCE)
    simultaneous = max(0.0, 1.0 - n * (1.0 - CONFIDENCE))
    within = (f"with probability >= {CONFIDENCE:.0%}, each released item's true count in this group is within "
              f"{bound:,.1f} of the group's count at its rank ({NAMES[mechanism]} at this group's share)")
    rows, summaries = [], []
    for key, group in zip(keys, released):
        for rank, item in enumerate(group.items, start=1):
            rows.append({"group": key, "rank": rank, "item": item, "error": within})
        if not group.items:  # ⊥ only: the key is still released (public), with no item
            rows.append({"group": key, "rank": None, "item": None,
                         "error": "no item of this group cleared Unknown Domain Gumbel's noisy threshold (⊥)"})
        summary = {"group": key, "released_count": len(group.items)}
        if mechanism == "unknown-domain":
            summary["bottom"] = bool(group.bottom)
        summaries.append(summary)
    shown, more = report_groups(summaries)
    shown_keys = {s["group"] for s in shown}
    values = {
        "items": [{"group": r["group"], "rank": r["rank"], "item": r["item"]} for r in rows
                  if r["group"] in shown_keys and r["rank"] is not None],
        "k": p.k,
        "released_count": sum(s["released_count"] for s in summaries),
        "method": mechanism,
        "error_bound": round(bound, 1),
        "confidence": CONFIDENCE,
        "simultaneous_confidence": simultaneous,
        "groups_released": n,
        "groups": shown,
        "groups_in_report": len(shown),
    }
    if items is not None:
        values["domain_size"] = len(items)
    errors = {
        "items": (f"{within.replace('in this group', 'in its group')}; all {n:,} groups' at once with probability "
                  f">= {simultaneous:.0%} (union bound); {record.describe()}"),
        "groups": (f"each group's ranked {p.item_col} values (release.groups / --groups-output: one row per "
                   "released item, with its error statement); items lists the groups in the report"),
    }
    if mechanism == "unknown-domain":
        errors["bottom"] = ("true for a group when fewer than k of its items cleared the noisy threshold: then "
                            "only the items that cleared it are released for that group")
    if more:
        errors["groups_in_report"] = (f"the report holds the first {len(shown):,} of {n:,} groups (public key "
                                      "order); every group is in release.groups and --groups-output")
    if p.gaussian:
        share = "the full ρ (parallel composition)" if m == 1 else f"ρ/{m}"
        guarantee = (f"Person-level {plan.guarantee.rho:g}-zero-concentrated differential privacy (ρ-zCDP, ρ = ε²/2 "
                     f"for ε = {plan.given.epsilon:g}: the zCDP level that {plan.given.epsilon:g}-differential "
                     f"privacy implies; not itself pure ε-DP; ({plan.equivalent.epsilon:.4g}, "
                     f"{plan.equivalent.delta:g})-DP) over all groups")
        spends = (f"spends {share} of the selection budget (a bounded-range mechanism, so zCDP composition over "
                  "a person's groups: √m scaling)")
    else:
        share = "the full ε (parallel composition)" if m == 1 else f"ε/{m}"
        guarantee = f"Person-level {plan.guarantee.describe()} over all groups"
        spends = (f"spends {share} of the selection budget"
                  + (" (and δ/m)" if mechanism in ("cdp-peel", "unknown-domain") and m > 1 else ""))
    statement = (
        f"{guarantee}: the output would be almost as likely if "
        f"any one person (every row with the same {p.person_col}) were removed or added. Each person's rows "
        f"count in at most {m} of their {p.group_by} groups; each group's selection by {NAMES[mechanism]} "
        f"{spends}. Released: up to {p.k} {p.item_col} values per group, in order"
        + (", from the public domain" if items is not None else "") + "; no counts are released."
    )
    item_type = T.LongType() if stage.integral_items(edge_df) else T.StringType()
    frame = groups_frame(edge_df.sparkSession, plan, edge_df.schema[GROUP].dataType, rows,
                         [("rank", T.IntegerType()), ("item", item_type)])
    split = [{"step": label, **c.to_dict()} for label, c in local.ledger]
    return Release.from_plan(
        plan, values=values, errors=errors, statement=statement, seeded=p.seed is not None,
        budget_split=split, parameters=how, noise=noise, artifacts={"groups": frame},
    )
