"""The top-k release: which k items have the most distinct persons, in order.

``dp_spark.top_k(df, *, epsilon, k, ...)``: plan (:mod:`dp_spark.plans.top_k`:
every parameter, the guarantee and its split), Spark stage
(:mod:`dp_spark.stages.item_counts`), mechanism (:mod:`dp_spark.mechanisms.top_k`).

Person-level DP; neighbouring tables differ by adding or removing one person
(all of its rows). The Spark stage reduces the table to per-item counts of
distinct persons (each person adds at most 1 to any count, all counts move
the same way) over a public domain (items absent from the data count 0) or,
without one, the k̄+1 largest counts. The driver runs one mechanism
(ALGORITHMS.md sections 3 and 5.1):

==================  =============================================  ==================
method              paper / algorithm                              guarantee
==================  =============================================  ==================
``joint``           Gillenwater et al. ICML 2022, Algorithm 1      ε-DP
                    (joint exponential mechanism, exact sampler)
``pnf-joint``       same paper, joint permute-and-flip             ε-DP
``pnf-peel``        k rounds of permute-and-flip at ε/k            ε-DP
                    (same paper, Algorithm 2)
``cdp-peel``        Durfee & Rogers 2019 one-shot Gumbel top-k,    (ε, δ)-DP
                    CDP accounting (Gillenwater et al. Lemma 4.2)   (ε-DP if δ = 0)
``unknown-domain``  Unknown Domain Gumbel (Durfee & Rogers 2019;   (ε, δ)-DP
                    Rogers 2024 Algorithm 1, Theorem 4)
==================  =============================================  ==================

All but ``unknown-domain`` need a public domain fixed before seeing the data
(whether an item appears in the data can depend on one person). ``auto``
(the default; :mod:`dp_spark.mechanisms.top_k.auto`) is ``unknown-domain``
without a domain; with one it spends the public share
``auto_share(k, ε, δ, d)`` of ε (nothing when public parameters suffice) on
a private choice of the mechanism and runs the chosen one with the rest
(with δ = 0 only a pure mechanism); the budget split does not depend on the
pick, ``result["method"]`` names it.

Per group (``group_by``, public keys ``groups``, cap ``max_groups`` m) the same
body runs; an ungrouped release is the one-key run (constant group, m = 1).
The template restricts the edge table to the keys and caps every person to m
groups (:mod:`dp_spark.releases.groups`, a per-person transformation). With
``max_groups=None``, ε/20 first chooses m by GEM
(:mod:`dp_spark.releases.group_cap`); m is released and the rest runs
conditioned on it. One Spark pass gives each group's counts; one person
moves each (group, item) count by at most 1, all one way, in the ≤ m groups
it keeps. Each group then runs the mechanism at ε'/m (and δ/m for
``cdp-peel`` and ``unknown-domain``), ε' the rest of ε (``auto`` with a
domain: the pure joint mechanism picked from public parameters): basic
composition over a person's m groups, parallel across the others, so
(ε', δ)-DP, and (ε, δ)-DP with the cap's step. The cap's choice (and
ungrouped ``auto``'s) is one draw on the driver.

Where the groups run (up to 100,000 keys, :data:`Params.MAX_KEYS`): on the
executors (:mod:`dp_spark.stages.top_k_groups`): the (group, item) counts
are hash-partitioned by group index and each group's, whole and in a
canonical order (domain order, or count descending then item), goes to
:class:`~dp_spark.mechanisms.top_k.groups.GroupSelection` in one task; only
the released (group index, rank, item, ⊥) rows leave, nothing per group
reaches the driver but the report's first 100 groups (a filter on the
public index) and the released total. An ungrouped run calls the same
selection in group 0 on the driver. Both compositions above need the
groups' draws independent: group g draws only from ``root.stream(g)``
(:class:`dp_spark.noise.rng.StreamRoot`), derived from a per-release root by
the public index g. Unseeded, stream g is ChaCha20 under the release's
256-bit key (drawn from its generator on the driver) from counter g·2⁶⁴:
disjoint blocks of one keystream, so streams are independent, and a re-run
task (a retry, a speculative or zombie attempt) draws the same values; the
key travels in the task closure only, never in a plan, a job description, a
DataFrame column or a log (nothing on the executors logs, and no count
leaves them). The selection is evaluated once: it is
stored by a local checkpoint before the report reads it, and
``release.groups`` reads the stored rows (a lost block fails the next
action rather than drawing again). Seeded (tests only), stream g is the
seed's SeedSequence child g: the output is the same on the driver and the
executors and whatever the partitioning. Which rows exist depends on the
keys and the mechanism's output only: every key has its k items (domain
methods) or its items and ⊥ (unknown-domain), also without rows.

``noise="gaussian"`` (per group, with a domain, by name): ρ-zCDP with
ρ = ε²/2 (a weaker guarantee, stated with its (ε, δ') equivalent): the cap's
exponential mechanism at √(8ρ_cap) is ε-bounded range, so ρ_cap-zCDP (Cesar
& Rogers 2021), each group's bounded-range selection costs ρ'/m
(:mod:`dp_spark.mechanisms.top_k.zcdp`), and ρ_cap + ρ' = ρ by adaptive zCDP
composition (Bun & Steinke 2016). Keys chosen privately are refused (an
(ε, δ) step has no sound ρ-zCDP form).

Only the ordered items are released (no counts), for every public key. The
error statement is a bound E, with probability >= 95%, on
max_i (c_(i) − c_{s_i}) (the paper's ℓ∞ error) from public parameters only;
all G groups at once with probability >= 1 − G·5%. A warning is released
when E exceeds :data:`WARN_FRACTION` of ``persons`` (public) or of auto's
noisy count at rank 1 (already paid for).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, replace
from functools import partial

import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark.accounting import PrivacyFilter
from dp_spark.accounting.exact import ratio_down
from dp_spark.errors import ParameterError
from dp_spark.keys import GroupKeys
from dp_spark.mechanisms.top_k import group_share, unknown_domain_calibration, unknown_domain_threshold
from dp_spark.mechanisms.top_k.auto import AutoChoice, auto_share, choose_mechanism
from dp_spark.mechanisms.top_k.error import CONFIDENCE, selection_noise
from dp_spark.mechanisms.top_k.groups import GroupSelection
from dp_spark.mechanisms.top_k.zcdp import zcdp_selection_noise
from dp_spark.noise.kinds import epsilon_for
from dp_spark.noise.records import NoiseDraw
from dp_spark.noise.rng import StreamRoot
from dp_spark.plan import REPORT_GROUPS, Plan, release_api
from dp_spark.plans.top_k import (DOMAIN_METHODS, MAX_GROUPED_SUMMARY, NAMES, check_grouped_joint_work,
                                 unknown_domain_zcdp)
from dp_spark.plans.top_k import plan as make_plan
from dp_spark.releases.group_cap import CHOSEN, choose_and_cap
from dp_spark.releases.template import run_release
from dp_spark.report import Release
from dp_spark.sparkjobs import spark_job
from dp_spark.stages import item_counts as stage
from dp_spark.stages import top_k_groups as groups_stage
from dp_spark.stages.edges import GROUP, UNGROUPED
from dp_spark.stages.group_items import GROUP_INDEX, join_keys, key_frame
from dp_spark.stages.set_union import materialize

log = logging.getLogger(__name__)

WARN_FRACTION = 0.1  # warn when the error bound exceeds this share of the largest count


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


@release_api(make_plan)  # the signature: Params' API fields, budget=, ledger= (one declaration)
def top_k(df, plan: Plan, budget, ledger) -> Release:
    """Release the k items with the most distinct persons, in rank order.

    Person-level privacy (add or remove one person with all rows): ε-DP for
    ``joint``, ``pnf-joint``, ``pnf-peel``, and ``cdp-peel`` or ``auto`` with
    δ = 0; (ε, δ)-DP for ``cdp-peel`` and ``auto`` with δ > 0 and for
    ``unknown-domain`` (δ/2 for its threshold, δ/2 for the zCDP conversion).
    Algorithms and papers: the module docstring.

    ``method``: ``auto`` (default), ``joint``, ``pnf-joint``, ``pnf-peel``,
    ``cdp-peel`` or ``unknown-domain``. ``domain``: the public possible items
    (list/array/Series, or a Spark DataFrame of public items); data items
    outside it are never released, its items absent from the data count 0.
    ``kbar``: for ``unknown-domain``, how many of the largest counts are
    collected (default max(1000, 2k)). ``persons``: optional public number (or
    upper bound) of persons, only used to judge the error bound. ``budget``: an
    optional shared PrivacyFilter (or ``ledger=``), spent before any data is
    read. ``seed``: tests and demos only. Rows with a null person or item are
    dropped.

    Returns a Release: ``result["items"]`` lists {"rank", "item"} in order
    (fewer than k, with ``bottom`` true, when Unknown Domain Gumbel returns ⊥),
    ``result["method"]`` the mechanism that ran, ``result["released_count"]``;
    ``release.items`` is the (rank, item) Spark DataFrame.

    Per group: ``group_by``, ``groups`` (public keys, at most 100,000) and
    ``max_groups`` m (each group's selection at ε/m; None: m chosen privately).
    ``release.groups``: the group column, ``rank``, ``item``, ``error``;
    ``result["groups"]`` covers the first 100 groups. ``noise="gaussian"``
    (with a domain): ρ-zCDP with ρ = ε²/2, √m scaling.
    """
    return run(plan, df, budget=budget, ledger=ledger)


def run(plan: Plan, df, *, budget=None, ledger=None, before_spend=None, domain=None) -> Release:
    """The release on its plan through :func:`~dp_spark.releases.template.run_release`.
    ``domain``: the public items when the plan only names them (the CLI's ``--domain``)."""
    domain = plan.params.domain if domain is None else domain
    return run_release(plan, df, _body, budget=budget, ledger=ledger, before_spend=before_spend,
                       prepare=partial(_with_domain, domain=domain))


def _with_domain(plan: Plan, edge_df, domain) -> Plan:
    """The plan to spend: with a public domain, its normalised items and size
    (public limits checked here, before anything is spent)."""
    if domain is not None:
        items = stage.normalise_domain(_domain_items(domain, plan.params.item_col), stage.integral_items(edge_df))
        # private keys: rebuilt from the caller's parameters, so the key step is charged once, on the full ε
        source = plan.given if "group_keys" in plan.split else plan.params
        rebuilt = make_plan(replace(source, domain=items, domain_size=len(items)))  # the domain's size limits
        if "group_keys" in plan.parameters:  # a grouped run: the template's count and source of the keys stay stated
            rebuilt = replace(rebuilt, steps=tuple(rebuilt.split),  # (Plan re-derives its split from steps)
                              parameters={**rebuilt.parameters, "group_keys": plan.parameters["group_keys"],
                                          "groups": plan.parameters["groups"]})
        plan = rebuilt
    if plan.params.group_by is not None:
        _grouped_limits(plan.params)
    return plan


def _grouped_limits(p) -> None:
    """A grouped run's public size limits, checked before spending: G·(k̄ + 1) or G·d counts go
    through the per-group mechanisms on the executors (at most MAX_GROUPED_SUMMARY), and the joint
    mechanisms' d·k per group (the plan) and G·d·k in all (at most MAX_GROUPED_JOINT_WORK:
    :func:`~dp_spark.plans.top_k.check_grouped_joint_work`; G known here also for keys read from a
    file or a DataFrame)."""
    # keys chosen privately (groups=None): at most MAX_KEYS keys are kept, a public bound
    n = type(p).MAX_KEYS if p.groups is None else len(p.groups)
    rows, what = ((n * (p.kbar + 1), f"{n:,} groups × (kbar + 1)") if p.domain_size is None
                  else (n * p.domain_size, f"{n:,} groups × {p.domain_size:,} domain items"))
    if rows > MAX_GROUPED_SUMMARY:
        raise ParameterError(f"{what} = {rows:,} counts would go through the per-group mechanisms, above the "
                             f"limit of {MAX_GROUPED_SUMMARY:,}; use fewer groups, a smaller kbar or a smaller "
                             "domain.")
    if p.domain_size is not None:
        check_grouped_joint_work(n, p.domain_size, p.k, p.mechanism, p.groups is None)


def _body(plan: Plan, edge_df, rng, local) -> Release:
    """Stage, mechanism and report of every run: an ungrouped run is the
    one-key run (group 0 of the release's streams) on the driver, a grouped
    run selects in every group on the executors."""
    p = plan.params
    grouped = p.group_by is not None
    keys, m = (p.groups, p.max_groups) if grouped else ((UNGROUPED,), 1)
    cap_noise, how = [], {}
    if m is None:  # logged before the branch below: whether a private key step released a key is not shown
        log.info("top-k: choosing the group cap privately")
    if m is None and not keys:  # a private key step released no key: no cap to choose, nothing drawn
        m = 1
    if m is None:
        # GEM sampled by the exponential mechanism: ε-bounded range, √(8ρ_cap) under zCDP (Cesar & Rogers 2021)
        # the histogram is counted at the key limit when a private key step released the keys (public)
        counted = type(p).MAX_KEYS if "group_keys" in plan.split else None
        m, edge_df, drawn = choose_and_cap(edge_df, len(keys), epsilon_for(plan.split.cost("max_groups"),
                                                                           bounded_range=True), rng, counted)
        cap_noise.append(drawn)
        how = {"max_groups": m, "max_groups_chosen": CHOSEN}
    items = p.domain if p.domain_size is not None else None
    if not grouped:
        return _report(plan, local, _select(plan, edge_df, items, rng), items, edge_df)
    # no key released: the same Spark pass on the empty table, so the jobs do not show it before the record
    selection = _select_groups(plan, edge_df, items, keys, m, StreamRoot.of(rng, seeded=p.seed is not None))
    record = dataclasses.replace(selection.record, target=f"in each of the {len(keys):,} groups: "
                                 f"{selection.record.target}", **({} if keys else {"draws": 0}))
    return _groups_report(plan, keys, m, selection, {**how, **selection.how}, local, edge_df, [*cap_noise, record],
                          items)


@dataclass(frozen=True)
class _Selection:
    """The ungrouped run's released items (rank order) and the public facts its error statement needs."""

    groups: list  # its one group's released items in rank order
    method: str  # the mechanism that ran
    record: NoiseDraw  # the record of the selection
    bottoms: list | None = None  # unknown-domain: ⊥ appended
    choice: AutoChoice | None = None  # auto's choice


@dataclass(frozen=True)
class _GroupsSelection:
    """A grouped run's released items, stored (group_index, rank, _key, bottom), and the public facts
    its report needs."""

    stored: object  # the stored private output (stages.top_k_groups.group_selections, materialized)
    method: str  # the mechanism that ran in every group
    record: NoiseDraw  # the record of one group's selection (at the group's share)
    how: dict  # the per-group share, for the report's parameters
    domain: object = None  # the public domain table (domain positions -> items), or None


def _selection_of(plan: Plan, mechanism: str, m: int, epsilon: float, root: StreamRoot):
    """The per-group selection (:class:`GroupSelection`) of the plan's guarantee at a cap of m."""
    p = plan.params
    if p.gaussian:
        return GroupSelection.zcdp(mechanism, p.k, plan.split.cost("selection").rho, m, root)
    return GroupSelection.laplace(mechanism, p.k, epsilon, p.delta, m, p.kbar, root)


def _select(plan: Plan, edge_df, items, rng) -> _Selection:
    """The ungrouped run: the stage's one collect, auto's choice (if any) from
    a child of ``rng``, then the mechanism on the driver in group 0 of the
    release's streams (:class:`StreamRoot` of ``rng``), as a grouped run's
    group 0 draws."""
    p = plan.params
    k, delta, mechanism = p.k, p.delta, p.mechanism
    if items is None:
        log.info("top-k: collecting the %d largest item counts", p.kbar + 1)
        top = stage.top_item_counts(edge_df, p.kbar)  # NON-PRIVATE
    else:
        log.info("top-k: counting persons per domain item (%d items)", len(items))
        counts = stage.domain_item_counts(edge_df, items)  # NON-PRIVATE
        top = stage.top_of_domain(items, counts, p.kbar) if mechanism == "unknown-domain" else None
    if top is not None:  # unknown-domain: the k̄ largest (ties: item, or domain order) and the (k̄+1)-th
        counts, next_count, items = top.counts, float(top.next_count), top.items
    else:
        next_count = 0.0
    epsilon, choice = plan.split.epsilon("selection"), None
    if mechanism == "auto":
        choice, epsilon = _auto_choice(plan, counts, p.domain_size, rng)
        mechanism = choice.method
    # a private choice is not logged: nothing drawn leaves the process before the release is recorded
    log.info("top-k: selecting with %s", mechanism if choice is None else "the privately chosen mechanism")
    root = StreamRoot.of(rng, seeded=plan.params.seed is not None)  # after auto's child: its draws as before
    picked, bottom = _selection_of(plan, mechanism, 1, epsilon, root)(0, counts, next_count)
    chosen = [items[int(i)] for i in picked]
    del counts, top  # non-private; nothing below may use them
    size = p.kbar if mechanism == "unknown-domain" else p.domain_size
    record = selection_noise(mechanism, k, epsilon, delta, size)
    return _Selection([chosen], mechanism, record, [bottom] if mechanism == "unknown-domain" else None, choice)


def _select_groups(plan: Plan, edge_df, items, keys, m: int, root: StreamRoot) -> _GroupsSelection:
    """A grouped run: every group's mechanism on the executors
    (:func:`dp_spark.stages.top_k_groups.group_selections`), evaluated once and stored."""
    p = plan.params
    mechanism = p.mechanism
    epsilon = None if p.gaussian else plan.split.epsilon("selection")  # the ρ-zCDP form reads ρ
    spark = edge_df.sparkSession
    # public parameters only: never the number of keys, which a private key step draws
    if items is None:
        log.info("top-k: the %d largest item counts in every group, selected on the executors", p.kbar + 1)
        domain = None
    else:
        log.info("top-k: counting persons per domain item (%d items) in every group, selected on the executors",
                 len(items))
        domain = groups_stage.domain_frame(spark, items, _item_type(edge_df))
    selection = _selection_of(plan, mechanism, m, epsilon, root)
    lazy = groups_stage.group_selections(edge_df, len(keys), selection, kbar=p.kbar, domain=domain,
                                         size=None if items is None else len(items), top=not selection.domain)
    with spark_job("selecting the top items of every group"):
        stored = materialize(lazy)  # evaluated once: the plan holds the key until then
    if p.gaussian:
        rho = plan.split.cost("selection").rho
        per = "epsilon_per_round_per_group" if mechanism == "cdp-peel" else "epsilon_per_group"
        return _GroupsSelection(stored, mechanism, zcdp_selection_noise(mechanism, p.k, selection.epsilon, len(items)),
                                {per: selection.epsilon, "rho_per_group": ratio_down(rho, m),
                                 "method_per_group": mechanism}, domain)
    eps_group, delta_group = group_share(epsilon, p.delta, m)
    size = p.kbar if mechanism == "unknown-domain" else len(items)
    record = selection_noise(mechanism, p.k, eps_group, delta_group, size)
    how = {"epsilon_per_group": eps_group, "delta_per_group": delta_group, "method_per_group": mechanism}
    return _GroupsSelection(stored, mechanism, record, how, domain)


def _auto_choice(plan: Plan, counts, size: int, rng) -> tuple[AutoChoice, float]:
    """auto's private choice with the plan's share of ε, and the selection step's ε."""
    k, epsilon, delta = plan.params.k, plan.params.epsilon, plan.params.delta
    share = auto_share(k, epsilon, delta, size)  # the share the plan charged (same public inputs)
    paid = plan.split.epsilon("choice")  # 0.0: the plan has no choice step (share 0)
    # share 0: the choice needs no data (choose_mechanism spends nothing; it refuses share=0 itself)
    choice = choose_mechanism(counts, k, epsilon, delta, rng, **({"share": share} if share > 0 else {}))
    # never more than the plan charged; depends on public parameters only
    if choice.epsilon_choice > paid or choice.method not in DOMAIN_METHODS:  # pragma: no cover
        raise RuntimeError("top-k auto: the choice does not match the plan's budget split (internal error)")
    return choice, plan.split.epsilon("selection")


def _error_texts(selection: _Selection, k, delta, persons) -> tuple[dict, float, str | None]:
    """(errors, the public ℓ∞ bound E, a warning or None); the warning compares
    E with ``persons`` or auto's noisy count at rank 1."""
    method, choice = selection.method, selection.choice
    drawn = selection.record
    bound = drawn.half_width(1.0 - CONFIDENCE)
    errors = {"items": (
        f"with probability >= {CONFIDENCE:.0%}, each released item's true count is within "
        f"{bound:,.1f} of the count at its rank (the i-th released item is held by at most "
        f"{bound:,.1f} fewer persons than the true i-th most common item; {NAMES[method]}: "
        f"{drawn.describe()})")}
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


def _values(selection: _Selection, rows, k, bound, warning, domain_size) -> dict:
    """The released values (the report's ``result``)."""
    values = {"items": rows, "k": k, "released_count": len(rows), "method": selection.method,
              "error_bound": round(bound, 1), "error_warning": warning}
    if selection.choice is not None:
        values["auto_predicted_error"] = {m: selection.choice.predicted.get(m) for m in ("joint", "cdp-peel")}
    if selection.method == "unknown-domain":
        values["bottom"] = bool(selection.bottoms[0])
    if domain_size is not None:
        values["domain_size"] = domain_size
    return values


def _report(plan: Plan, local: PrivacyFilter, selection: _Selection, items, edge_df) -> Release:
    """An ungrouped run's Release, from released values and public parameters only."""
    k, epsilon, delta = plan.params.k, plan.params.epsilon, plan.params.delta
    person_col, item_col = plan.params.person_col, plan.params.item_col
    rows = [{"rank": i + 1, "item": item} for i, item in enumerate(selection.groups[0])]
    errors, bound, warning = _error_texts(selection, k, delta, plan.params.persons)
    if warning is not None and selection.choice is None:
        # public without auto's private choice; with it, the warning is shown only in the recorded release
        log.warning("top-k: %s", warning)
    split = [{"step": label, **cost.to_dict()} for label, cost in local.ledger]
    if selection.method == "unknown-domain":
        eps_item, d_thr, _ = unknown_domain_calibration(epsilon, delta, k)
        threshold = unknown_domain_threshold(eps_item, d_thr, plan.params.kbar)
        errors["bottom"] = (
            f"true when fewer than k items cleared the noisy threshold (about {threshold:,.0f} "
            "persons above the (kbar+1)-th largest count): then only the items that cleared it "
            "are released"
        )
        split[0]["zcdp"] = unknown_domain_zcdp(epsilon, delta, k).to_dict()
    statement = (
        f"Person-level {plan.guarantee.describe()}: the output would be almost as likely if any one "
        f"person (every row with the same {person_col}) were removed or added. Released: the "
        f"{len(rows)} {item_col} values held by the most distinct persons, in order"
        + (", from the public domain" if items is not None else "")
        + f", chosen by {NAMES[selection.method]}"
        + (" (picked by auto)" if selection.choice is not None else "") + "; no counts are released."
    )
    return Release.from_plan(
        plan, values=_values(selection, rows, k, bound, warning, None if items is None else len(items)),
        errors=errors, statement=statement, seeded=plan.params.seed is not None, budget_split=split,
        artifacts={"items": _items_df(edge_df.sparkSession, rows, _item_type(edge_df))},
        noise=(*(() if selection.choice is None else selection.choice.noise), selection.record),
    )


def _item_type(edge_df):
    """The released items' Spark type: the normalised item column's (long or string)."""
    return T.LongType() if stage.integral_items(edge_df) else T.StringType()


def _items_df(spark, rows, item_type):
    """The released (rank, item) rows as a Spark DataFrame."""
    schema = T.StructType([T.StructField("rank", T.IntegerType(), False),
                           T.StructField("item", item_type, False)])
    pdf = pd.DataFrame({"rank": pd.Series([r["rank"] for r in rows], dtype="int32"),
                        "item": pd.Series([r["item"] for r in rows], dtype=object)})
    return spark.createDataFrame(pdf, schema)


def _groups_frame(plan: Plan, keys, selection: _GroupsSelection, edge_df):
    """(group_index, the group column, rank, item, bottom) of the stored selection: the public keys
    and the public domain joined in (post-processing); ``bound`` for the keys' join is public (the
    release's key limit when a private key step released them)."""
    p = plan.params
    spark = edge_df.sparkSession
    frame = selection.stored
    if selection.domain is not None:
        size = p.domain_size
        frame = groups_stage.with_domain(frame, selection.domain.withColumnRenamed(groups_stage.INDEX,
                                                                                groups_stage.KEY),
                                         size, groups_stage.KEY, "left")
    else:
        frame = frame.withColumnRenamed(groups_stage.KEY, "item")
    bound = type(p).MAX_KEYS if "group_keys" in plan.split else len(keys)
    group_type = edge_df.schema[GROUP].dataType
    if not isinstance(keys, GroupKeys):  # a rebuilt plan's keys: the same canonical order
        keys = GroupKeys.of(keys, isinstance(group_type, T.LongType))
    key_df = key_frame(spark, keys, group_type, p.group_by, bound=bound)
    return join_keys(frame, key_df, GROUP_INDEX, bound).select(GROUP_INDEX, p.group_by, "rank", "item", "bottom")


def _groups_report(plan: Plan, keys, m, selection: _GroupsSelection, how, local, edge_df, noise, items) -> Release:
    """A grouped run's Release: ``release.groups`` from the stored selection,
    the report's first REPORT_GROUPS groups (by a public filter on the group
    index) and the released total, from released values and public parameters only."""
    p = plan.params
    n, mechanism = len(keys), selection.method
    record = noise[-1]
    bound = record.half_width(1.0 - CONFIDENCE)
    simultaneous = max(0.0, 1.0 - n * (1.0 - CONFIDENCE))
    within = (f"with probability >= {CONFIDENCE:.0%}, each released item's true count in this group is within "
              f"{bound:,.1f} of the group's count at its rank ({NAMES[mechanism]} at this group's share)")
    bottom_error = "no item of this group cleared Unknown Domain Gumbel's noisy threshold (⊥)"
    joined = _groups_frame(plan, keys, selection, edge_df)
    with spark_job("collecting the first groups' released items"):
        head = joined.where(F.col(GROUP_INDEX) < REPORT_GROUPS).toArrow().to_pylist()  # <= REPORT_GROUPS·k rows
        released = selection.stored.where(F.col("rank").isNotNull()).count()
    head.sort(key=lambda r: (r[GROUP_INDEX], r["rank"] or 0))
    summaries = [{"group": key, "released_count": 0} for key in keys[:REPORT_GROUPS]]
    for row in head:
        summary = summaries[row[GROUP_INDEX]]
        summary["released_count"] += row["rank"] is not None
        if mechanism == "unknown-domain":
            summary["bottom"] = bool(row["bottom"])
    shown, more = summaries, n > len(summaries)
    values = {
        "items": [{"group": r[p.group_by], "rank": r["rank"], "item": r["item"]} for r in head
                  if r["rank"] is not None],
        "k": p.k,
        "released_count": int(released),
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
    error = F.when(F.col("rank").isNull(), F.lit(bottom_error)).otherwise(F.lit(within))
    frame = (joined.orderBy(GROUP_INDEX, "rank")
             .select(p.group_by, "rank", F.col("item").cast(_item_type(edge_df)).alias("item"), error.alias("error")))
    split = [{"step": label, **c.to_dict()} for label, c in local.ledger]
    return Release.from_plan(
        plan, values=values, errors=errors, statement=statement, seeded=p.seed is not None,
        budget_split=split, parameters=how, noise=noise, artifacts={"groups": frame},
    )
