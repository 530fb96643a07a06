"""Group keys chosen privately: ``group_by=`` without ``groups=``.

Every release with :class:`dp_spark.plan.GroupParams` gets it from the plan
(:func:`dp_spark.plan.with_private_keys`: the step "group_keys") and the
template: after the plan is spent, :func:`choose_keys` releases the keys and
the release runs as with ``groups=`` those keys.

Mechanism and guarantee: Gopi et al.'s DP Set Union run by the set-union
stage (:mod:`dp_spark.stages.set_union`) with exact integer noise
(:mod:`dp_spark.mechanisms.set_union.discrete`, proof there) on the edges
(person, group), a per-person transformation of the edge table, each person
keeping at most Δ0 distinct keys (a salted-hash choice among its own keys):
Δ0 = ``max_groups`` m when given, else :data:`~dp_spark.plan.KEYS_MAX_PER_PERSON`.

- Charged: the plan's step "group_keys", (ε_k, δ_k), before any data is read.
- Histogram: the weighted-Gaussian policy (:data:`KEY_STEP_POLICY`): a
  person keeping t keys adds ⌊2^30/√t⌋ units of 2^-30 to each (ℓ2 norm
  <= 1; an exact integer sum); floored onto the grid 2^-g, one added
  person moves it by ℓ2² <= Δ² = max_t t·(⌈a_t/2^(30−g)⌉ + 1)² grid cells²
  (about (2^g)²·(1 + 2/128)²), and a key only that person holds weighs at
  most ⌊2^g/√j⌋ cells, j the number of such keys
  (tests/spark/test_group_keys.py checks both on random neighbours).
- Noise: one exact discrete Gaussian N_Z(0, s²) per key (integer s,
  s² >= Δ²/(2ρ_n)) from its noise bucket's stream of the release's
  :class:`~dp_spark.noise.rng.StreamRoot`; ρ_n-zCDP converts to
  (ε_k, δ_k/2)-DP (Canonne–Kamath–Steinke 2020, §2.3, Corollary 13).
- Threshold: the integer R = max_j ⌊a_j/2^(30−g)⌋ + m_j with
  P[N_Z(0, s²) > m_j] <= (δ_k/2)/j: a key only the added person holds is
  released with probability at most δ_k/2 in all.
- So the released key set is (ε_k, δ_k)-DP.
- A release given (ρ, δ) (count-release, ``KEYS_BUDGET = "rho"``) pays
  ZCDP(ρ_k, δ_k) instead, ρ_k = KEYS_RHO_SHARE·ρ: s² >= Δ²/(2ρ_k) with no
  conversion and the threshold at δ_k/j, which makes the key set
  δ_k-approximate ρ_k-zCDP (the discrete module's (4): Bun & Steinke 2016,
  Definition 8.1); its own steps run on (ρ − ρ_k, δ − δ_k), and approximate
  zCDP adds up (their Lemma 8.3) to the (ρ, δ) given.

The plan takes ε_k = KEYS_EPSILON_SHARE·ε and, for a release with δ > 0
(set-union, top-k with δ), δ_k = min(KEYS_DELTA, KEYS_DELTA_SHARE·δ) out of
the release's budget; its own steps run on the rest, so basic composition
gives the (ε, δ) given. A pure-ε release has no δ to take δ_k from:
δ_k = KEYS_DELTA and the whole is (ε, KEYS_DELTA)-DP.

Whether a key appears is the DP decision itself: no key count is refused
after spending. Past the release's limit (``Params.MAX_KEYS``) of released keys
the first in sorted order are kept (post-processing, stated in the report).
"""

from __future__ import annotations

import dataclasses
import logging

from pyspark.sql import functions as F

from dp_spark.plan import KEYS_MAX_PER_PERSON, KEYS_POLICY, key_mechanism
from dp_spark.sparkjobs import spark_job
from dp_spark.stages import set_union as set_union_stage
from dp_spark.stages.edges import GROUP, ITEM, PERSON
from dp_spark.stages.set_union import materialize

log = logging.getLogger(__name__)

#: The key step's set-union policy: additive, an exact integer histogram.
KEY_STEP_POLICY = KEYS_POLICY
#: The key step's grid, σ and integer threshold at its cost (ε_k, δ_k) or (ρ_k, δ_k) and Δ0, checked by the
#: plan before spending.
key_step_plan = key_mechanism


def keys_per_person(max_groups: int | None) -> int:
    """Δ0 of the keys' set-union: m when given, else KEYS_MAX_PER_PERSON."""
    return int(max_groups) if max_groups is not None else KEYS_MAX_PER_PERSON  # as the plan's step label


def key_edges(edge_df):
    """(person, item): the group column as the set-union's item (a per-person
    transformation). NON-PRIVATE, lazy."""
    return edge_df.select(F.col(PERSON), F.col(GROUP).alias(ITEM))


def choose_keys(plan, edge_df, rng):
    """The keys released by the plan's "group_keys" step, after the plan was
    spent: (keys in sorted order, the noise record, the released facts). One
    Spark job computes and thresholds the histogram (:func:`key_step_plan`);
    only released keys reach the driver, as one Arrow array (at most the release's ``MAX_KEYS`` + 1)."""
    # every release imports this module through the template; only private keys need scipy here
    from dp_spark.mechanisms.set_union import ThresholdStep, derive_randomness  # lazy: scipy

    p = plan.params
    cost = plan.split.cost("group_keys")
    per_person = keys_per_person(p.max_groups)
    numeric = key_step_plan(cost, per_person)  # exact: integer noise and threshold
    salt, root = derive_randomness(rng, seeded=p.seed is not None)
    lazy = set_union_stage.set_union_items_of_edges(
        key_edges(edge_df), method=numeric.method, max_items=per_person, salt=salt,
        threshold=ThresholdStep(numeric, root),
    )
    log.info("group keys: choosing the keys of %s privately (set-union)", p.group_by)
    with spark_job("choosing the group keys privately (set-union on the group column)"):
        items = materialize(lazy)
    limit = type(p).MAX_KEYS
    released = items.orderBy(F.col(ITEM)).limit(limit + 1).toArrow().column(ITEM)  # DP output, as Arrow
    items.unpersist()
    del lazy, root, salt
    truncated = len(released) > limit
    keys = released.slice(0, limit)
    label = next(s.label for s in plan.split if s.name == "group_keys")
    record = dataclasses.replace(numeric.noise_record, step=label,
                                 target=f"each {p.group_by} key's histogram weight (released if above the threshold)")
    facts = {"group_keys_released": len(keys), "group_keys_truncated": truncated,
             "group_keys_threshold": numeric.rho, "group_keys_per_person": per_person,
             "group_keys_likely_weight": numeric.weight_for(0.95)}
    return keys, record, facts


def keys_reported(release, record, facts):
    """``release`` with the key step stated (noise record, result, parameters,
    error statement, statement). Released values and public constants only."""
    p_by = release.parameters.get("group_by")
    delta_k = release.parameters.get("group_keys_delta")
    if (rho_k := release.parameters.get("group_keys_rho")) is not None:  # a (ρ, δ) release's key step
        step = f"δ = {delta_k:g}-approximate ρ = {rho_k:g}-zCDP"
        threshold_part = delta_k
    else:
        step = f"({release.parameters.get('group_keys_epsilon'):g}, {delta_k:g})-DP"
        threshold_part = delta_k / 2
    errors = {**release.errors, "group_keys_released": (
        f"the {p_by} keys released by a set-union with exact noise, {step} (a weighted "
        f"histogram, each person contributing at most {facts['group_keys_per_person']} keys, discrete Gaussian "
        f"noise of σ {record.scale:.4g} and the threshold {facts['group_keys_threshold']:.4g}): a key is released "
        f"with probability at least 95% once its histogram weight reaches {facts['group_keys_likely_weight']:.4g} "
        f"(about that many persons holding only it); the keys one person alone holds are released with "
        f"probability at most {threshold_part:g} in all (the threshold's part of δ); keys with few persons are "
        "missing by design")}
    if facts["group_keys_truncated"]:
        kept = facts["group_keys_released"]
        errors["group_keys_truncated"] = (f"more than {kept:,} keys were released; the first {kept:,} in sorted "
                                          "order are kept (post-processing)")
    values = {**release.values, "group_keys_released": facts["group_keys_released"],
              "group_keys_truncated": facts["group_keys_truncated"]}
    parameters = {**release.parameters, "group_keys_threshold": facts["group_keys_threshold"],
                  "group_keys_per_person": facts["group_keys_per_person"]}
    statement = (f"{release.statement} The {p_by} keys were chosen privately ({facts['group_keys_released']:,} "
                 f"released) by a set-union on {p_by} (exact discrete Gaussian noise, {step}); "
                 "with it the whole release is "
                 f"{release.guarantee.describe()} by composition.")
    return dataclasses.replace(release, values=values, errors=errors, parameters=parameters, statement=statement,
                               noise=(record, *release.noise))
