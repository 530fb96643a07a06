"""Grouped distinct-count (issue 24): the distinct items of every public key
of ``group_by``, person-level pure ε-DP in all, in one Spark pass.

Run by :func:`dp_spark.distinct_count` with ``group_by=``, ``groups=`` (the
public keys) and ``max_groups=`` m, after the release template restricted
the edge table to the public keys and capped every person to at most m of
their groups (:mod:`dp_spark.releases.groups`; a per-person transformation).

Guarantee (the plan's split, :mod:`dp_spark.plans.distinct_count`):

0. ``shards=None``: ε/100, the noisy sampled person count of the ungrouped
   release (sensitivity 1: persons, not groups) picks the greedy shards.
0''. ``max_groups=None``: ε/20 chooses m in 1..M (M = the number of public
   keys) by GEM over Σ_p min(|G_p|, m) (sensitivity m:
   :func:`dp_spark.mechanisms.groups.choose_max_groups`) from the groups-
   per-person histogram (M numbers reach the driver); the cap uses it.
1. Spark stage (no noise): :func:`dp_spark.stages.distinct.grouped_greedy_counts`
   runs an independent greedy per group — virtual persons (person, group),
   virtual items (group, item) in the existing sharded kernel — and returns
   c_{g,l} for every group g and every bound candidate l (groups × candidates
   numbers reach the driver). Adding or removing one person y moves each
   c_{g,l} by 0..l, all in the same direction, and only in the ≤ m groups y
   keeps after the cap (tests/spark/test_grouped_distinct.py checks it on
   random neighbours).
2. Per group, the ungrouped mechanism (:func:`release_from_counts`: the same
   :func:`select_bound` and discrete Laplace count) at ε'/m, ε' the rest of ε
   after steps 0 and 0''. Each group's release is ε'/m-DP in that group's counts; one
   person changes at most m groups, so by basic composition over them (and
   parallel composition: the others do not change) the grouped release is
   ε'-DP, ε-DP with steps 0 and 0''. m = 1 gives every group the full ε'.

Each group's ``lower_bound`` holds with probability >= 1 − β; all G groups'
hold together with probability >= 1 − G·β (union bound), stated in the
report. Keys with no rows are released too (their counts are 0 plus noise).
"""

from __future__ import annotations

import dataclasses
import logging

from dp_spark.accounting.exact import ratio_down
from dp_spark.mechanisms.distinct_count import release_from_counts
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
    from dp_spark.stages.distinct import candidate_counts_vector, grouped_greedy_counts
    from dp_spark.stages.edges import GROUP
    from dp_spark.stages.groups import cap_groups

    p = plan.params
    keys, m, max_bound = p.groups, p.max_groups, p.max_bound
    cands = bound_candidates(max_bound)
    shards, how, noise = greedy_shards(edge_df, p.shards, plan.split.epsilon("shards"), rng)
    if m is None:
        m, drawn = _choose_cap(edge_df, len(keys), plan.split.epsilon("max_groups"), rng)
        edge_df = cap_groups(edge_df, m)
        noise.append(drawn)
        how = {**how, "max_groups": m, "max_groups_chosen": "privately (GEM over the rows each cap keeps)"}
    log.info("distinct-count: per-group bounded counts (%d public groups)", len(keys))
    at_candidates = grouped_greedy_counts(edge_df, max_bound, shards, len(keys), cands)  # NON-PRIVATE
    # ε'/m rounded down: m groups' shares never sum above ε' (basic composition)
    epsilon_group = ratio_down(plan.split.epsilon("select") + plan.split.epsilon("count"), m)
    released = []
    for g in range(len(keys)):  # the mechanism per group, on the driver (no Spark work)
        released.append(release_from_counts(candidate_counts_vector(at_candidates[g], cands, max_bound),
                                            epsilon_group, p.beta, rng))
    del at_candidates  # non-private; nothing below may use it
    how = {**how, "bound_candidates": cands, "selection_beta": SELECTION_BETA,
           "epsilon_per_group": epsilon_group}
    return _report(plan, keys, m, released, how, local, edge_df.schema[GROUP].dataType, edge_df.sparkSession,
                   [*noise, *_batched(released)])


def _choose_cap(edge_df, n_keys: int, epsilon: float, rng):
    """m in 1..M, M = the number of public keys, chosen ε-DP by GEM from the
    NON-PRIVATE groups-per-person histogram, and the record of the choice:
    :func:`dp_spark.releases.group_cap.choose_cap` (shared with the grouped top-k)."""
    from dp_spark.releases.group_cap import choose_cap

    return choose_cap(edge_df, n_keys, epsilon, rng, "distinct-count")


def _batched(released: list[dict]) -> list:
    """The groups' draws as records of identical draws: one for the
    selections (same scale in every group), one per bound for the counts."""
    selects = [r["noise"][0] for r in released]
    out = [dataclasses.replace(selects[0], draws=len(selects),
                               target="each group's per-person bound (scores c_l − m_l of sensitivity l)")]
    by_bound: dict[int, list] = {}
    for r in released:
        by_bound.setdefault(r["bound"], []).append(r["noise"][1])
    for bound, records in sorted(by_bound.items()):
        out.append(dataclasses.replace(records[0], draws=len(records),
                                       target=f"the count with at most {bound} items per person of each group "
                                              f"whose bound is {bound}"))
    return out


def _report(plan: Plan, keys, m, released, how, local, group_type, spark, noise) -> Release:
    from pyspark.sql import types as T

    from dp_spark.releases.groups import groups_frame, report_groups

    p = plan.params
    beta = p.beta
    confidence = 1.0 - beta
    simultaneous = max(0.0, 1.0 - len(keys) * beta)
    rows = []
    for key, r in zip(keys, released):
        count = r["noise"][1]
        error = (f"distinct items of this group after keeping at most {r['bound']} items per person (never more "
                 f"than the true count), plus {count.describe()}; within ±{count.half_width(beta):,.0f} of that "
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
                   "items per person, plus that group's discrete Laplace noise (each row of release.groups / "
                   "--groups-output states its own interval)"),
        "lower_bound": (f"each group's true number of distinct items is at least its lower_bound with probability "
                        f">= {confidence:.0%}; all {len(rows):,} groups' at once with probability >= "
                        f"{simultaneous:.0%} (union bound)"),
    }
    if more:
        errors["groups_in_report"] = (f"the report holds the first {len(shown):,} of {len(rows):,} groups (public "
                                      "key order); every group is in release.groups and --groups-output")
    share = "the full ε (parallel composition)" if m == 1 else f"ε/{m}"
    statement = (
        f"Person-level {p.epsilon:g}-differential privacy over all groups: the output would be almost as likely "
        f"if any one person (every row with the same {p.person_col}) were removed or added. Each person's rows "
        f"count in at most {m} of their {p.group_by} groups; each group's release spends "
        f"{share} of the selection and count budget. Each group's lower bound holds with probability "
        f"at least {confidence:.0%}; all {len(rows):,} together with probability at least {simultaneous:.0%}."
    )
    frame = groups_frame(spark, plan, group_type, rows,
                         [("estimate", T.LongType()), ("lower_bound", T.LongType()), ("bound", T.IntegerType())])
    return Release.from_plan(
        plan, values=values, errors=errors, statement=statement, seeded=p.seed is not None,
        budget_split=[{"step": label, **c.to_dict()} for label, c in local.ledger], parameters=how,
        noise=noise, artifacts={"groups": frame},
    )
