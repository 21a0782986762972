"""``robuststats analyze SOURCE``: recompute every table from stored item outcomes.

Never imports torch: it reads outcomes (a CSV/JSONL/parquet file, a run directory or a
result version) and runs the statistics only.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "analyze", help="recompute summary, tests and hypothesis verdicts from outcomes",
        description=(
            "Recompute accuracy, retention, paired McNemar tests and hypothesis verdicts "
            "from an item-outcomes table (columns condition, seed, eval_noise, noise_seed, "
            "item_id, correct), without models. SOURCE is a .csv/.jsonl/.parquet file, a run "
            "directory or a result version directory (whose stored spec is then used)."
        ),
    )
    p.add_argument("source", metavar="SOURCE", help="outcomes file, run dir or version dir")
    p.add_argument("--study", metavar="FILE",
                   help="study file with hypotheses and analysis options")
    p.add_argument("--reference", metavar="CONDITION",
                   help="compare every condition with this one (default: all pairs)")
    p.add_argument("--multiplicity", choices=["holm", "fdr_bh", "bonferroni", "sidak",
                                              "holm-sidak", "simes-hochberg", "hommel",
                                              "fdr_by", "none"])
    p.add_argument("--mcnemar", choices=["clustered", "mantel-haenszel"],
                   help="stratified McNemar method over seeds × noise seeds")
    p.add_argument("--confidence-level", type=float, metavar="X")
    p.add_argument("--alpha", type=float, metavar="X")
    p.add_argument("--n-resamples", type=int, metavar="N")
    p.add_argument("--format", choices=["text", "json"], default="text",
                   help="how to print the tables (default text)")
    p.add_argument("--out", metavar="DIR",
                   help="also write a new result version under DIR/<study>/")
    p.set_defaults(run=run)
    return p


def _stored_spec(source: Path) -> dict[str, Any] | None:
    for candidate in (source / "manifest.json", source / "spec.json"):
        if candidate.is_file():
            return json.loads(candidate.read_text()).get("spec")
    return None


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from robuststats.errors import InputError
    from robuststats.study.analysis import AnalysisOptions, analyze_outcomes
    from robuststats.study.io import read_outcomes
    from robuststats.study.spec import StudySpec

    source = Path(args.source)
    outcomes = read_outcomes(source)
    spec = None
    if args.study:
        spec = StudySpec.from_file(args.study)
    elif source.is_dir() and (stored := _stored_spec(source)) is not None:
        stored = {k: v for k, v in stored.items() if k != "spec_format"}
        spec = StudySpec.from_dict(stored, source=str(source))
    opts = AnalysisOptions.from_spec(spec) if spec is not None else AnalysisOptions()
    overrides = {"reference": args.reference, "multiplicity": args.multiplicity,
                 "confidence_level": args.confidence_level, "alpha": args.alpha,
                 "n_resamples": args.n_resamples, "mcnemar": args.mcnemar}
    for key, value in overrides.items():
        if value is not None:
            opts = _replace(opts, key, value)
    known = set(outcomes["condition"])
    hypotheses = list(spec.hypotheses) if spec is not None else []
    for h in hypotheses:
        for side in ("a", "b"):
            if h[side] not in known:
                raise InputError(f"hypothesis {h['id']}: condition {h[side]!r} is not in the "
                                 f"outcomes (conditions: {sorted(known)}).")
    analysis = analyze_outcomes(outcomes, hypotheses=hypotheses, options=opts)
    tables = analysis.tables()
    if args.format == "json":
        print(json.dumps({k: json.loads(v.to_json(orient="records")) for k, v in
                          tables.items()}, indent=2))
    else:
        with pd.option_context("display.width", 160, "display.max_columns", 30,
                               "display.max_colwidth", 40):
            for name in ("summary", "retention", "tests", "hypotheses"):
                df = tables[name]
                print(f"== {name} ==")
                print(df.to_string(index=False) if not df.empty else "(no rows)")
                print()
    if args.out:
        from robuststats.study.runner import write_version

        name = spec.name if spec is not None else "analysis"
        meta = {"source": str(source), "spec": spec.resolved() if spec else None,
                "spec_hash": spec.spec_hash() if spec else None,
                "alpha": opts.alpha, "confidence_level": opts.confidence_level,
                "multiplicity": opts.multiplicity}
        version = write_version(args.out, name, outcomes, analysis, meta)
        print(f"results: {version.path}")
    return 0


def _replace(opts: Any, key: str, value: Any) -> Any:
    from dataclasses import replace

    from robuststats.errors import InputError

    if key in ("confidence_level", "alpha") and not 0 < value < 1:
        raise InputError(f"`{key}` must lie in (0, 1), got {value}.")
    if key == "n_resamples" and value < 1:
        raise InputError(f"`n_resamples` must be a positive integer, got {value}.")
    return replace(opts, **{key: value})
