"""The count-release plan: parameters, (ρ, δ) and its split (Rogers 2024).

Rogers, "Private Count Release: A Simple and Scalable Approach for Private
Data Analytics" (arXiv 2403.05073); ALGORITHMS.md 5.2-5.3. The release is
person-level δ-approximate ρ-zCDP, stated with its (ε, δ + δ') equivalent
ε = ρ + 2·sqrt(ρ·ln(1/δ')), δ' = ``conversion_delta`` (default δ).

Budget split, from the parameters alone:

- ``method="pcr"`` (Algorithm 2): one step, the whole (ρ, δ), spent
  adaptively by the Private Count Release loop under its privacy filter
  (Unknown Domain Gumbel selections at a growing ε and discrete Gaussian
  counts; see :mod:`dp_spark.mechanisms.count_release.loop`). How much the
  selections and the counts actually took, and the part the filter held
  unused, is data-dependent and is reported in the release's budget split.
- ``method="bounded"`` (the contribution-bounding baseline): Gaussian-
  threshold partition selection (α·ρ, all of δ) and discrete Gaussian counts
  (the rest of ρ), calibrated by
  :func:`dp_spark.mechanisms.count_release.bounded_plan`.
"""

from __future__ import annotations

from dp_spark import checks
from dp_spark.accounting import ZCDP
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.count_release.bounded import BoundedPlan, bounded_plan
from dp_spark.mechanisms.count_release.loop import ACCURACY_FACTOR, DELTA_MIN, EPSILON_MIN, check_pcr_parameters
from dp_spark.plan import Plan

RELEASE = "count-release"
METHODS = ("pcr", "bounded")

#: Public upper limits of the sizing parameters, checked before Spark starts:
#: pcr collects the k̄ + 1 largest counts to the driver and runs up to k̄
#: rounds there; bounded keeps up to m items per person (sensitivity sqrt(m)).
KBAR_LIMIT = 1_000_000
MAX_ITEMS_LIMIT = 100_000
KBAR_WHY = " (that many counts are collected to the driver; lower kbar)"
MAX_ITEMS_WHY = " (the noise grows with sqrt(max_items); lower max_items)"

PCR_STEP = ("Private Count Release loop: Unknown Domain Gumbel selections and discrete Gaussian counts, "
            "spent adaptively under a privacy filter")


def calibration(plan: Plan) -> BoundedPlan:
    """The bounded baseline's public calibration (σ_s, τ, σ_c, T) of a
    ``method="bounded"`` plan: a function of its parameters only."""
    return bounded_plan(plan["rho"], plan["delta"], plan["max_items"], plan["alpha"], plan["relative_error"])


def _bounded_steps(calibrated: BoundedPlan) -> list[tuple[str, ZCDP]]:
    m = calibrated.max_items
    return [
        (f"selection: Gaussian thresholding on counts bounded to {m} items per person "
         f"(σ = {calibrated.selection_sigma:.4g}, threshold {calibrated.selection_threshold:.4g})",
         calibrated.selection_cost),
        (f"counts: discrete Gaussian, L2 sensitivity sqrt({m}), σ = {calibrated.count_sigma:.4g}",
         calibrated.count_cost),
    ]


def plan(*, rho, delta, method="pcr", person_col="person_id", item_col="item", relative_error=0.1,
         kbar=10000, max_items=None, alpha=0.5, count_threshold=False, epsilon_min=EPSILON_MIN,
         delta_min=DELTA_MIN, accuracy_factor=ACCURACY_FACTOR, conversion_delta=None, seed=None) -> Plan:
    """The count-release's plan (person-level δ-approximate ρ-zCDP); every
    parameter checked before any data is read."""
    checks.distinct_columns(person_col=person_col, item_col=item_col)
    method = checks.choice(method, "method", METHODS)
    rho = checks.rho(rho)  # within checks.RHO_RANGE, before any charge
    delta = checks.open_unit(delta, "delta")
    relative_error = checks.positive(relative_error, "relative_error", " (e.g. 0.1 for 10%)")
    kbar = checks.integer(kbar, "kbar", 1, KBAR_LIMIT, KBAR_WHY)
    if max_items is not None:
        max_items = checks.integer(max_items, "max_items", 1, MAX_ITEMS_LIMIT, MAX_ITEMS_WHY)
    alpha = checks.open_unit(alpha, "alpha")
    count_threshold = checks.boolean(count_threshold, "count_threshold")
    checks.seed(seed)
    conversion_delta = delta if conversion_delta is None else checks.open_unit(conversion_delta, "conversion_delta")
    if delta + conversion_delta >= 1:
        raise ParameterError("delta + conversion_delta must stay below 1; lower conversion_delta.")
    parameters = {
        "rho": rho, "delta": delta, "relative_error": relative_error, "method": method,
        "person_col": person_col, "item_col": item_col, "conversion_delta": conversion_delta,
        "noise": "discrete gaussian",
    }
    if method == "pcr":
        # ε*, δ*, a, and the rule that at least one round fits (the loop's own check)
        *_, epsilon_min, delta_min, accuracy_factor = check_pcr_parameters(
            rho, delta, relative_error, kbar, epsilon_min, delta_min, accuracy_factor)
        parameters.update(kbar=kbar, epsilon_min=epsilon_min, delta_min=delta_min, accuracy_factor=accuracy_factor)
        steps = [(PCR_STEP, ZCDP(rho, delta))]
        releases = (f"up to {kbar:,} noisy counts of distinct persons per {item_col} value, each with its σ "
                    "(as many as ρ and δ allow)")
        notes = ["the loop spends adaptively: the release's budget split shows what its selections and "
                 "counts took, and the part its privacy filter held unused (still counted)"]
    else:
        if max_items is None:
            raise ParameterError(
                "method 'bounded' needs max_items (m, the most distinct items kept per person; "
                "--max-items). Choose it from public knowledge: a percentile of the data is "
                "not private."
            )
        calibrated = bounded_plan(rho, delta, max_items, alpha, relative_error)
        parameters.update(max_items=max_items, alpha=alpha, count_threshold=count_threshold)
        steps = _bounded_steps(calibrated)
        releases = (f"noisy counts of distinct persons of the {item_col} values that clear a noisy threshold "
                    f"(each person keeping at most {max_items} items), each with its σ")
        notes = [f"counts below (2 + r)σ/r = {calibrated.count_threshold:.4g} are dropped"] if count_threshold else []
    guarantee = ZCDP(rho, delta)
    return Plan(
        release=RELEASE,
        guarantee=guarantee,
        steps=steps,
        parameters=parameters,
        privacy_unit="person",
        neighbouring=f"add or remove one person (all rows sharing a {person_col} value)",
        releases=releases,
        equivalent=guarantee.to_approx(conversion_delta),
        notes=notes,
    )
