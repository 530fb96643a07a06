"""Private selection: release the index of one (or a few) good candidates.

All mechanisms are pure numpy/scipy, take the candidates' scores as an array
and an explicit ``numpy.random.Generator`` named ``rng``, and return indices.
Scores are private; their sensitivities are public and fixed in advance.

- :mod:`.exponential`: exponential mechanism, report-noisy-max,
  permute-and-flip.
- :mod:`.gem`: Generalized Exponential Mechanism (Raskhodnikova & Smith),
  candidates with different sensitivities (Knop & Steinke, Algorithm 3).
- :mod:`.topk`: joint exponential mechanism for top-k (Gillenwater et al.),
  its permute-and-flip variant, peeling baselines, Unknown Domain Gumbel.
"""

from dp_spark.selection.exponential import (
    exponential_mechanism,
    exponential_mechanism_probabilities,
    permute_and_flip,
    report_noisy_max,
)
from dp_spark.selection.gem import (
    gem_normalized_scores,
    gem_normalized_scores_naive,
    generalized_exponential,
    generalized_exponential_probabilities,
)
from dp_spark.selection.topk import (
    UnknownDomainResult,
    cdp_peel_epsilon_per_step,
    cdp_peel_top_k,
    joint_top_k,
    pnf_joint_top_k,
    pnf_peel_top_k,
    unknown_domain_gumbel,
    unknown_domain_threshold,
)

__all__ = [
    "exponential_mechanism",
    "exponential_mechanism_probabilities",
    "report_noisy_max",
    "permute_and_flip",
    "gem_normalized_scores",
    "gem_normalized_scores_naive",
    "generalized_exponential",
    "generalized_exponential_probabilities",
    "joint_top_k",
    "pnf_joint_top_k",
    "pnf_peel_top_k",
    "cdp_peel_top_k",
    "cdp_peel_epsilon_per_step",
    "unknown_domain_gumbel",
    "unknown_domain_threshold",
    "UnknownDomainResult",
]
