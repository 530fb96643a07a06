"""Grouped distinct-count (issue 24): the distinct items of every public key
of ``group_by``, person-level, in one Spark pass: ρ-zCDP with ρ = ε²/2
(``noise="gaussian"``, asked for by name) or pure ε-DP (``noise="laplace"``, the default).

Run by :func:`dp_spark.distinct_count` with ``group_by=``, ``groups=`` (the
public keys) and ``max_groups=`` m, after the release template restricted
the edge table to the public keys and capped every person to at most m of
their groups (:mod:`dp_spark.releases.groups`; a per-person transformation).

Guarantee (the plan's split, :mod:`dp_spark.plans.distinct_count`; under
zCDP every step's share of ε is the same share of ρ):

0. ``shards=None``: ε/100, the noisy sampled person count of the ungrouped
   release (sensitivity 1: persons, not groups) picks the greedy shards
   (under zCDP its discrete Laplace runs at √(2ρ_s): ε-DP ⇒ ε²/2-zCDP).
0''. ``max_groups=None``: ε/20 chooses m in 1..M (M = the number of public
   keys) by GEM over Σ_p min(|G_p|, m) (sensitivity m:
   :func:`dp_spark.mechanisms.groups.choose_max_groups`) from the groups-
   per-person histogram (M numbers reach the driver); the cap uses it
   (under zCDP GEM runs at √(8ρ_m): an exponential mechanism, ε-bounded
   range, so ε²/8-zCDP).
1. Spark stage (no noise): :func:`dp_spark.stages.distinct.grouped_greedy_counts`
   runs an independent greedy per group — virtual persons (person, group),
   virtual items (group, item) in the existing sharded kernel — and returns
   c_{g,l} for every group g and every bound candidate l (groups × candidates
   numbers reach the driver). Adding or removing one person y moves each
   c_{g,l} by 0..l, all in the same direction, and only in the ≤ m groups y
   keeps after the cap (tests/spark/test_grouped_distinct.py checks it on
   random neighbours), so for each l the vector over groups moves by at most
   m·l in ℓ1 and √m·l in ℓ2.
2. Per group (:func:`dp_spark.mechanisms.distinct_count.grouped.release_groups`):
   pure, the ungrouped mechanism (:func:`release_from_counts`) at ε'/m:
   ε'-DP by basic composition over a person's ≤ m groups; zCDP, the bound
   choice at √(8ρ_select/m) and discrete Gaussian σ = √m·l/√(2ρ_count):
   ρ'-zCDP (that module's docstring). Parallel composition: the other groups
   do not change. m = 1 gives every group the full budget.

Each group's ``lower_bound`` holds with probability >= 1 − β; all G groups'
hold together with probability >= 1 − G·β (union bound), stated in the
report. Keys with no rows are released too (their counts are 0 plus noise).
"""

from __future__ import annotations

import dataclasses
import logging

from dp_spark.accounting.exact import exact, sqrt_down
from dp_spark.mechanisms.distinct_count.grouped import release_groups
from dp_spark.mechanisms.groups import group_noise_scale
from dp_spark.noise.tails import discrete_gaussian_upper_quantile
from dp_spark.plan import Plan
from dp_spark.releases.group_cap import CAP_GEM_BETA  # noqa: F401 - GEM's β in the choice of the cap (shared)
from dp_spark.releases.shards import greedy_shards
from dp_spark.report import Release
from dp_spark.settings.distinct_count import SELECTION_BETA, bound_candidates

log = logging.getLogger(__name__)

#: The per-value columns of ``release.groups`` (besides the group column and ``error``).
GROUP_COLUMNS = ("estimate", "lower_bound", "bound")


def body(plan: Plan, edge_df, rng, local) -> Release:
    """Stage, mechanism and report of the grouped release (module doc)."""
    from dp_spark.plans.distinct_count import noise_of
    from dp_spark.stages.distinct import grouped_greedy_counts
    from dp_spark.stages.edges import GROUP
    from dp_spark.stages.groups import cap_groups

    p = plan.params
    keys, m, max_bound = p.groups, p.max_groups, p.max_bound
    gaussian = noise_of(p) == "gaussian"
    cands = bound_candidates(max_bound)
    shards, how, noise = greedy_shards(edge_df, p.shards, pure_step_epsilon(plan, "shards", gaussian), rng)
    if m is None and keys:  # no key (a private key step released none): nothing to cap, nothing drawn
        m, drawn = _choose_cap(edge_df, len(keys), cap_epsilon(plan, "max_groups", gaussian), rng)
        edge_df = cap_groups(edge_df, m, public_keys=len(keys))  # m = #keys: no window (cap_groups doc)
        noise.append(drawn)
        how = {**how, "max_groups": m, "max_groups_chosen": "privately (GEM over the rows each cap keeps)"}
    log.info("distinct-count: per-group bounded counts (%d public groups)", len(keys))
    at_candidates = (grouped_greedy_counts(edge_df, max_bound, shards, len(keys), cands)  # NON-PRIVATE
                     if keys else {})
    if gaussian:
        select, count = plan.split.cost("select").rho, plan.split.cost("count").rho
    else:
        select, count = plan.split.epsilon("select"), plan.split.epsilon("count")
    released, per_group = release_groups(at_candidates, cands, max_bound, m, p.beta, rng,
                                         noise="gaussian" if gaussian else "laplace", select=select, count=count)
    del at_candidates  # non-private; nothing below may use it
    how = {**how, "bound_candidates": cands, "selection_beta": SELECTION_BETA, **per_group}
    return _report(plan, keys, m, released, how, local, edge_df.schema[GROUP].dataType, edge_df.sparkSession,
                   [*noise, *_batched(released, gaussian, m)])


def pure_step_epsilon(plan: Plan, step: str, gaussian: bool) -> float:
    """The ε a pure ε-DP step runs at: its ε, or under zCDP √(2ρ_step)
    (ε-DP ⇒ ε²/2-zCDP, Bun–Steinke 2016), rounded down; 0.0 without the step."""
    if step not in plan.split:
        return 0.0
    return sqrt_down(2 * exact(plan.split.cost(step).rho)) if gaussian else plan.split.epsilon(step)


def cap_epsilon(plan: Plan, step: str, gaussian: bool) -> float:
    """The ε of the group cap's GEM (an exponential mechanism: ε-bounded
    range, so ε²/8-zCDP, Cesar–Rogers 2021): its ε, or √(8ρ_step) under zCDP."""
    return sqrt_down(8 * exact(plan.split.cost(step).rho)) if gaussian else plan.split.epsilon(step)


def _choose_cap(edge_df, n_keys: int, epsilon: float, rng):
    """m in 1..M, M = the number of public keys, chosen ε-DP by GEM from the
    NON-PRIVATE groups-per-person histogram, and the record of the choice:
    :func:`dp_spark.releases.group_cap.choose_cap` (shared with the grouped top-k)."""
    from dp_spark.releases.group_cap import choose_cap

    return choose_cap(edge_df, n_keys, epsilon, rng, "distinct-count")


def _batched(released: list[dict], gaussian: bool, m: int) -> list:
    """The groups' draws as records of identical draws: one for the
    selections (same scale in every group), one per bound for the counts
    (under zCDP with the ℓ2 sensitivity √m·l of the vector over groups)."""
    selects = [r["noise"][0] for r in released]
    if not selects:
        return []
    out = [dataclasses.replace(selects[0], draws=len(selects),
                               target="each group's per-person bound (scores c_l − m_l of sensitivity l)")]
    by_bound: dict[int, list] = {}
    for r in released:
        by_bound.setdefault(r["bound"], []).append(r["noise"][1])
    for bound, records in sorted(by_bound.items()):
        extra, parameters = {}, {**records[0].parameters, "bound": bound}  # "bound": the HTML panel's record
        if gaussian:  # the vector over groups: ℓ2 sensitivity √m·l (GroupScale.sensitivity)
            extra = {"sensitivity": group_noise_scale(m, bound, rho=1.0).sensitivity}
            parameters["norm"] = 2
        out.append(dataclasses.replace(records[0], draws=len(records), **extra,
                                       target=f"the count with at most {bound} items per person of each group "
                                              f"whose bound is {bound}",
                                       parameters=parameters))
    return out


def _report(plan: Plan, keys, m, released, how, local, group_type, spark, noise) -> Release:
    from pyspark.sql import types as T

    from dp_spark.releases.groups import groups_frame, report_groups

    p = plan.params
    beta = p.beta
    confidence = 1.0 - beta
    simultaneous = max(0.0, 1.0 - len(keys) * beta)
    gaussian = "rho" in plan.parameters
    rows = []
    for key, r in zip(keys, released):
        count = r["noise"][1]
        # the discrete Gaussian's two-sided width from its upper tail bound at β/2 (noise.tails), else the record's
        width = discrete_gaussian_upper_quantile(count.scale, beta / 2) if gaussian else count.half_width(beta)
        error = (f"distinct items of this group after keeping at most {r['bound']} items per person (never more "
                 f"than the true count), plus {count.describe()}; within ±{width:,.0f} of that "
                 f"count with probability >= {confidence:.0%}; the lower bound holds with probability >= "
                 f"{confidence:.0%}")
        rows.append({"group": key, "estimate": r["estimate"], "lower_bound": r["lower_bound"], "bound": r["bound"],
                     "error": error})
    shown, more = report_groups(rows)
    values = {
        "method": p.method,
        "confidence": confidence,
        "simultaneous_confidence": simultaneous,
        "groups_released": len(rows),
        "groups": [{k: v for k, v in r.items() if k != "error"} for r in shown],
        "groups_in_report": len(shown),
    }
    errors = {
        "groups": (f"each group's estimate: distinct {p.item_col} values of the group after a per-group bound on "
                   f"items per person, plus that group's {'discrete Gaussian' if gaussian else 'discrete Laplace'} noise (each row of release.groups / "
                   "--groups-output states its own interval)"),
        "lower_bound": (f"each group's true number of distinct items is at least its lower_bound with probability "
                        f">= {confidence:.0%}; all {len(rows):,} groups' at once with probability >= "
                        f"{simultaneous:.0%} (union bound)"),
    }
    if more:
        errors["groups_in_report"] = (f"the report holds the first {len(shown):,} of {len(rows):,} groups (public "
                                      "key order); every group is in release.groups and --groups-output")
    if gaussian:
        share = "the full ρ (parallel composition)" if m == 1 else f"ρ/{m}"
        guarantee = (f"Person-level {plan.guarantee.rho:g}-zero-concentrated differential privacy (ρ-zCDP, ρ = ε²/2 "
                     f"for ε = {plan.given.epsilon:g}: the zCDP level that {plan.given.epsilon:g}-differential "
                     "privacy implies; not itself pure ε-DP) over all groups")
        how_noise = "discrete Gaussian noise, √m scaling"
    else:
        share = "the full ε (parallel composition)" if m == 1 else f"ε/{m}"
        if "group_keys" in plan.split:  # keys chosen privately: the plan's (ε, δ) in all (the template's sentence)
            guarantee = (f"Person-level ({plan.given.epsilon:g}, {plan.guarantee.delta:g})-differential privacy over "
                         "all groups")
        else:
            guarantee = f"Person-level {p.epsilon:g}-differential privacy over all groups"
        how_noise = "discrete Laplace noise"
    statement = (
        f"{guarantee}: the output would be almost as likely "
        f"if any one person (every row with the same {p.person_col}) were removed or added. Each person's rows "
        f"count in at most {m} of their {p.group_by} groups; each group's release spends "
        f"{share} of the selection and count budget ({how_noise}). Each group's lower bound holds with probability "
        f"at least {confidence:.0%}; all {len(rows):,} together with probability at least {simultaneous:.0%}."
    ) if rows else (
        f"{guarantee}: the output would be almost as likely if any one person (every row with the "
        f"same {p.person_col}) were removed or added. No {p.group_by} key was released, so no group's value is."
    )
    frame = groups_frame(spark, plan, group_type, rows,
                         [("estimate", T.LongType()), ("lower_bound", T.LongType()), ("bound", T.IntegerType())])
    return Release.from_plan(
        plan, values=values, errors=errors, statement=statement, seeded=p.seed is not None,
        budget_split=[{"step": label, **c.to_dict()} for label, c in local.ledger], parameters=how,
        noise=noise, artifacts={"groups": frame},
    )
