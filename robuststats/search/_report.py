"""A search's result version: the noise config, the trials table, the re-evaluation, figures
and a short report, published atomically through :class:`robuststats.results.ResultStore`.

``noise_config.yaml`` / ``noise_config.json`` hold the chosen configuration as a
:class:`~robuststats.engine.NoiseSpec` mapping (``layer_scales`` keyed by layer index, or
by module name for ``space: block``) plus a ``provenance`` mapping that
:meth:`NoiseSpec.from_file` ignores: ``NoiseSpec.from_file("noise_config.yaml")`` is the
configuration, ready for :func:`robuststats.engine.inject` or a study's ``train_noise``.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from robuststats.search._space import SearchSpace, budget

if TYPE_CHECKING:
    import optuna

    from robuststats.search._objective import SearchContext
    from robuststats.search._spec import SearchSpec

__all__ = ["TRIAL_COLUMNS", "config_document", "trials_table", "write_search_version"]

#: declared leading columns of ``trials.csv`` (then ``value_<i>`` and one ``m_<param>``
#: column per searched multiplier)
TRIAL_COLUMNS = ["number", "state", "baseline", "retry_of", "noisy_accuracy", "clean_accuracy",
                 "drop", "retention", "budget", "feasible", "pareto", "seconds",
                 "datetime_start", "datetime_complete", "worker"]


def trials_table(study: optuna.Study, space: SearchSpace, spec: SearchSpec) -> pd.DataFrame:
    """One row per trial, every state (failed and pruned included), in trial order."""
    import optuna

    trials = study.get_trials(deepcopy=False)
    front = set()
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    if complete:
        front = {t.number for t in (study.best_trials if spec.search.multi_objective
                                    else _best_or_none(study))}
    rows = []
    for t in trials:
        ua = t.user_attrs
        worker = t.system_attrs.get("robuststats:worker") or {}
        drop = ua.get("drop")
        row: dict[str, Any] = {
            "number": t.number, "state": t.state.name, "baseline": ua.get("baseline"),
            "retry_of": ua.get("retry_of"), "noisy_accuracy": ua.get("noisy_accuracy"),
            "clean_accuracy": ua.get("clean_accuracy"), "drop": drop,
            "retention": ua.get("retention"), "budget": ua.get("budget"),
            "feasible": (None if drop is None or spec.search.objective != "tolerance"
                         else bool(drop <= spec.search.bound)),
            "pareto": t.number in front, "seconds": ua.get("seconds"),
            "datetime_start": t.datetime_start, "datetime_complete": t.datetime_complete,
            "worker": f"{worker.get('host')}:{worker.get('pid')}" if worker else None,
        }
        for i, v in enumerate(t.values or []):
            row[f"value_{i}"] = v
        for p in space.places:
            row[f"m_{p.param}"] = t.params.get(p.param)
        rows.append(row)
    cols = TRIAL_COLUMNS + [f"value_{i}" for i in range(len(study.directions))] + \
        [f"m_{p.param}" for p in space.places]
    return pd.DataFrame.from_records(rows, columns=cols)


def _best_or_none(study: optuna.Study) -> list[Any]:
    try:
        return [study.best_trial]
    except ValueError:
        return []


def config_document(ctx: SearchContext, chosen: optuna.trial.FrozenTrial,
                    re_table: pd.DataFrame, provenance: dict[str, Any]) -> dict[str, Any]:
    """The noise config: a ``NoiseSpec`` mapping plus ``provenance``."""
    params = dict(chosen.params)
    noise = ctx.config_noise(params).replace(seed=0)
    doc = noise.to_dict()
    intervals = {}
    for r in re_table[re_table["config"] == "chosen"].to_dict(orient="records"):
        intervals[r["metric"]] = {k: _plain(r[k]) for k in
                                  ("estimate", "ci_low", "ci_high", "ci_level", "ci_method",
                                   "search_value", "gap", "verdict") if _plain(r[k]) is not None}
    for r in re_table[re_table["config"].str.contains(" − ", regex=False)].to_dict("records"):
        intervals[f"{r['config']} ({r['metric']})"] = {
            k: _plain(r[k]) for k in ("estimate", "ci_low", "ci_high", "ci_level", "ci_method",
                                      "pvalue", "verdict") if _plain(r[k]) is not None}
    doc["provenance"] = {
        **provenance, "trial": chosen.number, "values": list(chosen.values),
        "metrics": {k: chosen.user_attrs.get(k) for k in
                    ("noisy_accuracy", "clean_accuracy", "drop", "retention", "budget")},
        "search_value_is_optimistic": True,
        "reevaluation": intervals,
        "places": ctx.space.table(params, ctx.base_scale),
    }
    return doc


def _plain(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    if hasattr(v, "item"):
        return v.item()
    return v


def _settings(settings: dict[str, Any]) -> str:
    """``tpe (seed 0, n_startup_trials 5, ...)``: a sampler or pruner with its settings."""
    rest = ", ".join(f"{k} {v}" for k, v in settings.items() if k != "name")
    return f"{settings['name']} ({rest})" if rest else settings["name"]


def _optuna_version() -> str:
    import optuna

    return optuna.__version__


def write_search_version(out: str | Path, spec: SearchSpec, ctx: SearchContext,
                         study: optuna.Study, chosen: optuna.trial.FrozenTrial | None,
                         re_table: pd.DataFrame, meta: dict[str, Any], *,
                         seconds: float) -> Any:
    """Publish ``<out>/<name>/v<N>/`` (atomic, sealed with checksums)."""
    import yaml

    from robuststats.results import Manifest, ResultStore
    from robuststats.runs import environment
    from robuststats.search._study import stored_sensitivity

    trials = trials_table(study, ctx.space, spec)
    profile = _profile(ctx, study, chosen)
    sens = stored_sensitivity(study)
    env = environment()
    counts = trials["state"].value_counts().to_dict()
    provenance = {"study": spec.name, "storage": meta["storage"],
                  "objective": spec.search.objective, "space": spec.search.space,
                  "base_scale": ctx.base_scale, "spec_hash": spec.spec_hash(),
                  "run_hash": spec.run_hash(), "package_version": env["package_version"],
                  "git_commit": env.get("git_commit"),
                  "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    config = None if chosen is None else config_document(ctx, chosen, re_table, provenance)
    manifest = Manifest("search", {
        "spec": spec.resolved(), "spec_hash": spec.spec_hash(), "run_hash": spec.run_hash(),
        "description": spec.description, **meta,
        "trials": {k: int(v) for k, v in counts.items()},
        "chosen_trial": None if chosen is None else chosen.number,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seeds": spec.seed_list(), "noise_seeds": spec.search_noise_seeds(),
        "n_items": len(ctx.search_items), "sampler": spec.search.sampler_settings,
        "pruner": spec.search.pruner_settings, "optuna_version": _optuna_version()},
        seconds=round(seconds, 1), environment=env)

    def writer(path: Path, number: int) -> None:
        from robuststats.search._figures import write_figures

        if config is not None:
            (path / "noise_config.yaml").write_text(
                "# NoiseSpec.from_file loads this file; `provenance` is metadata.\n"
                + yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
            (path / "noise_config.json").write_text(
                json.dumps(config, indent=2, default=str, ensure_ascii=False) + "\n")
        trials.to_parquet(path / "trials.parquet", index=False)
        trials.to_csv(path / "trials.csv", index=False)
        re_table.to_parquet(path / "reevaluation.parquet", index=False)
        re_table.to_csv(path / "reevaluation.csv", index=False)
        profile.to_csv(path / "layer_profile.csv", index=False)
        if sens is not None:
            pd.DataFrame({"layer": [int(k) for k in sens["scores"]],
                          "sensitivity": list(sens["scores"].values()),
                          "source": sens["source"]}).to_csv(path / "sensitivity.csv",
                                                             index=False)
        figures = write_figures(path / "figures", spec, trials, profile, ctx.base_scale)
        (path / "report.md").write_text(_markdown(spec, ctx, chosen, trials, re_table, meta,
                                                  figures, number))

    return ResultStore(out).publish(spec.name, writer, manifest)


def _profile(ctx: SearchContext, study: optuna.Study,
             chosen: optuna.trial.FrozenTrial | None) -> pd.DataFrame:
    """Per place: the multipliers of the chosen, uniform and heuristic configurations."""
    import optuna

    configs: dict[str, dict[str, float]] = {}
    if chosen is not None:
        configs["chosen"] = dict(chosen.params)
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        name = t.user_attrs.get("baseline")
        if name and name not in configs:
            configs[name] = dict(t.params)
    rows = []
    for name, params in configs.items():
        for r in ctx.space.table(params, ctx.base_scale):
            rows.append({"config": name, **{k: r[k] for k in ("layer", "module", "param",
                                                              "multiplier", "scale")}})
    return pd.DataFrame.from_records(
        rows, columns=["config", "layer", "module", "param", "multiplier", "scale"])


def _fmt(v: Any, pct: bool = False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{100 * v:.1f}" if pct else f"{v:.4g}"


def _markdown(spec: SearchSpec, ctx: SearchContext, chosen: Any, trials: pd.DataFrame,
              re_table: pd.DataFrame, meta: dict[str, Any], figures: list[str],
              number: int) -> str:
    s = spec.search
    counts = trials["state"].value_counts().to_dict()
    lines = [f"# Search {spec.name} v{number}", "", spec.description.strip() or "", "",
             f"- objective: **{s.objective}**"
             + (f" (largest budget with accuracy drop ≤ {s.bound:g})" if s.objective ==
                "tolerance" else f" (maximise noisy {s.metric})")
             + (", multi-objective (metric vs noise budget)" if s.multi_objective else ""),
             f"- space: one log-uniform multiplier in [{s.scale_range[0]:g}, "
             f"{s.scale_range[1]:g}] per {'layer' if s.space == 'layer' else 'layer block'} "
             f"({len(ctx.space.places)} multipliers), base scale {ctx.base_scale:g}",
             f"- trials: {', '.join(f'{v} {k.lower()}' for k, v in counts.items())}; storage "
             f"`{meta['storage']}`, study `{spec.name}`",
             f"- sampler {_settings(s.sampler_settings)}; pruner "
             f"{_settings(s.pruner_settings)}", ""]
    if chosen is None:
        lines += ["**No configuration qualified** (tolerance: no trial stayed within the "
                  "bound). The baselines are re-evaluated below.", ""]
    else:
        lines += [f"Chosen: trial {chosen.number} "
                  f"(budget {_fmt(budget(dict(chosen.params), ctx.base_scale))}); config in "
                  "`noise_config.yaml` (`NoiseSpec.from_file`).", "",
                  "The search's own value of the chosen trial is **optimistic**: it is the "
                  "best of many evaluations on the same noise draws and items. The "
                  "re-evaluation below uses fresh noise seeds"
                  + (", held-out items" if ctx.holdout_items else "")
                  + (" and fresh training seeds" if s.objective == "training" else "")
                  + "; `gap` = search value − re-evaluated estimate.", ""]
    if not re_table.empty:
        lines += ["| config | metric | search value (optimistic) | re-evaluated | interval | "
                  "gap | p | verdict |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in re_table.to_dict(orient="records"):
            ci = "–" if r["ci_low"] is None or (isinstance(r["ci_low"], float) and
                                                math.isnan(r["ci_low"])) else \
                f"[{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}] {100 * r['ci_level']:.0f}%"
            lines.append(f"| {r['config']} | {r['metric']} | {_fmt(r['search_value'])} | "
                         f"{_fmt(r['estimate'])} | {ci} | {_fmt(r['gap'])} | "
                         f"{_fmt(r['pvalue'])} | {r['verdict'] if isinstance(r['verdict'], str) else ''} |")
        first = re_table.iloc[0]
        lines += ["", f"Rows: {first['n_rows']} × {first['row_unit']}, {first['n_items']} "
                  f"{first['items']} items; question: {first['question']}. Methods: "
                  + "; ".join(sorted({str(m) for m in re_table['ci_method'].dropna()})) + ".",
                  ""]
    lines += [f"![{Path(f).stem}]({f})" for f in figures]
    return "\n".join(lines) + "\n"
