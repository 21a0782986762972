"""A fitted error model in a divergence version: its tables, figure and report section.

``figures/noise_fit.png``: the residual stream's measured rel RMS against the rel RMS the
fitted spec produces in the confirmation run, through depth, each with its t interval over
items (left); per site, measured / simulated rel RMS and WAPE with their bootstrap intervals
and the tolerance band (right). ``noise_fit_scales`` and ``noise_fit_sites`` are the tables
of :class:`~robuststats.divergence.NoiseFit`; ``noise_fit.yaml`` the spec it wrote.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from robuststats._format import fmt_level

__all__ = ["fit_figure", "fit_lines", "fit_summary", "write_fit_files"]


def fit_figure(fit: Any, path: Path) -> Path | None:
    """Measured against simulated divergence through depth, and the per-site ratios."""
    if fit.depth.empty and fit.sites.empty:
        return None
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.4),
                                      gridspec_kw={"width_ratios": [1, 1.6]})
    d = fit.depth
    for name, color, marker in (("measured", "black", "o"), ("simulated", "tab:orange", "s")):
        y = d[f"rel_rms_{name}"]
        left.plot(d["layer"], y, color=color, marker=marker,
                  label=f"{name}" + (" (fitted spec)" if name == "simulated" else ""))
        left.fill_between(d["layer"], d[f"rel_rms_{name}_ci_low"],
                          d[f"rel_rms_{name}_ci_high"], color=color, alpha=0.18, lw=0)
    left.set_xlabel("decoder layer")
    left.set_ylabel("residual stream rel RMS ‖b − a‖/‖a‖")
    left.set_xticks(sorted(d["layer"].unique()))
    left.legend(fontsize=8, frameon=False)
    left.set_title(f"verdict: {fit.verdict}", fontsize=9)
    s = fit.sites.reset_index(drop=True)
    x = np.arange(len(s))
    lo, hi = 1 / (1 + fit.tolerance), 1 + fit.tolerance
    right.axhspan(lo, hi, color="tab:green", alpha=0.12, lw=0,
                  label=f"tolerance ±{fit.tolerance:.0%}")
    right.axhline(1, color="grey", lw=0.8)
    for metric, color, dx in (("rel_rms", "black", -0.15), ("wape", "tab:blue", 0.15)):
        est = s[f"{metric}_ratio"].to_numpy(float)
        err = np.vstack([est - s[f"{metric}_ratio_ci_low"].to_numpy(float),
                         s[f"{metric}_ratio_ci_high"].to_numpy(float) - est])
        shown = np.isfinite(est)
        right.errorbar(x[shown] + dx, est[shown], yerr=err[:, shown], fmt="o", ms=3,
                       color=color, lw=1, label=f"{metric} measured / simulated")
    bad = s.index[s["misfit"]].to_numpy()
    if bad.size:
        right.scatter(bad, np.full(bad.size, right.get_ylim()[1]), marker="v", color="red",
                      s=18, label="misfit", zorder=4)
    right.set_xticks(x)
    right.set_xticklabels([f"{r.layer}:{r.module_type}" for r in s.itertuples()],
                          rotation=90, fontsize=6)
    right.set_ylabel("measured / simulated")
    right.legend(fontsize=7, frameon=False, loc="upper left")
    fig.suptitle(f"{fit.settings['measured_candidate'].get('name')}: fitted relative Gaussian "
                 f"per {fit.places} ({fit.n_items} items; bands and bars: "
                 f"{fmt_level(fit.confidence_level)} intervals)", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _g(v: Any, digits: int = 4) -> str:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return "-"
    return "-" if x != x else f"{x:.{digits}g}"


def fit_summary(fit: Any) -> dict[str, Any]:
    """The plain record of the fit that the JSON output and ``report.json`` hold."""
    return {"verdict": fit.verdict, "places": fit.places, "tolerance": fit.tolerance,
            "rms_log_ratio": fit.rms_log_ratio, "method": fit.method,
            "n_resamples": fit.n_resamples, "simulations": fit.simulations,
            "seconds": round(fit.seconds, 2), "spec": fit.spec.to_dict(),
            "scales": [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}
                       for r in fit.scales.to_dict("records")],
            "misfit_sites": fit.sites.loc[fit.sites["misfit"], "site"].tolist(),
            "notes": list(fit.notes)}


def fit_lines(fit: Any) -> list[str]:
    """The report's section on the fitted error model."""
    lvl = fmt_level(fit.confidence_level)
    rows = [f"| {r.place} | `{r.key}` | {_g(r.scale)} | [{_g(r.scale_ci_low)}, "
            f"{_g(r.scale_ci_high)}] | {_g(r.multiplier)} |" for r in fit.scales.itertuples()]
    worst = fit.sites.sort_values("abs_log_ratio", ascending=False).head(8)
    wrows = [f"| {r.site} | {r.worst_metric} | {_g(r.worst_ratio)} | "
             f"[{_g(getattr(r, f'{r.worst_metric}_ratio_ci_low'))}, "
             f"{_g(getattr(r, f'{r.worst_metric}_ratio_ci_high'))}] | "
             f"{'yes' if r.misfit else ''} |" for r in worst.itertuples()]
    return ["", "## Fitted error model (relative Gaussian)", "",
            f"**Verdict: {fit.verdict}** (a site misfits when its {lvl} interval of measured / "
            f"simulated rel RMS or WAPE lies entirely outside ±{fit.tolerance:.0%}; RMS of "
            f"the log ratios over sites {_g(fit.rms_log_ratio, 3)}). Method: {fit.method}; "
            f"{fit.simulations} simulated runs.", "",
            "| place | layer_scales key | scale | interval | multiplier |",
            "| --- | --- | --- | --- | --- |", *rows, "",
            "Largest differences between the measurement and the fitted spec:", "",
            "| site | metric | measured / simulated | interval | misfit |",
            "| --- | --- | --- | --- | --- |", *wrows, "",
            "![measured against simulated](figures/noise_fit.png)",
            *([""] + [f"- {n}" for n in fit.notes] if fit.notes else [])]


def write_fit_files(fit: Any, path: Path) -> list[str]:
    """Tables, spec and figure of ``fit`` into the version directory ``path``; returns the
    figures written."""
    fit.scales.to_csv(path / "noise_fit_scales.csv", index=False)
    fit.scales.to_parquet(path / "noise_fit_scales.parquet", index=False)
    fit.sites.to_csv(path / "noise_fit_sites.csv", index=False)
    fit.sites.to_parquet(path / "noise_fit_sites.parquet", index=False)
    (path / "noise_fit.yaml").write_text(fit.to_yaml(), encoding="utf-8")
    figure = fit_figure(fit, path / "figures" / "noise_fit.png")
    return ["figures/noise_fit.png"] if figure else []
