"""Public settings of per-group releases, shared by the group-cap stage and
the choice of the cap (:mod:`dp_spark.mechanisms.groups`)."""

from __future__ import annotations

#: The largest public maximum M of the groups-per-person histogram and of a
#: cap m: the driver receives M numbers and the mechanism scores M candidates,
#: so M bounds both (a person in more groups than M is counted at M).
MAX_GROUPS_LIMIT = 100_000
