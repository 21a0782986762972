"""``report.md`` of a diagnosis: the plan, each level's targets, the avalanche windows, the
channels, the protection plan and the cross-reference with the sensitivity profile."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from robuststats._format import fmt_ci, fmt_level, fmt_p, fmt_pct, is_missing

__all__ = ["fmt_s", "level_rows", "markdown"]


def level_rows(diagnosis: Any, level: str) -> pd.DataFrame:
    t = diagnosis.table
    return t[t["level"] == level].reset_index(drop=True)


def fmt_s(v: Any) -> str:
    return "-" if is_missing(v) or not math.isfinite(float(v)) else f"{float(v):.2f}"


def _md_table(rows: list[list[str]], head: list[str]) -> str:
    if not rows:
        return "(no rows)"
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _target_rows(rows: pd.DataFrame, labels: bool) -> tuple[list[list[str]], list[str]]:
    head = ["rank", "target", "drop (pp)", "interval", "relative degradation (%)",
            "sensitivity", "p", "p_adj"] + (["seed 004 label"] if labels else [])
    out = []
    for _, r in rows.iterrows():
        cells = [str(int(r["rank"])), str(r["label"]), fmt_pct(r["estimate"], signed=True),
                 fmt_ci(r["ci_low"], r["ci_high"], r["ci_level"]),
                 f"{fmt_pct(r['relative_degradation'])} "
                 f"{fmt_ci(r['relative_degradation_ci_low'], r['relative_degradation_ci_high'], None)}",
                 f"{fmt_s(r['sensitivity'])} [{fmt_s(r['sensitivity_ci_low'])}, "
                 f"{fmt_s(r['sensitivity_ci_high'])}]",
                 fmt_p(r["pvalue"]), fmt_p(r["pvalue_adjusted"])]
        if labels:
            cells.append(str(r["seed004_label"]) or "-")
        out.append(cells)
    return out, head


def markdown(diagnosis: Any, profile: dict[str, Any], plan_entries: list[dict[str, Any]],
             xref: pd.DataFrame, label: str) -> str:
    p = diagnosis.plan
    meta = diagnosis.meta
    level = fmt_level(p.confidence_level)
    lines = [
        f"# Diagnosis of {p.study} ({label}), condition {p.condition}", "",
        f"Noise: {p.kind} at scale {p.scale:g}, forward only; operator level on one op type "
        f"at a time in the whole model; layer and window levels on `{p.ops}` in the chosen "
        f"layers. Training seeds {list(p.seeds)}, noise seeds {list(p.noise_seeds)}, "
        f"{meta.get('n_items')} items; the clean evaluation ran once per seed and is shared "
        f"by every target.",
        "",
        f"Every drop is clean − noisy accuracy in percentage points with its {level} "
        f"interval: {str(diagnosis.table['ci_method'].iloc[0]) if len(diagnosis.table) else '-'}."
        f" p-values test drop = 0 and are adjusted within each level ({p.multiplicity}); "
        "findings are ranked by the drop, not by a fixed threshold.",
        "",
    ]
    if diagnosis.notes:
        lines += ["Notes:", *[f"- {n}" for n in diagnosis.notes], ""]
    for level_name, title in (("operator", "Operator level"), ("layer", "Layer level"),
                              ("window", "Windows of consecutive layers")):
        rows = level_rows(diagnosis, level_name)
        if rows.empty:
            continue
        rows_md, head = _target_rows(rows, p.labels)
        lines += [f"## {title}", "", _md_table(rows_md, head), ""]
    if diagnosis.avalanche is not None:
        lines += ["## Avalanche: interaction of each window", "",
                  "Interaction = window drop − sum of its single layers' drops, per seed and "
                  "item on the same outcomes. A window is an avalanche when the interaction is "
                  "positive and its adjusted p-value is below "
                  f"{1 - p.confidence_level:g}.", ""]
        rows = [[str(int(a["rank"])), str(a["label"]), fmt_pct(a["window_drop"], signed=True),
                 fmt_pct(a["sum_single_drops"], signed=True),
                 fmt_pct(a["estimate"], signed=True),
                 fmt_ci(a["ci_low"], a["ci_high"], a["ci_level"]), fmt_p(a["pvalue_adjusted"]),
                 "yes" if a["avalanche"] else "no"]
                for _, a in diagnosis.avalanche.iterrows()]
        lines += [_md_table(rows, ["rank", "window", "window drop", "sum of layers",
                                   "interaction", "interval", "p_adj", "avalanche"]), ""]
    lines += ["![accuracy drop per layer and window](figures/heatmap.png)", ""] \
        if (Path("figures") / "heatmap.png").as_posix() in meta.get("figures", []) else []
    if diagnosis.channels is not None:
        from robuststats.diagnose._channels import module_summary

        s = module_summary(diagnosis.channels)
        lines += ["## Channel outliers", "",
                  f"Inputs of {', '.join(f'`{m}`' for m in p.modules)} on "
                  f"{meta.get('n_calibration_items')} calibration items (teacher-forced). "
                  f"`channel ratio` = a channel's max |x| / the median channel's max |x| "
                  f"(outlier above {p.channel_threshold:g}); `ratio` = a channel's max |x| / "
                  "its own median |x|.", ""]
        rows = [[str(int(r["seed"])), str(r["module"]), str(int(r["n_channels"])),
                 str(int(r["n_outliers"])), f"{r['max_channel_ratio']:.1f}",
                 f"{r['max_ratio']:.1f}", str(r["top_channels"])] for _, r in s.iterrows()]
        lines += [_md_table(rows, ["seed", "module", "channels", "outliers",
                                   "max channel ratio", "max ratio", "top channels"]), ""]
        if "n_outlier_channels" in xref:
            lines += ["Layers: layer-level rank beside channel outliers.", ""]
            rows = [[str(int(r["layer"])),
                     "-" if is_missing(r.get("rank")) else str(int(r["rank"])),
                     fmt_pct(r.get("estimate"), signed=True),
                     fmt_p(r.get("pvalue_adjusted")),
                     "-" if is_missing(r.get("n_outlier_channels"))
                     else f"{r['n_outlier_channels']:g}",
                     "-" if is_missing(r.get("max_channel_ratio"))
                     else f"{r['max_channel_ratio']:.1f}"] for _, r in xref.iterrows()]
            lines += [_md_table(rows, ["layer", "rank", "drop (pp)", "p_adj",
                                       "outlier channels", "max channel ratio"]), ""]
            corr = meta.get("correlation")
            if corr:
                lines += [f"Spearman's ρ between layer drop and max channel ratio: "
                          f"{corr['spearman_rho']:.2f} (p {fmt_p(corr['pvalue'])}, "
                          f"{corr['n_layers']} layers; descriptive).", ""]
    lines += ["## Protection plan", ""]
    if not plan_entries:
        lines += [f"Nothing to protect on this evidence: no op or layer has a drop whose "
                  f"adjusted p-value is below {1 - p.confidence_level:g}, no window an "
                  "avalanche, no module an outlier channel. With more items or seeds smaller "
                  "drops become detectable; the intervals above bound what was missed.", ""]
    for k, e in enumerate(plan_entries, start=1):
        lines.append(f"{k}. **{e['label']}** ({e['kind']}): {e['action']}. Evidence: "
                     f"{e['evidence']}.")
    if plan_entries:
        lines += ["", "As engine `layer_scales` (noise-free protected layers): "
                  f"`{json.dumps(profile['layer_scales'])}`."]
    timing = meta.get("timing")
    if timing:
        lines += ["", "## Time", "",
                  f"{timing['evaluations']} evaluations in {timing['seconds_probe']:.1f} s "
                  f"({timing['seconds_per_target']:.2f} s per target evaluation, "
                  f"clean {timing['seconds_clean']:.2f} s); total {diagnosis.seconds:.1f} s "
                  "including models."]
    return "\n".join(lines) + "\n"
