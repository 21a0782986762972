"""From the outcomes table to every table of a study: the statistics of one experiment.

Data flow (``docs/architecture.md``)::

    outcomes (robuststats.outcomes) ──► complete(): missing cells, dropped items
        ├─► summary, seeds, retention        (_tables)
        ├─► omnibus, pairwise tests          (_tests)
        └─► hypothesis verdicts              (_verdicts)

    outcomes in stream order ──► confidence sequences of one pair of models (_anytime)

Pure pandas/numpy plus :mod:`robuststats.stats`: never imports torch, so
``robuststats analyze`` works on any machine and on outcome files made elsewhere.
"""

from __future__ import annotations

from robuststats.analysis._anytime import (
    ANYTIME_COLUMNS,
    ANYTIME_STATEMENT,
    Model,
    anytime_table,
    decision,
    find_model,
    models_of,
    order_drift,
    order_drift_note,
    paired_stream,
)
from robuststats.analysis._dose import DoseOptions, condition_arrays, dose_response_tables
from robuststats.analysis._options import MULTIPLICITY_CHOICES, AnalysisOptions
from robuststats.analysis._run import Analysis, analyze_outcomes

__all__ = ["ANYTIME_COLUMNS", "ANYTIME_STATEMENT", "MULTIPLICITY_CHOICES", "Analysis",
           "AnalysisOptions", "DoseOptions", "Model", "analyze_outcomes", "anytime_table",
           "condition_arrays", "decision", "dose_response_tables", "find_model", "models_of",
           "order_drift", "order_drift_note", "paired_stream"]
