"""Statistics core: paired tests, bootstrap CIs, power, multiplicity, hypothesis verdicts.

Pure numpy/scipy/statsmodels: never imports torch.
"""

from __future__ import annotations

from robuststats.stats._bootstrap import (
    BootstrapResult,
    bootstrap_accuracy,
    bootstrap_difference,
    bootstrap_retention,
    bootstrap_retention_difference,
)
from robuststats.stats._common import ConfidenceInterval, DegenerateDataWarning
from robuststats.stats._hypotheses import (
    Hypothesis,
    HypothesisResult,
    evaluate_hypotheses,
    evaluate_hypothesis,
)
from robuststats.stats._mcnemar import McNemarResult, mcnemar
from robuststats.stats._mcnemar_stratified import mcnemar_stratified
from robuststats.stats._multiplicity import adjust_pvalues
from robuststats.stats._outcomes import AlignedOutcomes, align_conditions, validate_outcomes
from robuststats.stats._pilot import DiscordanceEstimate, estimate_discordance
from robuststats.stats._power import PoolSizeWarning, PowerResult, power_mcnemar
from robuststats.stats._power_unpaired import power_two_proportions

__all__ = [
    "AlignedOutcomes",
    "BootstrapResult",
    "ConfidenceInterval",
    "DegenerateDataWarning",
    "DiscordanceEstimate",
    "Hypothesis",
    "HypothesisResult",
    "McNemarResult",
    "PoolSizeWarning",
    "PowerResult",
    "adjust_pvalues",
    "align_conditions",
    "bootstrap_accuracy",
    "bootstrap_difference",
    "bootstrap_retention",
    "bootstrap_retention_difference",
    "estimate_discordance",
    "evaluate_hypotheses",
    "evaluate_hypothesis",
    "mcnemar",
    "mcnemar_stratified",
    "power_mcnemar",
    "power_two_proportions",
    "validate_outcomes",
]
