"""Figures (seaborn) and ``report.md`` for a result version. Never imports torch."""

from __future__ import annotations

from robuststats.report.figures import accuracy_figure, retention_figure
from robuststats.report.markdown import markdown_table, write_report

__all__ = ["accuracy_figure", "markdown_table", "retention_figure", "write_report"]
