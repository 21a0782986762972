"""The report's account of the inference noise that was actually injected.

A version written by ``robuststats study`` holds ``injections.parquet``: the engine's counts
per cell × layer × op × phase, with the realised RMS noise ratio. This section shows, per
noise level, that every noisy cell received injections and how large they were, so a noisy
outcome can be told from a clean one by more than its label.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from robuststats._format import fmt_noise

__all__ = ["injection_section"]

_CELL = ["condition", "seed", "eval_noise", "noise_seed"]


def injection_section(outdir: Path) -> list[str]:
    """Markdown parts for ``outdir/injections.parquet`` (none when the file is absent).

    Noisy cells are taken from ``outdir/outcomes.parquet`` when present, so a noisy cell
    with no recorded injection at all is named rather than silently absent.
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
    noisy = cells[cells["eval_noise"].astype(float) > 0]
    per_cell = inj.groupby(_CELL, as_index=False)["count"].sum()
    merged = noisy.merge(per_cell, on=_CELL, how="left").fillna({"count": 0})
    lines = ["| noise | noisy cells | cells with injections | injections | "
             "realised RMS noise ratio | target scale |", "| --- | --- | --- | --- | --- | --- |"]
    for level, d in merged.groupby("eval_noise"):
        rows = inj[np.isclose(inj["eval_noise"].astype(float), float(level))]
        lines.append(f"| {fmt_noise(level)} | {len(d)} | {int((d['count'] > 0).sum())} | "
                     f"{int(d['count'].sum())} | {_weighted(rows, 'rms_noise_ratio')} | "
                     f"{_weighted(rows, 'target_scale')} |")
    parts = ["## Inference noise as injected\n\nCounted by the engine in every evaluated "
             "cell (`injections.csv` has them per layer, op and phase); the RMS noise ratio "
             "is weighted by the injection counts.\n", "\n".join(lines) + "\n"]
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
