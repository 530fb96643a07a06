"""The set-union release (partition selection): which items may be published at all?

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
:mod:`dp_spark.mechanisms.set_union.policies` and
:func:`dp_spark.mechanisms.set_union.shard_cutoff`). ``shards=1`` is the paper's
algorithm.
"""

from __future__ import annotations

import logging

from dp_spark.accounting import ApproxDP, PrivacyFilter
from dp_spark.noise import make_rng
from dp_spark import checks
from dp_spark.report import Release
from dp_spark.mechanisms.set_union import SEQUENTIAL, derive_randomness, plan_set_union
from dp_spark.mechanisms.set_union import shard_cutoff as cutoff_per_shard
from dp_spark.sparkjobs import spark_job
from dp_spark.stages.edges import edges
from dp_spark.stages.set_union import DEFAULT_SHARDS, check_shards, materialize, set_union_items

log = logging.getLogger(__name__)

RELEASE = "set-union"
#: Release probability quoted in the error statement.
_LIKELY = 0.95


def _budget_steps(plan) -> list[tuple[str, ApproxDP]]:
    if plan.noise == "laplace":
        noise_step = (
            f"noisy histogram: Laplace mechanism, scale {plan.scale:.4g}, "
            f"l1 sensitivity {plan.sensitivity:g}"
        )
    else:
        noise_step = (
            f"noisy histogram: Gaussian mechanism (analytic calibration), sigma {plan.scale:.4g}, "
            "l2 sensitivity 1"
        )
    threshold_step = (
        f"threshold rho = {plan.rho:.4g}: items held only by the added person stay "
        "hidden except with this probability"
    )
    return [
        (noise_step, ApproxDP(plan.epsilon, plan.noise_delta)),
        (threshold_step, ApproxDP(0.0, plan.threshold_delta)),
    ]


def set_union(
    df,
    epsilon: float,
    delta: float,
    max_items: int = 100,
    policy: str = "policy-gaussian",
    alpha: float = 2.0,
    shards: int | None = None,
    person_col: str = "person_id",
    item_col: str = "item",
    seed: int | None = None,
    *,
    count: bool = True,
    shard_cutoff: str = "scaled",
    partitions: int | None = None,
    budget: PrivacyFilter | None = None,
    ledger=None,
) -> Release:
    """Release as many items of ``df`` as possible under person-level (ε, δ)-DP.

    Gopi et al.'s DP Set Union (ICML 2020, Algorithm 1): a person is every
    row sharing one ``person_col`` value; each person keeps at most
    ``max_items`` (Δ0) distinct items; the items' weighted histogram under
    ``policy`` gets Laplace or Gaussian noise and the items clearing the
    threshold ρ of the paper's theorems are released. Guarantee: (ε, δ)-DP
    (``epsilon``, ``delta``) for adding or removing one person.

    ``policy``: ``count`` (Korolova et al. baseline, Lap(Δ0/ε)),
    ``weighted-laplace``, ``weighted-gaussian``, ``policy-laplace``,
    ``policy-gaussian`` (default; the paper's best). ``alpha`` sets the
    policies' cutoff Γ = ρ + α·(noise scale) (paper's default 2).
    ``shards``: number of person shards for the sequential policies (default
    8, fixed: independent of the data and of the cluster's configuration, so
    the same call releases a set of the same expected size everywhere); 1 is
    the paper's single pass. ``shard_cutoff``: each shard's cutoff,
    ``scaled`` (Γ/√shards, default) or ``full`` (Γ); privacy is the same
    (:func:`dp_spark.mechanisms.set_union.shard_cutoff`).

    Returns a Release whose ``items`` attribute is a Spark DataFrame with one
    column ``item``, computed once inside this call and stored by the
    executors (a local checkpoint; never collected by the library). Its plan
    reads the stored rows only: it holds no salt and no noise key, and every
    action on it returns the same set (see the module's trust boundary).
    ``partitions``: partitions of the noise step (default
    ``spark.sql.shuffle.partitions``; a performance setting that does not change
    the distribution of the output). With ``count=True`` (default) the size
    of the released set is reported as ``items_released``. ``budget``: a shared
    PrivacyFilter, spent before any data is read. ``seed``: tests and demos
    only (the report is then marked not for publication). Rows with a null
    person or item are dropped; an empty table is a valid release (no items).
    """
    from dp_spark.io import spark_frame

    df = spark_frame(df, "df")  # a pandas DataFrame is converted; other types refused
    from dp_spark.ledger import budget_or_ledger

    budget = budget_or_ledger(budget, ledger)  # ledger=: a persisted budget (dp_spark.ledger)
    plan = plan_set_union(epsilon, delta, max_items, policy, alpha)  # checks ε, δ, Δ0, α, policy
    seed = checks.seed(seed)
    check_shards(shards)
    check_shards(partitions, "partitions")
    cutoff_per_shard(1.0, 1, shard_cutoff)  # validates the rule name
    edges(df, person_col, item_col)  # schema checks only (no data is read), before any spending
    cost = ApproxDP(plan.epsilon, plan.delta)
    if budget is not None:
        budget.spend(cost, label=RELEASE)  # refuses before any data is read
    local = PrivacyFilter(cost)
    for label, step in _budget_steps(plan):
        local.spend(step, label=label)

    spark = df.sparkSession
    sequential = plan.policy in SEQUENTIAL
    if sequential and shards is None:
        shards = DEFAULT_SHARDS
    # Unseeded: the noise root holds no key (executors draw OS entropy), and
    # the salt and the root are dropped once the items are materialized.
    salt, root = derive_randomness(make_rng(seed), keyed=seed is not None)
    lazy = set_union_items(
        df, person_col, item_col, plan, salt, root,
        shards=shards if sequential else None, partitions=partitions, cutoff_rule=shard_cutoff,
    )
    with spark_job("computing and thresholding the set-union histogram"):
        items = materialize(lazy)
    del lazy, salt, root

    values: dict = {}
    if count:
        values["items_released"] = int(items.count())
    values.update({
        "policy": plan.policy,
        "max_items": plan.max_items,
        "noise": plan.noise,
        "noise_scale": plan.scale,
        "threshold": plan.rho,
    })
    if sequential:
        values["cutoff"] = plan.gamma
        values["shards"] = int(shards)
        values["cutoff_per_shard"] = cutoff_per_shard(plan.gamma, shards, shard_cutoff)

    unit = f"one person (every row with the same {person_col})"
    likely = plan.weight_for(_LIKELY)
    item_error = (
        f"the released items are a subset of the {item_col} values in the input (no other "
        f"value can be released); an item held by a single person is released with "
        f"probability at most {plan.delta:.3g}; an item is released with probability "
        f"{_LIKELY:.0%} once its histogram weight reaches {likely:.4g}"
    )
    if sequential:
        reach = plan.release_probability(plan.gamma)
        item_error += (
            f" (an item whose weight reached the cutoff {plan.gamma:.4g} is released with "
            f"probability {reach:.1%}; each of the {int(shards)} shards stops an item at "
            f"{values['cutoff_per_shard']:.4g})"
        )
    elif plan.policy == "count":
        item_error += " (the weight is the number of persons keeping the item)"
    errors = {
        "items": item_error,
        "threshold": "exact (a constant of the mechanism, from the paper's theorem)",
    }
    if count:
        errors["items_released"] = (
            "exact size of the released set (the set itself is the mechanism's output); "
            "it undercounts the true number of distinct items by design"
        )
    statement = (
        f"Person-level ({plan.epsilon:g}, {plan.delta:.3g})-differential privacy: the released "
        f"set of {item_col} values would be almost as likely if any {unit} were removed or "
        f"added. Each person contributes at most {plan.max_items} distinct items; only the "
        "identities of the released items are published, never their weights or counts."
    )
    parameters = {
        "epsilon": plan.epsilon,
        "delta": plan.delta,
        "max_items": plan.max_items,
        "policy": plan.policy,
        "alpha": plan.alpha,
        "person_col": person_col,
        "item_col": item_col,
        "noise": plan.noise,
        "algorithm": "Gopi et al. 2020, DP Set Union (Algorithm 1)",
    }
    if sequential:
        parameters["shards"] = int(shards)
        parameters["shard_cutoff"] = shard_cutoff
    log.info("set-union: released items materialized")
    release = Release(
        name=RELEASE,
        privacy_unit="person",
        neighbouring=f"add or remove one person (all rows sharing a {person_col} value)",
        guarantee=local.spent,
        parameters=parameters,
        values=values,
        errors=errors,
        statement=statement,
        seeded=seed is not None,
        budget_split=[{"step": label, **c.to_dict()} for label, c in local.ledger],
        artifacts={"items": items},
    )
    return release
