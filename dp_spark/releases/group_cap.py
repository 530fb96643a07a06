"""The private choice of the group cap m, shared by the grouped releases (issue 24).

A grouped release with ``max_groups=None`` spends the plan's ``max_groups``
step (ε₀) on choosing m before its Spark stage, then caps every person to m
groups. :func:`choose_and_cap` does both for any grouped edge table:

- m in 1..M, M = the number of public keys (a person holds at most M of
  them), chosen ε₀-DP by :func:`dp_spark.mechanisms.groups.choose_max_groups`
  (GEM over q_m = Σ_p min(|G_p|, m), sensitivity m) from the NON-PRIVATE
  groups-per-person histogram (:func:`dp_spark.stages.groups.groups_per_person_histogram`:
  M numbers reach the driver, the histogram is dropped right after);
- the edge table capped to m groups per person
  (:func:`dp_spark.stages.groups.cap_groups`, a per-person transformation).

m is a released DP value: the rest of the release runs conditioned on it
(adaptive basic composition), so its per-group ε'/m is sound for the chosen
m. Used by the grouped top-k (:mod:`dp_spark.releases.top_k`). The
grouped distinct-count made this choice too; it now chooses m together with
its bound l by what its counts' noise costs
(:mod:`dp_spark.mechanisms.distinct_count.cap_bound`), since the rows kept
ignore that a larger m multiplies every group's noise by m.
"""

from __future__ import annotations

from dp_spark.mechanisms.groups import cap_record, choose_max_groups
from dp_spark.stages.groups import cap_groups, groups_per_person_histogram

#: GEM's failure probability in the private choice of the group cap.
CAP_GEM_BETA = 0.05
#: ``parameters["max_groups_chosen"]`` of a release whose m was chosen privately.
CHOSEN = "privately (GEM over the rows each cap keeps)"


def choose_cap(edge_df, n_keys: int, epsilon: float, rng):
    """(m, the record of the choice): m in 1..M (M = ``n_keys``) chosen
    ε-DP from the groups-per-person histogram (module docstring). Logs
    nothing: M is the number of keys, which a private key step draws, so the
    caller logs the step (public words only) before it knows M."""
    top = int(n_keys)  # with keys chosen privately a drawn number: not shown before the record
    histogram = groups_per_person_histogram(edge_df, top)
    m = int(choose_max_groups(histogram, epsilon, rng, method="gem", beta=CAP_GEM_BETA))
    del histogram  # non-private
    return m, cap_record(top, epsilon, CAP_GEM_BETA)


def choose_and_cap(edge_df, n_keys: int, epsilon: float, rng):
    """(m, the edge table capped to m groups per person, the record of the
    choice): :func:`choose_cap` then :func:`~dp_spark.stages.groups.cap_groups`."""
    m, drawn = choose_cap(edge_df, n_keys, epsilon, rng)
    return m, cap_groups(edge_df, m), drawn
