"""The robustness gate for CI: is a candidate non-inferior to a baseline under its noise
protocol?

``run_gate(candidate, baseline, max_degradation=0.15)`` reads the baseline's result version
(its protocol: task, items, error model, noise levels and seeds), evaluates a candidate
checkpoint under it (or reads the candidate's outcomes and checks they follow it), and
decides non-inferiority of retention (or noisy accuracy) with a one-sided test at every
noise level: the gate passes only when each one-sided ``1 − alpha`` lower bound of the
candidate-vs-baseline contrast lies above ``−max_degradation`` (docs/gate.md).
``robuststats gate`` is its command line; exit 0 pass, 1 fail, 2 bad input.

Torch is imported only to evaluate a checkpoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robuststats._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "GATE_COLUMNS": "robuststats.gate._gate",
    "MARGIN_TYPES": "robuststats.gate._contrast",
    "METRICS": "robuststats.gate._contrast",
    "ContrastVariance": "robuststats.stats",
    "GateResult": "robuststats.gate._gate",
    "GateTest": "robuststats.gate._contrast",
    "Protocol": "robuststats.gate._protocol",
    "gate_markdown": "robuststats.gate._report",
    "gate_test": "robuststats.gate._contrast",
    "gate_text": "robuststats.gate._report",
    "protocol_differences": "robuststats.gate._protocol",
    "run_gate": "robuststats.gate._gate",
    "unpaired_variance": "robuststats.stats",
    "write_gate": "robuststats.gate._report",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # static analysers see the real names
    from robuststats.gate._contrast import MARGIN_TYPES, METRICS, GateTest, gate_test  # noqa: F401
    from robuststats.gate._gate import GATE_COLUMNS, GateResult, run_gate  # noqa: F401
    from robuststats.gate._protocol import Protocol, protocol_differences  # noqa: F401
    from robuststats.gate._report import gate_markdown, gate_text, write_gate  # noqa: F401
    from robuststats.stats import ContrastVariance, unpaired_variance  # noqa: F401

__getattr__, __dir__ = lazy_exports("robuststats.gate", _EXPORTS, globals())
