"""Grouped distinct-count (issue 24): the distinct items of every public key
of ``group_by``, person-level, in one Spark pass: ρ-zCDP with ρ = ε²/2
(``noise="gaussian"``, asked for by name) or pure ε-DP (``noise="laplace"``, the default).

Run by :func:`dp_spark.distinct_count` with ``group_by=``, ``groups=`` (the
public keys) and ``max_groups=`` m, after the release template restricted
the edge table to the public keys (:mod:`dp_spark.releases.groups`); the
stage caps every person to at most m of their groups inside its kernel (a
per-person transformation: the template's ``cap_groups`` order).

Guarantee (the plan's split, :mod:`dp_spark.plans.distinct_count`; under
zCDP every step's share of ε is the same share of ρ):

0. ``shards=None``: ε/100, the noisy sampled person count of the ungrouped
   release (sensitivity 1: persons, not groups) picks the greedy shards
   (under zCDP its discrete Laplace runs at √(2ρ_s): ε-DP ⇒ ε²/2-zCDP).
0''. ``max_groups=None`` (:func:`_joint_body`): the cap m and ONE bound l
   for all groups are chosen together, then each group's count at them;
   steps 1-2 below are for a given m. One Spark pass (:func:`joint_counts`)
   computes c_{g,m,l} for every cap candidate m in 1, 2, 4, …, M (M = the
   number of public keys) and every bound candidate l (K·G·L numbers reach
   the driver). The choice spends ε/4 (the ``max_groups`` step): GEM's
   same-direction scores of q_{m,l} = Σ_g (c_{g,m,l} − margin(m, l)),
   sensitivity m·l, every score moving the same way between neighbours
   (:mod:`dp_spark.mechanisms.distinct_count.cap_bound`), sampled by
   permute-and-flip (ε-DP) or, under zCDP, the exponential mechanism at
   √(8ρ_m) (ε-bounded range, so ε²/8-zCDP). The counts spend the rest
   (the ``count`` step): every group's c_{g,m̂,l̂} from the same pass plus
   discrete Laplace of scale m̂·l̂/ε_count (the vector over groups has ℓ1
   sensitivity m̂·l̂: ε_count-DP), or discrete Gaussian σ = √m̂·l̂/√(2ρ_count)
   (ℓ2 sensitivity √m̂·l̂: ρ_count-zCDP). Adaptive composition: ε (or ρ)
   in all. A larger m keeps more items but multiplies every group's noise
   by m, and the score prices both (benchmarks/README.md, "Grouped
   distinct-count (issue 24)": it replaced GEM over the rows each cap keeps,
   which ignored the noise). The counts of the chosen cap are those of the
   pass's virtual groups (m̂, g): the same as a release with the public cap
   m̂ computes (the same rows, visited in the same order).
1. Spark stage (no noise): :func:`dp_spark.stages.distinct.grouped_greedy_counts`
   caps every person to m groups inside its kernel (``caps_in_stage``: the
   release template does not cap this release's edge table; no cap when
   m >= the number of keys), runs an independent greedy per group — virtual
   persons (person, group), virtual items (group, item), persons sharded
   and visited as in the ungrouped release — and returns
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

import numpy as np
from pyspark.sql import types as T

from dp_spark.accounting.exact import exact, ratio_down, sqrt_down
from dp_spark.mechanisms.distinct_count.cap_bound import (cap_candidates, choose_cap_and_bound, joint_margins,
                                                          release_at_bound)
from dp_spark.mechanisms.distinct_count.grouped import release_groups
from dp_spark.mechanisms.groups import group_noise_scale
from dp_spark.noise.records import NoiseDraw
from dp_spark.plan import Plan
from dp_spark.plans.distinct_count import noise_of
from dp_spark.releases.group_cap import CAP_GEM_BETA  # noqa: F401 - the previous cap choice's β (benchmark)
from dp_spark.releases.groups import groups_frame, report_groups
from dp_spark.releases.shards import greedy_shards
from dp_spark.report import Release
from dp_spark.settings.distinct_count import SELECTION_BETA, bound_candidates, candidate_betas, cap_note
from dp_spark.stages.distinct import grouped_greedy_counts
from dp_spark.stages.edges import GROUP

log = logging.getLogger(__name__)

#: The per-value columns of ``release.groups`` (besides the group column and ``error``).
GROUP_COLUMNS = ("estimate", "lower_bound", "bound")


def body(plan: Plan, edge_df, rng, local) -> Release:
    """Stage, mechanism and report of the grouped release (module doc)."""
    p = plan.params
    keys, m, max_bound = p.groups, p.max_groups, p.max_bound
    gaussian = noise_of(p) == "gaussian"
    cands = bound_candidates(max_bound)
    shards, how, noise = greedy_shards(edge_df, p.shards, pure_step_epsilon(plan, "shards", gaussian), rng)
    if m is None:  # the cap m and one bound l, chosen jointly (step 0'' of the module doc)
        return _joint_body(plan, edge_df, rng, local, keys, cands, shards, how, noise, gaussian)
    log.info("distinct-count: per-group bounded counts")  # the keys may be released ones: never their number
    # the cap inside the kernel (run_release(caps_in_stage=True)); none needed when m >= #keys
    caps = None if m >= len(keys) else (m,)
    # no key (a private key step released none): the same Spark pass on the then empty table (one virtual
    # group, discarded), so the Spark jobs before the record do not show whether any key was released
    counted = grouped_greedy_counts(edge_df, max_bound, shards, max(len(keys), 1), cands, caps=caps)  # NON-PRIVATE
    at_candidates = (counted if caps is None else counted[0]) if keys else {}
    del counted
    if gaussian:
        select, count = plan.split.cost("select").rho, plan.split.cost("count").rho
    else:
        select, count = plan.split.epsilon("select"), plan.split.epsilon("count")
    released, per_group = release_groups(at_candidates, cands, max_bound, m, p.beta, rng,
                                         noise="gaussian" if gaussian else "laplace", select=select, count=count)
    del at_candidates  # non-private; nothing below may use it
    how = {**how, "bound_candidates": cands, "selection_beta": SELECTION_BETA,
           "selection_candidate_betas": candidate_betas(len(cands)), **per_group}
    return _report(plan, keys, m, released, how, local, edge_df.schema[GROUP].dataType, edge_df.sparkSession,
                   [*noise, *_batched(released, gaussian, m)])


#: ``parameters["max_groups_chosen"]`` of a release whose cap and bound were chosen jointly.
JOINT_CHOSEN = ("privately, jointly with one bound l for all groups (GEM over the summed per-group counts minus "
                "their noise margins, sensitivity m·l)")


def _joint_body(plan: Plan, edge_df, rng, local, keys, cands, shards, how, noise, gaussian) -> Release:
    """``max_groups=None``: the counts at every cap candidate in one pass
    (:func:`joint_counts`, NON-PRIVATE), the joint choice of (m̂, l̂)
    (:func:`~dp_spark.mechanisms.distinct_count.cap_bound.choose_cap_and_bound`
    at the plan's ``max_groups`` step: permute-and-flip, ε-DP; under zCDP
    the exponential mechanism at √(8ρ_step), ρ_step-zCDP), then every
    group's count at (m̂, l̂) from the same pass
    (:func:`~dp_spark.mechanisms.distinct_count.cap_bound.release_at_bound`
    at the ``count`` step: ε_count/m̂ per group, or σ = √m̂·l̂/√(2ρ_count))."""
    p = plan.params
    kind = "gaussian" if gaussian else "laplace"
    count = plan.split.cost("count").rho if gaussian else plan.split.epsilon("count")
    m, released, drawn = None, [], []
    # before the branch: whether a private key step released any key is not shown before the record
    log.info("distinct-count: per-group bounded counts at every cap candidate, the cap and bound chosen jointly")
    # no key (a private key step released none): the same Spark pass on the then empty table (one virtual
    # group, discarded), so the Spark jobs before the record do not show whether any key was released
    caps = cap_candidates(max(len(keys), 1))
    at = joint_counts(edge_df, caps, max(len(keys), 1), p.max_bound, shards, cands)  # NON-PRIVATE
    if not keys:  # nothing to choose, nothing drawn
        del at
    else:
        epsilon = cap_epsilon(plan, "max_groups", gaussian)
        sampler = "exponential" if gaussian else "permute-and-flip"  # bounded range under zCDP (cap_bound doc)
        k, j = choose_cap_and_bound(at, caps, cands, joint_margins(caps, cands, p.beta, kind, count), epsilon, rng,
                                    sampler=sampler)
        m, bound = caps[k], cands[j]
        at_chosen = at[k, :, j].copy()
        del at  # non-private; only the chosen column is read below
        drawn = [NoiseDraw("max_groups", "gem", scale=2.0 / epsilon, std=None, sensitivity=1.0,
                           target=f"the group cap m in {', '.join(map(str, caps))} and the bound l in "
                                  f"{', '.join(map(str, cands))}, jointly (scores: summed counts minus margins, "
                                  "sensitivity m·l)",
                           parameters={"beta": SELECTION_BETA, "candidate_betas": candidate_betas(len(cands))})]
        released = release_at_bound(at_chosen, m, bound, p.beta, rng, noise=kind, count=count)
        del at_chosen
        share = {"rho_per_group": ratio_down(count, m)} if gaussian else {"epsilon_per_group": ratio_down(count, m)}
        how = {**how, "max_groups": m, "max_groups_chosen": JOINT_CHOSEN, "max_groups_candidates": caps,
               "bound": bound, "bound_chosen": "jointly with the group cap (one bound for all groups)", **share}
    how = {**how, "bound_candidates": cands, "selection_beta": SELECTION_BETA,
           "selection_candidate_betas": candidate_betas(len(cands))}
    return _report(plan, keys, m, released, how, local, edge_df.schema[GROUP].dataType, edge_df.sparkSession,
                   [*noise, *drawn, *_batched_counts(released, gaussian, m)], joint=True)


def joint_counts(edge_df, caps, n_keys: int, max_bound: int, shards: int, cands) -> np.ndarray:
    """NON-PRIVATE: ``at[k, g, j]`` = the per-group greedy count of group g
    at bound ``cands[j]`` on the edge table capped to ``caps[k]`` groups per
    person, for every cap candidate, in one Spark pass:
    :func:`dp_spark.stages.distinct.grouped_greedy_counts` with ``caps``
    (the cap applied per person inside the kernel, one shuffle by person,
    no window and no copy of a row in Spark). ``at[k]`` equals the counts
    of a release with the public cap ``caps[k]`` (the same virtual groups,
    visited in the same order). K·G·len(cands) numbers reach the driver.
    Between add/remove-one-person neighbours each ``at[k, g, j]`` moves by
    0..l_j, all in the same direction, in at most m_k groups per k
    (tests/spark/test_grouped_cap_bound.py)."""
    # no log line here: the caps and n_keys follow the number of keys, which a private key step draws
    # (the caller logs the step, before it knows whether any key was released)
    return grouped_greedy_counts(edge_df, max_bound, shards, n_keys, cands, caps=caps)


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


def _batched_counts(released: list[dict], gaussian: bool, m) -> list:
    """The joint path's count draws as one record: every group's count at
    the same (m̂, l̂) has the same scale (under zCDP with the ℓ2 sensitivity
    √m̂·l̂ of the vector over groups)."""
    if not released:
        return []
    bound, record = released[0]["bound"], released[0]["noise"][0]
    extra, parameters = {}, {"bound": bound}  # "bound": the HTML panel's record
    if gaussian:
        extra = {"sensitivity": group_noise_scale(m, bound, rho=1.0).sensitivity}
        parameters["norm"] = 2
    return [dataclasses.replace(record, draws=len(released), **extra, parameters=parameters,
                                target=f"the count with at most {bound} items per person of every group "
                                       f"(cap {m}, bound {bound})")]


def _report(plan: Plan, keys, m, released, how, local, group_type, spark, noise, joint: bool = False) -> Release:
    p = plan.params
    beta = p.beta
    confidence = 1.0 - beta
    simultaneous = max(0.0, 1.0 - len(keys) * beta)
    gaussian = "rho" in plan.parameters
    rows = []
    for key, r in zip(keys, released):
        count = r["noise"][-1]  # the count's record (after the per-group selection's, if any)
        width = count.half_width(beta)  # the kind's one tail (the JSON and the HTML state the same)
        error = (f"distinct items of this group after keeping at most {r['bound']} items per person (never more "
                 f"than the true count), plus {count.describe()}; within ±{width:,.0f} of that "
                 f"count with probability >= {confidence:.0%}; the lower bound holds with probability >= "
                 f"{confidence:.0%}")
        rows.append({"group": key, "estimate": r["estimate"], "lower_bound": r["lower_bound"], "bound": r["bound"],
                     "error": error})
    shown, more = report_groups(rows)
    top = how["bound_candidates"][-1]
    at_top = sum(r["bound"] == top for r in released)  # a function of the released bounds only
    values = {
        "method": p.method,
        "confidence": confidence,
        "simultaneous_confidence": simultaneous,
        "groups_released": len(rows),
        "groups_bound_may_cap": at_top,
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
    errors["groups_bound_may_cap"] = (  # always stated (the report's shape never depends on the bounds)
        f"{at_top:,} group(s) chose the largest bound considered (max_bound = {p.max_bound:,}): "
        f"{cap_note(top, p.max_bound)}" if at_top else
        f"no group chose the largest bound considered (max_bound = {p.max_bound:,})")
    if more:
        errors["groups_in_report"] = (f"the report holds the first {len(shown):,} of {len(rows):,} groups (the keys' "
                                      "sorted order); every group is in release.groups and --groups-output")
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
        f"count in at most {m} of their {p.group_by} groups; " + (
            f"that cap and one bound l = {how.get('bound')} items per person for every group were chosen together "
            f"privately (the budget's group cap step); each group's count spends {share} of the count budget "
            f"({how_noise})" if joint else
            f"each group's release spends {share} of the selection and count budget ({how_noise})") +
        ". Each group's lower bound holds with probability "
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
