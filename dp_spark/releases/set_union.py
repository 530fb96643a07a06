"""The set-union release (partition selection): which items may be published at all?

``dp_spark.set_union(df, *, epsilon, delta, method=...)``: plan
(:mod:`dp_spark.plans.set_union`), Spark stage
(:mod:`dp_spark.stages.set_union`, histogram kernels from
:mod:`dp_spark.summaries.set_union`), mechanism
(:mod:`dp_spark.mechanisms.set_union`: the noise + threshold step, handed to
the stage as a function).

Gopi, Gulhane, Kulkarni, Shen, Shokouhi, Yekhanin, "Differentially Private
Set Union" (ICML 2020), Algorithm 1 with the update policies Count, Weighted
Laplace / Gaussian (Appendix D) and Policy Laplace / Gaussian (Theorems 3.1,
4.1), run on Spark.

Pipeline and guarantee (person-level (ε, δ)-DP; add or remove one person):

1. Spark stage, no noise (:mod:`dp_spark.stages.set_union`): each person's
   distinct items, at most Δ0 of them chosen by a salted hash of the
   person's own rows; the weighted histogram under the policy (sequential
   policies run in shards of persons, shard histograms added).
2. Noise and threshold inside Spark, one generator per partition seeded by
   the executor's OS entropy (seeded test runs: spawned from the seed):
   release u iff H[u] + Z_u > ρ.
   - Laplace policies: Z ~ Lap(1/ε) (count: Lap(Δ0/ε)), the histogram's ℓ1
     sensitivity is 1 (count: Δ0), so the noisy histogram restricted to the
     neighbour's support is ε-DP; ρ is chosen so that an item only the extra
     person holds is released with probability ≤ δ in total. (ε, δ)-DP.
   - Gaussian policies: Z ~ N(0, σ²) with σ the analytic Gaussian calibration
     (Balle & Wang 2018) for (ε, δ/2) and ℓ2 sensitivity 1, and ρ with
     failure probability δ/2. (ε, δ)-DP.
   (Lemma A.1 of the paper's supplement: conditioning on the event that no
   new item is released costs δ.)

Released: the set of items (a Spark DataFrame with one column ``item``,
possibly large, never collected) and its size. The noisy weights are not
part of the output and are never kept.

Trust boundary: the Spark driver and executors running the call see the
data (as for any Spark job); nothing that leaves the call can reproduce the
noise. An unseeded release never creates a noise key: each partition of the
noise step seeds its generator from the executor's OS entropy. The released
items are evaluated exactly once, inside the call (a local checkpoint), and
the DataFrame handed back reads those stored rows: its plan (``explain``,
the Spark UI, a serialized plan, Spark Connect's plan) holds neither the
item-sampling salt nor the noise function, and no later action re-runs the
noise step (a lost stored block fails the action instead). The salt does
appear in the plan of the one job that computes the items (Spark UI / event
log while it runs); it is not a privacy key — the guarantee holds for every
salt, it only picks which Δ0 items a person with more keeps. A seeded run
(``seed``, tests and demos only) is reproducible by anyone who knows the
seed and is marked not for publication.

Difference from the paper: person order inside a shard is a fixed hash of
the person id and the restriction to Δ0 items uses a salted hash instead of
``np.random.choice``; the additive policies' per-person increments are rounded
down to whole units of 2^-30 so that the histogram is an exact integer sum
(sensitivity and the new-item bound still hold exactly, weights drop by less
than 1e-9 per person); with ``shards`` > 1 (default 8) the sequential
policies run per shard, each with the cutoff Γ/√shards by default, and the
shard histograms are added in shard order (privacy as for one shard, for any
cutoff; see
:mod:`dp_spark.summaries.set_union` and
:func:`dp_spark.mechanisms.set_union.shard_cutoff`). ``shards=1`` is the paper's
algorithm.
"""

from __future__ import annotations

import logging

from pyspark.sql import functions as F

from dp_spark.mechanisms.set_union import SEQUENTIAL, SetUnionPlan, ThresholdStep, derive_randomness
from dp_spark.mechanisms.set_union import shard_cutoff as cutoff_per_shard
from dp_spark.plan import Plan, release_api
from dp_spark.plans.set_union import mechanism_plan, plan as make_plan
from dp_spark.releases.groups import report_groups
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

    Gopi et al.'s DP Set Union (ICML 2020, Algorithm 1): a person is every
    row sharing one ``person_col`` value; each person keeps at most
    ``max_items`` (Δ0) distinct items; the items' weighted histogram under
    the update policy ``method`` gets Laplace or Gaussian noise and the items
    clearing the threshold ρ of the paper's theorems are released.
    Guarantee: (ε, δ)-DP (``epsilon``, ``delta``) for adding or removing one
    person; the split between the noise and the threshold is in
    :mod:`dp_spark.plans.set_union`.

    ``method``: ``count`` (Korolova et al. baseline, Lap(Δ0/ε)),
    ``weighted-laplace``, ``weighted-gaussian``, ``policy-laplace``,
    ``policy-gaussian`` (default; the paper's best). ``alpha`` sets the
    policies' cutoff Γ = ρ + α·(noise scale) (paper's default 2).
    ``shards``: number of person shards for the sequential policies (default
    8, fixed: independent of the data and of the cluster's configuration, so
    the same call releases a set of the same expected size everywhere); 1 is
    the paper's single pass. ``shard_cutoff``: each shard's cutoff,
    ``scaled`` (Γ/√shards, default) or ``full`` (Γ); privacy is the same
    (:func:`dp_spark.mechanisms.set_union.shard_cutoff`).

    Returns a :class:`~dp_spark.Release` whose ``items`` artifact is a Spark
    DataFrame with one column ``item``, computed once inside this call and
    stored by the executors (a local checkpoint; never collected by the
    library). Its plan reads the stored rows only: it holds no salt and no
    noise key, and every action on it returns the same set (see the module's
    trust boundary). ``partitions``: partitions of the noise step (default
    two per task slot of the cluster, never the session's shuffle partitions; a performance setting that does not
    change the distribution of the output). With ``count=True`` (default) the
    size of the released set is ``result["released_count"]``; ``result``
    also holds ``method`` (the policy run), ``max_items``, ``noise``,
    ``noise_scale``, ``threshold`` and, for the sequential policies,
    ``cutoff``, ``shards`` and ``cutoff_per_shard``. ``budget``: a shared
    PrivacyFilter (or ``ledger=``, a persisted one), spent before any data is
    read; refused if it would overspend. ``seed``: tests and demos only (the
    report is then marked not for publication). Rows with a null person or
    item are dropped; an empty table is a valid release (no items).

    Per group (issue 24; the same body on the composite key, :mod:`dp_spark.stages.group_items`):
    ``group_by`` (a column) and ``groups`` (the public keys: a list, a
    one-column Spark DataFrame or a file path; at most 1,024) run the SAME
    one mechanism on the composite key (group, item): Δ0 = ``max_items``
    bounds a person's (group, item) pairs over all groups, so a person's
    budget flows across groups and the guarantee is the same (ε, δ), not
    divided. ``max_groups`` m is optional: given, each person keeps the rows
    of at most m of their groups first (a per-person transformation); None
    (default) caps nothing and spends nothing on choosing it.
    ``release.groups`` is a Spark DataFrame (the group column, ``item``,
    ``error``) of the released pairs of the public keys; the report's
    ``result["groups"]`` holds the first 100 keys with their number of
    released items. Rows with a null group or a group outside the keys are
    dropped.
    """
    return run(plan, df, budget=budget, ledger=ledger)


def run(plan: Plan, df, *, budget=None, ledger=None, before_spend=None) -> Release:
    """The release on its plan (built once: by :func:`set_union` or the
    CLI), through the one release flow (:func:`dp_spark.releases.template.run_release`)."""
    return run_release(plan, df, _body, budget=budget, ledger=ledger, before_spend=before_spend)


def _body(plan: Plan, edge_df, rng, local) -> Release:
    """Stage (histogram) and mechanism (noise + threshold, inside Spark) on
    the composite key (group, item), then the report: ungrouped, the
    released items; grouped, the released pairs (:func:`_grouped_report`).
    An ungrouped run is the one-key run (its composite key is the item).
    Grouped, the guarantee is the ungrouped (ε, δ), undivided: each person
    keeps at most Δ0 = ``max_items`` distinct composite items over all their
    groups, so the sensitivity and the new-item bound behind ρ are the
    ungrouped ones (:mod:`dp_spark.stages.group_items`); ``max_groups``, if
    given, is a per-person cap the template applied first."""
    numeric = mechanism_plan(plan)
    composite = Composite.of(edge_df, plan.params.groups, private="group_keys" in plan.split)
    # never the number of keys: with keys chosen privately it is drawn, and not shown before the record
    items = _released_items(composite.edges(edge_df), plan, numeric, rng)
    log.info("set-union: released items materialized")
    per_group = composite.per_group(items) if plan.params.count else None
    values = _values(plan, numeric, sum(per_group) if per_group is not None else None)
    errors = _errors(plan, numeric, values)
    if plan.params.group_by is None:  # the report's shape only: the released items
        return _report(plan, numeric, values, errors, local, artifacts={"items": items})
    return _grouped_report(plan, numeric, composite, items, per_group, values, errors, local)


def _released_items(edge_df, plan: Plan, numeric: SetUnionPlan, rng):
    """The released items, evaluated once and stored (a local checkpoint).
    The stage builds the histogram (no noise) and runs the mechanism
    layer's :class:`~dp_spark.mechanisms.set_union.ThresholdStep` inside
    Spark. Unseeded, the noise root holds no key (executors draw OS
    entropy); the salt, the root and the lazy DataFrame holding them go out
    of scope once the items are stored."""
    sequential = numeric.method in SEQUENTIAL
    shards = plan.parameters.get("shards")
    salt, root = derive_randomness(rng, keyed=plan.params.seed is not None)
    lazy = set_union_items_of_edges(
        edge_df, method=numeric.method, max_items=numeric.max_items,
        salt=salt, threshold=ThresholdStep(numeric, root),
        gamma=cutoff_per_shard(numeric.gamma, shards, plan["shard_cutoff"]) if sequential else None,
        shards=shards, partitions=plan.params.partitions,
    )
    with spark_job("computing and thresholding the set-union histogram"):
        return materialize(lazy)


def _values(plan: Plan, numeric: SetUnionPlan, released_count) -> dict:
    """The report's ``result``: the released set's size (a DP output) and
    public constants only."""
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
    """The grouped Release: the released composite items split into
    ``release.groups`` (the group column under its own name, ``item`` in
    its normalised type, ``error``: post-processing with the public keys),
    the first ``REPORT_GROUPS`` keys with their number of released pairs in
    ``result["groups"]`` (sizes of the released set: at most one number per
    key reaches the driver). Released values, public keys and constants only."""
    p = plan.params
    error = (f"this pair was released by one set union over (group, {p.item_col}) pairs: {errors['items']}; "
             f"the threshold counts persons over all groups (Δ0 = {numeric.max_items} pairs per person)")
    frame = composite.split(items, p.group_by).withColumn("error", F.lit(error))
    rows = [{"group": k, **({"released_count": per_group[i]} if per_group is not None else {})}
            for i, k in enumerate(composite.keys)]
    shown, more = report_groups(rows)
    values.update({"groups": shown, "groups_released": len(rows), "groups_in_report": len(shown)})
    errors["groups"] = (f"each public key of {p.group_by} with the number of its ({p.group_by}, {p.item_col}) "
                        "pairs released (exact size of that part of the released set); the pairs are in "
                        "release.groups / --groups-output, each row with its error statement")
    if more:
        errors["groups_in_report"] = (f"the report holds the first {len(shown):,} of {len(rows):,} keys (the keys' "
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
