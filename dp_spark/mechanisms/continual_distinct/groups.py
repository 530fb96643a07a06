"""Per-group continual distinct counting: the budget of each group's counter (issue 24).

Pure numpy / fractions; never imports pyspark. The grouped release runs one
independent ungrouped mechanism (:func:`continual_counts`, the same method)
per public group key, on that group's stream after each ITEM's events are
capped to at most m of its groups (the m first of the item's own groups in
a fixed public hash order of (item, group); a per-item transformation, done
by the Spark stage). This module says how much of ρ each group's counter
gets, and proves it.

Guarantee: item-level ρ-zCDP for all groups' series together, under the
release's relation (Jain et al. 2023, Definition 1.2, "subset": any subset
of one item's events replaced by no-ops).

Proof. Let D' be D with a subset of item x's events removed; the cap keeps
x's groups G (of D) and G' (of D'), |G|, |G'| <= m, and every other item's
capped events are identical. In group g the two streams differ only in x's
events there, and:
- g in G ∩ G': x's events E'_g ⊆ E_g: a *subset* pair of group g's stream;
- g in G \\ G': D has all of x's events E_g, D' none: an *item-removal* pair;
- g in G' \\ G: D' has all of x's (remaining) events E'_g, D none: an
  item-removal pair (a group enters G' only because groups ranked before it
  lost all of x's events);
- any other g: identical streams.
So with k = |G ∩ G'| at most k subset pairs and 2(m − k) item-removal pairs
change — up to 2m groups (m = 1: x's events in a and b, a kept; remove
x's a-events and b is kept instead: both a and b change). Each group's
counter is ρ_g-zCDP under either relation, and the counters use independent
noise, so the series are (k + 2(m − k))·ρ_g ≤ 2m·ρ_g-zCDP: ``ρ_g = ρ/(2m)``
(:func:`group_factor` 2m) for "auto", "adaptive" and "baseline", whose
sparse-vector queries and recompute counts move by ≤ 1 under both relations.
"bounded" (trees only) needs less: a tree is calibrated to ℓ2² ≤ 4·w·L under
"subset" and moves by ℓ2² ≤ w·L under item-removal
(:mod:`.relations`), so the changed groups' trees add up to ℓ2² ≤ k·4wL +
2(m − k)·wL ≤ m·4wL and ``ρ_g = ρ/m`` suffices (factor m; m = 1: every
group the full ρ by parallel composition). tests/unit/test_continual_groups.py
checks every step on random subset and item-removal neighbours.

Fewer groups than that: with G public keys, only G counters exist, so the
factor is min(2m, G) (min(m, G) for "bounded"). Proof: every changed group
is one of the G keys, so at most min(2m, G) counters change, each by at most
ρ_g (either relation), and the series are min(2m, G)·ρ_g-zCDP. "bounded":
each changed group's tree moves by ℓ2² ≤ 4·w·L (a subset pair; an
item-removal pair by ≤ w·L ≤ 4·w·L), and at most G groups change, so the
sum is ≤ G·4wL; with the bound above, ≤ min(m, G)·4wL, and ρ_g =
ρ/min(m, G) suffices. G is the number of public keys, known before
anything is read (the keys are public); it is never a count from the data.

Rounding (issue 35): the chain from the charge to the noise. The plan
charges ρ (its calibrated float, the budget of the release's ``local``
filter, which counts binary values exactly: ``PrivacyFilter(...,
as_written=False)``, :func:`dp_spark.accounting.filter.fits`). Each
group's counter runs at ρ_g (:func:`group_rho`) and splits it into the
per-group parts p_1..p_n of ``budget_split`` (Σ p_i <= ρ_g exactly); its
noise at part i is calibrated to p_i (σ² >= Δ²/(2·p_i), rounded up onto
the sampler's grid), so in step i one item's neighbour costs at most
factor·p_i (above). The grouped step i is charged c_i
(:func:`grouped_budget_split`), and the chain needs, exactly:

(a) c_i >= factor·p_i for every i: no step spends more than it is
    charged, so every noise σ is at least the σ an exact-real calibration
    to the charged share c_i/factor gives;
(b) Σ c_i <= ρ: the steps fit the local filter and the guarantee.

c_i = factor·p_i rounded UP (the smallest float at or above it) gives (a).
For (b), ρ_g leaves room for that rounding: for a float x >= 2^-1022,
float_up(x) < x + ulp(x) <= x·(1 + 2^-52), so Σ float_up(factor·p_i) <=
factor·Σ p_i·(1 + 2^-52) <= factor·ρ_g·(1 + 2^-52) <= ρ with ρ_g the
largest float at or below ρ / (factor·(1 + 2^-52)) (a few ulps below
ρ/factor; :func:`group_rho`). A factor that is a power of two (1, 2, 4,
…) needs no room: factor·p_i is then a float (a power-of-two scaling of a
float in the normal range is exact), and ρ_g = ρ/factor rounded down (m =
1, "bounded": the full ρ). Given the total ρ, the last step is charged
what is left of it (``remainder``: the largest float at or below ρ − Σ of
the others): by (b) that is at least float_up(factor·p_n), so (a) holds for
it too, and the shares then sum to ρ (exactly, whenever ρ − Σ of the others
is a float; else to the float just below it). Both are checked exactly
(:class:`fractions.Fraction`) whenever the split is made, and a violation is
refused before anything is read (never seen: the bound above is a proof).
Rounding factor·p_i DOWN (as before) could charge a step less than it
spends (tests/unit/test_continual_groups.py finds such ρ).
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

from dp_spark.accounting.exact import exact, float_down, float_up, remainder
from dp_spark.errors import ParameterError

__all__ = ["group_factor", "group_rho", "grouped_budget_split", "grouped_label", "merged_records"]

#: The relative room ρ_g leaves below ρ/factor for rounding each grouped
#: step up: float_up(x) < x·(1 + 2^-52) for every float x >= 2^-1022.
ROUNDING_ROOM = Fraction(1, 2**52)


def group_factor(method: str, max_groups: int, n_groups: int | None = None) -> int:
    """The number of groups' worth of budget one item's neighbour can touch:
    m for "bounded" (trees only), 2m for the others, and never more than
    ``n_groups`` G, the number of public keys, when known (min(2m, G),
    min(m, G); module docstring). None: G not known yet (2m / m, sound)."""
    m = int(max_groups)
    if m < 1:
        raise ParameterError("max_groups must be at least 1")
    factor = m if method == "bounded" else 2 * m
    if n_groups is None:
        return factor
    if int(n_groups) < 1:
        raise ParameterError("a grouped release needs at least one public key")
    return min(factor, int(n_groups))


def group_rho(rho: float, method: str, max_groups: int, n_groups: int | None = None) -> float:
    """ρ_g, each group's counter's budget: the largest float at or below
    ρ / (``group_factor``·(1 + 2^-52)), so that the grouped steps, each
    factor·p_i rounded up, never sum above ρ (module docstring,
    "Rounding"); a few ulps below ρ/factor. A power-of-two factor needs no
    room: ρ/factor rounded down."""
    factor = group_factor(method, max_groups, n_groups)
    room = 0 if factor & (factor - 1) == 0 else ROUNDING_ROOM  # a power of two: factor·p_i exact
    return float_down(exact(rho) / (factor * (1 + room)))


def grouped_label(label: str, factor: int) -> str:
    """A budget step of the grouped release: the per-group step ``label``,
    summed over the ``factor`` group counters one item can change."""
    return f"{label}; per group at ρ/{factor} (one item's neighbour costs at most {factor} groups' worth)"


def grouped_budget_split(parts: list[tuple[str, float]], factor: int,
                         total: float | None = None) -> list[tuple[str, float]]:
    """The grouped release's budget split from one group's (``budget_split``
    at ρ_g = :func:`group_rho`): step i charged c_i = factor·p_i rounded UP
    (never less than the step spends), and, given ``total`` (the release's
    ρ, what the plan charges), the last step charged what is left of it, so
    the steps sum to ρ. Checked exactly (module docstring, "Rounding"):
    c_i >= factor·p_i and Σ c_i <= ``total``; ParameterError otherwise
    (public parameters only, before anything is read)."""
    factor = int(factor)
    wanted = [exact(part) * factor for _, part in parts]
    charged = [float_up(w) for w in wanted]
    if total is not None and charged:
        charged[-1] = remainder(total, *charged[:-1])
    if any(Fraction(c) < w for c, w in zip(charged, wanted)) or (
            total is not None and sum(map(Fraction, charged), Fraction(0)) > exact(total)):
        raise ParameterError(f"the grouped budget split does not fit its total at factor {factor}: "
                             "each group's ρ must be group_rho(ρ, ...)")
    return [(grouped_label(label, factor), c) for (label, _), c in zip(parts, charged)]


def merged_records(per_group: list[tuple], factor: int) -> list:
    """Every group's noise records as one list: records equal but for their
    number of draws are merged (their draws added); each is charged to its
    grouped step (:func:`grouped_label`). Public values only."""
    merged: dict = {}
    for records in per_group:
        for r in records:
            r = r.at(grouped_label(r.step, factor))
            key = dataclasses.replace(r, draws=None)
            key = (key.step, key.kind, key.scale, key.std, key.sensitivity, key.target,
                   tuple(sorted((k, repr(v)) for k, v in key.parameters.items())))
            if key in merged:
                old = merged[key]
                draws = None if old.draws is None or r.draws is None else old.draws + r.draws
                merged[key] = dataclasses.replace(old, draws=draws)
            else:
                merged[key] = r
    return list(merged.values())
