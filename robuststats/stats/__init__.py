"""Statistics core: paired tests, bootstrap CIs, power, multiplicity, hypothesis verdicts.

Pure numpy/scipy/statsmodels: never imports torch. Submodules load on first attribute access
so that ``robuststats power`` and ``--help`` start fast (statsmodels and pandas are slow to
import).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "BootstrapResult": "robuststats.stats._bootstrap",
    "ConfidenceInterval": "robuststats.stats._common",
    "CrossedVariance": "robuststats.stats._seed_random",
    "DegenerateDataWarning": "robuststats.stats._common",
    "DiscordanceEstimate": "robuststats.stats._pilot",
    "Hypothesis": "robuststats.stats._hypotheses",
    "HypothesisResult": "robuststats.stats._hypotheses",
    "McNemarResult": "robuststats.stats._mcnemar",
    "PoolSizeWarning": "robuststats.stats._power",
    "PowerResult": "robuststats.stats._power",
    "SeedRandomResult": "robuststats.stats._seed_random",
    "adjust_pvalues": "robuststats.stats._multiplicity",
    "bootstrap_accuracy": "robuststats.stats._bootstrap",
    "bootstrap_difference": "robuststats.stats._bootstrap",
    "bootstrap_retention": "robuststats.stats._bootstrap",
    "bootstrap_retention_difference": "robuststats.stats._bootstrap",
    "crossed_variance": "robuststats.stats._seed_random",
    "estimate_discordance": "robuststats.stats._pilot",
    "evaluate_hypotheses": "robuststats.stats._hypotheses",
    "evaluate_hypothesis": "robuststats.stats._hypotheses",
    "mcnemar": "robuststats.stats._mcnemar",
    "mcnemar_stratified": "robuststats.stats._mcnemar_stratified",
    "power_mcnemar": "robuststats.stats._power",
    "power_two_proportions": "robuststats.stats._power_unpaired",
    "seed_random_accuracy": "robuststats.stats._seed_random",
    "seed_random_retention": "robuststats.stats._seed_random",
    "seed_random_retention_test": "robuststats.stats._seed_random",
    "seed_random_test": "robuststats.stats._seed_random",
    "simulate_outcomes": "robuststats.stats._simulate",
    "true_effects": "robuststats.stats._simulate",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # static analysers see the real names
    from robuststats.stats._bootstrap import (  # noqa: F401
        BootstrapResult,
        bootstrap_accuracy,
        bootstrap_difference,
        bootstrap_retention,
        bootstrap_retention_difference,
    )
    from robuststats.stats._common import ConfidenceInterval, DegenerateDataWarning  # noqa: F401
    from robuststats.stats._hypotheses import (  # noqa: F401
        Hypothesis,
        HypothesisResult,
        evaluate_hypotheses,
        evaluate_hypothesis,
    )
    from robuststats.stats._mcnemar import McNemarResult, mcnemar  # noqa: F401
    from robuststats.stats._mcnemar_stratified import mcnemar_stratified  # noqa: F401
    from robuststats.stats._multiplicity import adjust_pvalues  # noqa: F401
    from robuststats.stats._pilot import DiscordanceEstimate, estimate_discordance  # noqa: F401
    from robuststats.stats._power import PoolSizeWarning, PowerResult, power_mcnemar  # noqa: F401
    from robuststats.stats._power_unpaired import power_two_proportions  # noqa: F401
    from robuststats.stats._seed_random import (  # noqa: F401
        CrossedVariance,
        SeedRandomResult,
        crossed_variance,
        seed_random_accuracy,
        seed_random_retention,
        seed_random_retention_test,
        seed_random_test,
    )
    from robuststats.stats._simulate import simulate_outcomes, true_effects  # noqa: F401


def __getattr__(name: str) -> Any:
    try:
        module_name = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'robuststats.stats' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
