"""Statistics core: paired tests, bootstrap CIs, power, multiplicity, hypothesis verdicts,
dose-response fits and critical thresholds.

Pure numpy/scipy/statsmodels: never imports torch. Submodules load on first attribute access
so that ``robuststats power`` and ``--help`` start fast (statsmodels and pandas are slow to
import).

The public API is the names exported here. The implementation is grouped by what it does:
``power/`` (planning items, seeds and gates), ``dose/`` (dose-response fits and the critical
threshold) and ``resampling/`` (the two-way bootstrap). The top-level modules hold the core
those build on (the result types and warnings of ``_common``, the paired tests and
intervals, the seed-random t with its crossed variance and its reference for few seeds)
and the rest: multiplicity, the hypotheses' verdicts, the pilot estimates, the simulator. A
module outside a subpackage uses only what that subpackage's ``__init__`` exports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robuststats._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "ConfidenceInterval": "robuststats.stats._common",
    "DegenerateDataWarning": "robuststats.stats._common",
    "SeedBootstrapWarning": "robuststats.stats._common",
    "ContrastVariance": "robuststats.stats._contrast_variance",
    "paired_variance": "robuststats.stats._contrast_variance",
    "unpaired_variance": "robuststats.stats._contrast_variance",
    "DiscordanceEstimate": "robuststats.stats._discordance",
    "Estimability": "robuststats.stats._estimability",
    "clip_interval": "robuststats.stats._estimability",
    "retention_estimability": "robuststats.stats._estimability",
    "estimate_discordance": "robuststats.stats._discordance",
    "estimate_icc": "robuststats.stats._discordance",
    "PilotPairs": "robuststats.stats._discordance",
    "read_pilot": "robuststats.stats._discordance",
    "evaluate_hypotheses": "robuststats.stats._hypotheses",
    "evaluate_hypothesis": "robuststats.stats._hypotheses",
    "Hypothesis": "robuststats.stats._hypotheses",
    "HypothesisResult": "robuststats.stats._hypotheses",
    "mcnemar": "robuststats.stats._mcnemar",
    "McNemarResult": "robuststats.stats._mcnemar",
    "mcnemar_stratified": "robuststats.stats._mcnemar_stratified",
    "ParameterError": "robuststats.stats._parameters",
    "adjust_pvalues": "robuststats.stats._multiplicity",
    "MULTIPLICITY_METHODS": "robuststats.stats._multiplicity",
    "cochran_q": "robuststats.stats._omnibus",
    "CochranQResult": "robuststats.stats._omnibus",
    "estimate_seed_components": "robuststats.stats._seed_components",
    "SeedComponents": "robuststats.stats._seed_components",
    "crossed_variance": "robuststats.stats._seed_random",
    "CrossedVariance": "robuststats.stats._seed_random",
    "independent_seeds_retention_test": "robuststats.stats._seed_random",
    "independent_seeds_test": "robuststats.stats._seed_random",
    "seed_random_accuracy": "robuststats.stats._seed_random",
    "seed_random_retention": "robuststats.stats._seed_random",
    "seed_random_retention_test": "robuststats.stats._seed_random",
    "seed_random_test": "robuststats.stats._seed_random",
    "SeedRandomResult": "robuststats.stats._seed_random",
    "simulate_outcomes": "robuststats.stats._simulate",
    "true_effects": "robuststats.stats._simulate",
    "DoseResponseFit": "robuststats.stats.dose._curve",
    "EffectiveDose": "robuststats.stats.dose._curve",
    "DOSE_MODELS": "robuststats.stats.dose._models",
    "DOSE_RESPONSE_MODELS": "robuststats.stats.dose._response",
    "fit_dose_response": "robuststats.stats.dose._response",
    "select_dose_response": "robuststats.stats.dose._response",
    "critical_threshold": "robuststats.stats.dose._threshold",
    "ThresholdResult": "robuststats.stats.dose._threshold",
    "PoolSizeWarning": "robuststats.stats.power._design",
    "UnreachablePowerError": "robuststats.stats.power._design",
    "GatePowerResult": "robuststats.stats.power._gate",
    "power_gate": "robuststats.stats.power._gate",
    "estimate_gate_components": "robuststats.stats.power._gate_components",
    "gate_influence": "robuststats.stats.power._gate_components",
    "GateComponents": "robuststats.stats.power._gate_components",
    "power_mcnemar": "robuststats.stats.power._mcnemar",
    "POWER_METHODS": "robuststats.stats.power._mcnemar",
    "power_two_proportions": "robuststats.stats.power._mcnemar",
    "PowerResult": "robuststats.stats.power._mcnemar",
    "power_seeds": "robuststats.stats.power._seeds",
    "SeedPowerResult": "robuststats.stats.power._seeds",
    "TooFewSeedsError": "robuststats.stats.power._seeds",
    "noncentral_t_power": "robuststats.stats.power._seeds_formulas",
    "power_seeds_curve": "robuststats.stats.power._seeds_table",
    "power_seeds_table": "robuststats.stats.power._seeds_table",
    "power_curve": "robuststats.stats.power._table",
    "power_table": "robuststats.stats.power._table",
    "bootstrap_accuracy": "robuststats.stats.resampling._bootstrap",
    "bootstrap_difference": "robuststats.stats.resampling._bootstrap",
    "bootstrap_retention": "robuststats.stats.resampling._bootstrap",
    "bootstrap_retention_difference": "robuststats.stats.resampling._bootstrap",
    "BootstrapResult": "robuststats.stats.resampling._bootstrap",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # static analysers see the real names
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
    from robuststats.stats._estimability import (  # noqa: F401
        Estimability,
        clip_interval,
        retention_estimability,
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
    from robuststats.stats._parameters import ParameterError  # noqa: F401
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
    from robuststats.stats.dose._curve import DoseResponseFit, EffectiveDose  # noqa: F401
    from robuststats.stats.dose._models import DOSE_MODELS  # noqa: F401
    from robuststats.stats.dose._response import (  # noqa: F401
        DOSE_RESPONSE_MODELS,
        fit_dose_response,
        select_dose_response,
    )
    from robuststats.stats.dose._threshold import ThresholdResult, critical_threshold  # noqa: F401
    from robuststats.stats.power._design import (  # noqa: F401
        PoolSizeWarning,
        UnreachablePowerError,
    )
    from robuststats.stats.power._gate import GatePowerResult, power_gate  # noqa: F401
    from robuststats.stats.power._gate_components import (  # noqa: F401
        GateComponents,
        estimate_gate_components,
        gate_influence,
    )
    from robuststats.stats.power._mcnemar import (  # noqa: F401
        POWER_METHODS,
        PowerResult,
        power_mcnemar,
        power_two_proportions,
    )
    from robuststats.stats.power._seeds import (  # noqa: F401
        SeedPowerResult,
        TooFewSeedsError,
        power_seeds,
    )
    from robuststats.stats.power._seeds_formulas import noncentral_t_power  # noqa: F401
    from robuststats.stats.power._seeds_table import (  # noqa: F401
        power_seeds_curve,
        power_seeds_table,
    )
    from robuststats.stats.power._table import power_curve, power_table  # noqa: F401
    from robuststats.stats.resampling._bootstrap import (  # noqa: F401
        BootstrapResult,
        bootstrap_accuracy,
        bootstrap_difference,
        bootstrap_retention,
        bootstrap_retention_difference,
    )


__getattr__, __dir__ = lazy_exports('robuststats.stats', _EXPORTS, globals())
