"""``dp-spark count-release``: item counts of distinct persons, each with its σ."""

from __future__ import annotations

from dp_spark.commands.base import INPUT_OPTIONS, Option, RUN_OPTIONS, items_writer

NAME = "count-release"
HELP = "differentially private item counts near a target relative error (Private Count Release)"

OPTIONS = INPUT_OPTIONS + (
    Option("rho", float, 0.5, "ρ: the release is δ-approximate ρ-zCDP"),
    Option("delta", float, 1e-6, "δ of the δ-approximate ρ-zCDP guarantee"),
    Option("relative_error", float, 0.1, "target relative error r of a released count"),
    Option("kbar", int, 10000, "pcr: how many of the largest counts are collected (and the most "
           "counts released)"),
    Option("method", str, "pcr", "pcr (Private Count Release, no contribution bound) or bounded "
           "(contribution-bounding baseline, needs --max-items)", ("pcr", "bounded")),
    Option("max_items", int, None, "bounded: m, the most distinct items kept per person"),
    Option("alpha", float, 0.5, "bounded: share of ρ spent on selecting items"),
    Option("count_threshold", bool, False, "bounded: drop noisy counts below (2+r)σ/r", flag=True),
    Option("epsilon_min", float, 0.0005, "pcr: ε* of the first selection (grown by √2 after ⊥)"),
    Option("delta_min", float, 1e-11, "pcr: δ* spent by each selection"),
    Option("accuracy_factor", float, 1.5, "pcr: a in σ = (r/a)·T"),
    Option("conversion_delta", float, None, "δ' of the stated (ε, δ + δ') equivalent (default δ)"),
    Option("items_output", str, None, "also write the released items here as Parquet (atomically)"),
    Option("budget_rho", float, None, "total ρ budget; the run is refused before reading data if "
           "the release would exceed it"),
    Option("budget_delta", float, None, "total δ budget (with --budget-rho; default 0)"),
) + RUN_OPTIONS


def _validate(opts):
    from dp_spark.releases.count_release import validate as validate_release

    return validate_release(
        opts["rho"], opts["delta"], opts["relative_error"], opts["kbar"], opts["method"], opts["seed"],
        max_items=opts["max_items"], alpha=opts["alpha"], epsilon_min=opts["epsilon_min"],
        delta_min=opts["delta_min"], accuracy_factor=opts["accuracy_factor"],
        conversion_delta=opts["conversion_delta"],
    )


def validate(opts) -> None:
    """Check parameters before Spark starts, with the release's own checks."""
    from dp_spark.errors import ParameterError
    from dp_spark import checks

    _validate(opts)
    if opts["budget_rho"] is not None:
        checks.positive(opts["budget_rho"], "budget_rho")
    if opts["budget_delta"] is not None:
        if opts["budget_rho"] is None:
            raise ParameterError("--budget-delta needs --budget-rho.")
        checks.open_unit(opts["budget_delta"], "budget_delta")


def cost(opts):
    """What the release will spend (checked against the budget before reading)."""
    from dp_spark.accounting import ZCDP

    return ZCDP(opts["rho"], opts["delta"])


def budget(opts):
    """The run's privacy filter (a zCDP budget), if a budget was given."""
    from dp_spark.accounting import ZCDP, PrivacyFilter

    if opts["budget_rho"] is None:
        return None
    return PrivacyFilter(ZCDP(opts["budget_rho"], opts["budget_delta"] or 0.0))


def run(spark, df, opts, budget_filter):
    from dp_spark.releases.count_release import count_release

    return count_release(
        df,
        rho=opts["rho"],
        delta=opts["delta"],
        relative_error=opts["relative_error"],
        kbar=opts["kbar"],
        method=opts["method"],
        person_col=opts["person_col"],
        item_col=opts["item_col"],
        seed=opts["seed"],
        max_items=opts["max_items"],
        alpha=opts["alpha"],
        count_threshold=bool(opts["count_threshold"]),
        epsilon_min=opts["epsilon_min"],
        delta_min=opts["delta_min"],
        accuracy_factor=opts["accuracy_factor"],
        conversion_delta=opts["conversion_delta"],
        budget=budget_filter,
    )


ARTIFACT_WRITERS = {"items": items_writer("items_df", "counts", single_file=True)}
