"""The top-k plan: parameters, the guarantee and its split (ALGORITHMS.md 3, 5.1).

The guarantee and the budget split follow from the parameters alone:

- ``joint``, ``pnf-joint``, ``pnf-peel`` (Gillenwater et al. ICML 2022, Algorithm 1, its
  permute-and-flip variant, Algorithm 2): ε-DP, one step;
- ``cdp-peel`` (Durfee & Rogers 2019; Gillenwater et al. Lemma 4.2): (ε, δ)-DP, or ε-DP when δ = 0;
- ``unknown-domain`` (Rogers 2024, Algorithm 1, Theorem 4): (ε, δ)-DP, one step (δ/2-approximate
  kε'²/8-zCDP, converted with δ/2);
- ``auto`` with a public domain (:mod:`dp_spark.mechanisms.top_k.auto`): ε·s on its private choice,
  s = ``auto_share(k, ε, δ, d)`` (public; no such step when s = 0), the rest (with δ) on the selection
  by the mechanism it picks. The steps do not depend on the pick, so neither does the split; with
  δ > 0 the release is charged (ε, δ) even when it picks a pure mechanism. Without a domain ``auto`` is
  ``unknown-domain``.

Per group (``group_by``) the selection runs once per group at ε'/m (and δ/m), basic composition over a
person's ≤ m groups. ``noise="gaussian"`` (asked for by name, per group only, with a public domain)
makes the release ρ-zCDP with ρ = ε²/2 instead (the zCDP level pure ε-DP implies; a weaker guarantee
than ε-DP): the same shares of ρ, each group's bounded-range selection (``joint`` at √(8ρ'/m), or the
default ``cdp-peel`` at √(8ρ'/(m·k)) per round) costing ρ'/m (:mod:`dp_spark.mechanisms.top_k.zcdp`; a
person's ≤ m groups compose to ρ', the others do not change), and a private cap m by GEM's exponential
mechanism at √(8ρ_cap): ε-bounded range, so ρ_cap-zCDP.

A plan reads no data, not even the domain: ``domain`` only says whether a public domain is given, and
``domain_size`` is its size when known. The release reads the (public) domain before spending and
rebuilds the plan with its size, so the size limits are checked before any charge; ``--dry-run``
cannot check them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dp_spark import checks
from dp_spark.accounting import ApproxDP, PureDP, ZCDP, remainder
from dp_spark.errors import ParameterError
from dp_spark.mechanisms.top_k import cdp_peel_epsilon_per_step, unknown_domain_calibration
from dp_spark.mechanisms.top_k.auto import auto_share, public_choice
from dp_spark.plan import (ZCDP_EQUIVALENT_DELTA, GroupParams, Plan, Step, builds, check_group_column, counted_keys,
                           param, set_checked)
from dp_spark.plans import EPSILON_HELP, ITEM_COL_HELP, PERSON_COL_HELP, SEED_HELP
from dp_spark.plans.distinct_count import (MAX_GROUPS_EPSILON_SHARE, MAX_GROUPS_STEP, gaussian_label, grouped_label,
                                           grouped_rho)

RELEASE = "top-k"
METHODS = ("auto", "joint", "pnf-joint", "pnf-peel", "cdp-peel", "unknown-domain")
DOMAIN_METHODS = ("joint", "pnf-joint", "pnf-peel", "cdp-peel")
DEFAULT_KBAR = 1000
#: δ the CLI uses when the mechanism needs one and none is given (:func:`dp_spark.commands.top_k.complete`).
DEMO_DELTA = 1e-6

#: Public limits, checked before any data is read; each names the resource it protects.
MAX_K = 1000  # k items are ranked; the joint samplers' work grows as d·k
MAX_KBAR = 100_000  # unknown-domain collects kbar + 1 (item, count) rows to the driver
MAX_DOMAIN = 10_000_000  # one count per domain item is collected to the driver
MAX_JOINT_ENTRIES = 10**9  # joint / pnf-joint may sweep all d·k entries of their matrix
#: a grouped run hands G·(kbar + 1) (group, item, count) rows, or G·d domain counts, to the per-group
#: mechanisms on the executors (each group's in one task; nothing per group reaches the driver)
MAX_GROUPED_SUMMARY = 2 * 10**9
#: A grouped run's joint mechanisms (``joint``, ``pnf-joint``; grouped ``auto`` with a domain picks one of
#: them) may sweep all d·k entries of their matrix in every one of the G groups (a group without rows, all
#: counts 0, sweeps them all), so G·d·k entries in all on the executors (G: the public keys, or the release's
#: key limit MAX_TOP_K_KEYS when the keys are chosen privately). Measured on the 2-core development machine
#: while the test suite ran beside (load average 13-17): the samplers alone, one core, take 34-47 ns per
#: entry (joint, all-zero counts) up to ~110 ns (pnf-joint, Zipf counts), d·k = 10^6..10^7, memory O(d) per
#: group (<= ~100 MiB at d = 10^6); a grouped release on local[2] at G·d·k = 10^8 (G = 100, d = 50,000,
#: k = 20, 200,000 rows) took 12.9 s (joint) and 21.0 s (pnf-joint) against 4.7 s for cdp-peel, about 80
#: and 160 ns per entry beyond it. 2·10^10 entries are then at most ~1 hour of pnf-joint on that loaded
#: machine (~30 minutes of joint; minutes on a cluster). With keys chosen privately (G = 100,000, d <=
#: 20,000 by MAX_GROUPED_SUMMARY) that is d·k <= 200,000, e.g. k = 10 at the largest domain.
MAX_GROUPED_JOINT_WORK = 2 * 10**10
JOINT_MECHANISMS = ("joint", "pnf-joint")
#: public keys a grouped run takes (and privately chosen keys it keeps): each group's mechanism runs on
#: the executors, the keys are one Arrow array on the driver (issue 40)
MAX_TOP_K_KEYS = 100_000

#: The noise of a grouped release (module docstring): "laplace" (the default) or "gaussian".
NOISES = ("laplace", "gaussian")
#: ``method="auto"`` with ``noise="gaussian"``: CDP-Peel gains √k from zCDP composition over its k
#: rounds, the joint mechanism does not; chosen by measurement: see
#: benchmarks/results/2026-11-28-grouped-top-k-zcdp.md.
ZCDP_AUTO = "cdp-peel"
ZCDP_CAP_STEP = (" (sampled by the exponential mechanism at √(8ρ): ε-bounded range, so ε²/8-zCDP, Cesar & "
                 "Rogers 2021)")
ZCDP_SELECTION = {
    "joint": "ε_g = √(8ρ/m) per group: ε_g-bounded range, so ε_g²/8 = ρ/m-zCDP",
    "cdp-peel": "ε' = √(8ρ/(m·k)) per round and group: k ε'-bounded-range rounds, so k·ε'²/8 = ρ/m-zCDP",
}

#: The mechanisms in words (budget split, statement, error statement).
NAMES = {
    "joint": "the joint exponential mechanism (Gillenwater et al. 2022, Algorithm 1)",
    "pnf-joint": "joint permute-and-flip (Gillenwater et al. 2022)",
    "pnf-peel": "peeling permute-and-flip (k rounds at ε/k)",
    "cdp-peel": "one-shot Gumbel top-k with CDP accounting (Durfee & Rogers 2019)",
    "unknown-domain": "Unknown Domain Gumbel (Durfee & Rogers 2019; Rogers 2024, Algorithm 1)",
}
AUTO_CHOICE_STEP = "auto: noisy counts at ranks 1 and k (discrete Laplace) to choose between the joint mechanism and CDP-Peel"
AUTO_SELECT_STEP = ("selection with the mechanism auto chose (result.method: cdp-peel is (ε, δ)-DP, the "
                    "others ε-DP; δ is charged either way)")
AUTO_PUBLIC_STEP = ("selection with the pure ε-DP mechanism auto chose from public parameters alone "
                    "(result.method; delta = 0: nothing spent on the choice)")
AUTO_PUBLIC_DELTA_STEP = ("selection with the mechanism auto chose from public parameters alone (result.method; "
                          "nothing spent on the choice; δ is charged whichever runs)")


def limit(value: int, name: str, maximum: int, why: str) -> int:
    """``value`` if at most the public limit ``maximum``, else ParameterError saying ``why``."""
    if value > maximum:
        raise ParameterError(f"{name}={value:,} is above the limit of {maximum:,}: {why}. Lower {name}.")
    return value


def resolve_method(method: str, has_domain: bool) -> str:
    """The mechanism ``method`` names: ``auto`` stays ``auto`` with a public domain and is
    ``unknown-domain`` without; a domain mechanism without a domain raises ParameterError."""
    checks.choice(method, "method", METHODS)
    if method == "auto":
        return "auto" if has_domain else "unknown-domain"
    if method in DOMAIN_METHODS and not has_domain:
        raise ParameterError(
            f"method {method!r} needs a public domain (domain= / --domain PATH: the list "
            "of possible items, fixed before seeing the data). Treating the items observed in "
            "the data as the domain is not differentially private, because whether an item "
            "appears at all can depend on one person. Give a domain, or use method "
            "'unknown-domain', which needs none."
        )
    return method


def check_domain_size(size, k: int, mechanism: str) -> int:
    """Public limits on the domain (its size is public), before data is read."""
    size = limit(checks.whole(size, "domain_size"), "the domain size", MAX_DOMAIN,
                 "one count per domain item is collected to the driver")
    if k > size:
        raise ParameterError(f"k={k} is larger than the domain ({size} items); lower k or extend the domain.")
    if mechanism in ("joint", "pnf-joint", "auto") and size * k > MAX_JOINT_ENTRIES:
        raise ParameterError(
            f"domain size × k = {size * k:,} is above the limit of {MAX_JOINT_ENTRIES:,} for the joint "
            "mechanisms (they may sweep every entry of a k × d matrix); lower k, shrink the domain, "
            "or use method 'cdp-peel' or 'pnf-peel'."
        )
    return size


def check_grouped_joint_work(groups: int, domain_size: int, k: int, mechanism: str, private_keys: bool) -> None:
    """Refuse, from public values only and before anything is read or spent, a grouped run whose joint
    mechanism (:data:`JOINT_MECHANISMS`) would sweep more than :data:`MAX_GROUPED_JOINT_WORK` entries in
    all: G = ``groups`` groups × d = ``domain_size`` × ``k`` (G the release's key limit when the keys are
    chosen privately: ``private_keys``). The peeling mechanisms' work is O(d + k log d) per group."""
    if mechanism not in JOINT_MECHANISMS:
        return
    work = int(groups) * int(domain_size) * int(k)
    if work > MAX_GROUPED_JOINT_WORK:
        who = (f"{groups:,} groups (the release's key limit: the keys are chosen privately)" if private_keys
               else f"{groups:,} public keys")
        raise ParameterError(
            f"{who} × domain size {domain_size:,} × k = {k:,} is {work:,} entries, above the limit of "
            f"{MAX_GROUPED_JOINT_WORK:,} for method {mechanism!r} run in every group (the joint mechanisms may "
            "sweep every entry of a k × d matrix in each group, on the executors); give fewer keys"
            + (" (public keys: groups=)" if private_keys else "") +
            ", a smaller k or domain, or use method 'cdp-peel' or 'pnf-peel' (peeling, no k × d sweep).")


def grouped_mechanism(method: str, has_domain: bool, k: int, domain_size) -> str:
    """The mechanism of every group of a grouped run, from public parameters: ``method``'s, except
    ``auto`` with a domain: :func:`~dp_spark.mechanisms.top_k.auto.public_choice` at δ = 0, as a private
    choice per group would spend a share in every group."""
    mechanism = resolve_method(method, has_domain)
    if mechanism == "auto":
        return public_choice(k, 1.0, 0.0, domain_size)
    return mechanism


def zcdp_mechanism(method: str, has_domain: bool) -> str:
    """The per-group mechanism of a ``noise="gaussian"`` run: ``joint`` or ``cdp-peel`` (bounded range),
    ``auto`` = :data:`ZCDP_AUTO`; ParameterError without a public domain and for the other methods."""
    checks.choice(method, "method", METHODS)
    if not has_domain:
        raise ParameterError(
            "noise='gaussian' needs a public domain (domain= / --domain): its per-group mechanisms are the joint "
            "exponential mechanism and one-shot Gumbel top-k; Unknown Domain Gumbel, the mechanism without a "
            "domain, is only δ-approximately zCDP. Give a domain, or drop noise='gaussian'.")
    if method == "auto":
        return ZCDP_AUTO
    if method not in ("joint", "cdp-peel"):
        why = ("is only δ-approximately zCDP (Rogers 2024)" if method == "unknown-domain" else
               "is permute-and-flip, which has no bounded-range guarantee")
        raise ParameterError(
            f"noise='gaussian' runs, per group, 'joint' or 'cdp-peel' (bounded-range mechanisms: ε²/8-zCDP at ε); "
            f"method {method!r} {why}. Use method 'auto', 'joint' or 'cdp-peel', or drop noise='gaussian'.")
    return method


def guarantee_of(mechanism: str, epsilon: float, delta: float):
    """The cost a top-k release spends: (ε, δ) for ``cdp-peel``, ``unknown-domain`` and ``auto`` (any
    pick) when δ > 0, else ε."""
    if mechanism in ("cdp-peel", "unknown-domain", "auto") and delta > 0:
        return ApproxDP(epsilon, delta)
    return PureDP(epsilon)


def unknown_domain_zcdp(epsilon: float, delta: float, k: int) -> ZCDP:
    """Unknown Domain Gumbel's guarantee at the per-item ε' that makes it (ε, δ)-DP: δ/2-approximate
    (kε'²/8)-zCDP (Rogers 2024, Theorem 4)."""
    eps_item, d_thr, _ = unknown_domain_calibration(epsilon, delta, k)
    return ZCDP(k * eps_item**2 / 8.0, d_thr)


def _grouped_steps(p) -> list:
    """A grouped run's split: with ``max_groups=None`` the private cap m (ε·MAX_GROUPS_EPSILON_SHARE,
    GEM), then the selection per group at ε'/m and δ/m (:func:`grouped_label`)."""
    mechanism = grouped_mechanism(p.method, p.has_domain, p.k, p.domain_size)
    pre = []
    if p.max_groups is None:
        pre.append(Step("max_groups", MAX_GROUPS_STEP, PureDP(p.epsilon * MAX_GROUPS_EPSILON_SHARE)))
    rest = remainder(p.epsilon, *(s.cost.epsilon for s in pre))  # the parts sum to <= epsilon exactly
    what = (f"selection: {NAMES[mechanism]}" + (f", kbar = {p.kbar} per group" if mechanism == "unknown-domain"
                                                else ""))
    if mechanism in ("cdp-peel", "unknown-domain"):
        what += " (each group at (ε/m, δ/m))"
    return [*pre, Step("selection", grouped_label(what, p.max_groups), guarantee_of(mechanism, rest, p.delta))]


def _steps(mechanism: str, k: int, epsilon: float, delta: float, kbar: int, domain_size) -> list:
    """The budget split in the order spent (module docstring)."""
    cost = guarantee_of(mechanism, epsilon, delta)
    if mechanism == "auto":
        share = checks.nonnegative(auto_share(k, epsilon, delta, domain_size), "auto's share of epsilon")
        if share == 0.0:
            return [Step("selection", AUTO_PUBLIC_STEP if delta == 0.0 else AUTO_PUBLIC_DELTA_STEP, cost)]
        choice = epsilon * share
        selection = remainder(epsilon, choice)  # the parts sum to <= epsilon exactly
        return [Step("choice", AUTO_CHOICE_STEP, PureDP(choice)),
                Step("selection", AUTO_SELECT_STEP, ApproxDP(selection, delta) if delta > 0 else PureDP(selection))]
    if mechanism == "unknown-domain":
        eps_item, d_thr, d_conv = unknown_domain_calibration(epsilon, delta, k)
        zcdp = unknown_domain_zcdp(epsilon, delta, k)
        return [Step("selection", f"selection: Unknown Domain Gumbel, per-item ε' = {eps_item:.6g}, threshold δ "
                 f"= {d_thr:g}, kbar = {kbar} ({zcdp.describe()}), converted to (ε, δ)-DP "
                 f"with δ' = {d_conv:g}", cost)]
    if mechanism == "cdp-peel":
        return [Step("selection", f"selection: one-shot Gumbel top-k, per-step ε' = "
                 f"{cdp_peel_epsilon_per_step(epsilon, delta, k):.6g}", cost)]
    return [Step("selection", f"selection: {NAMES[mechanism]}", cost)]


@dataclass(frozen=True, kw_only=True)
class Params(GroupParams):
    """Every top-k parameter (default, CLI help, public limit), checked on construction. ``domain``:
    anything but None says a public domain is given (not read here); ``domain_size``: its number of
    items, set by the release once it has read the domain (then the limits are checked)."""

    MAX_KEYS: ClassVar[int] = MAX_TOP_K_KEYS

    k: int = param(help="number of items to release, in rank order", limit=MAX_K, cli_default=10, cli_type=int)
    epsilon: float = param(help=EPSILON_HELP, cli_default=1.0)
    delta: float = param(0.0, "δ for unknown-domain and for cdp-peel's (ε, δ) accounting; the other "
                         f"mechanisms are pure ε-DP (default: {DEMO_DELTA:g} where the mechanism needs δ — "
                         "unknown-domain, and auto without --domain — else 0)",
                         cli_default=None)  # the CLI fills it (commands.top_k.complete)
    method: str = param("auto", "selection mechanism: auto = unknown-domain without --domain; with one, the "
                        "mechanism auto predicts to be the most accurate (a pure one when delta = 0; any share "
                        "of epsilon spent on that choice is shown in the budget split)", choices=METHODS)
    domain: object = param(None, "public list of possible items: a text file with one item per line, or a "
                           "CSV/Parquet file with the item column (needed by joint, pnf-joint, pnf-peel, "
                           "cdp-peel)", limit=MAX_DOMAIN, cli_type=str)
    kbar: int | None = param(None, "unknown-domain: how many of the largest counts are collected (default "
                             "max(1000, 2k))", limit=MAX_KBAR, cli_type=int)
    persons: int | None = param(None, "public number (or upper bound) of persons, only used to warn when the "
                                "error bound is large next to it", cli_type=int)
    person_col: str = param("person_id", PERSON_COL_HELP)
    item_col: str = param("item", ITEM_COL_HELP)
    domain_size: int | None = param(None, "the public domain's number of items", limit=MAX_DOMAIN,
                                    api=False, cli=False)
    seed: int | None = param(None, SEED_HELP, cli_type=int)
    noise: str | None = param(None, "per-group selection of a grouped release: laplace (the default: each group "
                              "at ε/m, pure ε-DP, or (ε, δ)-DP for cdp-peel and unknown-domain) or gaussian "
                              "(ρ-zCDP with ρ = ε²/2, √m scaling across a person's m groups, with a public domain; "
                              "more accurate when persons are in many groups, but a weaker guarantee than ε-DP); "
                              "an ungrouped release is unchanged (laplace)", choices=NOISES, cli_type=str)

    def __post_init__(self):
        k = limit(checks.whole(self.k, "k"), "k", MAX_K, "top-k ranks k items and the joint samplers' time grows as d·k")
        set_checked(self, k=k)
        checks.distinct_columns(person_col=self.person_col, item_col=self.item_col)
        set_checked(self, epsilon=checks.epsilon(self.epsilon))  # within checks.EPSILON_RANGE, before any charge
        set_checked(self, delta=checks.delta(self.delta, "delta", allow_zero=True))
        self.check_groups()
        if self.group_by is not None:
            # release.groups' columns: a group column of the same name would fail after spending
            check_group_column(self.group_by, ("rank", "item", "error"), person_col=self.person_col,
                               item_col=self.item_col)
        if self.noise is not None:
            set_checked(self, noise=checks.choice(self.noise, "noise", NOISES))
            if self.group_by is None and self.noise != "laplace":
                raise ParameterError(f"noise={self.noise!r} is available per group only (with group_by=); an "
                                     "ungrouped top-k is pure ε-DP or (ε, δ)-DP by its method (noise='laplace').")
        if self.gaussian:
            zcdp_mechanism(self.method, self.has_domain)  # refused here, before anything is read
            if self.delta > 0.0:
                raise ParameterError("noise='gaussian' is ρ-zCDP with ρ = ε²/2 and spends no δ (its per-group "
                                     "mechanisms need none); drop delta.")
        mechanism = self.mechanism
        if mechanism == "unknown-domain" and self.delta == 0.0:
            reason = "no public domain was given, so method 'auto' uses" if self.method == "auto" else "method"
            raise ParameterError(
                f"{reason} 'unknown-domain', which needs delta > 0 (e.g. delta=1e-6); "
                "or give a public domain for pure ε-DP with 'joint'."
            )
        kbar = limit(checks.whole(max(DEFAULT_KBAR, 2 * k) if self.kbar is None else self.kbar, "kbar"), "kbar",
                     MAX_KBAR, "unknown-domain collects kbar + 1 item counts to the driver")
        set_checked(self, kbar=kbar)
        if mechanism == "unknown-domain" and k > kbar:
            raise ParameterError(f"k={k} is larger than kbar={kbar}; raise kbar to at least k.")
        checks.seed(self.seed)
        set_checked(self, persons=None if self.persons is None else checks.whole(self.persons, "persons"))
        if self.domain_size is not None:
            set_checked(self, domain_size=check_domain_size(self.domain_size, k, mechanism))
            if self.group_by is not None and (self.groups is None or counted_keys(self.groups) is not None):
                # keys from a file or a DataFrame are counted when read, before spending (releases.top_k)
                n = type(self).MAX_KEYS if self.groups is None else counted_keys(self.groups)
                check_grouped_joint_work(n, self.domain_size, k, mechanism, self.groups is None)

    @property
    def has_domain(self) -> bool:
        return self.domain is not None or self.domain_size is not None

    @property
    def mechanism(self) -> str:
        """The mechanism ``method`` names; per group in a grouped run."""
        if self.gaussian:
            return zcdp_mechanism(self.method, self.has_domain)
        if self.group_by is not None:
            return grouped_mechanism(self.method, self.has_domain, self.k, self.domain_size)
        return resolve_method(self.method, self.has_domain)

    @property
    def gaussian(self) -> bool:
        """A grouped ρ-zCDP run (``noise="gaussian"``: refused without ``group_by``)."""
        return self.noise == "gaussian"


@builds(Params)
def plan(params: Params) -> Plan:
    """The top-k release's plan (person level; ε-DP or (ε, δ)-DP by ``method``: module docstring)."""
    p = params
    k, epsilon, delta, kbar, domain_size, has_domain = p.k, p.epsilon, p.delta, p.kbar, p.domain_size, p.has_domain
    mechanism = p.mechanism
    parameters = {
        "k": k, "epsilon": epsilon, "delta": delta, "method": p.method,
        "person_col": p.person_col, "item_col": p.item_col,
        "domain": _domain_words(has_domain, domain_size), "persons": p.persons,
    }
    if mechanism == "unknown-domain":
        parameters["kbar"] = kbar
    parameters.update(p.group_parameters())  # {} when not grouped: an ungrouped plan is unchanged
    notes = []
    if has_domain and domain_size is None:
        notes.append("the domain is read when the release runs; its size limits are checked then, "
                     "before anything is spent")
    releases = (f"the {k} {p.item_col} values held by the most distinct persons, in order"
                + (", from the public domain" if has_domain else "")
                + (", chosen by the mechanism auto picks" if mechanism == "auto" else f", chosen by "
                   f"{NAMES[mechanism]}")
                + ("" if p.group_by is None else f", per public key of {p.group_by}") + "; no counts")
    if p.gaussian:
        return _gaussian_plan(p, parameters, releases, tuple(notes))
    return Plan(
        release=RELEASE,
        guarantee=guarantee_of(mechanism, epsilon, delta),
        steps=(_steps(mechanism, k, epsilon, delta, kbar, domain_size) if p.group_by is None
               else _grouped_steps(p)),
        parameters=parameters,
        privacy_unit="person",
        neighbouring=f"add or remove one person (all rows sharing a {p.person_col} value)",
        releases=releases,
        notes=tuple(notes),
    )


def _gaussian_plan(p, parameters: dict, releases: str, notes: tuple) -> Plan:
    """The grouped ρ-zCDP plan (``noise="gaussian"``, module docstring), ρ =
    :func:`~dp_spark.plans.distinct_count.grouped_rho`, stating its (ε, δ') equivalent at
    ZCDP_EQUIVALENT_DELTA. Private keys are refused by :func:`dp_spark.plan.with_private_keys`."""
    rho = grouped_rho(p.epsilon)
    mechanism = p.mechanism
    steps = []
    if p.max_groups is None:
        steps.append(Step("max_groups", MAX_GROUPS_STEP + ZCDP_CAP_STEP, ZCDP(rho * MAX_GROUPS_EPSILON_SHARE)))
    rest = remainder(rho, *(s.cost.rho for s in steps))  # the parts sum to <= rho exactly
    steps.append(Step("selection", gaussian_label(f"selection: {NAMES[mechanism]}", p.max_groups,
                                                  ZCDP_SELECTION[mechanism]), ZCDP(rest)))
    guarantee = ZCDP(rho)
    return Plan(
        release=RELEASE,
        guarantee=guarantee,
        steps=steps,
        parameters={**parameters, "noise": "gaussian", "rho": rho, "method_per_group": mechanism},
        privacy_unit="person",
        neighbouring=f"add or remove one person (all rows sharing a {p.person_col} value)",
        releases=releases,
        equivalent=guarantee.to_approx(ZCDP_EQUIVALENT_DELTA),
        notes=(*notes, f"ρ-zCDP with ρ = ε²/2 = {rho:g} for ε = {p.epsilon:g}: the zCDP level that ε-DP implies, "
                       "a weaker guarantee than ε-DP (asked for by noise='gaussian')"),
    )


def _domain_words(has_domain: bool, size) -> str | None:
    if not has_domain:
        return None
    return "a public domain" if size is None else f"{size} public items"
