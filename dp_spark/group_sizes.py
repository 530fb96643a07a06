"""A grouped report's summary of every group's released size (``result["group_sizes"]``), whatever
the number of keys: the largest groups and a histogram on 1-2-5 bins. Post-processing of released
values and public keys only; pure numpy (the HTML report draws it without a Spark action)."""

from __future__ import annotations

import math

import numpy as np


#: Groups named in a grouped report's ``group_sizes["largest"]``.
LARGEST_GROUPS = 12


def size_edges(low: float, high: float) -> list[float]:
    """Bin edges 1-2-5 per decade from ``low`` (below 0 when some sizes are: noisy counts can be) to
    past ``high``: [.., 0, 1, 2, 5, 10, 20, ...], each bin [edges[i], edges[i+1])."""
    edges = [float(math.floor(low))] if low < 0 else []
    edges += [0.0, 1.0]
    step = 0
    while edges[-1] <= high:
        step += 1
        edges.append(float((1, 2, 5)[step % 3] * 10 ** (step // 3)) if step % 3 else float(10 ** (step // 3)))
    return edges


def size_summary(keys, sizes, measure: str, largest: int = LARGEST_GROUPS) -> dict:
    """``result["group_sizes"]`` of a grouped release: every group's released size (``sizes``, one
    per key in key order: a released estimate or a number of released values) summarised for the
    report: the ``largest`` groups (ties in key order) and a histogram of all of them on 1-2-5 bins.
    Post-processing of released values and public keys; O(largest + bins) values, whatever the
    number of keys (the per-group rows themselves are in ``release.groups``)."""
    sizes = np.asarray(sizes, dtype=np.float64)
    if sizes.shape != (len(keys),):
        raise ValueError("size_summary: one size per key")
    if not len(keys):
        return {"measure": measure, "groups": 0, "largest": [], "edges": [], "counts": []}
    top = np.argsort(-sizes, kind="stable")[:largest]
    edges = size_edges(float(sizes.min()), float(sizes.max()))
    counts = np.histogram(sizes, bins=np.asarray(edges))[0]
    # np.histogram's last bin is closed; the edges end past the maximum, so no size sits on it
    return {"measure": measure, "groups": int(len(keys)),
            "largest": [{"group": keys[int(i)], "size": _number(sizes[i])} for i in top],
            "edges": [_number(e) for e in edges], "counts": [int(c) for c in counts]}


def _number(value: float):
    return int(value) if float(value).is_integer() else float(value)
