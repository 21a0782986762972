"""``robuststats search FILE``: adaptive per-layer noise search with Optuna (docs/search.md)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from robuststats.cli import _options as opts
from robuststats.cli._output import emit, fmt_number, is_missing, render_table
from robuststats.cli._types import positive_int_up_to

__all__ = ["add_parser", "run"]


def _trials(text: str) -> int:
    from robuststats.search import MAX_TRIALS

    return positive_int_up_to(MAX_TRIALS)(text)


#: the options, in the order --help lists them
_OPTIONS = [
    opts.spec_file("search", "studies/adaptive_search.yaml"),
    opts.option("--trials", type=_trials, metavar="N",
                help="finished trials the study should hold (default: search.trials); a rerun "
                     "continues up to N"),
    opts.workers("worker processes running trials against the one storage (default 1: this "
                 "process)"),
    opts.option("--storage", metavar="URL",
                help="Optuna storage: an SQLAlchemy URL (sqlite:///x.db, postgresql://...), "
                     "journal:PATH or a .journal/.log file, or a .db/.sqlite file (default "
                     "sqlite:///RUNS/<name>/search.db)"),
    *opts.resumable("search",
                    runs_help="run directories: cached probed models, default storage (default "
                              "runs/)",
                    fresh_help="delete this search's study from the storage and its cached "
                               "models, and start over",
                    plan="the plan"),
]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    return opts.add_command(
        subparsers, "search", run, options=_OPTIONS,
        help="adaptive per-layer noise search (Optuna): tolerance map or noise-aware "
             "training, re-evaluated on fresh noise",
        description=(
            "Search one log-uniform noise-scale multiplier per decoder layer (or layer block) "
            "with Optuna. Objective 'tolerance': the largest per-layer noise budget whose "
            "accuracy drop stays within a bound; 'training': train with the per-layer scales "
            "and maximise noisy accuracy or retention. The study lives in an Optuna storage "
            "(default SQLite under RUNS/<name>/search.db): rerunning the command continues "
            "it. The chosen configuration is re-evaluated on fresh noise seeds (and held-out "
            "items) against the uniform baseline, and written as a NoiseSpec file with the "
            "trials table and figures to a new result version OUT/<name>/v<N>/."),
        epilog=("Open the study in optuna-dashboard: optuna-dashboard "
                "sqlite:///runs/<name>/search.db (or the --storage given)."))


def run(args: argparse.Namespace) -> int:
    from robuststats.runs import Interrupted
    from robuststats.search import SearchSpec, check_storage, default_storage, normalise_url

    spec = SearchSpec.from_file(args.search_file).with_overrides(trials=args.trials)
    url = check_storage(normalise_url(args.storage) if args.storage
                        else default_storage(args.runs, spec.name))
    if args.check:
        return _check(args, spec, url)
    opts.check_output_dirs(args, "out", "runs")
    from robuststats.search import run_search

    def log(message: str) -> None:
        if not args.no_progress:
            print(f"robuststats search: {message}", file=sys.stderr)

    try:
        result = run_search(spec, storage=url, workers=args.workers, out=args.out,
                            runs=args.runs, fresh=args.fresh, progress=not args.no_progress,
                            log=log)
    except Interrupted as exc:
        print(f"robuststats search: interrupted by {exc}; finished trials are kept in "
              f"{url}: rerun the same command to continue", file=sys.stderr)
        return 128 + exc.signum
    table = result.reevaluation
    data = {"search": spec.name, "version": result.version.label,
            "path": str(result.version.path), "storage": result.storage, "ok": result.ok,
            "trials_target": result.trials_target,
            "trials_finished": result.trials_finished,
            "trials_run_now": result.trials_run_now, "trials_failed": result.trials_failed,
            "recovered": result.recovered, "chosen": result.chosen,
            "seconds": round(result.seconds, 1), "reevaluation": table,
            "worker_failures": result.worker_failures}
    emit(args.format, data=data, text=lambda: _text(spec, result))
    if result.worker_failures:
        print(f"robuststats search: {len(result.worker_failures)} worker(s) failed; "
              f"tracebacks: {', '.join(result.worker_failures)}", file=sys.stderr)
        return 1
    return 0


def _text(spec: Any, result: Any) -> str:
    lines = [f"search {spec.name}: {result.trials_finished} finished trial(s) of "
             f"{result.trials_target} ({result.trials_run_now} run now, "
             f"{result.trials_failed} failed), {result.seconds:.1f} s",
             f"storage: {result.storage}",
             f"results: {result.version.path}"]
    if result.chosen is None:
        lines.append("no configuration qualified (see the report)")
    else:
        lines.append(f"chosen: trial {result.chosen['trial']}; config: "
                     f"{result.version.path / 'noise_config.yaml'}")
    table = result.reevaluation
    if table is not None and not table.empty:
        def f4(value: Any) -> str:
            return fmt_number(value, ".4f")

        rows = [{"config": r["config"], "metric": r["metric"],
                 "search (optimistic)": f4(r["search_value"]), "re-evaluated": f4(r["estimate"]),
                 "interval": "-" if is_missing(r["ci_low"])
                 else f"[{f4(r['ci_low'])}, {f4(r['ci_high'])}]",
                 "gap": f4(r["gap"]), "verdict": r["verdict"] if isinstance(r["verdict"], str)
                 else ""} for r in table.to_dict(orient="records")]
        cols = ["config", "metric", "search (optimistic)", "re-evaluated", "interval", "gap",
                "verdict"]
        lines += ["", render_table(rows, cols)]
    return "\n".join(lines)


def _check(args: argparse.Namespace, spec: Any, url: str) -> int:
    """``--check``: the search file, the flags, the task and the trainer; then the plan."""
    from robuststats.search import preflight

    search_items, holdout = preflight(spec)
    s = spec.search
    data = {"search": spec.name, "valid": True, "objective": s.objective,
            "multi_objective": s.multi_objective, "space": s.space,
            "scale_range": list(s.scale_range), "trials": s.trials, "storage": url,
            "sampler": s.sampler_name, "pruner": s.pruner_name,
            "search_items": len(search_items), "holdout_items": len(holdout),
            "noise_level": spec.eval_level, "noise_seeds": spec.search_noise_seeds(),
            "reevaluation_noise_seeds": spec.fresh_noise_seeds(),
            "seeds": spec.seed_list(), "run_hash": spec.run_hash()}

    def text() -> str:
        return "\n".join([
            f"search {spec.name}: valid; nothing was run (--check)",
            f"  objective {s.objective}"
            + (" (multi-objective)" if s.multi_objective else "")
            + f", one multiplier per {s.space} in [{s.scale_range[0]:g}, {s.scale_range[1]:g}]",
            f"  {s.trials} trials, sampler {s.sampler_name}, pruner {s.pruner_name}",
            f"  {len(search_items)} search items, {len(holdout)} held-out items; noise level "
            f"{spec.eval_level:g}, noise seeds {spec.search_noise_seeds()} (re-evaluation "
            f"{spec.fresh_noise_seeds()})",
            f"  storage {url}",
        ])

    emit(args.format, data=data, text=text)
    return 0
