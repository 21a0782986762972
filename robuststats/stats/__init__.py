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

from robuststats._lazy import lazy_package

if TYPE_CHECKING:  # the public names, read by static analysers and by lazy_package
    from robuststats.stats._common import ConfidenceInterval as ConfidenceInterval
    from robuststats.stats._common import DegenerateDataWarning as DegenerateDataWarning
    from robuststats.stats._common import SeedBootstrapWarning as SeedBootstrapWarning
    from robuststats.stats._contrast_variance import ContrastVariance as ContrastVariance
    from robuststats.stats._contrast_variance import paired_variance as paired_variance
    from robuststats.stats._contrast_variance import unpaired_variance as unpaired_variance
    from robuststats.stats._discordance import DiscordanceEstimate as DiscordanceEstimate
    from robuststats.stats._discordance import PilotPairs as PilotPairs
    from robuststats.stats._discordance import estimate_discordance as estimate_discordance
    from robuststats.stats._discordance import estimate_icc as estimate_icc
    from robuststats.stats._discordance import read_pilot as read_pilot
    from robuststats.stats._estimability import Estimability as Estimability
    from robuststats.stats._estimability import clip_interval as clip_interval
    from robuststats.stats._estimability import (
        retention_estimability as retention_estimability,
    )
    from robuststats.stats._hypotheses import Hypothesis as Hypothesis
    from robuststats.stats._hypotheses import HypothesisResult as HypothesisResult
    from robuststats.stats._hypotheses import evaluate_hypotheses as evaluate_hypotheses
    from robuststats.stats._hypotheses import evaluate_hypothesis as evaluate_hypothesis
    from robuststats.stats._mcnemar import McNemarResult as McNemarResult
    from robuststats.stats._mcnemar import mcnemar as mcnemar
    from robuststats.stats._mcnemar_stratified import mcnemar_stratified as mcnemar_stratified
    from robuststats.stats._multiplicity import MULTIPLICITY_METHODS as MULTIPLICITY_METHODS
    from robuststats.stats._multiplicity import adjust_pvalues as adjust_pvalues
    from robuststats.stats._omnibus import CochranQResult as CochranQResult
    from robuststats.stats._omnibus import cochran_q as cochran_q
    from robuststats.stats._parameters import ParameterError as ParameterError
    from robuststats.stats._seed_components import SeedComponents as SeedComponents
    from robuststats.stats._seed_components import (
        estimate_seed_components as estimate_seed_components,
    )
    from robuststats.stats._seed_random import CrossedVariance as CrossedVariance
    from robuststats.stats._seed_random import SeedRandomResult as SeedRandomResult
    from robuststats.stats._seed_random import crossed_variance as crossed_variance
    from robuststats.stats._seed_random import (
        independent_seeds_retention_test as independent_seeds_retention_test,
    )
    from robuststats.stats._seed_random import independent_seeds_test as independent_seeds_test
    from robuststats.stats._seed_random import seed_random_accuracy as seed_random_accuracy
    from robuststats.stats._seed_random import seed_random_retention as seed_random_retention
    from robuststats.stats._seed_random import (
        seed_random_retention_test as seed_random_retention_test,
    )
    from robuststats.stats._seed_random import seed_random_test as seed_random_test
    from robuststats.stats._simulate import simulate_outcomes as simulate_outcomes
    from robuststats.stats._simulate import true_effects as true_effects
    from robuststats.stats.dose._curve import DoseResponseFit as DoseResponseFit
    from robuststats.stats.dose._curve import EffectiveDose as EffectiveDose
    from robuststats.stats.dose._models import DOSE_MODELS as DOSE_MODELS
    from robuststats.stats.dose._response import DOSE_RESPONSE_MODELS as DOSE_RESPONSE_MODELS
    from robuststats.stats.dose._response import fit_dose_response as fit_dose_response
    from robuststats.stats.dose._response import select_dose_response as select_dose_response
    from robuststats.stats.dose._threshold import ThresholdResult as ThresholdResult
    from robuststats.stats.dose._threshold import critical_threshold as critical_threshold
    from robuststats.stats.power._design import PoolSizeWarning as PoolSizeWarning
    from robuststats.stats.power._design import UnreachablePowerError as UnreachablePowerError
    from robuststats.stats.power._gate import GatePowerResult as GatePowerResult
    from robuststats.stats.power._gate import power_gate as power_gate
    from robuststats.stats.power._gate_components import GateComponents as GateComponents
    from robuststats.stats.power._gate_components import (
        estimate_gate_components as estimate_gate_components,
    )
    from robuststats.stats.power._gate_components import gate_influence as gate_influence
    from robuststats.stats.power._mcnemar import POWER_METHODS as POWER_METHODS
    from robuststats.stats.power._mcnemar import PowerResult as PowerResult
    from robuststats.stats.power._mcnemar import power_mcnemar as power_mcnemar
    from robuststats.stats.power._mcnemar import power_two_proportions as power_two_proportions
    from robuststats.stats.power._seeds import SeedPowerResult as SeedPowerResult
    from robuststats.stats.power._seeds import TooFewSeedsError as TooFewSeedsError
    from robuststats.stats.power._seeds import power_seeds as power_seeds
    from robuststats.stats.power._seeds_formulas import noncentral_t_power as noncentral_t_power
    from robuststats.stats.power._seeds_table import power_seeds_curve as power_seeds_curve
    from robuststats.stats.power._seeds_table import power_seeds_table as power_seeds_table
    from robuststats.stats.power._table import power_curve as power_curve
    from robuststats.stats.power._table import power_table as power_table
    from robuststats.stats.resampling._bootstrap import BootstrapResult as BootstrapResult
    from robuststats.stats.resampling._bootstrap import bootstrap_accuracy as bootstrap_accuracy
    from robuststats.stats.resampling._bootstrap import bootstrap_difference as bootstrap_difference
    from robuststats.stats.resampling._bootstrap import bootstrap_retention as bootstrap_retention
    from robuststats.stats.resampling._bootstrap import (
        bootstrap_retention_difference as bootstrap_retention_difference,
    )


__getattr__, __dir__ = lazy_package(globals())
