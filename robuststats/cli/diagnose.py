"""``robuststats diagnose FILE``: the diagnostic probe of a study's models."""

from __future__ import annotations

import argparse
from typing import Any

from robuststats.cli._output import add_format_option, emit, fmt_ci, fmt_p, fmt_pct, render_table
from robuststats.cli._types import open_unit, positive_int
from robuststats.config.bounds import MAX_WORKERS
from robuststats.errors import did_you_mean

__all__ = ["add_parser", "run"]

#: the probe's levels (robuststats.diagnose.LEVELS, repeated here so --help imports nothing)
_LEVELS = ("operator", "layer", "window", "channel")


def _window(text: str) -> int:
    value = positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"must be at least 2 (a window of 1 is the layer "
                                         f"level), got {text!r}")
    return value


def _levels(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",")]
    for name in names:
        if name not in _LEVELS:
            hint = did_you_mean(name, _LEVELS)
            raise argparse.ArgumentTypeError(
                f"unknown level {name!r}{hint}; choose from {','.join(_LEVELS)}")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"levels must be distinct, got {text!r}")
    return names


def _workers(text: str) -> int:
    return positive_int(text, MAX_WORKERS)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "diagnose", help="probe where a study's models are sensitive to noise (op, layer, "
                         "window, channel)",
        description=(
            "Noise as an oscilloscope: evaluate the study's trained models with noise in one "
            "op type at a time (operator), one decoder layer at a time (layer), windows of "
            "consecutive layers (window, with an interval on each window's interaction: "
            "avalanche), and measure per-channel activation outliers at chosen module inputs "
            "(channel). Every finding is a drop with its interval and a multiplicity-adjusted "
            "p-value; the result version OUT/<study>.diagnose/v<N>/ holds tables, report.md, "
            "report.json, a heatmap, sensitivity.json/.yaml and a protection plan. Models are "
            "loaded from RUNS/<study>/models/ (trained there when missing). The study file's "
            "'diagnose:' section sets the defaults; flags override it only when given."
        ),
    )
    p.add_argument("study_file", metavar="STUDY_FILE", help="YAML study file, e.g. "
                   "studies/e8_smoke.yaml")
    p.add_argument("--levels", type=_levels, metavar="LIST",
                   help="comma-separated subset of operator,layer,window,channel "
                        "(default: all; the window level also evaluates every single layer)")
    p.add_argument("--window", type=_window, metavar="K",
                   help="layers per window (default 3)")
    p.add_argument("--stride", type=positive_int, metavar="S",
                   help="layers between window starts (default 1)")
    p.add_argument("--scale", type=open_unit, metavar="S",
                   help="noise scale of every target (default 0.05)")
    p.add_argument("--condition", metavar="NAME",
                   help="training condition whose models are probed (default: the first)")
    p.add_argument("--seeds", type=positive_int, metavar="N",
                   help="training seeds: the study's first N (0..N-1 when it gives a count)")
    p.add_argument("--noise-seeds", type=positive_int, metavar="N",
                   help="noise draws per target and seed (default: the study's)")
    p.add_argument("--n-items", type=positive_int, metavar="N",
                   help="evaluation items (default: the study's evaluation.n_items)")
    p.add_argument("--labels", action="store_true", default=None,
                   help="add seed 004's fixed thresholds (sensitivity > 3 critical, window "
                        "degradation > 15%% avalanche point) as labels; they decide nothing")
    p.add_argument("--out", default="results", metavar="DIR",
                   help="result store root (default results/)")
    p.add_argument("--runs", default="runs", metavar="DIR",
                   help="run directories with the study's cached models (default runs/)")
    p.add_argument("--workers", type=_workers, default=1, metavar="N",
                   help="evaluate in N worker processes (default 1: in this process); the "
                   "result is the same for any N")
    p.add_argument("--recompute", action="store_true",
                   help="evaluate every target again instead of reading back the evaluations "
                   "a previous (or killed) run of the same probe stored in the run directory")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (on stderr)")
    add_format_option(p)
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    from robuststats.diagnose import resolve_plan, run_diagnosis
    from robuststats.runs import check_output_dir
    from robuststats.runs.spec import StudySpec

    spec = StudySpec.from_file(args.study_file)
    plan, ledger_spec = resolve_plan(
        spec, levels=args.levels, window=args.window, stride=args.stride,
        seeds=args.seeds, noise_seeds=args.noise_seeds, n_items=args.n_items,
        condition=args.condition, scale=args.scale, labels=args.labels)
    # before anything is built or trained: a bad --out must not surface after the compute
    check_output_dir(args.out, "--out")
    check_output_dir(args.runs, "--runs")
    progress = None if args.no_progress else _bar
    result = run_diagnosis(spec, plan, ledger_spec=ledger_spec, out=args.out, runs=args.runs,
                           progress=progress, reuse=not args.recompute,
                           workers=args.workers)
    from robuststats.diagnose import protection_plan

    entries = protection_plan(result)
    data = {"study": spec.name, "condition": plan.condition,
            "version": result.version.label, "path": str(result.version.path),
            "seconds": round(result.seconds, 1), "plan": plan.to_dict(),
            "notes": list(result.notes),
            "targets": result.table.to_dict(orient="records"),
            "avalanche": None if result.avalanche is None
            else result.avalanche.to_dict(orient="records"),
            "protection_plan": entries}
    emit(args.format, data=data, text=lambda: _text(result, entries))
    return 0


def _bar(total: int, initial: int) -> Any:
    from robuststats.runs import progress_bar

    return progress_bar(True, total, initial, unit="eval", desc="diagnose")


def _text(result: Any, entries: list[dict[str, Any]]) -> str:
    plan = result.plan
    lines = [f"diagnosis of {plan.study} ({plan.condition}): {len(result.targets)} targets × "
             f"{len(plan.seeds)} seed(s) × {len(plan.noise_seeds)} noise seed(s), "
             f"scale {plan.scale:g}, {result.seconds:.1f} s",
             f"results: {result.version.path}"]
    lines += [f"note: {n}" for n in result.notes]
    cols = ["rank", "label", "drop", "interval", "p_adj"]
    for level in ("operator", "layer", "window"):
        rows = result.table[result.table["level"] == level]
        if rows.empty:
            continue
        records = [{"rank": int(r["rank"]), "label": r["label"],
                    "drop": fmt_pct(r["estimate"], signed=True),
                    "interval": fmt_ci(r["ci_low"], r["ci_high"], r["ci_level"]),
                    "p_adj": fmt_p(r["pvalue_adjusted"])} for _, r in rows.head(5).iterrows()]
        lines += ["", f"{level} level (top {len(records)} of {len(rows)}, drop in pp):",
                  render_table(records, cols)]
    lines += ["", "protection plan:" if entries else "protection plan: nothing to protect on "
              "this evidence"]
    lines += [f"  {k}. {e['label']} ({e['kind']}): {e['action']}"
              for k, e in enumerate(entries, start=1)]
    return "\n".join(lines)
