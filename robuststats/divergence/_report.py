"""A divergence as a versioned result: tables, ``report.md``, ``report.json`` and a figure.

``write_divergence(div, out=..., name=...)`` publishes ``<out>/<name>.divergence/v<N>/``
through :class:`robuststats.results.ResultStore` (written in a temporary directory, sealed
with a manifest of SHA-256 checksums, renamed into place, read-only), so ``robuststats
results list|show|verify`` read it like any other version.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from robuststats._format import fmt_level, is_missing
from robuststats.divergence._analysis import exceeding_table
from robuststats.divergence._fit import GrowthFit
from robuststats.divergence._sites import RESIDUAL

__all__ = ["depth_figure", "summary", "write_divergence"]


def _num(value: Any) -> float | None:
    if is_missing(value):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def _g(value: Any, digits: int = 4) -> str:
    v = _num(value)
    return "-" if v is None else f"{v:.{digits}g}"


def _ci(low: Any, high: Any, level: float) -> str:
    if _num(low) is None or _num(high) is None:
        return "-"
    return f"[{_g(low)}, {_g(high)}] {fmt_level(level)}"


def summary(div: Any, *, max_mape: float,
            sensitivity: dict[int, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The plain-JSON summary the CLI prints and ``report.json`` holds."""
    exceed = exceeding_table(div.modules, max_mape, sensitivity=sensitivity)
    fit = {k: (_num(v) if isinstance(v, (float, np.floating)) else v)
           for k, v in div.fit.to_dict().items()}
    return {"reference": div.reference.to_dict(), "candidate": div.candidate.to_dict(),
            "n_items": div.n_items, "n_layers": div.n_layers, "settings": div.settings,
            "max_mape": max_mape, "fit": fit, "notes": list(div.notes),
            "seconds": round(div.seconds, 2),
            "depth": _records(div.depth), "exceeding": _records(exceed),
            "injections": {"passes": len(div.injections),
                           "total": int(div.injections["injections"].sum())
                           if len(div.injections) else 0},
            **({"one_side": _records(div.one_side)}
               if getattr(div, "one_side", None) is not None else {})}


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return json.loads(df.to_json(orient="records"))


#: the predictions of the residual stream's divergence drawn beside the measurement
#: (columns of the depth table; docs/divergence.md gives their formulas)
PREDICTIONS = (("additive", "additive: sum of the layers' own errors", "-."),
               ("quadrature", "quadrature: root of the sum of squares", ":"),
               ("compounding", "compounding: each layer amplifies what it receives", (0, (5, 2))))


def depth_figure(div: Any, path: Path) -> Path | None:
    """Divergence by depth, three panels against the decoder layer:

    * the residual stream's relative RMS error, measured (with its interval over items, as
      error bars and a band), beside each layer's local error and the additive, quadrature
      and compounding predictions the report's verdict weighs it against (linear axis);
    * the relative RMS error of every module type (accumulated, log axis);
    * the MAPE of every module type (accumulated).
    """
    fig = _depth(div)
    if fig is None:
        return None
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fig.savefig(path, dpi=120, bbox_inches="tight", pad_inches=0.15)
    finally:
        plt.close(fig)
    return path


def _depth(div: Any) -> Any:
    """The figure of :func:`depth_figure` (not saved), or None without decoder layers."""
    t = div.modules[div.modules["layer"] >= 0]
    if t.empty:
        return None
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), layout="constrained")
    level = fmt_level(float(div.modules["ci_level"].iloc[0]))
    acc = t[t["mode"] == "accumulated"]
    _residual_panel(axes[0], acc, t, div.depth, level)
    types = list(dict.fromkeys(acc["module_type"]))
    cmap = plt.get_cmap("tab20")
    for ax, metric, label in ((axes[1], "rel_rms", "relative RMS error ‖b − a‖/‖a‖ (log)"),
                              (axes[2], "mape", f"MAPE (ε = {div.settings['eps']:g}·RMS)")):
        for k, mtype in enumerate(types):
            g = acc[acc["module_type"] == mtype].sort_values("layer")
            if metric == "rel_rms":  # exact zeros have no place on a log scale
                g = g.assign(rel_rms=g["rel_rms"].where(g["rel_rms"] > 0))
            residual = mtype == RESIDUAL
            ax.plot(g["layer"], g[metric], marker="o", markersize=4 if not residual else 5,
                    lw=2.4 if residual else 1.0, color="black" if residual else cmap(k % 20),
                    label=mtype, zorder=3 if residual else 2)
        if metric == "rel_rms" and (acc[metric] > 0).any():
            ax.set_yscale("log")
        ax.set_xlabel("decoder layer")
        ax.set_ylabel(label)
        ax.set_xticks(sorted(acc["layer"].unique()))
        ax.set_title("every module type (accumulated)", fontsize=9)
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(7, len(labels)),
               fontsize=7, frameon=False, title="module type", title_fontsize=8)
    fig.suptitle(f"{div.candidate.name} vs {div.reference.name}: divergence by depth "
                 f"({div.n_items} items; intervals: {level} CI over items)", fontsize=10)
    return fig


def _residual_panel(ax: Any, acc: pd.DataFrame, t: pd.DataFrame, depth: pd.DataFrame,
                    level: str) -> None:
    res = acc[acc["module_type"] == RESIDUAL].sort_values("layer")
    if res.empty:
        ax.set_axis_off()
        return
    x = res["layer"].to_numpy(dtype=float)
    y = res["rel_rms"].to_numpy(dtype=float)
    low = res["rel_rms_ci_low"].to_numpy(dtype=float)
    high = res["rel_rms_ci_high"].to_numpy(dtype=float)
    ax.fill_between(x, low, high, color="black", alpha=0.25, lw=0, zorder=2,
                    gid="residual:band")
    ax.errorbar(x, y, yerr=np.vstack([y - low, high - y]), fmt="o-", color="black", lw=2.2,
                capsize=4, markersize=5, zorder=4, label=f"measured ({level} CI)")
    loc = t[(t["mode"] == "local") & (t["module_type"] == RESIDUAL)].sort_values("layer")
    if len(loc):
        ax.plot(loc["layer"], loc["rel_rms"], ls="--", color="0.35", marker="x",
                label="local: the layer alone", zorder=3)
    d = depth.sort_values("layer") if "layer" in depth.columns else depth
    colors = {"additive": "tab:blue", "quadrature": "tab:green", "compounding": "tab:red"}
    for column, label, style in PREDICTIONS:
        if column in d.columns and pd.to_numeric(d[column], errors="coerce").notna().any():
            ax.plot(d["layer"], pd.to_numeric(d[column], errors="coerce"), ls=style, lw=1.6,
                    color=colors[column], label=label, zorder=3, gid=f"prediction:{column}")
    ax.set_xlabel("decoder layer")
    ax.set_ylabel("residual stream: relative RMS error")
    ax.set_xticks(sorted(res["layer"].unique()))
    ax.set_ylim(bottom=0)
    ax.set_title("residual stream: measured against the predictions", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")


def _md_table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def verdict_text(fit: GrowthFit) -> str:
    """One sentence on how the residual stream's divergence accumulated."""
    grown, acc = fit.growth, fit.accumulation
    lvl = fmt_level(fit.confidence_level)
    if fit.verdict is None or grown is None or acc is None:
        last = None if grown is None else grown.last_rel_rms
        text = "accumulation: not assessed (" + (
            "no divergence" if _num(last) == 0 or (last is None and not fit.verdict_note)
            else fit.verdict_note or "needs the local pass and two layers") + ")"
        if grown is not None and _num(grown.growth_per_layer) is not None and _num(last):
            text += (f"; after layer {grown.last_layer} the residual stream's rel RMS is "
                     f"{_g(grown.last_rel_rms)}; growth per layer "
                     f"{_g(100 * grown.growth_per_layer, 3)} % "
                     f"[{_g(100 * grown.growth_per_layer_ci_low, 3)}, "
                     f"{_g(100 * grown.growth_per_layer_ci_high, 3)}] {lvl}")
        return text
    return (f"accumulation: {fit.verdict} — after layer {grown.last_layer} the residual "
            f"stream's rel RMS is {_g(grown.last_rel_rms)}; the layers' own errors would "
            f"add to {_g(acc.additive_last)} (quadrature {_g(acc.quadrature_last)}, "
            f"seed 004's sum of per-layer relative errors {_g(acc.seed004_last)}); "
            f"measured / additive = {_g(acc.amplification, 3)} "
            f"[{_g(acc.amplification_ci_low, 3)}, {_g(acc.amplification_ci_high, 3)}] "
            f"{lvl}; "
            f"growth per layer {_g(100 * grown.growth_per_layer, 3)} % "
            f"[{_g(100 * grown.growth_per_layer_ci_low, 3)}, "
            f"{_g(100 * grown.growth_per_layer_ci_high, 3)}] {lvl}")


def _capture_lines(settings: dict[str, Any]) -> list[str]:
    """Where the two runs of a comparison of captures were made, and the sketch's error."""
    caps = settings.get("captures")
    if not caps:
        return []
    sk = settings.get("sketch", {})
    lines = [f"- compared from two captures (no local pass): {sk.get('subset_size')} "
             f"positions and a {sk.get('projection_dim')}-dimensional sign projection per "
             f"item and module, seed {sk.get('seed')}; relative SD of each item's ‖b − a‖² "
             f"estimate at most √(2/k) = {_g(math.sqrt(2 / sk['projection_dim']), 3)}"
             if sk.get("projection_dim") else "- compared from two captures"]
    for key in ("reference", "candidate"):
        c = caps[key]
        lines.append(f"- {key} capture: `{Path(str(c['path'])).name}` ({c.get('host')}, "
                     f"{c.get('device')}: {c.get('device_name')}; {c.get('created')}; "
                     f"robuststats {c.get('package_version')})")
    lines.append("- each estimate's sketch error is inside its interval over items (the "
                 "sketches are independent from item to item); `modules.csv` gives the "
                 "sketch's own share as `*_sketch_se`")
    return lines


def markdown(div: Any, data: dict[str, Any], exceed: pd.DataFrame, label: str) -> str:
    lvl = float(div.modules["ci_level"].iloc[0]) if len(div.modules) else 0.95
    lines = [f"# Divergence {label}", "",
             f"- reference: **{div.reference.name}** ({div.reference.describe()})",
             f"- candidate: **{div.candidate.name}** ({div.candidate.describe()})",
             f"- {div.n_items} items, {div.n_layers} decoder layers, batch "
             f"{div.settings['batch_size']}, MAPE guard ε = {div.settings['eps']:g}·RMS, "
             f"intervals: {div.modules['ci_method'].iloc[0] if len(div.modules) else '-'}",
             f"- engine injections ({'reference and candidate captures' if div.settings.get('captures') else 'candidate and local passes'}): "
             f"{data['injections']['total']}",
             *_capture_lines(div.settings),
             "", "## Accumulation through depth", "", verdict_text(div.fit), ""]
    rows = [[str(r.layer), _g(r.rel_rms), _ci(r.rel_rms_ci_low, r.rel_rms_ci_high, lvl),
             _g(r.local_rel_rms), _g(r.additive), _g(r.quadrature), _g(r.seed004),
             _g(r.compounding), _g(r.amplification), _g(r.mape), _g(r.cosine, 6)]
            for r in div.depth.itertuples()]
    lines += [_md_table(["layer", "rel RMS", "interval", "local", "additive", "quadrature",
                         "seed 004 sum", "compounding", "measured/additive", "MAPE",
                         "cosine"], rows), "",
              "![divergence by depth](figures/depth.png)", "",
              f"## Modules beyond MAPE {data['max_mape']:g}", ""]
    if exceed.empty:
        lines.append(f"No module's MAPE interval reaches above {data['max_mape']:g}.")
    else:
        rows = [[str(r.rank), r.site, r.verdict, _g(r.mape),
                 _ci(r.mape_ci_low, r.mape_ci_high, lvl), _g(r.rel_rms), _g(r.sensitivity),
                 "yes" if r.sensitive else "", _g(r.priority)] for r in exceed.itertuples()]
        lines.append(_md_table(["rank", "module", "verdict", "MAPE", "interval", "rel RMS",
                                "sensitivity", "sensitive", "priority"], rows))
    acc = div.modules[div.modules["mode"] == "accumulated"]
    rows = [[r.site, r.module_type, _g(r.mape), _g(r.mdape), _g(r.wape), _g(r.rel_rms),
             _ci(r.rel_rms_ci_low, r.rel_rms_ci_high, lvl), _g(r.cosine, 6)]
            for r in acc.itertuples()]
    lines += ["", "## Every module (accumulated)", "",
              _md_table(["module", "type", "MAPE", "median APE", "WAPE", "rel RMS",
                         "interval", "cosine"], rows)]
    if "norm_rel_diff" in div.modules.columns:
        from robuststats.divergence._msprobe import STAT_METRICS

        rows = [[r.site, *(f"{_g(getattr(r, m))} {_ci(getattr(r, f'{m}_ci_low'), getattr(r, f'{m}_ci_high'), lvl)}"
                           for m in STAT_METRICS)] for r in acc.itertuples()]
        lines += ["", "## Differences of the dumps' statistics (per call; / RMS of the "
                  "reference)", "", _md_table(["module", *STAT_METRICS], rows)]
    one_side = getattr(div, "one_side", None)
    if one_side is not None:
        rows = [[r.side, r.site, str(r.layer), r.call, r.caller, str(r.n_calls), r.shape,
                 r.dtype] for r in one_side.head(60).itertuples()]
        lines += ["", "## Calls in one dump only (not compared)", "",
                  _md_table(["side", "in", "layer", "call", "caller", "calls", "shape",
                             "dtype"], rows)
                  if rows else "Every call is in both dumps."]
        if len(one_side) > 60:
            lines.append(f"\n... {len(one_side) - 60} more rows in one_side.csv")
    if div.notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in div.notes]
    return "\n".join(lines) + "\n"


def store_name(text: str) -> str:
    """A result-store name from a model directory or study name."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("._-") or "model"
    return name[:100]


def write_divergence(div: Any, *, out: str | Path = "results", name: str = "model",
                     max_mape: float = 0.05,
                     sensitivity: dict[int, dict[str, Any]] | None = None,
                     source: dict[str, Any] | None = None, noise_fit: Any = None) -> Any:
    """Publish ``div`` as ``<out>/<name>.divergence/v<N>/``; returns the version.

    ``noise_fit``: a :class:`~robuststats.divergence.NoiseFit` of this divergence, written
    beside it (``noise_fit.yaml``, its tables, ``figures/noise_fit.png``, a report section).
    """
    from robuststats.results import Manifest, ResultStore
    from robuststats.runs import environment

    study = f"{store_name(name)}.divergence"
    data = summary(div, max_mape=max_mape, sensitivity=sensitivity)
    exceed = exceeding_table(div.modules, max_mape, sensitivity=sensitivity)
    tables = {"items": div.items, "modules": div.modules, "depth": div.depth,
              "exceeding": exceed, "injections": div.injections}
    if getattr(div, "one_side", None) is not None:
        tables["one_side"] = div.one_side  # msprobe dumps: the calls of one stack only

    def writer(path: Path, number: int) -> None:
        for key, df in tables.items():
            df.to_parquet(path / f"{key}.parquet", index=False)
            df.to_csv(path / f"{key}.csv", index=False)
        figure = depth_figure(div, path / "figures" / "depth.png")
        figures = ["figures/depth.png"] if figure else []
        if noise_fit is not None:
            from robuststats.divergence._fitreport import fit_summary, write_fit_files

            figures += write_fit_files(noise_fit, path)
        report = {**data, "version": f"v{number}", "source": source or {},
                  "figures": figures, "modules": _records(div.modules),
                  **({"noise_fit": fit_summary(noise_fit)} if noise_fit is not None else {})}
        (path / "report.json").write_text(json.dumps(report, indent=2, allow_nan=False,
                                                     default=str) + "\n")
        text = markdown(div, data, exceed, f"{study}/v{number}")
        if noise_fit is not None:
            from robuststats.divergence._fitreport import fit_lines

            text += "\n".join(fit_lines(noise_fit)) + "\n"
        (path / "report.md").write_text(text)

    manifest = Manifest("divergence", {
        "source": source or {}, "reference": div.reference.to_dict(),
        "candidate": div.candidate.to_dict(), "settings": div.settings,
        "max_mape": max_mape, "n_items": div.n_items, "n_layers": div.n_layers,
        "sensitivity": None if sensitivity is None
        else {str(k): v for k, v in sensitivity.items()},
        **({"noise_fit": {"verdict": noise_fit.verdict, "places": noise_fit.places,
                          "spec": noise_fit.spec.to_dict()}} if noise_fit is not None else {})},
        row_counts={**{k: len(v) for k, v in tables.items()},
                    **({"noise_fit_scales": len(noise_fit.scales),
                        "noise_fit_sites": len(noise_fit.sites)} if noise_fit is not None
                       else {})},
        seconds=round(div.seconds, 2), environment=environment())
    return ResultStore(out).publish(study, writer, manifest)
