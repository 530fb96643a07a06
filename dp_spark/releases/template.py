"""The one release flow every ``dp_spark.<release>`` runs (issue 23).

plan (built once, by the keyword function or the CLI) → the input as a
Spark DataFrame → the budget (``budget=`` or ``ledger=``; a seeded run
never charges a ledger) → one edge table (every schema and null check,
once; no data read) → public inputs the release reads before spending
(top-k's domain) → for a grouped release (``params.group_by``), the
public keys read, the edge table restricted to them and each person capped
to ``max_groups`` groups (:mod:`dp_spark.releases.groups`; a release whose
stage caps persons itself, ``caps_in_stage``, gets the table uncapped: the
grouped distinct-count, inside its kernel) → a keyed run's recorded release, if any → ``plan.spend``
(refused before any data is read) → for keys chosen privately (``group_by``
without ``groups``), the plan's "group_keys" step releases them
(:mod:`dp_spark.releases.group_keys`) and the edge table is restricted and
capped to them as to public keys → the release's body: its Spark stage,
its mechanism and its report, with the run's own noise generator → the
release's noise records checked against its budget split (Σ cost of a
step's records <= the step's cost: :func:`check_noise_charged`) → the
release recorded in the ledger (a keyed run) before it is returned.

A keyed run is marked 'drawn' in the ledger before its first privacy draw:
the noise generator handed to the key step and the body marks the run (its
own committed transaction) on its first use, whatever is read from it
(:func:`dp_spark.noise.rng.first_use_generator`,
:func:`dp_spark.ledger.budget.draw_mark`). A run that failed before that
(e.g. in a Spark stage that runs before any draw) stays 'charged' and a
retry reuses its charge; a release that reads the generator while it builds
its Spark stage (set-union's salt and executor noise, the private key step,
distinct-count's sampled shard count) is marked before that stage runs, so
a failure of that stage needs a new run key; a run that drew and did not record is never retried
under its key. Every draw comes from that generator, or from generators set
up after it was read (set-union's executor noise, seeded by the OS where it
runs once ``derive_randomness`` has read the generator), so no draw
precedes the mark (tests/spark/test_ledger_drawn.py checks every release of
the registry). When another run under the key recorded its release first,
the mark returns that release instead (nothing drawn here).

The guarantee of every release is its plan's: ``plan.spend`` charges
``plan.guarantee`` before the body runs, and the body draws its noise only
within the steps of the filter it is handed. Nothing here reads the data:
the edge table is lazy, and the checks on it look at the schema only, so
whether a release is refused never depends on the rows.
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
from dp_spark.noise.records import overspent_steps
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
    """The person-level releases' edge table (``person``, ``item``,
    ``group``): :func:`dp_spark.stages.edges.edges` with the plan's columns
    (``group`` from ``params.group_by`` when the release is grouped, else
    the constant). Schema checks only; no data is read."""
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
    """Run one release on its ``plan`` (a :class:`~dp_spark.plan.Plan` with
    typed ``params``, built once by the caller) and return its
    :class:`~dp_spark.report.Release`.

    ``body(plan, edge_df, rng, local)``: the release's own part — its Spark
    stage, its mechanism and its report — given the edge table, the run's
    noise generator (seeded only with ``plan.params.seed``) and ``local``,
    the run's own privacy filter holding every step of the plan's split
    (the budget split of the report). ``edge_table(plan, df)``: the edge
    table, every schema and null check (default :func:`person_edges`).
    ``prepare(plan, edge_df)``: public inputs read before spending (e.g.
    top-k's domain), returning the plan to spend, refined by them.
    ``before_spend()``: the caller's last check before the charge (the
    CLI's ``--bad-rows fail``), after the schema checks, not run for a
    replayed keyed run. ``caps_in_stage``: a grouped release whose own
    stage applies the per-person group cap ``max_groups`` (the grouped
    distinct-count, inside its kernel); the edge table it receives is then
    restricted to the keys but not capped. ``budget`` / ``ledger``: a shared PrivacyFilter or
    a persisted ledger budget (not both), charged by ``plan.spend`` before
    any data is read.
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
        # public keys read (refused past MAX_PUBLIC_GROUPS), rows restricted to them, each person capped
        # to max_groups groups (unless the release's stage caps: caps_in_stage): per-person
        # transformations, lazy; nothing spent yet
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
            # the plan's "group_keys" step (spent above) releases the keys; then they act as public: the
            # release runs exactly as with groups= those keys (restricted, capped edge table unless
            # caps_in_stage; same body)
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
    """Σ cost(records of a step) <= the step's cost, for every step of the
    release's budget split (each record's cost by its kind's privacy map:
    :func:`dp_spark.noise.records.overspent_steps`). A failure is a defect:
    :class:`~dp_spark.errors.AccountingError`, the release withheld before
    it is recorded or returned. Public values only (records and split)."""
    over = overspent_steps(release.noise, release.budget_split)
    if over:  # the steps by position: a label may hold released values, not shown before the record
        labels = [part["step"] for part in release.budget_split]
        raise AccountingError(
            f"dp_spark defect: {release.name}'s noise for budget step(s) "
            + ", ".join(str(labels.index(s) + 1) for s in over) + f" of {len(labels)} would cost more than the "
            "step charged; the release is withheld. Please report it.")
