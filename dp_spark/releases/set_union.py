"""The set-union release (partition selection): which items may be published at all?

``dp_spark.set_union(df, *, epsilon, delta, method=...)``: plan
(:mod:`dp_spark.plans.set_union`), Spark stage
(:mod:`dp_spark.stages.set_union`, kernels in
:mod:`dp_spark.summaries.set_union`), mechanism
(:mod:`dp_spark.mechanisms.set_union`: noise + threshold, handed to the stage).

Gopi, Gulhane, Kulkarni, Shen, Shokouhi, Yekhanin, "Differentially Private
Set Union" (ICML 2020), Algorithm 1 with the update policies Count, Weighted
Laplace / Gaussian (Appendix D) and Policy Laplace / Gaussian (Theorems 3.1,
4.1), and Policy Greedy (Carvalho, Wang, Gondara, AAAI 2022; its proof and
threshold in :mod:`dp_spark.mechanisms.set_union.greedy`), on Spark.
Person-level (ε, δ)-DP (add or remove one person):

1. Spark stage, no noise: each person's distinct items, at most Δ0 chosen by
   a salted hash of the person's own rows (Policy Greedy: the person's most
   frequent, ties by the hash); the weighted histogram under the policy
   (sequential policies run in shards of persons, histograms added).
2. Noise and threshold inside Spark, one generator per public noise bucket (a
   :class:`~dp_spark.noise.rng.StreamRoot` stream: ChaCha20 under the release's key;
   seeded runs: spawned from the seed): release u iff
   H[u] + Z_u > ρ. Laplace policies: Z ~ Lap(1/ε) (count: Lap(Δ0/ε)) on ℓ1
   sensitivity 1 (count: Δ0), so the noisy histogram on the neighbour's
   support is ε-DP, and ρ releases an item only the extra person holds with
   probability ≤ δ in total. Gaussian policies: Gaussian noise for (ε, δ/2)
   on ℓ2 sensitivity 1, ρ with failure probability δ/2. (Lemma A.1 of the paper's supplement:
   conditioning on no new item being released costs δ.) Policy Greedy:
   Lap(1/ε) on ℓ1 sensitivity 1, every kept item a candidate (weight 0
   included), ρ from :func:`~dp_spark.mechanisms.set_union.rho_greedy`.
   What runs is the exact counterpart on integers: discrete Laplace on the
   weight rounded at random onto a grid of 2^-20
   (:mod:`dp_spark.mechanisms.set_union.laplace_grid`), discrete Gaussian on
   the capped weight floored onto a grid of 2^-g, g <= 40, calibrated through
   ρ-zCDP (:mod:`dp_spark.mechanisms.set_union.gaussian_grid`), each with an
   integer threshold.

Released: the set of items (a Spark DataFrame, column ``item``, never
collected) and its size; the noisy weights are never kept.

Trust boundary: the driver and executors running the call see the data;
nothing that leaves the call can reproduce the noise: an unseeded release's
noise key (256 bits from its ChaCha20 generator, :class:`dp_spark.noise.rng.StreamRoot`)
goes to the executors in the task closure only, and a re-run task draws the
same values. The items are evaluated once inside the call (a local
checkpoint), so the returned DataFrame's plan holds neither the salt nor the
key and no action re-runs the noise step. The salt is not a
privacy key: the guarantee holds for every salt.

Differences from the paper: a fixed hash of the person id orders persons in
a shard; a salted hash replaces ``np.random.choice`` for the Δ0 restriction;
additive increments are rounded down to units of 2^-30, an exact integer
histogram (sensitivity and the new-item bound hold exactly); with
``shards`` > 1 the sequential policies run per shard (cutoff Γ/√shards by
default), histograms added in shard order, with the privacy of one shard
for any cutoff (:mod:`dp_spark.summaries.set_union`).
"""

from __future__ import annotations

import logging

from pyspark.sql import functions as F

from dp_spark.group_sizes import size_summary
from dp_spark.mechanisms.set_union import SEQUENTIAL, SetUnionPlan, ThresholdStep, derive_randomness
from dp_spark.mechanisms.set_union import shard_cutoff as cutoff_per_shard
from dp_spark.plan import REPORT_GROUPS, Plan, release_api
from dp_spark.plans.set_union import mechanism_plan, plan as make_plan
from dp_spark.releases.template import run_release
from dp_spark.report import Release
from dp_spark.sparkjobs import spark_job
from dp_spark.stages.group_items import Composite
from dp_spark.stages.set_union import materialize, set_union_items_of_edges

log = logging.getLogger(__name__)

#: Release probability quoted in the error statement.
_LIKELY = 0.95


@release_api(make_plan)  # the signature: Params' API fields, budget=, ledger= (one declaration)
def set_union(df, plan: Plan, budget, ledger) -> Release:
    """Release as many items of ``df`` as possible under person-level (ε, δ)-DP.

    Gopi et al.'s DP Set Union (ICML 2020, Algorithm 1; module docstring): each
    person (rows sharing ``person_col``) keeps at most ``max_items`` (Δ0)
    distinct items; items whose noisy weight clears the threshold are released.

    ``method``: ``count`` (Korolova et al. baseline, Lap(Δ0/ε)),
    ``weighted-laplace``, ``weighted-gaussian``, ``policy-laplace``,
    ``policy-gaussian`` (default), ``policy-greedy`` (Carvalho et al., AAAI
    2022: each person keeps its Δ0 most frequent items and fills them to the
    cutoff in that order, Laplace noise). ``alpha``: the policies' cutoff
    Γ = ρ + α·(noise scale) (paper's default 2). ``shards``: person shards of
    the sequential policies (default 8, fixed, so the output does not depend on
    the cluster; 1 is the paper's single pass); ``shard_cutoff``: ``scaled``
    (Γ/√shards, default) or ``full``, same privacy. ``partitions``: of the noise
    step (performance only). ``budget``: a shared PrivacyFilter (or
    ``ledger=``), spent before any data is read. ``seed``: tests and demos only.
    Rows with a null person or item are dropped.

    Returns a :class:`~dp_spark.Release`: ``release.items`` (column ``item``,
    stored by the executors; every action returns the same set); with
    ``count=True`` (default) ``result["released_count"]``; ``result`` also
    holds ``method``, ``max_items``, ``noise``, ``noise_scale``, ``threshold``
    and, for the sequential policies, ``cutoff``, ``shards`` and
    ``cutoff_per_shard``.

    Per group: ``group_by`` and ``groups`` (public keys, at most 1,000,000) run ONE
    mechanism on the composite key (group, item); Δ0 bounds a person's pairs
    over all groups, so the guarantee is the same (ε, δ), not divided.
    ``max_groups`` m (optional) caps each person to m groups first.
    ``release.groups``: the group column, ``item``, ``error``;
    ``result["groups"]`` the first 100 keys with their released counts.
    """
    return run(plan, df, budget=budget, ledger=ledger)


def run(plan: Plan, df, *, budget=None, ledger=None, before_spend=None) -> Release:
    """The release on its plan through :func:`~dp_spark.releases.template.run_release`."""
    return run_release(plan, df, _body, budget=budget, ledger=ledger, before_spend=before_spend)


def _body(plan: Plan, edge_df, rng, local) -> Release:
    """Stage and mechanism on the composite key (group, item), then the report."""
    numeric = mechanism_plan(plan)
    composite = Composite.of(edge_df, plan.params.groups, private="group_keys" in plan.split,
                             limit=type(plan.params).MAX_KEYS)
    # never the number of keys: with keys chosen privately it is drawn, and not shown before the record
    items = _released_items(composite.edges(edge_df), plan, numeric, rng)
    log.info("set-union: released items materialized")
    per_group = composite.per_group(items) if plan.params.count else None
    values = _values(plan, numeric, int(per_group.sum()) if per_group is not None else None)
    errors = _errors(plan, numeric, values)
    if plan.params.group_by is None:  # the report's shape only: the released items
        return _report(plan, numeric, values, errors, local, artifacts={"items": items})
    return _grouped_report(plan, numeric, composite, items, per_group, values, errors, local)


def _released_items(edge_df, plan: Plan, numeric: SetUnionPlan, rng):
    """The released items, evaluated once and stored (a local checkpoint); the
    salt and noise root go out of scope once the items are stored."""
    sequential = numeric.method in SEQUENTIAL
    shards = plan.parameters.get("shards")
    salt, root = derive_randomness(rng, seeded=plan.params.seed is not None)
    lazy = set_union_items_of_edges(
        edge_df, method=numeric.method, max_items=numeric.max_items,
        salt=salt, threshold=ThresholdStep(numeric, root),
        gamma=cutoff_per_shard(numeric.gamma, shards, plan["shard_cutoff"]) if sequential else None,
        shards=shards, partitions=plan.params.partitions,
    )
    with spark_job("computing and thresholding the set-union histogram"):
        return materialize(lazy)


def _values(plan: Plan, numeric: SetUnionPlan, released_count) -> dict:
    """The report's ``result``: the released set's size and public constants."""
    values: dict = {}
    if released_count is not None:
        values["released_count"] = released_count
    values.update({
        "method": numeric.method,
        "max_items": numeric.max_items,
        "noise": numeric.noise,
        "noise_scale": numeric.scale,
        "threshold": numeric.rho,
    })
    if numeric.method in SEQUENTIAL:
        shards = plan["shards"]
        values["cutoff"] = numeric.gamma
        values["shards"] = int(shards)
        values["cutoff_per_shard"] = cutoff_per_shard(numeric.gamma, shards, plan["shard_cutoff"])
    return values


def _errors(plan: Plan, numeric: SetUnionPlan, values: dict) -> dict:
    likely = numeric.weight_for(_LIKELY)
    item_error = (
        f"{numeric.noise_record.describe()}, then the threshold {numeric.rho:.4g}: "
        f"the released items are a subset of the {plan['item_col']} values in the input (no other "
        f"value can be released); an item held by a single person is released with "
        f"probability at most {numeric.delta:.3g}; an item is released with probability "
        f"{_LIKELY:.0%} once its histogram weight reaches {likely:.4g}"
    )
    if numeric.method in SEQUENTIAL:
        reach = numeric.release_probability(numeric.gamma)
        item_error += (
            f" (an item whose weight reached the cutoff {numeric.gamma:.4g} is released with "
            f"probability {reach:.1%}; each of the {values['shards']} shards stops an item at "
            f"{values['cutoff_per_shard']:.4g})"
        )
    elif numeric.method == "count":
        item_error += " (the weight is the number of persons keeping the item)"
    errors = {
        "items": item_error,
        "threshold": "exact (a constant of the mechanism, from the paper's theorem)",
    }
    if "released_count" in values:
        errors["released_count"] = (
            "exact size of the released set (the set itself is the mechanism's output); "
            "it undercounts the true number of distinct items by design"
        )
    return errors


def _report(plan: Plan, numeric: SetUnionPlan, values: dict, errors: dict, local, artifacts: dict,
            statement: str | None = None) -> Release:
    """The Release from released values and public parameters only."""
    unit = f"one person (every row with the same {plan['person_col']})"
    statement = statement or (
        f"Person-level ({numeric.epsilon:g}, {numeric.delta:.3g})-differential privacy: the released "
        f"set of {plan['item_col']} values would be almost as likely if any {unit} were removed or "
        f"added. Each person contributes at most {numeric.max_items} distinct items; only the "
        "identities of the released items are published, never their weights or counts."
    )
    return Release.from_plan(
        plan, values=values, errors=errors, statement=statement, seeded=plan.params.seed is not None,
        budget_split=[{"step": label, **c.to_dict()} for label, c in local.ledger],
        artifacts=artifacts, noise=(numeric.noise_record,),
    )


def _grouped_report(plan: Plan, numeric: SetUnionPlan, composite: Composite, items, per_group, values: dict,
                    errors: dict, local) -> Release:
    """The grouped Release: the released pairs split by the public keys into
    ``release.groups``, the first ``REPORT_GROUPS`` keys' sizes in the report."""
    p = plan.params
    error = (f"this pair was released by one set union over (group, {p.item_col}) pairs: {errors['items']}; "
             f"the threshold counts persons over all groups (Δ0 = {numeric.max_items} pairs per person)")
    frame = composite.split(items, p.group_by).withColumn("error", F.lit(error))
    n = len(composite.keys)
    shown = [{"group": k, **({"released_count": int(per_group[i])} if per_group is not None else {})}
             for i, k in enumerate(composite.keys.head(REPORT_GROUPS))]
    more = n > len(shown)
    values.update({"groups": shown, "groups_released": n, "groups_in_report": len(shown)})
    if per_group is not None:  # every group's number of released pairs, summarised (post-processing)
        values["group_sizes"] = size_summary(composite.keys, per_group, f"released {p.item_col} values")
        errors["group_sizes"] = (f"every {p.group_by} group's number of released pairs (exact sizes of the "
                                 "released set's parts): the largest groups and how many groups fall in each range")
    errors["groups"] = (f"each public key of {p.group_by} with the number of its ({p.group_by}, {p.item_col}) "
                        "pairs released (exact size of that part of the released set); the pairs are in "
                        "release.groups / --groups-output, each row with its error statement")
    if more:
        errors["groups_in_report"] = (f"the report holds the first {len(shown):,} of {n:,} keys (the keys' "
                                      "sorted order); every released pair is in release.groups and --groups-output")
    m = p.max_groups
    cap = (f" Each person's rows count in at most {m} of their {p.group_by} groups." if m is not None else "")
    whole = plan.guarantee  # the whole release's, the private key step's share included (plan.with_private_keys)
    keys_note = " (the private choice of the keys included)" if "group_keys" in plan.split else ""
    statement = (
        f"Person-level ({whole.epsilon:g}, {whole.delta:.3g})-differential privacy over all groups{keys_note}: the "
        f"released set of ({p.group_by}, {p.item_col}) pairs would be almost as likely if any one person (every "
        f"row with the same {p.person_col}) were removed or added. One set union runs on the pairs: each person "
        f"contributes at most {numeric.max_items} distinct pairs over all groups, so the budget is not split "
        f"between groups.{cap} Only the identities of the released pairs are published, never their weights."
    )
    return _report(plan, numeric, values, errors, local, {"groups": frame}, statement)
