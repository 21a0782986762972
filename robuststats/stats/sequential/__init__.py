"""Group-sequential tests over training seeds: Lan–DeMets spending, boundaries by recursive
integration, operating characteristics and repeated confidence intervals; and anytime-valid
confidence sequences for one pair of models on a stream of items, for their difference
and for one model's retention (``_betting``).

Formulas and sources: the module docstrings and ``docs/statistics.md`` (sequential studies).
"""

from __future__ import annotations

from robuststats.stats.sequential._betting import (
    ConfidenceSequence,
    betting_confidence_sequence,
    retention_confidence_sequence,
)
from robuststats.stats.sequential._design import (
    FUTILITY,
    GroupSequentialDesign,
    OperatingCharacteristics,
    group_sequential_design,
)
from robuststats.stats.sequential._looks import (
    LookDecision,
    SequentialOptions,
    analyse_look,
    decide_look,
    look_designs,
)
from robuststats.stats.sequential._power import (
    SequentialPowerResult,
    every_look,
    nested_t_paths,
    power_sequential,
    size_sequential,
    spaced_looks,
)
from robuststats.stats.sequential._spending import SPENDING_FUNCTIONS, check_spending, spent

__all__ = [
    "FUTILITY",
    "SPENDING_FUNCTIONS",
    "ConfidenceSequence",
    "GroupSequentialDesign",
    "LookDecision",
    "OperatingCharacteristics",
    "SequentialOptions",
    "SequentialPowerResult",
    "analyse_look",
    "betting_confidence_sequence",
    "check_spending",
    "decide_look",
    "every_look",
    "group_sequential_design",
    "look_designs",
    "nested_t_paths",
    "power_sequential",
    "retention_confidence_sequence",
    "size_sequential",
    "spaced_looks",
    "spent",
]
