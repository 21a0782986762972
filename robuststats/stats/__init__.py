"""Statistics core: paired tests, bootstrap CIs, power, multiplicity, hypothesis verdicts.

Pure numpy/scipy/statsmodels: never imports torch.
"""

from __future__ import annotations

from robuststats.stats._common import ConfidenceInterval, DegenerateDataWarning

__all__ = ["ConfidenceInterval", "DegenerateDataWarning"]
