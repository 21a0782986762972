"""``robuststats analyze SOURCE``: recompute every table from stored item outcomes.

Never imports torch: it reads outcomes (a CSV/TSV/JSONL/parquet file, a run directory or a
result version) and runs the statistics only (:mod:`robuststats.study.reanalysis`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from robuststats.cli import _anytime
from robuststats.cli import _options as opts
from robuststats.cli._output import emit, fmt_ci, fmt_p, fmt_pct, render_table
from robuststats.glossary import table_names

__all__ = ["add_parser", "run"]

#: tables printed in table format, in the glossary's file order
SHOWN = table_names("analysis", analyze=True)
#: tables left out of the text when they have no rows
_OPTIONAL = table_names(optional=True)

_PCT = ("accuracy", "clean_accuracy", "noisy_accuracy", "retention", "accuracy_a",
        "accuracy_b", "seed_sd", "seed_min", "seed_max", "margin")


#: the options, in the order --help lists them
_OPTIONS = [
    opts.option("source", metavar="SOURCE", help="outcomes file, run dir or version dir"),
    opts.option("--study", metavar="FILE", help="study file with hypotheses and analysis options"),
    opts.option("--reference", metavar="CONDITION",
                help="compare every condition with this one (default: all pairs)"),
    opts.option("--multiplicity", metavar="METHOD",
                help="multiplicity procedure: holm (default), fdr_bh, bonferroni, ..., none"),
    opts.option("--mcnemar", choices=["clustered", "mantel-haenszel"],
                help="stratified McNemar method over seeds × noise seeds"),
    opts.option("--confidence-level", type=float, metavar="X"),
    opts.option("--alpha", type=float, metavar="X"),
    opts.option("--n-resamples", type=int, metavar="N"),
    opts.option("--rng-seed", type=int, metavar="N", help="seed of the bootstrap streams"),
    opts.option("--holes", choices=["drop", "raise"], default="drop",
                help="items missing from a present cell: drop them from every table and list "
                     "them (default), or stop with the cell and item named"),
    opts.Group(
        "lm-evaluation-harness samples",
        "SOURCE may be lm-eval --log_samples output: a mapping file (.yaml/.yml/.json with "
        "format: lm-eval-samples and one entry per run: path, condition, seed, eval_noise, "
        "noise_seed; docs/checkpoints.md) or one samples .jsonl with the flags below. "
        "doc_id is the item; doc_hash must agree across runs.", [
            opts.option("--filter", metavar="NAME",
                        help="lm-eval filter to score (e.g. strict-match, flexible-extract); "
                             "required when the samples hold several"),
            opts.option("--metric", metavar="KEY", help="0/1 metric key (default exact_match)"),
            opts.option("--condition", metavar="NAME", help="condition of a single samples file"),
            opts.option("--seed", type=int, metavar="N",
                        help="training seed of a single samples file (default 0)"),
            opts.option("--eval-noise", type=float, metavar="X",
                        help="noise level of a single samples file (default 0)"),
            opts.option("--noise-seed", type=int, metavar="N",
                        help="noise seed of a single samples file (default 0)"),
        ]),
    opts.Group(
        "Inspect AI logs",
        "SOURCE may be Inspect AI logs (the extra `inspect`): a mapping file with format: "
        "inspect-logs (runs by path or glob; conditions maps each value of condition_from "
        "to a condition), a directory of logs, or one .eval/.json log (its condition: "
        "--condition, default the value of --condition-from). Sample id is the item; "
        "epochs are repeated evaluations (noise seeds 0..E-1); the header's sample ids "
        "× epochs are the items every cell must hold.", [
            opts.option("--scorer", metavar="NAME",
                        help="Inspect scorer whose value is `correct` (required when the "
                             "logs hold several)"),
            opts.option("--threshold", type=float, metavar="X",
                        help="count a score >= X as correct (for scores other than 0/1)"),
            opts.option("--condition-from", metavar="FIELD",
                        help="where a log's condition comes from: model (default), "
                             "metadata.KEY, task_args.KEY, tag:PREFIX, file or directory"),
        ]),
    _anytime.OPTIONS,
    opts.FORMAT,
    opts.out("also write a new, analysis-only result version under DIR/<study>/",
             default=None),
]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    return opts.add_command(
        subparsers, "analyze", run, options=_OPTIONS,
        help="recompute summary, tests and hypothesis verdicts from outcomes",
        description=(
            "Recompute accuracy, retention, paired tests and hypothesis verdicts from an "
            "item-outcomes table (columns condition, seed, eval_noise, noise_seed, item_id, "
            "correct; seed, eval_noise and noise_seed default to 0), without models. SOURCE "
            "is a .csv/.tsv/.jsonl/.parquet file, a run directory or a result version "
            "directory (whose stored study is then used). Missing cells are inferred from "
            "the conditions × seeds × noise levels present; hypotheses that need one are "
            "INCONCLUSIVE, as in the study run."
        ),
        epilog="Accuracies and intervals print in percent; the column names are those of "
               "docs/glossary.md. Exit status: 0, 2 on bad input; with --anytime --watch, "
               "0 decided, 3 undecided at --timeout, 130 interrupted.")


#: kinds of result version other than a study's -> the command that re-runs one
_RERUN = {"gate": "robuststats gate", "divergence": "robuststats divergence",
          "search": "robuststats search", "diagnose": "robuststats diagnose"}


def _version_kind(source: Path) -> str | None:
    """The ``kind`` a result version's manifest names when it is not a study's (a gate,
    divergence, search or diagnose version), else None. A version that holds no item
    outcomes is refused here, naming its kind and the command that re-runs it."""
    import json

    from robuststats.errors import InputError

    manifest = source / "manifest.json"
    if not source.is_dir() or not manifest.is_file():
        return None
    try:
        kind = json.loads(manifest.read_text(encoding="utf-8")).get("kind")
    except (ValueError, OSError, AttributeError, RecursionError):
        return None  # stored_study names what is wrong with it
    if not isinstance(kind, str) or kind in ("", "study"):
        return None
    rerun = _RERUN.get(kind, f"robuststats {kind}")
    if not (source / "outcomes.parquet").is_file():
        raise InputError(f"{str(source)!r} is a {kind} version: it holds no item outcomes to "
                         f"analyse; `robuststats results show` prints it and `{rerun}` re-runs "
                         "it.")
    return kind


def _spec(args: argparse.Namespace, source: Path) -> Any:
    """The study of --study, else the one stored with SOURCE (a study's version or run
    directory), else None."""
    from robuststats.errors import InputError
    from robuststats.runs.spec import StudySpec
    from robuststats.study.reanalysis import stored_study

    kind = _version_kind(source)
    if kind is not None and not args.study:
        # the stored study is the one the version's models came from; its hypotheses name
        # that study's conditions, not this version's (a gate's candidate and baseline)
        print(f"robuststats analyze: note: {str(source)!r} is a {kind} version: its item "
              f"outcomes are analysed without the hypotheses of the study it came from; "
              f"`robuststats results show` prints its own result and `{_RERUN.get(kind)}` "
              "re-runs it.", file=sys.stderr)
        return None
    stored = stored_study(source) if source.is_dir() else None
    if not args.study:
        return stored
    spec = StudySpec.from_file(args.study)
    # `run_ahead` is how the seeds were run, not the plan: any value replays the same looks
    if stored is not None and stored.sequential is not None and (
            spec.sequential is None or spec.sequential.plan() != stored.sequential.plan()):
        raise InputError(f"--study: its `sequential:` plan differs from the one "
                         f"{str(source)!r} was run with; a sequential study's looks, "
                         "spending and futility are fixed before its data, so its looks are "
                         "replayed under the stored plan only (leave out --study)")
    return spec


def _options(args: argparse.Namespace, spec: Any) -> Any:
    from robuststats.analysis import AnalysisOptions

    base = spec.analysis if spec is not None else AnalysisOptions()
    flags = {"reference": args.reference, "multiplicity": args.multiplicity,
             "confidence_level": args.confidence_level, "alpha": args.alpha,
             "n_resamples": args.n_resamples, "mcnemar": args.mcnemar,
             "rng_seed": args.rng_seed}
    given = {k: v for k, v in flags.items() if v is not None}
    if not given:
        return base
    from pydantic import ValidationError

    from robuststats.errors import InputError

    try:
        return type(base).model_validate({**base.model_dump(), **given})
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err["loc"] else "?"
        raise InputError(f"--{key.replace('_', '-')}: {err['msg']}, got "
                         f"{given.get(key)!r}.") from None


def run(args: argparse.Namespace) -> int:
    from robuststats.outcomes import read_outcomes
    from robuststats.study.reanalysis import reanalyze

    source = Path(args.source)
    _anytime.check(args)
    if args.anytime:
        if _harness_flags(args) or _is_harness(source):
            from robuststats.errors import InputError

            raise InputError(f"--anytime: {str(source)!r} is harness output; --anytime reads "
                             "an outcomes table (.csv/.tsv/.jsonl/.parquet, a run or "
                             "version directory) in the order of its rows.")
        return _anytime.run(args)
    if args.out:
        opts.check_output_dirs(args, "out")  # a bad --out fails before the analysis
    spec = _spec(args, source)
    options = _options(args, spec)
    outcomes = _read(args, source) if _harness_flags(args) or _is_harness(source) \
        else read_outcomes(source)
    analysis = reanalyze(outcomes, spec, options=options, holes=args.holes)
    tables = analysis.tables()
    emit(args.format, data={"source": str(source), "settings": analysis.settings,
                            **tables}, text=lambda: _text(tables))
    if args.out:
        from robuststats.study.reanalysis import write_reanalysis

        version = write_reanalysis(args.out, source, outcomes, analysis, spec, options)
        print(f"results: {version.path}", file=sys.stderr)
    return 0


_CELL_FLAGS = ("condition", "seed", "eval_noise", "noise_seed")


def _harness_flags(args: argparse.Namespace) -> list[str]:
    return [name for name in ("filter", "metric", "scorer", "threshold", "condition_from",
                              *_CELL_FLAGS)
            if getattr(args, name, None) is not None]


def _is_harness(source: Path) -> bool:
    from robuststats.outcomes import is_lmeval_samples

    return source.suffix.lower() in (".yaml", ".yml", ".json", ".eval") \
        or is_lmeval_samples(source) or bool(_log_directory(source))


def _log_directory(source: Path) -> list[Path]:
    """The Inspect logs directly in ``source`` when it is a directory that is neither a
    result version nor a run directory; else empty."""
    from robuststats.outcomes import is_inspect_log

    if not source.is_dir() or (source / "outcomes.parquet").is_file() \
            or (source / "cells").is_dir():
        return []
    return [p for p in sorted(source.iterdir()) if is_inspect_log(p)]


def _read(args: argparse.Namespace, source: Path) -> Any:
    """Harness output: a mapping file of runs, one Inspect log, or one lm-eval samples file
    with the cell flags."""
    from robuststats.errors import InputError
    from robuststats.outcomes import (
        is_inspect_log,
        is_lmeval_samples,
        read_harness_runs,
        read_inspect_log,
        read_lmeval_samples,
        validate_outcomes,
    )

    if is_inspect_log(source):
        _refuse(args, ("filter", "metric"), f"{str(source)!r} is an Inspect log")
        frame = read_inspect_log(
            source, condition=args.condition, condition_from=args.condition_from,
            seed=args.seed or 0, eval_noise=args.eval_noise or 0.0,
            noise_seed=args.noise_seed, scorer=args.scorer, threshold=args.threshold)
        return validate_outcomes(frame, source=str(source))
    logs = _log_directory(source)
    if logs:
        from robuststats.outcomes import read_inspect_runs

        _refuse(args, ("filter", "metric"), f"{str(source)!r} is a directory of Inspect logs")
        _refuse(args, _CELL_FLAGS, f"{str(source)!r} holds {len(logs)} Inspect logs, each its "
                                   "own cell (--condition-from names where the condition "
                                   "comes from); list them in a mapping file to give each "
                                   "run its cell")
        return read_inspect_runs({"format": "inspect-logs",
                                  "runs": [{"path": str(p)} for p in logs]},
                                 scorer=args.scorer, threshold=args.threshold,
                                 condition_from=args.condition_from)
    if source.is_dir():
        raise InputError(f"{str(source)!r} holds neither outcomes.parquet (a result version), "
                         "cells/*.parquet (a run directory) nor Inspect logs (.eval, .json).")
    if source.suffix.lower() in (".yaml", ".yml", ".json"):
        _refuse(args, _CELL_FLAGS, "a mapping file gives each run its cell; these flags "
                                   "apply to a single samples file or log")
        return read_harness_runs(source, filter=args.filter, metric=args.metric,
                                 scorer=args.scorer, threshold=args.threshold,
                                 condition_from=args.condition_from)
    if not is_lmeval_samples(source):
        raise InputError(f"{', '.join(opts.flag(n) for n in _harness_flags(args))}: "
                         f"{str(source)!r} is not an lm-eval samples file (a .jsonl whose "
                         "lines have doc_id, doc_hash and filter), an Inspect log or a "
                         "mapping file of runs.")
    _refuse(args, ("scorer", "threshold", "condition_from"),
            f"{str(source)!r} is an lm-eval samples file")
    if args.condition is None:
        raise InputError(f"--condition: {str(source)!r} is an lm-eval samples file; name its "
                         "condition (and --seed, --eval-noise, --noise-seed when not 0), or "
                         "list several runs in a mapping file.")
    frame = read_lmeval_samples(
        source, condition=args.condition, seed=args.seed or 0,
        eval_noise=args.eval_noise or 0.0, noise_seed=args.noise_seed or 0,
        filter=args.filter, metric=args.metric or "exact_match")
    return validate_outcomes(frame, source=str(source))


def _refuse(args: argparse.Namespace, names: tuple[str, ...], why: str) -> None:
    from robuststats.errors import InputError

    given = [opts.flag(n) for n in names if getattr(args, n) is not None]
    if given:
        raise InputError(f"{', '.join(given)}: {why}.")


def _text(tables: dict[str, Any]) -> str:
    from robuststats.glossary import TABLE_COLUMNS

    blocks = []
    for name in SHOWN:
        df = tables[name]
        if name in _OPTIONAL and df.empty:
            continue
        columns = [c for c in TABLE_COLUMNS[name] if c in df.columns
                   and c not in ("ci_low", "ci_high", "ci_level", "statement", "question",
                                 "reason", "multiplicity", "alpha")]
        records = df.to_dict(orient="records")
        formats = {c: fmt_pct for c in _PCT}
        formats |= {"pvalue": fmt_p, "pvalue_adjusted": fmt_p,
                    "estimate": (lambda v: fmt_pct(v, signed=True))}
        if "ci_low" in df.columns:
            for r in records:
                r["interval"] = fmt_ci(r.get("ci_low"), r.get("ci_high"), r.get("ci_level"))
            at = columns.index("ci_method") if "ci_method" in columns else len(columns)
            columns.insert(at, "interval")
        blocks.append(f"== {name} ==\n" + render_table(records, columns, formats=formats))
    return "\n\n".join(blocks)
