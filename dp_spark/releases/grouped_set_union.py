"""Grouped set-union (issue 24): the released (group, item) pairs of every
public key of ``group_by``, person-level (ε, δ)-DP in all, one mechanism.

Run by :func:`dp_spark.set_union` with ``group_by=`` and ``groups=`` (the
public keys), after the release template restricted the edge table to the
public keys (and, with ``max_groups`` m given, kept each person's rows in at
most m of their groups): :mod:`dp_spark.releases.groups`, per-person
transformations.

Guarantee: the ungrouped release's, unchanged and undivided. The edge table's
item becomes the composite key (group, item)
(:func:`dp_spark.stages.group_items.composite_edges`, a per-person, row-by-row
injective map), and the ONE DP Set Union mechanism of
:mod:`dp_spark.releases.set_union` runs on it: each person keeps at most Δ0 =
``max_items`` distinct composite items over all their groups (the salted-hash
restriction), so the weighted histogram's ℓ1 / ℓ2 sensitivity and the
new-item bound behind ρ are exactly the ungrouped ones
(tests/spark/test_group_items.py checks the bound on random neighbours), and
the release is (ε, δ)-DP for adding or removing one person. A person's budget
flows across groups: no per-group ε/m. ``max_groups`` is therefore not needed
for privacy: None (the default) caps nothing and spends nothing; a given m is
a per-person cap applied first (it only decides which of a person's groups
their Δ0 pairs come from).

Released: the pairs clearing the threshold, as ``release.groups`` (the group
column under its own name, ``item`` in its normalised type, ``error``), split
from the stored (locally checkpointed) composite items: post-processing with
the public keys. The report's ``result["groups"]`` holds the first
``REPORT_GROUPS`` keys with the number of pairs released in each (sizes of
the released set: at most one number per public key reaches the driver).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark.plan import Plan
from dp_spark.releases.groups import report_groups
from dp_spark.report import Release
from dp_spark.stages.edges import GROUP, item_type
from dp_spark.stages.group_items import composite_edges, released_per_group, split_composite

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GroupShape:
    """The public shape of a grouped run's edge table: the number of keys,
    the group column's and the item's types (schema only)."""

    n_keys: int
    group_type: object
    integral: bool

    def released_per_group(self, items) -> list[int]:
        """Released pairs per public key (sizes of the released set)."""
        return released_per_group(items, self.n_keys)


def composite_input(edge_df, n_keys: int):
    """(the composite (person, item = (group, item)) edge table, its public
    shape): :func:`dp_spark.stages.group_items.composite_edges`. Lazy."""
    shape = GroupShape(int(n_keys), edge_df.schema[GROUP].dataType, isinstance(item_type(edge_df), T.LongType))
    # never the number of keys: with keys chosen privately it is drawn, and not shown before the record
    log.info("set-union: one set union over (group, item) pairs")
    return composite_edges(edge_df), shape


def grouped_report(plan: Plan, numeric, composite, per_group, values: dict, errors: dict, shape: GroupShape,
                   local) -> Release:
    """The Release: the released composite items split into
    ``release.groups`` (module doc), the per-key sizes in the report.
    Released values, public keys and constants only."""
    p = plan.params
    keys = p.groups
    error = (f"this pair was released by one set union over (group, {p.item_col}) pairs: {errors['items']}; "
             f"the threshold counts persons over all groups (Δ0 = {numeric.max_items} pairs per person)")
    frame = (split_composite(composite, keys, p.group_by, shape.group_type, shape.integral)
             .withColumn("error", F.lit(error)))
    rows = [{"group": k, **({"released_count": per_group[i]} if per_group is not None else {})}
            for i, k in enumerate(keys)]
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
    return Release.from_plan(
        plan, values=values, errors=errors, statement=statement, seeded=p.seed is not None,
        budget_split=[{"step": label, **c.to_dict()} for label, c in local.ledger],
        artifacts={"groups": frame}, noise=(numeric.noise_record,),
    )
