"""The diagnosis as a versioned result: tables, JSON and Markdown reports, a heatmap, the
per-layer sensitivity file and the protection plan.

``write_diagnosis(diagnosis, out=...)`` publishes ``<out>/<study>.diagnose/v<N>/`` through
:class:`robuststats.results.ResultStore` (written in a temporary directory, sealed with a
manifest of SHA-256 checksums, renamed into place in one step, made read-only), so
``robuststats results list|show|verify`` read it like any study version.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from robuststats._format import fmt_ci, fmt_p, fmt_pct, is_missing
from robuststats.diagnose._heatmap import heatmap
from robuststats.diagnose._markdown import fmt_s, level_rows, markdown

__all__ = ["SENSITIVITY_FORMAT", "cross_reference", "protection_plan", "sensitivity_profile",
           "write_diagnosis"]

#: name and version of the per-layer sensitivity file (docs/diagnose.md)
SENSITIVITY_FORMAT = ("robuststats.sensitivity", 1)


def _num(value: Any) -> float | None:
    """A JSON number, or None for a missing value (no NaN in the files)."""
    if is_missing(value):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def cross_reference(diagnosis: Any) -> pd.DataFrame:
    """One row per layer: its layer-level rank and drop beside its channel outliers.

    Channel figures are over the training seeds: ``n_outlier_channels`` is the mean count of
    flagged channels in the layer's watched modules per seed, ``max_channel_ratio`` the
    largest seen.
    """
    layers = level_rows(diagnosis, "layer")
    rows = []
    for i in range(diagnosis.n_layers):
        r = layers[layers["target"] == f"layer:{i}"]
        row: dict[str, Any] = {"layer": i}
        if len(r):
            r0 = r.iloc[0]
            row.update(rank=int(r0["rank"]), estimate=r0["estimate"], ci_low=r0["ci_low"],
                       ci_high=r0["ci_high"], ci_level=r0["ci_level"],
                       pvalue_adjusted=r0["pvalue_adjusted"],
                       significant=bool(r0["significant"]))
        if diagnosis.avalanche is not None:
            hit = [a.target for a in diagnosis.avalanche.itertuples()
                   if a.avalanche and str(i) in str(a.layers).split(",")]
            row["avalanche_windows"] = ",".join(hit)
        ch = diagnosis.channels
        if ch is not None:
            g = ch[ch["layer"] == i]
            if len(g):
                per_seed = g.groupby("seed")["outlier"].sum()
                row.update(n_outlier_channels=float(per_seed.mean()),
                           max_channel_ratio=float(g["channel_ratio"].max()),
                           max_ratio=float(g["ratio"].max()),
                           outlier_modules=",".join(sorted(set(g.loc[g["outlier"], "module"]))))
        rows.append(row)
    return pd.DataFrame(rows)


def _correlation(xref: pd.DataFrame) -> dict[str, Any] | None:
    """Spearman's ρ between layer drop and max channel ratio (descriptive), ≥ 3 layers."""
    if "max_channel_ratio" not in xref or "estimate" not in xref:
        return None
    d = xref[["estimate", "max_channel_ratio"]].dropna()
    if len(d) < 3 or d["estimate"].nunique() < 2 or d["max_channel_ratio"].nunique() < 2:
        return None
    from scipy.stats import spearmanr

    res = spearmanr(d["estimate"], d["max_channel_ratio"])
    return {"spearman_rho": float(res.statistic), "pvalue": float(res.pvalue),
            "n_layers": len(d)}


def _evidence(row: Any, alpha_level: float) -> str:
    text = (f"drop {fmt_pct(row['estimate'], signed=True)} pp "
            f"{fmt_ci(row['ci_low'], row['ci_high'], row['ci_level'])}, relative degradation "
            f"{fmt_pct(row['relative_degradation'])} %, sensitivity "
            f"{fmt_s(row['sensitivity'])} "
            f"[{fmt_s(row['sensitivity_ci_low'])}, {fmt_s(row['sensitivity_ci_high'])}], "
            f"p_adj {fmt_p(row['pvalue_adjusted'])} ({row['multiplicity']}, rank "
            f"{int(row['rank'])} of its level)")
    if row.get("seed004_label"):
        text += f"; seed 004 label: {row['seed004_label']}"
    return text


def protection_plan(diagnosis: Any) -> list[dict[str, Any]]:
    """What to keep in higher precision, each with its evidence, strongest first.

    An op or a layer is on the plan when its drop is positive and its adjusted p-value is
    below α (``significant``); a window when its interaction is flagged (avalanche); a
    module when channel outliers were found in it (per-channel scales, or higher precision,
    for its input).
    """
    plan = diagnosis.plan
    alpha = 1.0 - plan.confidence_level
    entries: list[dict[str, Any]] = []
    for level, kind in (("operator", "op"), ("layer", "layer")):
        rows = level_rows(diagnosis, level)
        for _, r in rows[(rows["significant"]) & (rows["estimate"] > 0)].iterrows():
            entries.append({"kind": kind, "target": r["target"], "label": r["label"],
                            "layers": r["layers"], "estimate": float(r["estimate"]),
                            "action": ("keep this op in higher precision everywhere"
                                       if kind == "op" else
                                       f"keep layer {r['layers']} ({plan.ops}) in higher "
                                       "precision"),
                            "evidence": _evidence(r, alpha)})
    if diagnosis.avalanche is not None:
        for _, a in diagnosis.avalanche[diagnosis.avalanche["avalanche"]].iterrows():
            entries.append({
                "kind": "window", "target": a["target"], "label": a["label"],
                "layers": a["layers"], "estimate": float(a["estimate"]),
                "action": f"do not run layers {a['layers']} together in low precision",
                "evidence": (f"interaction (window drop − sum of its layers' drops) "
                             f"{fmt_pct(a['estimate'], signed=True)} pp "
                             f"{fmt_ci(a['ci_low'], a['ci_high'], a['ci_level'])}, p_adj "
                             f"{fmt_p(a['pvalue_adjusted'])} ({a['multiplicity']}); window "
                             f"drop {fmt_pct(a['window_drop'], signed=True)} pp vs "
                             f"{fmt_pct(a['sum_single_drops'], signed=True)} pp summed")})
    if diagnosis.channels is not None:
        from robuststats.diagnose._channels import module_summary

        summary = module_summary(diagnosis.channels)
        by_module = summary.groupby(["module", "layer"], sort=False).agg(
            n_outliers=("n_outliers", "max"), max_channel_ratio=("max_channel_ratio", "max"),
            top_channels=("top_channels", "first")).reset_index()
        for _, m in by_module[by_module["n_outliers"] > 0].iterrows():
            entries.append({
                "kind": "module", "target": m["module"], "label": m["module"],
                "layers": str(int(m["layer"])), "estimate": None,
                "action": "per-channel scales (or SmoothQuant-style migration) for its input, "
                          "or keep it in higher precision",
                "evidence": (f"{int(m['n_outliers'])} input channel(s) with max |x| above "
                             f"{plan.channel_threshold:g}× the median channel's (largest "
                             f"{m['max_channel_ratio']:.1f}×; top channels "
                             f"{m['top_channels']})")})
    order = {"op": 0, "layer": 1, "window": 2, "module": 3}
    entries.sort(key=lambda e: (order[e["kind"]], -(e["estimate"] or 0.0)))
    return entries


def sensitivity_profile(diagnosis: Any) -> dict[str, Any]:
    """The per-layer sensitivity file (``sensitivity.json``/``.yaml``; docs/diagnose.md).

    Keyed by layer index (as a string) and by module name, with the evidence of each, and a
    ready ``layer_scales`` mapping in the engine's format (multiplier 0 for every protected
    layer) so a protected configuration can be evaluated as is.
    """
    plan = diagnosis.plan
    meta = diagnosis.meta
    prefix = meta.get("layer_prefix")
    layers: dict[str, Any] = {}
    xref = cross_reference(diagnosis)
    for _, r in xref.iterrows():
        i = int(r["layer"])
        entry: dict[str, Any] = {"module": f"{prefix}.{i}" if prefix else str(i)}
        row = diagnosis.table[diagnosis.table["target"] == f"layer:{i}"]
        if len(row):
            t = row.iloc[0]
            entry.update({k: _num(t[k]) for k in (
                "estimate", "ci_low", "ci_high", "relative_degradation",
                "relative_degradation_ci_low", "relative_degradation_ci_high", "sensitivity",
                "sensitivity_ci_low", "sensitivity_ci_high", "pvalue", "pvalue_adjusted")})
            entry.update(rank=int(t["rank"]), significant=bool(t["significant"]))
            if t["seed004_label"]:
                entry["seed004_label"] = str(t["seed004_label"])
        if diagnosis.avalanche is not None:
            entry["windows"] = [
                {"target": a.target, "interaction": _num(a.estimate),
                 "ci_low": _num(a.ci_low), "ci_high": _num(a.ci_high),
                 "pvalue_adjusted": _num(a.pvalue_adjusted), "avalanche": bool(a.avalanche)}
                for a in diagnosis.avalanche.itertuples()
                if str(i) in str(a.layers).split(",")]
        for key in ("n_outlier_channels", "max_channel_ratio", "max_ratio"):
            if key in r and not is_missing(r[key]):
                entry[key] = _num(r[key])
        layers[str(i)] = entry
    modules: dict[str, Any] = {}
    if diagnosis.channels is not None:
        ch = diagnosis.channels
        for name, g in ch.groupby("module", sort=False):
            flagged = sorted({int(c) for c in g.loc[g["outlier"], "channel"]})
            modules[str(name)] = {
                "layer": int(g["layer"].iloc[0]), "n_channels": int(g["channel"].nunique()),
                "outlier_channels": flagged, "max_ratio": _num(g["ratio"].max()),
                "max_channel_ratio": _num(g["channel_ratio"].max())}
    operators = {}
    for _, t in level_rows(diagnosis, "operator").iterrows():
        operators[str(t["label"])] = {k: _num(t[k]) for k in (
            "estimate", "ci_low", "ci_high", "sensitivity", "sensitivity_ci_low",
            "sensitivity_ci_high", "pvalue_adjusted")} | {"rank": int(t["rank"]),
                                                            "significant": bool(t["significant"])}
    plan_entries = protection_plan(diagnosis)
    protected_layers = sorted({int(x) for e in plan_entries if e["kind"] in ("layer", "window")
                               for x in str(e["layers"]).split(",")})
    return {
        "format": SENSITIVITY_FORMAT[0], "format_version": SENSITIVITY_FORMAT[1],
        "study": plan.study, "condition": plan.condition, "seeds": list(plan.seeds),
        "noise_seeds": list(plan.noise_seeds), "n_items": meta.get("n_items"),
        "scale": plan.scale, "kind": plan.kind, "ops": plan.ops,
        "confidence_level": plan.confidence_level, "multiplicity": plan.multiplicity,
        "n_layers": diagnosis.n_layers, "layers": layers, "modules": modules,
        "operators": operators,
        "protect": {"layers": protected_layers,
                    "ops": [e["label"] for e in plan_entries if e["kind"] == "op"],
                    "modules": [e["target"] for e in plan_entries if e["kind"] == "module"]},
        "layer_scales": {str(i): 0.0 for i in protected_layers},
    }


def _timing(diagnosis: Any) -> dict[str, Any]:
    tm = diagnosis.timings
    evals = tm[~tm["level"].isin(["clean", "channel"])]
    return {"evaluations": len(tm), "seconds_probe": float(tm["seconds"].sum()),
            "seconds_per_target": float(evals["seconds"].mean()) if len(evals) else 0.0,
            "seconds_clean": float(tm.loc[tm["level"] == "clean", "seconds"].mean()),
            "by_level": {k: float(v) for k, v in
                         tm.groupby("level")["seconds"].mean().items()}}


def write_diagnosis(diagnosis: Any, *, out: str | Path = "results") -> Any:
    """Publish ``diagnosis`` as ``<out>/<study>.diagnose/v<N>/``; returns the version."""
    import yaml

    from robuststats.diagnose._channels import module_summary
    from robuststats.results import Manifest, ResultStore
    from robuststats.runs import environment

    name = f"{diagnosis.plan.study}.diagnose"
    xref = cross_reference(diagnosis)
    meta = dict(diagnosis.meta)
    meta["correlation"] = _correlation(xref)
    meta["timing"] = _timing(diagnosis)
    meta["figures"] = ["figures/heatmap.png"] if (diagnosis.n_layers and not
                                                  level_rows(diagnosis, "layer").empty) else []
    diagnosis = _with_meta(diagnosis, meta)
    profile = sensitivity_profile(diagnosis)
    entries = protection_plan(diagnosis)
    tables: dict[str, pd.DataFrame] = {"targets": diagnosis.table,
                                       "timings": diagnosis.timings}
    if len(xref):
        tables["layers"] = xref
    if diagnosis.avalanche is not None:
        tables["avalanche"] = diagnosis.avalanche
    if diagnosis.channels is not None:
        tables["channels"] = diagnosis.channels
        tables["channel_modules"] = module_summary(diagnosis.channels)
    env = environment()

    def writer(path: Path, number: int) -> None:
        diagnosis.outcomes.to_parquet(path / "outcomes.parquet", index=False)
        if len(diagnosis.injections):
            diagnosis.injections.to_parquet(path / "injections.parquet", index=False)
            diagnosis.injections.to_csv(path / "injections.csv", index=False)
        for key, df in tables.items():
            df.to_parquet(path / f"{key}.parquet", index=False)
            df.to_csv(path / f"{key}.csv", index=False)
        (path / "sensitivity.json").write_text(json.dumps(profile, indent=2) + "\n")
        (path / "sensitivity.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
        if meta["figures"]:
            heatmap(diagnosis, path / "figures" / "heatmap.png")
        report = {"study": diagnosis.plan.study, "version": f"v{number}",
                  "plan": diagnosis.plan.to_dict(), "notes": list(diagnosis.notes),
                  "present_ops": list(diagnosis.present_ops), "n_layers": diagnosis.n_layers,
                  "seconds": diagnosis.seconds, "timing": meta["timing"],
                  "correlation": meta["correlation"],
                  "tables": {k: json.loads(df.to_json(orient="records"))
                             for k, df in tables.items() if k != "channels"},
                  "protection_plan": entries}
        (path / "report.json").write_text(json.dumps(report, indent=2, allow_nan=False,
                                                     default=_json_default) + "\n")
        (path / "report.md").write_text(markdown(diagnosis, profile, entries, xref,
                                                 f"{name}/v{number}"))

    manifest = Manifest("diagnosis", {
        **{k: v for k, v in meta.items() if k != "figures"},
        "seeds": list(diagnosis.plan.seeds), "noise_seeds": list(diagnosis.plan.noise_seeds),
        "targets": [t.target_id for t in diagnosis.targets]},
        row_counts={"outcomes": len(diagnosis.outcomes),
                    **{k: len(v) for k, v in tables.items()}},
        seconds=round(diagnosis.seconds, 1), environment=env)
    return ResultStore(out).publish(name, writer, manifest)


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return _num(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return str(value)


def _with_meta(diagnosis: Any, meta: dict[str, Any]) -> Any:
    from dataclasses import replace

    return replace(diagnosis, meta=meta)
