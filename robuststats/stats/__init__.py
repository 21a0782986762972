"""Statistics core: paired tests, bootstrap CIs, power, multiplicity, hypothesis verdicts.

Pure numpy/scipy/statsmodels: never imports torch.
"""

from __future__ import annotations

from robuststats.stats._common import ConfidenceInterval, DegenerateDataWarning
from robuststats.stats._pilot import DiscordanceEstimate, estimate_discordance
from robuststats.stats._power import PoolSizeWarning, PowerResult, power_mcnemar
from robuststats.stats._power_unpaired import power_two_proportions

__all__ = [
    "ConfidenceInterval",
    "DegenerateDataWarning",
    "DiscordanceEstimate",
    "PoolSizeWarning",
    "PowerResult",
    "estimate_discordance",
    "power_mcnemar",
    "power_two_proportions",
]
