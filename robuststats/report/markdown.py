"""``report.md``: the hypotheses first, then the tables behind them, then the figures."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from robuststats.report.figures import accuracy_figure, retention_figure

__all__ = ["markdown_table", "write_report"]


def _fmt(v: Any, col: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        if "pvalue" in col:
            return f"{v:.2g}" if v < 0.001 else f"{v:.3f}"
        if col in ("eval_noise", "margin"):
            return f"{v:g}"
        return f"{v:.4f}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def markdown_table(df: pd.DataFrame, columns: list[str] | None = None) -> str:
    cols = [c for c in (columns or list(df.columns)) if c in df.columns]
    if df.empty:
        return "_(no rows)_\n"
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join(" --- " for _ in cols) + "|"]
    for _, row in df.iterrows():
        lines.append("| " + " | ".join(_fmt(row[c], c) for c in cols) + " |")
    return "\n".join(lines) + "\n"


def write_report(outdir: Path, tables: Mapping[str, pd.DataFrame], meta: Mapping[str, Any]
                 ) -> Path:
    """Write figures (``figures/*.png``) and ``report.md`` into ``outdir``."""
    figdir = outdir / "figures"
    figdir.mkdir(exist_ok=True)
    summary, retention = tables.get("summary"), tables.get("retention")
    figures: list[tuple[str, str]] = []
    if summary is not None and not summary.empty:
        accuracy_figure(summary, figdir / "accuracy_vs_noise.png")
        figures.append(("Accuracy vs inference noise", "figures/accuracy_vs_noise.png"))
    if retention is not None and not retention.empty:
        retention_figure(retention, figdir / "retention.png")
        figures.append(("Retention per condition and noise level", "figures/retention.png"))

    parts = [f"# {meta.get('study', 'study')} — results {meta.get('label', '')}\n"]
    if meta.get("description"):
        parts.append(f"{meta['description'].strip()}\n")
    facts = [("spec hash", str(meta.get("spec_hash", ""))[:16]), ("seeds", meta.get("seeds")),
             ("noise seeds", meta.get("noise_seeds")), ("items per cell", meta.get("n_items")),
             ("cells", f"{meta.get('cells_finished')} of {meta.get('cells_planned')} finished"),
             ("alpha / CI level", f"{meta.get('alpha')} / {meta.get('confidence_level')}"),
             ("multiplicity", meta.get("multiplicity")), ("package", meta.get("package_version")),
             ("git commit", str(meta.get("git_commit"))[:12])]
    parts.append("\n".join(f"- **{k}**: {v}" for k, v in facts if v is not None) + "\n")
    missing = tables.get("missing")
    if missing is not None and not missing.empty:
        parts.append("## Missing cells\n\nThese cells have no outcomes (failed or not run); "
                     "estimates below use the cells that exist, and hypotheses that need "
                     "missing cells are INCONCLUSIVE.\n")
        parts.append(markdown_table(missing))
    hyp = tables.get("hypotheses")
    if hyp is not None and not hyp.empty:
        parts.append("## Pre-registered hypotheses\n")
        parts.append(markdown_table(hyp, ["id", "statement", "metric", "a", "b", "eval_noise",
                                          "relation", "margin", "estimate", "ci_low", "ci_high",
                                          "verdict", "test", "reason"]))
    if summary is not None:
        parts.append("## Accuracy per condition and noise level\n\nMean over seeds, noise "
                     "seeds and items; CI by bootstrap over seeds and items; `seed_sd` is "
                     "the SD of per-seed accuracy.\n")
        parts.append(markdown_table(summary))
    if retention is not None:
        parts.append("## Retention (noisy / clean accuracy on the same items)\n")
        parts.append(markdown_table(retention))
    tests = tables.get("tests")
    if tests is not None:
        parts.append("## Paired comparisons (McNemar, stratified over seeds and noise seeds)\n\n"
                     "`n01`: items right under `b` only; `n10`: right under `a` only. "
                     "`pvalue_adjusted` corrects for the whole family of comparisons.\n\n"
                     "Scope: the McNemar p-values condition on the trained models (they "
                     "account for items, clustered across seeds and noise draws, but not for "
                     "training-seed variation); the `ci_low`/`ci_high` intervals resample "
                     "seeds as well and so speak about the training procedure. A tiny "
                     "p-value beside an interval that covers 0 means the models differ on "
                     "these items but the seeds disagree on the direction or size. The "
                     "hypothesis verdicts rest on the intervals.\n")
        parts.append(markdown_table(tests))
    for title, rel in figures:
        parts.append(f"## {title}\n\n![{title}]({rel})\n")
    path = outdir / "report.md"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
