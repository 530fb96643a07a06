"""The private choice of the group cap m for the grouped top-k.

With ``max_groups=None`` the release spends the plan's ``max_groups`` step
(ε₀) on choosing m before its Spark stage, then caps every person to m
groups (:func:`choose_and_cap`). m in 1..M (M public keys) is chosen ε₀-DP
by :func:`dp_spark.mechanisms.groups.choose_max_groups` (GEM over
q_m = Σ_p min(|G_p|, m), sensitivity m) from the NON-PRIVATE
groups-per-person histogram (M numbers reach the driver); the cap
(:func:`dp_spark.stages.groups.cap_groups`) is a per-person transformation.
m is released and the rest runs conditioned on it (adaptive basic
composition), so its per-group ε'/m is sound. The grouped distinct-count
chooses m jointly with its bound instead
(:mod:`dp_spark.mechanisms.distinct_count.cap_bound`): the rows kept ignore
that a larger m multiplies every group's noise.
"""

from __future__ import annotations

from dp_spark.mechanisms.groups import cap_record, choose_max_groups
from dp_spark.stages.groups import cap_groups, groups_per_person_histogram

#: GEM's failure probability in the private choice of the group cap.
CAP_GEM_BETA = 0.05
#: ``parameters["max_groups_chosen"]`` of a release whose m was chosen privately.
CHOSEN = "privately (GEM over the rows each cap keeps)"


def choose_cap(edge_df, n_keys: int, epsilon: float, rng, counted: int | None = None):
    """(m, the choice's record): m chosen ε-DP among 1..M, M = ``n_keys``
    (module docstring). ``counted``: the public length the Spark pass
    counts the histogram at (>= M; default M): the release's key limit when a
    private key step released the keys, so the Spark job (its cap literal)
    does not show how many it released. The histogram at M is then folded
    from it on the driver: entries j < M as counted, entry M the sum of the
    rest (persons with >= M groups), the same histogram (post-processing of
    the NON-PRIVATE counts, before the draw). Logs nothing: M may be drawn by
    a private key step, so the caller logs first."""
    top = int(n_keys)  # with keys chosen privately a drawn number: not shown before the record
    length = top if counted is None else int(counted)
    if length < top:
        raise ValueError("counted must be at least n_keys")
    counts = groups_per_person_histogram(edge_df, length)
    histogram = counts[:top].copy()
    histogram[top - 1] += counts[top:].sum()  # capped at M: every person with M or more groups
    del counts
    m = int(choose_max_groups(histogram, epsilon, rng, method="gem", beta=CAP_GEM_BETA))
    del histogram  # non-private
    return m, cap_record(top, epsilon, CAP_GEM_BETA)


def choose_and_cap(edge_df, n_keys: int, epsilon: float, rng, counted: int | None = None):
    """(m, the edge table capped to m groups per person, the choice's record); ``counted`` as
    :func:`choose_cap`."""
    m, drawn = choose_cap(edge_df, n_keys, epsilon, rng, counted)
    return m, cap_groups(edge_df, m), drawn
