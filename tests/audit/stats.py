"""Statistics for the audit tier: empirical lower bounds on ε from
distinguishing runs on neighbouring inputs.

A mechanism M is (ε, δ)-DP only if, for every event S and neighbours D, D',
P[M(D) ∈ S] <= e^ε P[M(D') ∈ S] + δ. Running M n times on each input and
counting how often S happens gives Clopper–Pearson intervals for both
probabilities; the smallest ε consistent with them,

    ε_lb = ln((p_lo(D) − δ) / p_hi(D')),

is a lower bound on the true ε that holds with confidence 1 − α (α split
over the two intervals). An audit test fails when ε_lb exceeds the claimed
ε: the mechanism is then provably leakier than it says.

Each audit also shows that it can fail: the same event and trial count run
against a deliberately broken variant (noise scale halved, i.e. about 2ε)
must give ε_lb above the claimed ε (``assert_detects``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import stats

#: Confidence of every audit bound (two one-sided intervals at α/2 each).
ALPHA = 1e-3


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Exact two-sided (1 − α) interval for a binomial proportion k/n."""
    if not 0 <= k <= n or n <= 0:
        raise ValueError(f"need 0 <= k <= n, n > 0; got k={k}, n={n}")
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def epsilon_lower_bound(k1: int, n1: int, k2: int, n2: int, delta: float = 0.0,
                        alpha: float = ALPHA) -> float:
    """Lower bound on ε from event counts: k1 of n1 runs on D, k2 of n2 on D'.

    Uses the one-sided bounds p1 >= p1_lo and p2 <= p2_hi, each at level
    α/2 (so the pair holds with probability >= 1 − α). Returns 0.0 when the
    counts show no leakage.
    """
    p1_lo = clopper_pearson(k1, n1, alpha)[0]
    p2_hi = clopper_pearson(k2, n2, alpha)[1]
    num = p1_lo - delta
    if num <= 0.0 or p2_hi <= 0.0:
        return 0.0
    return max(0.0, math.log(num / p2_hi))


def two_sided_lower_bound(k1: int, n1: int, k2: int, n2: int, delta: float = 0.0,
                          alpha: float = ALPHA) -> float:
    """The larger of the two directions (S on D vs D', and the complement
    event, i.e. the other way round), with α split over both."""
    return max(
        epsilon_lower_bound(k1, n1, k2, n2, delta, alpha / 2),
        epsilon_lower_bound(n2 - k2, n2, n1 - k1, n1, delta, alpha / 2),
    )


@dataclass(frozen=True)
class AuditResult:
    mechanism: str
    claimed: float
    lower_bound: float
    trials: int
    delta: float = 0.0

    def line(self) -> str:
        d = f", δ = {self.delta:g}" if self.delta else ""
        return (f"{self.mechanism:<45} claimed ε = {self.claimed:<8g}{d}  "
                f"empirical ε lower bound = {self.lower_bound:.3f}  ({self.trials:,} trials per input)")


#: Filled by audit tests through the ``audit_record`` fixture; printed at the end of the run.
RESULTS: list[AuditResult] = []


def assert_detects(mechanism: str, claimed: float, lower_bound_of_broken: float) -> None:
    """The audit's power check: on a deliberately broken variant (about 2ε),
    the same event and trial count must prove a leak above the claim."""
    assert lower_bound_of_broken > claimed, (
        f"{mechanism}: the audit cannot detect a factor-2 mistake "
        f"(broken variant's bound {lower_bound_of_broken:.3f} <= claimed {claimed:g}); "
        "use a sharper event or more trials"
    )
