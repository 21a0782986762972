"""The report's account of the inference noise that was actually injected.

A version written by ``robuststats study`` holds ``injections.parquet``: the engine's counts
per cell × layer × op × phase, with the realised RMS noise ratio. This section shows, per
error model and noise level, that every noisy cell received injections and how large they
were, so a noisy outcome can be told from a clean one by more than its label.

Error models are never pooled: an injection of per-call noise is one perturbed op result,
one of quantization or static weight noise is one product computed with changed operands,
and a number format's target scale is 1 (the format itself) where a Gaussian's is its
standard deviation. The error model of a cell comes from the engine's ``kind`` and
``target`` columns (sessions record them), else from the study spec in the version's
``manifest.json`` (the condition's ``eval_kind`` or ``evaluation.kind``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from robuststats._format import fmt_noise

__all__ = ["error_model_label", "injection_section"]

_CELL = ["condition", "seed", "eval_noise", "noise_seed"]
_GAUSSIAN = ("relative_gaussian", "absolute_gaussian")
_UNKNOWN = ("error model not recorded", "-")


def error_model_label(kind: Any, target: Any = "output") -> tuple[str, str]:
    """``(error model, what one injection is)`` for an engine ``kind`` and ``target``."""
    if not isinstance(kind, str) or not kind:
        return _UNKNOWN
    target = target if isinstance(target, str) and target else "output"
    if target == "inputs":
        return (f"{kind} weights and activations (input quantization)",
                "a product with quantized operands")
    if target == "weights":
        if kind in _GAUSSIAN:
            return (f"static {kind} weight noise, drawn once per noise seed",
                    "a product with the perturbed weight")
        return f"{kind} weights (weight-only quantization)", "a product with quantized weights"
    if kind in _GAUSSIAN:
        return f"{kind} on op results, drawn on every call", "a noisy op result"
    if kind == "systematic_bias":
        return "systematic_bias on op results", "a biased op result"
    return f"{kind} rounding of op results", "a rounded op result"


def _spec_models(outdir: Path) -> dict[str, tuple[str, str]]:
    """condition → error model, from the study spec of a sealed version (empty if none)."""
    path = outdir / "manifest.json"
    try:
        spec = json.loads(path.read_text(encoding="utf-8")).get("spec") or {}
        default = (spec.get("evaluation") or {}).get("kind", "relative_gaussian")
        conditions = spec.get("conditions") or {}
    except (OSError, ValueError, AttributeError):
        return {}
    from robuststats.engine.eval_kinds import EVALUATION_KINDS

    out = {}
    for name, cond in conditions.items():
        kind = (cond or {}).get("eval_kind") or default
        entry = EVALUATION_KINDS.get(kind)
        if entry is None:
            continue
        fields = dict(entry.fields)
        out[str(name)] = error_model_label(fields.get("kind", kind), fields.get("target"))
    return out


def _cell_models(inj: pd.DataFrame, cells: pd.DataFrame, outdir: Path) -> pd.DataFrame:
    """``cells`` with the columns ``model`` and ``counted`` (what one injection is)."""
    by_spec = _spec_models(outdir)
    labels = [by_spec.get(str(c), _UNKNOWN) for c in cells["condition"]]
    if {"kind", "target"} <= set(inj.columns) and not inj.empty:
        # what the engine recorded wins over what the spec says
        rec = inj[[*_CELL, "kind", "target"]].drop_duplicates(_CELL)
        recorded = cells[_CELL].merge(rec, on=_CELL, how="left")  # keeps the cells' order
        for i, (kind, target) in enumerate(zip(recorded["kind"], recorded["target"])):
            if isinstance(kind, str) and kind:
                labels[i] = error_model_label(kind, target)
    return cells.assign(model=[m for m, _ in labels], counted=[c for _, c in labels])


def injection_section(outdir: Path) -> list[str]:
    """Markdown parts for ``outdir/injections.parquet`` (none when the file is absent).

    Noisy cells are taken from ``outdir/outcomes.parquet`` when present, so a noisy cell
    with no recorded injection at all is named rather than silently absent. Each error
    model has its own rows.
    """
    path = outdir / "injections.parquet"
    if not path.is_file():
        return []
    inj = pd.read_parquet(path)
    if inj.empty or not set(_CELL) | {"count"} <= set(inj.columns):
        return []
    outcomes = outdir / "outcomes.parquet"
    cells = (pd.read_parquet(outcomes, columns=_CELL).drop_duplicates() if outcomes.is_file()
             else inj[_CELL].drop_duplicates())
    noisy = _cell_models(inj, cells[cells["eval_noise"].astype(float) > 0], outdir)
    per_cell = inj.groupby(_CELL, as_index=False)["count"].sum()
    merged = noisy.merge(per_cell, on=_CELL, how="left").fillna({"count": 0})
    rows_of = inj.merge(noisy[[*_CELL, "model"]], on=_CELL, how="inner")
    lines = ["| error model | one injection is | noise | noisy cells | cells with injections | "
             "injections | realised RMS error ratio | target scale |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    order = list(dict.fromkeys(merged["model"]))  # first appearance: the study's order
    for model in order:
        m = merged[merged["model"] == model]
        counted = m["counted"].iloc[0]
        for level, d in m.groupby("eval_noise"):
            rows = rows_of[(rows_of["model"] == model)
                           & np.isclose(rows_of["eval_noise"].astype(float), float(level))]
            lines.append(f"| {model} | {counted} | {fmt_noise(level)} | {len(d)} | "
                         f"{int((d['count'] > 0).sum())} | {int(d['count'].sum())} | "
                         f"{_weighted(rows, 'rms_noise_ratio')} | "
                         f"{_weighted(rows, 'target_scale')} |")
    parts = ["## Inference noise as injected\n\nCounted by the engine in every evaluated "
             "cell (`injections.csv` has them per layer, op and phase), one row per error "
             "model and noise level: error models count different things and their target "
             "scales differ in meaning (a number format is applied at scale 1 whatever the "
             "level that labels its cells). The RMS error ratio ‖error‖ / ‖exact‖ is weighted "
             "by the injection counts.\n", "\n".join(lines) + "\n"]
    silent = merged[merged["count"] <= 0]
    if not silent.empty:
        named = ", ".join(f"{r.condition} seed {r.seed} at {fmt_noise(r.eval_noise)} noise "
                          f"(noise seed {r.noise_seed})"
                          for r in silent.head(10).itertuples(index=False))
        more = f" and {len(silent) - 10} more" if len(silent) > 10 else ""
        parts.append(f"**{len(silent)} noisy cell(s) recorded no injection**: {named}{more}. "
                     "Their outcomes are not evidence about noise.\n")
    return parts


def _weighted(rows: pd.DataFrame, column: str) -> str:
    if column not in rows.columns or rows.empty:
        return "-"
    values = pd.to_numeric(rows[column], errors="coerce").to_numpy(dtype=float)
    weights = rows["count"].to_numpy(dtype=float)
    ok = np.isfinite(values) & (weights > 0)
    if not ok.any():
        return "-"
    return f"{np.average(values[ok], weights=weights[ok]):.4g}"
