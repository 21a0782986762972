"""The robustness gate for CI: is a candidate non-inferior to a baseline under its noise
protocol?

``run_gate(candidate, baseline, max_degradation=0.15)`` reads the baseline's result version
(its protocol: task, items, error model, noise levels and seeds), evaluates a candidate
checkpoint under it (or reads the candidate's outcomes and checks they follow it), and
decides non-inferiority of retention (or noisy accuracy) with a one-sided test at every
noise level: the gate passes only when each one-sided ``1 − alpha`` lower bound of the
candidate-vs-baseline contrast lies above ``−max_degradation`` (docs/gate.md). The same
design answers superiority by a margin and equivalence within one (TOST):
``run_gate(..., question="superiority" | "equivalence")``.
``robuststats gate`` is its command line; exit 0 pass, 1 fail, 2 bad input.
``run_anytime_gate`` decides the same questions for one candidate model against one
baseline model on a stream of items, by a confidence sequence (``--anytime``; exit 3 while
undecided, 4 when a sequence emptied before deciding).

Torch is imported only to evaluate a checkpoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robuststats._lazy import lazy_package

if TYPE_CHECKING:  # the public names, read by static analysers and by lazy_package
    from robuststats.gate._anytime import BROKEN_EXIT as BROKEN_EXIT
    from robuststats.gate._anytime import UNDECIDED_EXIT as UNDECIDED_EXIT
    from robuststats.gate._anytime import AnytimeGate as AnytimeGate
    from robuststats.gate._anytime import AnytimeLevel as AnytimeLevel
    from robuststats.gate._anytime import anytime_gate_text as anytime_gate_text
    from robuststats.gate._anytime import anytime_verdicts as anytime_verdicts
    from robuststats.gate._anytime import run_anytime_gate as run_anytime_gate
    from robuststats.gate._anytime import standing_decision as standing_decision
    from robuststats.gate._contrast import MARGIN_TYPES as MARGIN_TYPES
    from robuststats.gate._contrast import METRICS as METRICS
    from robuststats.gate._contrast import GateTest as GateTest
    from robuststats.gate._contrast import gate_test as gate_test
    from robuststats.gate._gate import GATE_COLUMNS as GATE_COLUMNS
    from robuststats.gate._gate import GateResult as GateResult
    from robuststats.gate._gate import run_gate as run_gate
    from robuststats.gate._protocol import Protocol as Protocol
    from robuststats.gate._protocol import protocol_differences as protocol_differences
    from robuststats.gate._questions import QUESTIONS as QUESTIONS
    from robuststats.gate._report import gate_markdown as gate_markdown
    from robuststats.gate._report import gate_text as gate_text
    from robuststats.gate._report import write_gate as write_gate
    from robuststats.stats import ContrastVariance as ContrastVariance
    from robuststats.stats import unpaired_variance as unpaired_variance

__getattr__, __dir__ = lazy_package(globals())
