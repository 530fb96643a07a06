"""The one release flow every ``dp_spark.<release>`` runs (:func:`run_release`).

plan → input as a Spark DataFrame → budget (a seeded run never charges a
ledger) → edge table (schema and null checks; no data read) → public inputs
(top-k's domain) → for a grouped release, public keys read and the edge
table restricted and capped (:mod:`dp_spark.releases.groups`) → a keyed
run's recorded release, if any → ``plan.spend`` (refused before any data is
read) → keys chosen privately, if asked (:mod:`dp_spark.releases.group_keys`)
→ the release's body (Spark stage, mechanism, report) → its noise records
checked against its budget split (:func:`check_noise_charged`) → the release
recorded in the ledger (a keyed run) before it is returned.

A keyed run is marked 'drawn' in the ledger (its own committed transaction)
on the first use of the noise generator handed to the key step and the body
(:func:`dp_spark.noise.rng.first_use_generator`,
:func:`dp_spark.ledger.budget.draw_mark`). A run that failed before that
stays 'charged' and a retry reuses its charge; a release that reads the
generator while building its Spark stage (set-union's salt and executor
noise, the private key step, distinct-count's sampled shard count) is marked
before that stage runs; a run that drew and did not record is never retried
under its key. Every draw comes from that generator or from generators set
up after it was read, so no draw precedes the mark
(tests/spark/test_ledger_drawn.py checks every release). When another run
under the key recorded first, its release is returned (nothing drawn here).

The guarantee of every release is its plan's: ``plan.spend`` charges
``plan.guarantee`` before the body runs, and the body draws noise only within
the steps of the filter it is handed. Nothing here reads the data: the edge
table is lazy and the checks look at the schema only, so whether a release
is refused never depends on the rows.
"""

from __future__ import annotations

from typing import Any, Callable

from dp_spark import noise
from dp_spark.errors import AccountingError, ParameterError
from dp_spark.io import spark_frame
from dp_spark.ledger import budget as ledger_budget
from dp_spark.ledger import budget_or_ledger
from dp_spark.ledger.budget import LedgerBudget, draw_mark, recorded_release, replay_of, replayed
from dp_spark.ledger.rules import RecordedMeanwhile
from dp_spark.noise.records import overspent_steps, uncharged_records
from dp_spark.noise.rng import first_use_generator
from dp_spark.public_inputs import refuse_private_as_public
from dp_spark.releases import group_keys
from dp_spark.releases.group_keys import keys_reported
from dp_spark.releases.groups import grouped_edges
from dp_spark.stages import edges as edge_stage
from dp_spark.stages.session_shape import check_session

#: The error of ``seed=`` with a persisted budget (``ledger=``, or a ledger
#: budget as ``budget=``), in the CLI's words for ``--seed --ledger``.
SEEDED_LEDGER = (
    "seed= makes the output reproducible and so not private, but a ledger budget would charge the "
    "real budget for it; drop seed= for a release to publish, or the ledger for a test run."
)


def person_edges(plan, df):
    """The person-level edge table (``person``, ``item``, ``group``) with the
    plan's columns. Schema checks only; no data is read."""
    return edge_stage.edges(df, plan.params.person_col, plan.params.item_col, getattr(plan.params, "group_by", None))


def refuse_seeded_ledger(seed, budget) -> None:
    """A seeded run is not private: refuse it with a persisted (ledger)
    budget, before anything is read or charged. Public values only."""
    if seed is not None and isinstance(budget, LedgerBudget):
        raise ParameterError(SEEDED_LEDGER)


def run_release(
    plan,
    df,
    body: Callable[..., Any],
    *,
    budget=None,
    ledger=None,
    edge_table: Callable[[Any, Any], Any] = person_edges,
    prepare: Callable[[Any, Any], Any] | None = None,
    before_spend: Callable[[], None] | None = None,
    caps_in_stage: bool = False,
):
    """Run one release on its ``plan``; return its :class:`~dp_spark.report.Release`.

    ``body(plan, edge_df, rng, local)``: the release's Spark stage, mechanism
    and report, given the edge table, the run's noise generator (seeded only
    with ``plan.params.seed``) and ``local``, the run's privacy filter holding
    every step of the plan's split. ``edge_table(plan, df)``: the edge table
    (default :func:`person_edges`). ``prepare(plan, edge_df)``: reads public
    inputs before spending; returns the refined plan. ``before_spend()``: the
    caller's last check before the charge (the CLI's ``--bad-rows fail``).
    ``caps_in_stage``: the stage applies the ``max_groups`` cap itself (the
    edge table is then not capped). ``budget`` / ``ledger``: a shared
    PrivacyFilter or a persisted ledger budget (not both).
    """
    seed = plan.params.seed
    df = spark_frame(df, "df")  # a pandas DataFrame is converted; other types refused
    budget = budget_or_ledger(budget, ledger)  # ledger=: a persisted budget (dp_spark.ledger)
    refuse_seeded_ledger(seed, budget)
    # a "public" keys file or domain that is (holds, lies inside) the input: refused from the paths alone
    refuse_private_as_public(df, groups=getattr(plan.params, "groups", None),
                             domain=getattr(plan.params, "domain", None))
    edge_df = edge_table(plan, df)  # every schema and null check, once; no data read
    private_keys = getattr(plan.params, "keys_chosen_privately", lambda: False)()
    if getattr(plan.params, "group_by", None) is not None and not private_keys:
        # public keys read, rows restricted and capped (per-person, lazy); nothing spent yet
        plan, edge_df = grouped_edges(plan, edge_df, cap=not caps_in_stage)
    if prepare is not None:
        plan = prepare(plan, edge_df)  # public inputs only (e.g. top-k's domain), before spending
    if (replay := recorded_release(budget, plan, df)) is not None:  # a keyed run's identity, bound here
        return replay  # this key released this run before: the recorded release, no data read, no noise
    check_session(df.sparkSession)  # the packed columns' Arrow type, from the session alone: refused unspent
    if before_spend is not None:
        before_spend()
    local = plan.spend(budget)  # refuses before any data is read
    if (replay := replayed(budget)) is not None:
        return replay  # the key's release was recorded: returned unchanged, no data read, no noise drawn
    # a keyed run: marked 'drawn' in the ledger (committed) on the generator's first use, before any draw
    rng = first_use_generator(noise.make_rng(seed), draw_mark(budget))
    try:
        if private_keys:
            # the "group_keys" step (spent above) releases the keys; then the run is as with groups= them
            keys, record, facts = group_keys.choose_keys(plan, edge_df, rng)
            plan, edge_df = grouped_edges(plan, edge_df, keys=keys, cap=not caps_in_stage)
            release = keys_reported(body(plan, edge_df, rng, local), record, facts)
        else:
            release = body(plan, edge_df, rng, local)
    except RecordedMeanwhile as exc:  # another run under the key recorded first; this one drew nothing
        return replay_of(exc.run)
    check_noise_charged(release)
    return ledger_budget.record_release(budget, release)  # recorded in the ledger (a keyed run) before it leaves


def check_noise_charged(release) -> None:
    """Σ cost(records of a step) <= the step's cost for every step of the
    budget split (:func:`dp_spark.noise.records.overspent_steps`), and every
    record names a step of the split
    (:func:`dp_spark.noise.records.uncharged_records`); otherwise an
    :class:`~dp_spark.errors.AccountingError` (a defect), the release withheld
    before it is recorded. Public values only."""
    over = overspent_steps(release.noise, release.budget_split)
    if over:  # the steps by position: a label may hold released values, not shown before the record
        labels = [part["step"] for part in release.budget_split]
        raise AccountingError(
            f"dp_spark defect: {release.name}'s noise for budget step(s) "
            + ", ".join(str(labels.index(s) + 1) for s in over) + f" of {len(labels)} would cost more than the "
            "step charged; the release is withheld. Please report it.")
    stray = uncharged_records(release.noise, release.budget_split)
    if stray:
        raise AccountingError(
            f"dp_spark defect: {stray} of {release.name}'s noise records name no step of its budget split "
            "(a draw charged nowhere); the release is withheld. Please report it.")
