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

0. Only for ``method="greedy"`` with ``shards=None``: ε/100 of discrete
   Laplace noise on the number of persons in a fixed 1-in-r hash sample of
   the person ids (membership is a public function of the id, so
   sensitivity 1), times r, picks one greedy shard per 200,000 persons. A
   shard count depending on the true size would break the sensitivity
   argument; a noisy one keeps it (each fixed shard count gives sensitivity
   l, and the choice is DP). r = ``person_sample(ε/100)`` keeps the noise
   within 6,400 persons. The rest, ε' = 0.99·ε, is split as below (with
   explicit shards ε' = ε).
0'. Only for ``method="matching"``: ε/100 on the private size check (exact
   Algorithm 1 needs the edge list on the driver). Each person is truncated
   to its first P = ``max_bound`` distinct items in the public order
   (xxhash64(item), item), a per-person transformation, so DC(truncated D; l)
   keeps sensitivity l and stays <= DC(D; l); the number N of truncated pairs
   (sensitivity P) gets discrete Laplace noise of scale P/(ε/100). Matching
   runs iff Ñ + m <= ``edge_limit``, m the (1 − 10⁻⁶) quantile of that
   noise, else the sharded greedy (same sensitivity l). The choice is
   post-processing of Ñ, so no refusal depends on the data; past
   P[N > edge_limit | matching] <= 10⁻⁶ the limit only sizes memory.
1. Spark stage (no noise): c_l = DC(D; l) or its greedy / sampling lower
   bound for l = 1..L (L = ``max_bound``); each c_l has sensitivity l. The
   greedy's partition layout changes no count.
2. ε'/2: l̂ is chosen among the public candidates 1, 4, 16, 64, … below L
   and L (:mod:`dp_spark.settings.distinct_count`) by the Generalized
   Exponential Mechanism's normalised scores (Algorithm 3) of
   q_l = c_l − m_l, sensitivities Δ_l = l, m_l the (1−β) upper quantile of
   the count noise for bound l (public). Each candidate's own GEM threshold
   is a public shift of its utility, so the choice stays DP. Two changes
   from the paper, each keeping ε'/2-DP: the pairwise denominator is
   max(l, l') instead of l + l' (every c_l moves by 0..l in the same
   direction when a person is added, so q_l − q_l' moves by at most
   max(l, l') and each normalised score by at most 1), and the scores are
   sampled by permute-and-flip instead of the exponential mechanism
   (ε'/2-DP on sensitivity-1 scores, never less likely to pick the best).
   The grid and these changes were chosen by measurement: see
   benchmarks/results/2026-11-26-distinct-count-bound-selection.md and
   benchmarks/results/2026-11-29-distinct-count-grid.md.
   ``bound_may_cap`` says when l̂ is L (l̂ is released, so this is free).
3. ε'/2: discrete Laplace mechanism, X ~ DLap(scale 2l̂/ε'), so c_l̂
   (sensitivity l̂) gets ε'/2-DP. Released: ``estimate`` = max(0, c_l̂ + X)
   and ``lower_bound`` = max(0, c_l̂ + X − m_l̂) (post-processing).

Per group (``group_by=``, ``groups=``, ``max_groups=`` m), ONE body: an
ungrouped run is the one-key run (m = 1). The greedy caps every person to m
groups inside its kernel (:func:`dp_spark.stages.distinct.grouped_greedy_counts`:
a person moves every c_{g,l} by 0..l, one way, in ≤ m groups); every group
runs steps 2-3 at ε'/m, or under ``noise="gaussian"`` (ρ-zCDP, ρ = ε²/2) with
the exponential-mechanism choice and discrete Gaussian counts. With
``max_groups=None``, m and one bound l for all groups are chosen jointly
(ε/4; :mod:`dp_spark.mechanisms.distinct_count.cap_bound`). Each group's
lower bound holds with probability >= 1 − β, all G with >= 1 − G·β. The
groups' mechanisms run vectorised over numpy arrays on the driver (up to
``Params.MAX_KEYS`` = 100,000 keys); ``release.groups`` is built from Arrow.

Lower-bound property: P[X > m_l̂] <= β, so with probability >= 1 − β,
lower_bound <= c_l̂ <= DC(D; l̂) <= DC(D).

Difference from the paper: it adds continuous Laplace noise; the count is an
integer, so we add exact discrete Laplace noise (no floating-point attack)
and use its exact quantile as the margin m_l (the paper's (2l/ε)·ln(1/(2β))
is the continuous analogue). The reference code subtracts half that margin
with the total ε; we subtract the full one, which makes the 1 − β statement
true.
"""

from __future__ import annotations

import logging
from functools import partial

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark.group_sizes import size_summary
from dp_spark.io import spark_frame
from dp_spark.mechanisms.distinct_count import choose_shards, matching_fits, noisy_size, release_from_counts
from dp_spark.accounting.exact import ratio_down
from dp_spark.keys import GroupKeys
from dp_spark.mechanisms.distinct_count.cap_bound import (JOINT_SAMPLERS, GroupRelease, budget_of, cap_candidates,
                                                          cap_choice_record, choose_cap_and_bound, counts_at_bound,
                                                          joint_margins, joint_shares, release_groups_batch,
                                                          scored_caps)
from dp_spark.noise.kinds import epsilon_for
from dp_spark.plan import REPORT_GROUPS, Plan, release_api
from dp_spark.plans.distinct_count import person_sample, plan as make_plan
from dp_spark.releases.groups import report_groups
from dp_spark.releases.template import run_release
from dp_spark.report import Release
from dp_spark.settings.distinct_count import (
    SELECTION_BETA,
    bound_candidates,
    candidate_betas,
    cap_note,
)
from dp_spark.stages import edges as edge_stage
from dp_spark.stages.arrow_frames import arrow_frame
from dp_spark.stages.distinct import (bounded_counts_of_edges, count_pairs, greedy_counts, grouped_greedy_counts,
                                      matching_counts, matching_pairs)
from dp_spark.stages.edges import GROUP, person_ids

log = logging.getLogger(__name__)

#: ``parameters["max_groups_chosen"]`` of a release whose cap and bound were chosen jointly.
JOINT_CHOSEN = ("privately, jointly with one bound l for all groups (GEM over the summed per-group counts minus "
                "their noise margins, sensitivity m·l)")


def greedy_shards(person_df, shards: int | None, epsilon: float, rng) -> tuple[int, dict, list]:
    """(shards, the released parameters of the choice, its noise records):
    ``shards`` when given, else step 0 of the module docstring (ε-DP at
    ``epsilon``), its own Spark job (chosen by measurement:
    benchmarks/results/2026-11-23-speed-all-1824.md)."""
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
    """Matching with its private size check (step 0'): NON-PRIVATE counts,
    the released parameters of the choice and the size check's noise record."""
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
    """(groups counted: one virtual group when no key was released; caps
    counted at: every candidate when m is chosen with the bound, else (m,), or
    None when m >= the keys). "The keys" is their number when public, the
    release's limit when a private key step released them, so which Spark pass
    runs, and at which caps, does not show how many it released: capping at m
    >= the keys keeps every row (the same counts), and the joint choice scores
    the candidates up to the released number from the counts at the limit's
    (:func:`~dp_spark.mechanisms.distinct_count.cap_bound.scored_caps`)."""
    keys, m = plan.params.keys_and_cap()
    n_keys = max(len(keys), 1)
    public = type(plan.params).MAX_KEYS if "group_keys" in plan.split else n_keys
    return n_keys, cap_candidates(public) if m is None else (None if m >= public else (m,))


def _bounded_counts(edge_df, plan: Plan, epsilon_pre: float, rng, persons=None) -> tuple[np.ndarray, dict, list]:
    """NON-PRIVATE ``at[k, g, j]`` (group g at the k-th cap of :func:`_caps` and
    bound ``cands[j]``), the released parameters and noise records of the noisy
    choices at ``epsilon_pre``. Matching and sampling count one group."""
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
    # no key released: the same Spark pass (one virtual group, discarded), not shown before the record
    n_keys, caps = _caps(plan)
    counted = grouped_greedy_counts(edge_df, p.max_bound, shards, n_keys, cands, caps=caps)
    return (counted[None] if caps is None else counted), how, noise


@release_api(make_plan)  # the signature: Params' API fields, budget=, ledger= (one declaration)
def distinct_count(df, plan: Plan, budget, ledger) -> Release:
    """Release the number of distinct items in ``df`` under person-level ε-DP.

    A person is everything sharing one ``person_col`` value; neighbouring tables
    differ by one person with all their rows. Spends exactly ``epsilon``: ε/2
    choosing the per-person bound among 1, 4, 16, … below ``max_bound`` and
    ``max_bound`` itself (default 65,536; 1,024 for ``matching``), ε/2 on
    discrete Laplace noise on the bounded count, less ε/100 for a noisy size
    step when needed (module docstring); states a (1 − ``beta``) lower bound.

    ``method``: ``greedy`` (default; Knop–Steinke Algorithm 2, sharded on
    Spark), ``matching`` (exact Algorithm 1 on each person's first ``max_bound``
    items when a noisy pair count (ε/100) fits under ``edge_limit``, else
    greedy) or ``sampling`` (baseline). ``shards``: for greedy; None chooses one
    per 200,000 persons from a noisy count (ε/100; matching reuses its pair
    count). ``budget``: an optional shared :class:`~dp_spark.PrivacyFilter` (or
    ``ledger=``), spent before any data is read; refused if it would overspend.
    ``seed``: tests and demos only (marked not for publication). Rows with a
    null person or item are dropped.

    Returns a :class:`~dp_spark.Release`; ``result`` holds ``estimate``,
    ``lower_bound``, ``bound``, ``bound_may_cap`` (l̂ is the largest candidate:
    raise ``max_bound``), ``confidence``, ``method``, ``noise_scale`` and
    ``noise_std``.

    Per group (greedy only; module docstring): ``group_by``, ``groups``
    (public keys: a list, a one-column Spark DataFrame or a file path; at most
    100,000; None: chosen privately, the release is then (ε, δ)-DP) and
    ``max_groups`` m (each group at ε/m). ``release.groups``: the group
    column, ``estimate``, ``lower_bound``, ``bound``, ``error``;
    ``result["groups"]`` holds the first 100. ``noise``: ``"laplace"`` (default, ε-DP) or ``"gaussian"`` (ρ-zCDP
    with ρ = ε²/2, a weaker guarantee, √m scaling).
    """
    return run(plan, df, budget=budget, ledger=ledger)


def run(plan: Plan, df, *, budget=None, ledger=None, before_spend=None) -> Release:
    """The release on its plan through :func:`~dp_spark.releases.template.run_release`."""
    df = spark_frame(df, "df")  # as run_release does (the same object): the shard count reads its person column
    # ungrouped, the automatic shard count reads the input's person column alone (faster than the edge table)
    source = df if plan.params.group_by is None else None
    return run_release(plan, df, partial(_body, source=source), budget=budget, ledger=ledger,
                       before_spend=before_spend, caps_in_stage=True)  # the greedy caps persons inside its kernel


def _body(plan: Plan, edge_df, rng, local, source=None) -> Release:
    """Stage, mechanism and report; an ungrouped run is its one key at m = 1."""
    p, split = plan.params, plan.split
    persons = None if source is None else person_ids(source, p.person_col)  # after the template's schema checks
    keys, m = p.keys_and_cap()
    cands, (_, caps) = bound_candidates(p.max_bound), _caps(plan)
    pre = next((split.cost(s) for s in ("shards", "matching") if s in split), None)  # at most one of them
    at, how, noise = _bounded_counts(edge_df, plan, epsilon_for(pre), rng, persons)  # NON-PRIVATE
    kind, count = budget_of(split.cost("count"))
    joint = m is None
    chosen = {"bound_candidates": cands, "selection_beta": SELECTION_BETA,
              "selection_candidate_betas": candidate_betas(len(cands))}
    if p.group_by is None:  # the one key at m = 1: the ungrouped mechanism (looked up here: audits wrap it)
        one = release_from_counts(at[0][0], ratio_down(budget_of(split.cost("select"))[1] + count, 1), p.beta, rng,
                                  candidates=cands)
        del at  # non-private; nothing below may use it
        return _report(plan, one, {**how, **chosen}, local, [*noise, *one["noise"]])
    released, per_group = None, {}  # no key released: nothing to choose, nothing drawn
    if keys and joint:  # (m̂, l̂) by GEM at the max_groups step, then every group's count at them in one batch
        # the candidates up to the keys' (released) number, read from the counts at the caps counted
        caps, rows = scored_caps(caps, len(keys))
        scored = at if len(rows) == at.shape[0] else at[rows]  # public keys: every counted cap, no copy
        epsilon = epsilon_for(split.cost("max_groups"), bounded_range=JOINT_SAMPLERS[kind] == "exponential")
        k, j = choose_cap_and_bound(scored, caps, cands, joint_margins(caps, cands, p.beta, kind, count), epsilon,
                                    rng, sampler=JOINT_SAMPLERS[kind])
        m, bound = caps[k], cands[j]
        noise.append(cap_choice_record(caps, cands, epsilon, JOINT_SAMPLERS[kind]))
        released = counts_at_bound(scored[k, :, j], m, bound, p.beta, rng, noise=kind, count=count)
        del scored
        per_group = {"max_groups": m, "max_groups_chosen": JOINT_CHOSEN, "max_groups_candidates": caps,
                     "bound": bound, "bound_chosen": "jointly with the group cap (one bound for all groups)",
                     **joint_shares(m, kind, count)}
    elif keys:  # every group's choice and count, vectorised over the groups
        released, per_group = release_groups_batch(at[0], cands, p.max_bound, m, p.beta, rng, noise=kind,
                                                   select=budget_of(split.cost("select"))[1], count=count)
    del at  # non-private; nothing below may use it
    how = {**how, **per_group, **chosen} if joint else {**how, **chosen, **per_group}
    records = () if released is None else released.records
    return _groups_report(plan, keys, m, released, how, local, edge_df, [*noise, *records], joint)


def _report(plan: Plan, released, how, local, noise) -> Release:
    """The ungrouped Release from released values, public parameters and the
    noise records (its error statements are made from them)."""
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
    """A count's error statement from its noise record: the kind's tail at β."""
    return (f"{what} after keeping at most {bound} items per person (never more than the true count), plus "
            f"{count.describe()}; within ±{count.half_width(beta):,.0f} of that count with probability >= "
            f"{1.0 - beta:.0%}")


def _release(plan: Plan, local, how, noise, **report) -> Release:
    return Release.from_plan(plan, seeded=plan.params.seed is not None, parameters=how, noise=noise,
                             budget_split=[{"step": label, **c.to_dict()} for label, c in local.ledger], **report)


def _group_errors(released: GroupRelease, beta: float) -> list[str]:
    """Each candidate's error statement (a group's is that of its released bound): public values,
    the count record of one group's draw at that candidate."""
    return [f"{_count_error('distinct items of this group', r, int(c), beta)}; the lower bound holds with "
            f"probability >= {1.0 - beta:.0%}" for c, r in zip(released.candidates, released.count_records)]


def _groups_frame(spark, plan: Plan, group_type, keys, released: GroupRelease | None):
    """``release.groups`` from Arrow: the keys' array and the released arrays (no Python row per
    group), and each row's ``error`` by a Spark expression from its released bound (one statement per
    candidate bound)."""
    name = plan.params.group_by
    schema = T.StructType([T.StructField(name, group_type, False), T.StructField("estimate", T.LongType(), True),
                           T.StructField("lower_bound", T.LongType(), True),
                           T.StructField("bound", T.IntegerType(), True)])
    key_type = pa.int64() if isinstance(group_type, T.LongType) else pa.string()
    n = 0 if released is None else len(released)
    keys_array = keys.arrow if isinstance(keys, GroupKeys) else pa.array(list(keys), key_type)
    empty = np.zeros(0, dtype=np.int64)
    table = pa.table({name: keys_array.slice(0, n) if n else pa.array([], key_type),
                      "estimate": pa.array(empty if released is None else released.estimate, pa.int64()),
                      "lower_bound": pa.array(empty if released is None else released.lower_bound, pa.int64()),
                      "bound": pa.array(empty if released is None else released.bound, pa.int32())})
    bound = type(plan.params).MAX_KEYS if "group_keys" in plan.split else len(keys)  # public, not how many
    frame = arrow_frame(spark, table, schema, bound=bound)
    texts = [] if released is None else _group_errors(released, plan.params.beta)
    pairs = [x for c, text in zip([] if released is None else released.candidates.tolist(), texts)
             for x in (F.lit(int(c)), F.lit(text))]
    error = F.element_at(F.create_map(*pairs), F.col("bound")) if pairs else F.lit(None).cast("string")
    return frame.withColumn("error", error)


def _groups_report(plan: Plan, keys, m, released: GroupRelease | None, how, local, edge_df, noise,
                   joint: bool) -> Release:
    """The grouped Release (a row per key in ``release.groups``, the first in
    the report) from released values, public parameters and the records."""
    p = plan.params
    beta = p.beta
    confidence = 1.0 - beta
    n_groups = 0 if released is None else len(released)
    simultaneous = max(0.0, 1.0 - len(keys) * beta)
    gaussian = "rho" in plan.parameters
    first = keys.head(REPORT_GROUPS + 1) if isinstance(keys, GroupKeys) else list(keys)[:REPORT_GROUPS + 1]
    rows = [] if released is None else [
        {"group": key, "estimate": int(e), "lower_bound": int(lb), "bound": int(b)}
        for key, e, lb, b in zip(first, released.estimate[:len(first)].tolist(),
                                 released.lower_bound[:len(first)].tolist(), released.bound[:len(first)].tolist())]
    shown, more = report_groups(rows)
    top = how["bound_candidates"][-1]
    at_top = 0 if released is None else int(np.count_nonzero(released.bound == top))  # released bounds only
    values = {
        "method": p.method,
        "confidence": confidence,
        "simultaneous_confidence": simultaneous,
        "groups_released": n_groups,
        "groups_bound_may_cap": at_top,
        "groups": shown,
        "groups_in_report": len(shown),
    }
    # every group's estimate, summarised (post-processing of released values; empty when no key was released)
    values["group_sizes"] = size_summary(keys, np.zeros(0) if released is None else released.estimate,
                                         f"estimated distinct {p.item_col} values")
    errors = {
        "groups": (f"each group's estimate: distinct {p.item_col} values of the group after a per-group bound on "
                   f"items per person, plus that group's {'discrete Gaussian' if gaussian else 'discrete Laplace'} "
                   "noise (each row of release.groups / --groups-output states its own interval)"),
        "lower_bound": (f"each group's true number of distinct items is at least its lower_bound with probability "
                        f">= {confidence:.0%}; all {n_groups:,} groups' at once with probability >= "
                        f"{simultaneous:.0%} (union bound)"),
    }
    errors["group_sizes"] = (f"every {p.group_by} group's estimate (as in release.groups, each with its own "
                             "error): the largest groups and how many groups fall in each range")
    errors["groups_bound_may_cap"] = (  # always stated (the report's shape never depends on the bounds)
        f"{at_top:,} group(s) chose the largest bound considered (max_bound = {p.max_bound:,}): "
        f"{cap_note(top, p.max_bound)}" if at_top else
        f"no group chose the largest bound considered (max_bound = {p.max_bound:,})")
    if more:
        errors["groups_in_report"] = (f"the report holds the first {len(shown):,} of {n_groups:,} groups (the keys' "
                                      "sorted order); every group is in release.groups and --groups-output")
    if gaussian:
        share = "the full ρ (parallel composition)" if m == 1 else f"ρ/{m}"
        guarantee = (f"Person-level {plan.guarantee.rho:g}-zero-concentrated differential privacy (ρ-zCDP, ρ = ε²/2 "
                     f"for ε = {plan.given.epsilon:g}: the zCDP level that {plan.given.epsilon:g}-differential "
                     f"privacy implies; not itself pure ε-DP) over all groups, which implies "
                     f"({plan.equivalent.epsilon:.3g}, {plan.equivalent.delta:g})-differential privacy")
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
        f"at least {confidence:.0%}; all {n_groups:,} together with probability at least {simultaneous:.0%}."
    ) if n_groups else (
        f"{guarantee}: the output would be almost as likely if any one person (every row with the "
        f"same {p.person_col}) were removed or added. No {p.group_by} key was released, so no group's value is."
    )
    frame = _groups_frame(edge_df.sparkSession, plan, edge_df.schema[GROUP].dataType, keys, released)
    return _release(plan, local, how, noise, values=values, errors=errors, statement=statement,
                    artifacts={"groups": frame})
