"""Privacy accounting in stdlib-only Python: ``costs`` (PureDP, ApproxDP, ZCDP), ``conversions``,
``composition`` (``compose``), ``filter`` (``PrivacyFilter``, exact on the decimals written; the ledger
counts through the same functions) and ``exact`` (exact arithmetic with directed rounding: costs and
noise scales up, remaining budgets down).
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
