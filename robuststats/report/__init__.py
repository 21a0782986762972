"""Figures (seaborn) and ``report.md`` for a result version. Never imports torch."""

from __future__ import annotations

from robuststats.report._views import (
    CONDITION_HEADERS,
    HYPOTHESIS_HEADERS,
    claim,
    condition_descriptions,
    condition_formats,
    condition_rows,
    hypothesis_rows,
    records,
    retention_notes,
)
from robuststats.report.figures import accuracy_figure, interval_label, retention_figure
from robuststats.report.forest import VERDICT_STYLE, forest_figure
from robuststats.report.markdown import markdown_table, write_report

__all__ = [
    "CONDITION_HEADERS",
    "HYPOTHESIS_HEADERS",
    "VERDICT_STYLE",
    "accuracy_figure",
    "claim",
    "condition_descriptions",
    "condition_formats",
    "condition_rows",
    "forest_figure",
    "hypothesis_rows",
    "interval_label",
    "markdown_table",
    "records",
    "retention_figure",
    "retention_notes",
    "write_report",
]
