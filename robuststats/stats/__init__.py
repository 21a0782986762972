"""Statistics core: paired tests, bootstrap CIs, power, multiplicity, hypothesis verdicts,
dose-response fits and critical thresholds.

Pure numpy/scipy/statsmodels: never imports torch. Submodules load on first attribute access
so that ``robuststats power`` and ``--help`` start fast (statsmodels and pandas are slow to
import).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robuststats._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "gate_influence": "robuststats.stats._power_gate",
    "noncentral_t_power": "robuststats.stats._power_seeds_formulas",
    "DOSE_MODELS": "robuststats.stats._dose_models",
    "BootstrapResult": "robuststats.stats._bootstrap",
    "CochranQResult": "robuststats.stats._omnibus",
    "ConfidenceInterval": "robuststats.stats._common",
    "CrossedVariance": "robuststats.stats._seed_random",
    "DegenerateDataWarning": "robuststats.stats._common",
    "SeedBootstrapWarning": "robuststats.stats._common",
    "DOSE_RESPONSE_MODELS": "robuststats.stats._dose_response",
    "DiscordanceEstimate": "robuststats.stats._discordance",
    "DoseResponseFit": "robuststats.stats._dose_response",
    "EffectiveDose": "robuststats.stats._dose_response",
    "Hypothesis": "robuststats.stats._hypotheses",
    "HypothesisResult": "robuststats.stats._hypotheses",
    "MULTIPLICITY_METHODS": "robuststats.stats._multiplicity",
    "McNemarResult": "robuststats.stats._mcnemar",
    "POWER_METHODS": "robuststats.stats._power",
    "PilotPairs": "robuststats.stats._discordance",
    "PoolSizeWarning": "robuststats.stats._power",
    "TooFewSeedsError": "robuststats.stats._power_seeds",
    "PowerResult": "robuststats.stats._power",
    "SeedComponents": "robuststats.stats._seed_components",
    "SeedPowerResult": "robuststats.stats._power_seeds",
    "SeedRandomResult": "robuststats.stats._seed_random",
    "ThresholdResult": "robuststats.stats._dose_threshold",
    "adjust_pvalues": "robuststats.stats._multiplicity",
    "bootstrap_accuracy": "robuststats.stats._bootstrap",
    "bootstrap_difference": "robuststats.stats._bootstrap",
    "bootstrap_retention": "robuststats.stats._bootstrap",
    "bootstrap_retention_difference": "robuststats.stats._bootstrap",
    "cochran_q": "robuststats.stats._omnibus",
    "critical_threshold": "robuststats.stats._dose_threshold",
    "ContrastVariance": "robuststats.stats._contrast_variance",
    "paired_variance": "robuststats.stats._contrast_variance",
    "unpaired_variance": "robuststats.stats._contrast_variance",
    "crossed_variance": "robuststats.stats._seed_random",
    "independent_seeds_retention_test": "robuststats.stats._seed_random",
    "independent_seeds_test": "robuststats.stats._seed_random",
    "estimate_discordance": "robuststats.stats._discordance",
    "estimate_gate_components": "robuststats.stats._power_gate",
    "estimate_icc": "robuststats.stats._discordance",
    "estimate_seed_components": "robuststats.stats._seed_components",
    "evaluate_hypotheses": "robuststats.stats._hypotheses",
    "evaluate_hypothesis": "robuststats.stats._hypotheses",
    "fit_dose_response": "robuststats.stats._dose_response",
    "mcnemar": "robuststats.stats._mcnemar",
    "mcnemar_stratified": "robuststats.stats._mcnemar_stratified",
    "power_mcnemar": "robuststats.stats._power",
    "GateComponents": "robuststats.stats._power_gate",
    "GatePowerResult": "robuststats.stats._power_gate",
    "power_curve": "robuststats.stats._power_table",
    "power_gate": "robuststats.stats._power_gate",
    "power_table": "robuststats.stats._power_table",
    "power_seeds": "robuststats.stats._power_seeds",
    "power_seeds_curve": "robuststats.stats._power_seeds",
    "power_seeds_table": "robuststats.stats._power_seeds",
    "power_two_proportions": "robuststats.stats._power",
    "read_pilot": "robuststats.stats._discordance",
    "seed_random_accuracy": "robuststats.stats._seed_random",
    "seed_random_retention": "robuststats.stats._seed_random",
    "seed_random_retention_test": "robuststats.stats._seed_random",
    "seed_random_test": "robuststats.stats._seed_random",
    "select_dose_response": "robuststats.stats._dose_response",
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
    from robuststats.stats._common import (  # noqa: F401
        ConfidenceInterval,
        DegenerateDataWarning,
        SeedBootstrapWarning,
    )
    from robuststats.stats._contrast_variance import (  # noqa: F401
        ContrastVariance,
        paired_variance,
        unpaired_variance,
    )
    from robuststats.stats._discordance import (  # noqa: F401
        DiscordanceEstimate,
        PilotPairs,
        estimate_discordance,
        estimate_icc,
        read_pilot,
    )
    from robuststats.stats._dose_response import (  # noqa: F401
        DOSE_RESPONSE_MODELS,
        DoseResponseFit,
        EffectiveDose,
        fit_dose_response,
        select_dose_response,
    )
    from robuststats.stats._dose_threshold import (  # noqa: F401
        ThresholdResult,
        critical_threshold,
    )
    from robuststats.stats._hypotheses import (  # noqa: F401
        Hypothesis,
        HypothesisResult,
        evaluate_hypotheses,
        evaluate_hypothesis,
    )
    from robuststats.stats._mcnemar import McNemarResult, mcnemar  # noqa: F401
    from robuststats.stats._mcnemar_stratified import mcnemar_stratified  # noqa: F401
    from robuststats.stats._multiplicity import MULTIPLICITY_METHODS, adjust_pvalues  # noqa: F401
    from robuststats.stats._omnibus import CochranQResult, cochran_q  # noqa: F401
    from robuststats.stats._power import (  # noqa: F401
        POWER_METHODS,
        PoolSizeWarning,
        PowerResult,
        power_mcnemar,
        power_two_proportions,
    )
    from robuststats.stats._power_gate import (  # noqa: F401
        GateComponents,
        GatePowerResult,
        estimate_gate_components,
        power_gate,
    )
    from robuststats.stats._power_seeds import (  # noqa: F401
        SeedPowerResult,
        TooFewSeedsError,
        power_seeds,
        power_seeds_curve,
        power_seeds_table,
    )
    from robuststats.stats._power_table import power_curve, power_table  # noqa: F401
    from robuststats.stats._seed_components import (  # noqa: F401
        SeedComponents,
        estimate_seed_components,
    )
    from robuststats.stats._seed_random import (  # noqa: F401
        CrossedVariance,
        SeedRandomResult,
        crossed_variance,
        independent_seeds_retention_test,
        independent_seeds_test,
        seed_random_accuracy,
        seed_random_retention,
        seed_random_retention_test,
        seed_random_test,
    )
    from robuststats.stats._simulate import simulate_outcomes, true_effects  # noqa: F401


__getattr__, __dir__ = lazy_exports('robuststats.stats', _EXPORTS, globals())
