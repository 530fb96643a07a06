"""Privacy accounting: costs, conversions, composition and a privacy filter.

Pure numpy-free Python (stdlib only). See ``costs`` (PureDP, ApproxDP, ZCDP),
``conversions`` (zCDP <-> (ε, δ), pure/bounded-range/Gaussian -> zCDP),
``composition`` (``compose``), ``filter`` (``PrivacyFilter``, exact on
the decimals written: 0.9 then 0.1 fill 1, no overspend; the ledger counts
through the same ``amounts``/``fits``) and ``exact`` (``written``: the
decimal a parameter was written as; ``calibrate``: the float a mechanism
runs at, at most that decimal; directed rounding: costs and noise scales
up, remaining budgets down).
"""

from dp_spark.accounting.composition import compose, convert_cost
from dp_spark.accounting.conversions import (
    bounded_range_to_zcdp,
    gaussian_zcdp,
    pure_to_zcdp,
    zcdp_to_approx_epsilon,
)
from dp_spark.accounting.costs import ZCDP, ApproxDP, PrivacyCost, PureDP
from dp_spark.accounting.exact import float_down, float_up, ratio_up, remainder, share_down
from dp_spark.accounting.filter import PrivacyFilter

__all__ = [
    "PureDP",
    "ApproxDP",
    "ZCDP",
    "PrivacyCost",
    "compose",
    "convert_cost",
    "zcdp_to_approx_epsilon",
    "pure_to_zcdp",
    "bounded_range_to_zcdp",
    "gaussian_zcdp",
    "PrivacyFilter",
    "float_up",
    "float_down",
    "ratio_up",
    "remainder",
    "share_down",
]
