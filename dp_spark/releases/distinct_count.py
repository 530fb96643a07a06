"""The distinct-count release: person-level ε-DP count of distinct items.

``dp_spark.distinct_count(df, *, epsilon, ...)``: plan
(:mod:`dp_spark.plans.distinct_count`), Spark stage
(:mod:`dp_spark.stages.distinct`), mechanism
(:mod:`dp_spark.mechanisms.distinct_count`).

Knop & Steinke, "Counting Distinct Elements Under Person-Level Differential
Privacy" (NeurIPS 2023), Algorithm 1 (exact, ``method="matching"``) and its
linear-time variant with Algorithm 2's greedy counts (``method="greedy"``,
run sharded on Spark), plus the paper's sampling baseline.

Pipeline and budget split (basic composition, total ε-DP):

0. Only for ``method="greedy"`` with ``shards=None`` (automatic): ε/100 —
   discrete Laplace noise on the number of persons in a fixed 1-in-r hash
   sample of the input's (non-null) person ids, read from the person column
   alone (whether a person is in it is a public function of its id, so the
   count has sensitivity 1), times r,
   picks the number of greedy shards, one per 200,000 persons. Sharding loses
   accuracy when shards hold few persons, and a shard count that depended on
   the true size would break the sensitivity argument; a noisy count keeps it
   (each fixed shard count gives sensitivity l, and the choice is DP). The
   sample makes this step's aggregation a 1/r-th of a full distinct-person
   count's (the scan remains): r = ``person_sample(ε/100)``
   (:mod:`dp_spark.plans.distinct_count`), 64 from ε = 1, smaller below so
   that the noise (scale r·100/ε persons) stays within 6,400; its sampling
   error, about sqrt(r·persons), is small against 200,000 persons per shard.
   The rest, ε' = 0.99·ε, is split as below; with explicit shards ε' = ε.
0'. Only for ``method="matching"``: ε/100 — the private size check (Knop &
   Steinke's exact Algorithm 1 needs the edge list on the driver). Each
   person is first truncated to its first P = ``max_bound`` distinct items
   in the public order (xxhash64(item), item) — a per-person transformation,
   so DC(truncated D; l) keeps sensitivity l and stays <= DC(D; l) — and the
   number N of truncated pairs (sensitivity P) gets discrete Laplace noise of
   scale P/(ε/100). Matching runs iff Ñ + m <= ``edge_limit``, with m the
   (1 − 10⁻⁶) quantile of that noise; otherwise the counts come from the
   sharded greedy on the full data (same sensitivity l). The choice is
   post-processing of Ñ, so no refusal depends on the data; P[N >
   edge_limit | matching chosen] <= 10⁻⁶, and past that probability the
   limit is a memory sizing only: the pairs are collected, never refused.
1. Spark stage (no noise): c_l = DC(D; l) or its greedy / sampling lower
   bound for l = 1..L (L = ``max_bound``); each c_l has sensitivity l. The
   greedy's Spark partitions come from the shard count and the cluster's
   parallelism, never from the session's shuffle partitions, and each shard
   lies whole in one partition: the layout changes no count (issue 26).
2. ε'/2 — the bound choice picks l̂ among the public candidates l = 1, 4,
   16, 64, … below L and L itself (a function of ``max_bound`` only; L =
   65,536 by default, 1,024 for matching: issue 36 measured that a top of
   100 undercounted tables with ~93 or 1,000 items per person by 31 % and
   91 %) from the
   Generalized Exponential Mechanism's normalised scores (Algorithm 3) of
   q_l = c_l − m_l with sensitivities Δ_l = l, each candidate with its own
   GEM threshold (t = (4/ε')·ln 20 for 1, 4, 16, 64 as in issue 25, a
   failure share 4 times smaller for each further candidate, so candidates
   far above the data's scale keep a small total chance; public shifts of
   the utilities, so any value keeps the choice DP), where m_l is the
   (1−β) upper quantile of the count noise for bound l (a public constant).
   Two changes from the paper, each keeping ε'/2-DP: the pairwise
   denominator is max(l, l') instead of l + l' (every c_l moves by 0..l in
   the same direction when a person is added, so q_l − q_l' moves by at most
   max(l, l') and each normalised score by at most 1), and the scores are
   sampled by permute-and-flip instead of the exponential mechanism (ε'/2-DP
   on sensitivity-1 scores, never less likely to pick the best). The
   report's ``parameters`` state the candidates (``bound_candidates``) and
   ``selection_beta``. The paper uses every l = 1..L with GEM's β = β and
   the exponential mechanism; issue 25 measured the grid and these changes
   as better (benchmarks/README.md), issue 36 the top and the β
   (benchmarks/distinct_count_grid_2026-11-29.md). When l̂ is L, the
   largest candidate, the report says the bound may cap the estimate
   (``bound_may_cap``; l̂ is released, so saying so is free).
3. ε'/2 — discrete Laplace mechanism: X ~ DLap(scale 2l̂/ε'), so the count
   c_l̂ (sensitivity l̂) gets ε'/2-DP. Released: ``estimate`` = max(0, c_l̂ + X) and
   ``lower_bound`` = max(0, c_l̂ + X − m_l̂) (post-processing of one draw).

Per group (issue 24: ``group_by=``, ``groups=`` the public keys or keys
released by the plan's key step, ``max_groups=`` m), ONE body: an ungrouped
run is the one-key grouped run (the edge table's constant group, m = 1), so
steps 0-3 are the per-group release with one group. The template restricts
the edge table to the keys (:mod:`dp_spark.releases.groups`); the greedy caps
every person to m groups inside its kernel and runs one greedy per group
(:func:`dp_spark.stages.distinct.grouped_greedy_counts`: a person moves every
c_{g,l} by 0..l, one way, in ≤ m groups); every group runs steps 2-3 at ε'/m,
or under ``noise="gaussian"`` (ρ-zCDP, ρ = ε²/2, asked for by name) with the
exponential-mechanism choice and discrete Gaussian counts
(:func:`dp_spark.mechanisms.distinct_count.cap_bound.release_groups`). With
``max_groups=None`` the cap m and one bound l for all groups are chosen
jointly at the ``max_groups`` step (ε/4), then every group's count at them
(:mod:`dp_spark.mechanisms.distinct_count.cap_bound`). Each group's lower
bound holds with probability >= 1 − β, all G together with >= 1 − G·β.

Lower-bound property: P[X > m_l̂] <= β, so with probability >= 1 − β,
lower_bound <= c_l̂ <= DC(D; l̂) <= DC(D).

Difference from the paper: the paper adds continuous Laplace noise; the count
is an integer, so we add exact discrete Laplace noise (no floating-point
attack) and use its exact quantile as the margin m_l (the paper's
(2l/ε)·ln(1/(2β)) is the continuous analogue). The reference code subtracts
half that margin with the total ε; we subtract the full one, which is what
makes the 1 − β statement true.
"""

from __future__ import annotations

import logging
from functools import partial

import numpy as np
from pyspark.sql import types as T

from dp_spark.io import spark_frame
from dp_spark.mechanisms.distinct_count import choose_shards, matching_fits, noisy_size, release_from_counts
from dp_spark.mechanisms.distinct_count.cap_bound import (JOINT_SAMPLERS, budget_of, cap_candidates, cap_choice_record,
                                                          choose_cap_and_bound, group_records,
                                                          joint_count_records, joint_margins, joint_shares,
                                                          release_at_bound, release_groups)
from dp_spark.noise.kinds import epsilon_for
from dp_spark.plan import Plan, release_api
from dp_spark.plans.distinct_count import person_sample, plan as make_plan
from dp_spark.releases.groups import groups_frame, report_groups
from dp_spark.releases.template import run_release
from dp_spark.report import Release
from dp_spark.settings.distinct_count import (
    SELECTION_BETA,
    bound_candidates,
    candidate_betas,
    cap_note,
)
from dp_spark.stages import edges as edge_stage
from dp_spark.stages.distinct import (bounded_counts_of_edges, count_pairs, greedy_counts, grouped_greedy_counts,
                                      matching_counts, matching_pairs)
from dp_spark.stages.edges import GROUP, person_ids

log = logging.getLogger(__name__)

#: ``parameters["max_groups_chosen"]`` of a release whose cap and bound were chosen jointly.
JOINT_CHOSEN = ("privately, jointly with one bound l for all groups (GEM over the summed per-group counts minus "
                "their noise margins, sensitivity m·l)")


def greedy_shards(person_df, shards: int | None, epsilon: float, rng) -> tuple[int, dict, list]:
    """(shards, the released parameters saying how they were chosen, the
    noise records of the choice): ``shards`` when given (spending nothing),
    else step 0 of the module doc at ``epsilon`` (pure ε-DP): the noisy
    count of the persons of ``person_df`` in a fixed 1-in-r hash sample
    (r = :func:`~dp_spark.plans.distinct_count.person_sample` (ε)),
    one shard per 200,000 persons. Its own Spark job, before the greedy's:
    the shard count fixes the greedy's layout (issue 26 measured folding it
    into the greedy's pass as worse: benchmarks/README.md)."""
    if shards is not None:
        return int(shards), {"shards_chosen": "by the caller", "shards": int(shards)}, []
    log.info("distinct-count: choosing the number of greedy shards from a noisy sampled person count")
    one_in = person_sample(epsilon)
    sampled, drawn = noisy_size(edge_stage.count_sampled_persons(person_df, one_in), 1, epsilon, rng,
                                target=f"the number of persons in a 1-in-{one_in} hash sample")
    chosen = int(choose_shards(sampled * one_in))
    how = {"shards_chosen": f"automatically (noisy person count of a 1-in-{one_in} hash sample)",
           "shards": chosen}
    return chosen, how, [drawn.at("shards")]


def _matching_or_greedy(edge_df, max_bound, shards, edge_limit, epsilon_check, rng) -> tuple[np.ndarray, dict, list]:
    """Matching with its private size check (step 0' of the module doc).
    Returns NON-PRIVATE counts, the released parameters of the choice and
    the record of the size check's draw."""
    pairs = matching_pairs(edge_df, max_bound).persist()
    try:
        noisy_pairs, drawn = noisy_size(count_pairs(pairs), max_bound, epsilon_check, rng,
                                        target="the number of (person, item) pairs after truncation")
        noise = [drawn.at("matching")]
        if matching_fits(noisy_pairs, drawn.scale, edge_limit):  # the check's own noise scale
            log.info("distinct-count: bounded counts (the method used is in the release)")  # a noisy choice
            counts = matching_counts(edge_df, max_bound, None, pairs=pairs, bounds=bound_candidates(max_bound))
            return counts, {"counted_by": "exact matching", "shards": None}, noise
    finally:
        pairs.unpersist()
    chosen = shards or choose_shards(max(noisy_pairs, 0) // max_bound)
    log.info("distinct-count: bounded counts (the method used is in the release)")  # a noisy choice
    counts = greedy_counts(edge_df, max_bound, chosen)
    return counts, {"counted_by": "greedy (noisy pair count above edge_limit)", "shards": int(chosen)}, noise


def _caps(plan: Plan) -> tuple[int, list | tuple | None]:
    """(the number of groups counted, the group caps counted at) of a run:
    the keys (one virtual group, discarded, when a private key step
    released none: the same Spark pass); every cap candidate when m is
    chosen with the bound, else m (None: no cap, when m >= the keys)."""
    keys, m = plan.params.keys_and_cap()
    n_keys = max(len(keys), 1)
    return n_keys, cap_candidates(n_keys) if m is None else (None if m >= n_keys else (m,))


def _bounded_counts(edge_df, plan: Plan, epsilon_pre: float, rng, persons=None) -> tuple[np.ndarray, dict, list]:
    """NON-PRIVATE ``at[k, g, j]``: group g's count at the k-th cap of
    :func:`_caps` (k = 0 alone without caps) and bound ``cands[j]``; the
    released parameters of how they were computed (every data-dependent
    choice here is noisy and charged, at ``epsilon_pre``) and the records of
    those choices' draws. ``persons``: the frame whose sampled persons the
    automatic shard count counts (default: the edge table's). Matching and
    sampling count one group (the plan refuses them per group)."""
    p = plan.params
    cands = bound_candidates(p.max_bound)
    at_cands = np.asarray(cands) - 1
    if p.method == "matching":
        counts, how, noise = _matching_or_greedy(edge_df, p.max_bound, p.shards, p.edge_limit, epsilon_pre, rng)
        return counts[at_cands][None, None, :], how, noise
    how, noise, shards = {}, [], p.shards
    if p.method == "greedy":
        shards, how, noise = greedy_shards(edge_df if persons is None else persons, shards, epsilon_pre, rng)
    # the method only: never the number of keys, which a private key step may have drawn
    log.info("distinct-count: computing bounded counts (method %s)", p.method)
    if p.method == "sampling":
        counts = bounded_counts_of_edges(edge_df, p.max_bound, "sampling", salt=int(rng.integers(0, 2**62)))
        return counts[at_cands][None, None, :], how, noise
    # no key (a private key step released none): the same Spark pass on the then empty table (one virtual
    # group, discarded), so the Spark jobs before the record do not show whether any key was released
    n_keys, caps = _caps(plan)
    counted = grouped_greedy_counts(edge_df, p.max_bound, shards, n_keys, cands, caps=caps)
    return (counted[None] if caps is None else counted), how, noise


@release_api(make_plan)  # the signature: Params' API fields, budget=, ledger= (one declaration)
def distinct_count(df, plan: Plan, budget, ledger) -> Release:
    """Release the number of distinct items in ``df`` under person-level ε-DP.

    A person is everything that shares one ``person_col`` value; neighbouring
    tables differ by adding or removing one person with all their rows. The
    release spends exactly ``epsilon`` (ε/2 choosing the per-person bound
    among 1, 4, 16, … below ``max_bound`` and ``max_bound`` itself (default
    65,536; 1,024 for ``matching``) with the Generalized Exponential
    Mechanism's scores sampled by permute-and-flip, ε/2 for discrete Laplace noise on
    the bounded count, less ε/100 for a noisy size step when one is needed:
    see the module docstring) and states a (1 − ``beta``) lower bound.

    ``method``: ``greedy`` (default; Knop–Steinke Algorithm 2, sharded on
    Spark), ``matching`` (exact Algorithm 1 on each person's first
    ``max_bound`` items, run when a noisy pair count (ε/100) says the edge
    list fits under ``edge_limit``, else greedy) or ``sampling`` (baseline).
    ``shards``: greedy (and matching's greedy fallback); None (default)
    chooses one shard per 200,000 persons from a noisy count, spending ε/100
    (matching reuses its noisy pair count).
    ``budget``: an optional shared :class:`~dp_spark.PrivacyFilter` (or
    ``ledger=``, a persisted one); ε is spent from it before any data is
    read, and the release is refused if it would overspend.
    ``seed``: for tests and demos only; a seeded release is marked not for
    publication. Rows with a null person or item are dropped.

    Returns a :class:`~dp_spark.Release` whose ``result`` holds
    ``estimate``, ``lower_bound``, ``bound``, ``bound_may_cap`` (l̂ is the
    largest candidate: persons with more items count at most l̂ of them;
    raise ``max_bound``), ``confidence``, ``method``, ``noise_scale`` and
    ``noise_std``.

    Per group (issue 24; the module doc, "Per group"):
    ``group_by`` (a column), ``groups`` (the public keys: a list, a
    one-column Spark DataFrame or a file path; at most 1,024; every key is
    released, also one without rows) and ``max_groups`` m (each person keeps
    the rows of at most m of their groups; each group spends ε/m, m = 1 the
    full ε). ``release.groups`` is a Spark DataFrame: the group column,
    ``estimate``, ``lower_bound``, ``bound`` and ``error``; the report's
    ``result["groups"]`` holds the first 100 groups. ``method="greedy"``
    only. ``max_groups=None`` chooses m and one bound l for all groups
    jointly (ε/4, GEM over the summed counts minus their noise margins: a
    step of ``budget_split``; the counts get the rest); ``groups=None``: the keys
    chosen privately (a set-union on the group column; the release is then
    (ε, δ)-DP). ``noise``: per group, ``"laplace"`` (the default: pure
    ε-DP, ε/m per group) or ``"gaussian"`` (asked for by name: ρ-zCDP with
    ρ = ε²/2, the zCDP level pure ε-DP implies, a weaker guarantee;
    discrete Gaussian noise with √m scaling); an ungrouped release is pure
    ε-DP (``"laplace"``).
    """
    return run(plan, df, budget=budget, ledger=ledger)


def run(plan: Plan, df, *, budget=None, ledger=None, before_spend=None) -> Release:
    """The release on its plan (built once: by :func:`distinct_count` or the
    CLI), through the one release flow (:func:`dp_spark.releases.template.run_release`)."""
    df = spark_frame(df, "df")  # as run_release does (the same object): the shard count reads its person column
    # ungrouped, the automatic shard count reads the input's person column alone (faster than the edge table)
    source = df if plan.params.group_by is None else None
    return run_release(plan, df, partial(_body, source=source), budget=budget, ledger=ledger,
                       before_spend=before_spend, caps_in_stage=True)  # the greedy caps persons inside its kernel


def _body(plan: Plan, edge_df, rng, local, source=None) -> Release:
    """Stage, mechanism and report, after the plan was spent (the module
    doc): every run is a grouped one, an ungrouped run its one key at m = 1.
    ``source``: the input, whose person column alone the shard count reads."""
    p, split = plan.params, plan.split
    persons = None if source is None else person_ids(source, p.person_col)  # after the template's schema checks
    keys, m = p.keys_and_cap()
    cands, (_, caps) = bound_candidates(p.max_bound), _caps(plan)
    pre = next((split.cost(s) for s in ("shards", "matching") if s in split), None)  # at most one of them
    at, how, noise = _bounded_counts(edge_df, plan, epsilon_for(pre), rng, persons)  # NON-PRIVATE
    kind, count = budget_of(split.cost("count"))
    joint = m is None
    if not keys:  # nothing to choose, nothing drawn
        released, per_group = [], {}
    elif joint:  # (m̂, l̂) by GEM at the max_groups step, then every group's count at them
        epsilon = epsilon_for(split.cost("max_groups"), bounded_range=JOINT_SAMPLERS[kind] == "exponential")
        k, j = choose_cap_and_bound(at, caps, cands, joint_margins(caps, cands, p.beta, kind, count), epsilon, rng,
                                    sampler=JOINT_SAMPLERS[kind])
        m, bound = caps[k], cands[j]
        noise.append(cap_choice_record(caps, cands, epsilon, JOINT_SAMPLERS[kind]))
        released = release_at_bound(at[k, :, j], m, bound, p.beta, rng, noise=kind, count=count)
        per_group = {"max_groups": m, "max_groups_chosen": JOINT_CHOSEN, "max_groups_candidates": caps,
                     "bound": bound, "bound_chosen": "jointly with the group cap (one bound for all groups)",
                     **joint_shares(m, kind, count)}
    else:
        released, per_group = release_groups(at[0], cands, p.max_bound, m, p.beta, rng, noise=kind,
                                             select=budget_of(split.cost("select"))[1], count=count,
                                             pure=release_from_counts)  # looked up here: audits wrap it
    del at  # non-private; nothing below may use it
    chosen = {"bound_candidates": cands, "selection_beta": SELECTION_BETA,
              "selection_candidate_betas": candidate_betas(len(cands))}
    if p.group_by is None:  # the report's shape only: the one group's values, not a groups table
        return _report(plan, released[0], {**how, **chosen}, local, [*noise, *released[0]["noise"]])
    how = {**how, **per_group, **chosen} if joint else {**how, **chosen, **per_group}
    records = (joint_count_records if joint else group_records)(released, kind, m)
    return _groups_report(plan, keys, m, released, how, local, edge_df, [*noise, *records], joint)


def _report(plan: Plan, released, how, local, noise) -> Release:
    """The Release from released values, public parameters and the records
    of the privacy draws (``noise``: its error statements are made from them)."""
    beta, person_col, item_col = plan.params.beta, plan.params.person_col, plan.params.item_col
    confidence = 1.0 - beta
    bound = released["bound"]
    count_noise = next(r for r in noise if r.step == "count")
    values = {
        "estimate": released["estimate"],
        "lower_bound": released["lower_bound"],
        "bound": bound,
        "bound_may_cap": bool(released["bound_is_top"]),
        "method": plan.params.method,
        "confidence": confidence,
        "noise_scale": released["noise_scale"],
        "noise_std": released["noise_std"],
    }
    errors = {
        "estimate": _count_error("distinct items", count_noise, bound, beta),
        "lower_bound": (
            f"the true number of distinct items is at least this with probability "
            f">= {confidence:.0%}"
        ),
    }
    max_bound = plan.params.max_bound
    errors["bound"] = (  # always stated (the report's shape never depends on l̂)
        f"the largest bound considered (max_bound = {max_bound:,}) was chosen: {cap_note(bound, max_bound)}"
        if released["bound_is_top"] else
        f"chosen privately among {', '.join(f'{c:,}' for c in how['bound_candidates'])}; not the largest, "
        "so max_bound did not cap it")
    statement = (
        f"Person-level {plan.params.epsilon:g}-differential privacy: the output would be almost "
        f"as likely if any one person (every row with the same {person_col}) were "
        f"removed or added. With probability at least {confidence:.0%} the table "
        f"holds at least {released['lower_bound']:,} distinct {item_col} values."
    )
    return _release(plan, local, how, noise, values=values, errors=errors, statement=statement)


def _count_error(what: str, count, bound: int, beta: float) -> str:
    """A count's error statement from the record of its noise (``count``):
    the kind's one tail at β (the JSON and the HTML state the same)."""
    return (f"{what} after keeping at most {bound} items per person (never more than the true count), plus "
            f"{count.describe()}; within ±{count.half_width(beta):,.0f} of that count with probability >= "
            f"{1.0 - beta:.0%}")


def _release(plan: Plan, local, how, noise, **report) -> Release:
    return Release.from_plan(plan, seeded=plan.params.seed is not None, parameters=how, noise=noise,
                             budget_split=[{"step": label, **c.to_dict()} for label, c in local.ledger], **report)


def _groups_report(plan: Plan, keys, m, released, how, local, edge_df, noise, joint: bool) -> Release:
    """The grouped Release: a row per key (``release.groups``, the report's
    first groups), from released values, public parameters and the records."""
    p = plan.params
    beta = p.beta
    confidence = 1.0 - beta
    simultaneous = max(0.0, 1.0 - len(keys) * beta)
    gaussian = "rho" in plan.parameters
    rows = []
    for key, r in zip(keys, released):
        # r["noise"][-1]: the count's record (after the per-group selection's, if any)
        error = (f"{_count_error('distinct items of this group', r['noise'][-1], r['bound'], beta)}; the lower bound "
                 f"holds with probability >= {confidence:.0%}")
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
                   f"items per person, plus that group's {'discrete Gaussian' if gaussian else 'discrete Laplace'} "
                   "noise (each row of release.groups / --groups-output states its own interval)"),
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
    frame = groups_frame(edge_df.sparkSession, plan, edge_df.schema[GROUP].dataType, rows,
                         [("estimate", T.LongType()), ("lower_bound", T.LongType()), ("bound", T.IntegerType())])
    return _release(plan, local, how, noise, values=values, errors=errors, statement=statement,
                    artifacts={"groups": frame})
