"""Grouped continual-distinct (issue 24): the number of present items at every
step, per public key of ``group_by``, item-level ρ-zCDP in all, in one Spark pass.

Run by :func:`dp_spark.continual_distinct` with ``group_by=`` (a column of
the events), ``groups=`` (the public keys) and ``max_groups=`` m (required:
see :mod:`dp_spark.plans.continual_distinct`). Before anything is spent the
release template (:mod:`dp_spark.releases.groups`) restricts the valid events
to the public keys and caps every ITEM (this release's privacy unit) to at
most m of its groups: the m first of the item's groups in the public order
``(xxhash64(item, group), group)``; a per-item transformation
(:mod:`dp_spark.stages.continual_groups`). The keys times the tree horizon
are limited up front (``MAX_GROUPED_STEPS``, from the public keys alone).

Guarantee: item-level ρ-zCDP for all groups' series together, under the
release's relation (any subset of one item's events removed). Every group
gets its own counter — the ungrouped mechanism (:func:`continual_counts`,
same method) on that group's stream at ρ_g = ρ/min(2m, G), or ρ/min(m, G)
for "bounded", G the number of public keys; one item's neighbour changes at
most that many groups' worth (only G groups exist)
(:mod:`dp_spark.mechanisms.continual_distinct.groups`, proved and property-
tested). Each group's error bounds hold simultaneously over its steps with
probability >= 1 − β; all G groups' with probability >= 1 − G·β.

Spark: ONE pass computes every group's flip cells
(:func:`dp_spark.stages.continual_groups.grouped_cells`); at most
groups × T × (J + 2) cells reach the driver, where each group's counter runs
in turn (no Spark work per group). ``release.groups`` (a Spark DataFrame:
the group column under its own name, ``step``, ``count``, ``std``,
``error_bound`` and each row's ``error``) holds released values only; the
JSON report carries each group's last step for the first REPORT_GROUPS keys.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import types as T

from dp_spark.mechanisms.continual_distinct import continual_counts
from dp_spark.mechanisms.continual_distinct.groups import merged_records
from dp_spark.plan import Plan
from dp_spark.plans.continual_distinct import RULES, error_assumption
from dp_spark.releases.groups import report_groups
from dp_spark.report import Release
from dp_spark.stages.continual_groups import grouped_cells
from dp_spark.stages.edges import GROUP

log = logging.getLogger(__name__)

#: The per-value columns of ``release.groups`` (besides the group column and ``error``).
GROUP_COLUMNS = ("step", "count", "std", "error_bound")


def body(plan: Plan, events, rng, local) -> Release:
    """Stage (every group's summaries, one pass), a counter per group, the report."""
    p = plan.params
    keys = p.groups
    log.info("continual-distinct: per-group flip counts")  # no key count: the rule of tests/audit/test_transcript.py
    cells = grouped_cells(events, len(keys), plan["tree_horizon"], shards=p.shards)  # NON-PRIVATE
    rho_group, w = plan["rho_per_group"], plan["flippancy_bound"]
    results = []
    for g in range(len(keys)):  # each group's counter on the driver (no Spark work)
        results.append(continual_counts(cells.summaries(g), rho_group, p.method, w, rng=rng, beta=p.beta))
    del cells  # non-private; nothing below may use it
    noise = merged_records([r.noise for r in results], plan["group_budget_factor"])
    return _report(plan, keys, results, local, events.schema[GROUP].dataType, events.sparkSession, noise)


def _rows(plan: Plan, keys, results) -> pd.DataFrame:
    """Every group's released series, one row per (group, step): released values only."""
    T = plan.params.horizon
    confidence = 1.0 - plan.params.beta
    assumption = error_assumption(plan.params.method, plan["flippancy_bound"])
    frames = []
    for key, r in zip(keys, results):
        bound = np.asarray(r.error_bound[:T], dtype=np.float64)
        frames.append(pd.DataFrame({
            "group": [key] * T,
            "step": np.arange(1, T + 1, dtype=np.int64),
            "count": np.rint(np.asarray(r.estimates[:T], dtype=np.float64)).astype(np.int64),
            "std": np.asarray(r.std[:T], dtype=np.float64),
            "error_bound": np.where(np.isfinite(bound), bound, np.nan),
        }))
    out = pd.concat(frames, ignore_index=True)
    tail = (f" of the true number of present items of this group, at every step of the group at once with "
            f"probability >= {confidence:.0%}{assumption}")
    out["error"] = [f"within ±{b:,.4g}{tail}" if np.isfinite(b) else "no error bound at this step"
                    for b in out["error_bound"].to_numpy()]
    return out


def _frame(spark, name: str, group_type, rows: pd.DataFrame):
    """``release.groups`` as a Spark DataFrame (via Arrow: up to
    MAX_GROUPED_STEPS rows, built on the driver from released values)."""
    key = pa.int64() if isinstance(group_type, T.LongType) else pa.string()
    schema = pa.schema([(name, key), ("step", pa.int64()), ("count", pa.int64()), ("std", pa.float64()),
                        ("error_bound", pa.float64()), ("error", pa.string())])
    table = pa.Table.from_pandas(rows.rename(columns={"group": name}), schema=schema, preserve_index=False)
    return spark.createDataFrame(table)


def _report(plan: Plan, keys, results, local, group_type, spark, noise) -> Release:
    p = plan.params
    m, factor = p.max_groups, plan["group_budget_factor"]
    confidence = 1.0 - p.beta
    simultaneous = max(0.0, 1.0 - len(keys) * p.beta)
    last = []
    for key, r in zip(keys, results):
        bound = float(r.error_bound[p.horizon - 1])
        last.append({"group": key, "final_estimate": int(np.rint(r.estimates[p.horizon - 1])),
                     "final_std": float(r.std[p.horizon - 1]),
                     "final_error_bound": bound if np.isfinite(bound) else None})
    shown, more = report_groups(last)
    values = {
        "method": p.method,
        "horizon": int(p.horizon),
        "confidence": confidence,
        "simultaneous_confidence": simultaneous,
        "groups_released": len(keys),
        "groups": shown,
        "groups_in_report": len(shown),
        "notes": sorted({n for r in results for n in r.notes}),
    }
    errors = {
        "groups": ("each group's count at every step: the number of present items of that group (after each item's "
                   f"events are kept in at most {m} of its groups) plus that group's discrete Gaussian noise; "
                   "release.groups / --groups-output has one row per (group, step) with its std, error_bound and "
                   "error statement; the report holds each group's last step"),
        "final_error_bound": (f"with probability >= {confidence:.0%} every step's |count − true count| of a group "
                              f"is at most its error_bound; all {len(keys):,} groups' at once with probability >= "
                              f"{simultaneous:.0%} (union bound)"),
    }
    if more:
        errors["groups_in_report"] = (f"the report holds the first {len(shown):,} of {len(keys):,} groups (the keys' "
                                      "sorted order); every group is in release.groups and --groups-output")
    most = m if p.method == "bounded" else 2 * m
    share = (f"ρ/{factor}" + (" (the full ρ: parallel composition)" if factor == 1 else "")
             + f" (the factor min({'m' if p.method == 'bounded' else '2m'}, G) = min({most}, {len(keys)}): one "
             f"item's neighbour changes at most that many of the {len(keys):,} groups' counters)")
    statement = (
        f"Item-level {plan.guarantee.describe()} over all groups' series, which implies "
        f"({plan.equivalent.epsilon:.3g}, {p.delta:g})-differential privacy: the output would be almost as likely "
        f"if any subset of the events of any one item (rows with the same {p.item_col}) were removed. The privacy "
        f"unit is an item, not a person. Each item's events count in at most {m} of its {p.group_by} groups; each "
        f"group's series spends {share}. With probability at least {confidence:.0%} every estimate of a group is "
        f"within its error_bound; all {len(keys):,} groups' together with probability at least {simultaneous:.0%}."
    )
    frame = _frame(spark, p.group_by, group_type, _rows(plan, keys, results))

    return Release.from_plan(
        plan, values=values, errors=errors, statement=statement, seeded=p.seed is not None,
        budget_split=[{"step": label, **c.to_dict()} for label, c in local.ledger],
        parameters={"rho_per_group": plan["rho_per_group"], "rules": list(RULES)},
        noise=noise, artifacts={"groups": frame},
    )
