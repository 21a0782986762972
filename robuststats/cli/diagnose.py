"""``robuststats diagnose FILE``: the diagnostic probe of a study's models."""

from __future__ import annotations

import argparse
from typing import Any

from robuststats.cli import _options as opts
from robuststats.cli._output import emit, fmt_ci, fmt_p, fmt_pct, render_table
from robuststats.cli._types import POSITIVE_INT, checked, open_unit, positive_int
from robuststats.errors import did_you_mean

__all__ = ["add_parser", "run"]

#: the probe's levels (robuststats.diagnose.LEVELS, repeated here so --help imports nothing)
_LEVELS = ("operator", "layer", "window", "channel")

#: layers per window: 2 or more
_window = checked(int, POSITIVE_INT,
                  ((lambda v: v >= 2), "must be at least 2 (a window of 1 is the layer level)"))


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


#: the options, in the order --help lists them
_OPTIONS = [
    opts.spec_file("study", "studies/e8_smoke.yaml"),
    opts.option("--levels", type=_levels, metavar="LIST",
                help="comma-separated subset of operator,layer,window,channel (default: all; "
                     "the window level also evaluates every single layer)"),
    opts.option("--window", type=_window, metavar="K", help="layers per window (default 3)"),
    opts.option("--stride", type=positive_int, metavar="S",
                help="layers between window starts (default 1)"),
    opts.option("--scale", type=open_unit, metavar="S",
                help="noise scale of every target (default 0.05)"),
    opts.option("--condition", metavar="NAME",
                help="training condition whose models are probed (default: the first)"),
    opts.option("--seeds", type=positive_int, metavar="N",
                help="training seeds: the study's first N (0..N-1 when it gives a count)"),
    opts.option("--noise-seeds", type=positive_int, metavar="N",
                help="noise draws per target and seed (default: the study's)"),
    opts.option("--n-items", type=positive_int, metavar="N",
                help="evaluation items (default: the study's evaluation.n_items)"),
    opts.option("--labels", action="store_true", default=None,
                help="add seed 004's fixed thresholds (sensitivity > 3 critical, window "
                     "degradation > 15%% avalanche point) as labels; they decide nothing"),
    opts.out("result store root: the diagnosis is written to OUT/<study>.diagnose/v<N>/ "
             "(default results/, relative to the current directory)"),
    opts.runs("run directories with the study's cached models and stored evaluations "
              "(default runs/, relative to the current directory)"),
    opts.workers("evaluate in N worker processes (default 1: in this process); the result is "
                 "the same for any N"),
    opts.option("--recompute", action="store_true",
                help="evaluate every target again instead of reading back the evaluations a "
                     "previous (or killed) run of the same probe stored in the run directory"),
    opts.NO_PROGRESS,
    opts.FORMAT,
]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    return opts.add_command(
        subparsers, "diagnose", run, options=_OPTIONS,
        help="probe where a study's models are sensitive to noise (op, layer, window, channel)",
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
        ))


def run(args: argparse.Namespace) -> int:
    from robuststats.diagnose import resolve_plan, run_diagnosis
    from robuststats.runs.spec import StudySpec

    spec = StudySpec.from_file(args.study_file)
    plan, ledger_spec = resolve_plan(
        spec, levels=args.levels, window=args.window, stride=args.stride,
        seeds=args.seeds, noise_seeds=args.noise_seeds, n_items=args.n_items,
        condition=args.condition, scale=args.scale, labels=args.labels)
    # before anything is built or trained: a bad --out must not surface after the compute
    opts.check_output_dirs(args, "out", "runs")
    progress = None if args.no_progress else _bar
    result = run_diagnosis(spec, plan, ledger_spec=ledger_spec, out=args.out, runs=args.runs,
                           progress=progress, reuse=not args.recompute,
                           workers=args.workers, started=lambda: _say_where(spec.name, args))
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


def _say_where(study: str, args: argparse.Namespace) -> None:
    """One line on stderr before any compute: where the version and the run data go (the
    defaults are directories of the current one, easy to write into a checkout unawares)."""
    import sys
    from pathlib import Path

    out = Path(args.out).resolve() / f"{study}.diagnose"
    runs = Path(args.runs).resolve() / study
    print(f"robuststats diagnose: writing a new version under {out}/ (--out) and models and "
          f"evaluations under {runs}/ (--runs)", file=sys.stderr)


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
