"""``robuststats study FILE``: run (or resume) a study and write a new result version."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from robuststats.cli import _options as opts
from robuststats.cli._output import emit, render_table
from robuststats.cli._types import positive_int
from robuststats.errors import InputError

__all__ = ["add_parser", "run"]


#: the options, in the order --help lists them
_OPTIONS = [
    opts.spec_file("study", "studies/e8_matrix.yaml"),
    opts.option("--seeds", type=positive_int, metavar="N",
                help="number of training seeds: 0..N-1, or the first N the file lists"),
    opts.option("--n-items", type=positive_int, metavar="N", help="evaluation items per cell"),
    opts.option("--noise-seeds", type=positive_int, metavar="N",
                help="inference-noise draws per noisy cell (clean cells use one)"),
    opts.option("--device", metavar="DEV",
                help="where the builtin trainer trains and every cell evaluates: cpu, cuda, "
                     "cuda:N, npu, npu:N (default: the file's `device:`, else cpu); part of "
                     "the run, so another device is another run directory"),
    opts.workers("parallel worker processes (default 2; 1 runs in this process)", default=2),
    opts.option("--executor", choices=("local", "ray"), default="local",
                help="where jobs run: local processes (default) or Ray tasks, with the study's "
                     "`resources:` per job"),
    opts.option("--ray-address", metavar="ADDR",
                help="with --executor ray: 'auto' or the address of a running cluster "
                     "(default: start a local Ray with --workers CPUs)"),
    *opts.resumable("study",
                    runs_help="run directories with cached models and cells (default runs/)",
                    fresh_help="discard an existing run directory of this study and start over",
                    plan="the plan (cells, models)"),
]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    return opts.add_command(
        subparsers, "study", run, options=_OPTIONS,
        help="run or resume a study file (training, noisy evaluation, analysis)",
        description=(
            "Run every cell (condition × seed × eval noise × noise seed) of a study file, "
            "resuming finished cells from the run directory, then analyse the outcomes and "
            "write a new immutable result version OUT/<study>/v<N>/. Flags override the "
            "study file only when given."
        ))


def run(args: argparse.Namespace) -> int:
    from robuststats.runs import Interrupted
    from robuststats.runs.spec import StudySpec
    from robuststats.study.runner import run_study

    spec = StudySpec.from_file(args.study_file).with_overrides(
        seeds=args.seeds, n_items=args.n_items, noise_seeds=args.noise_seeds,
        device=args.device)
    if spec.device is not None:  # a device this machine lacks: refused before any compute
        from robuststats.runs.machine import check_torch_device

        check_torch_device(spec.device, "--device" if args.device else "device")
    if args.check:
        return _check(args, spec)
    # before anything is built or trained: a bad --out must not surface after the compute
    opts.check_output_dirs(args, "out", "runs")
    executor = None
    if args.executor == "ray":
        from robuststats.runs.ray_executor import RayExecutor

        executor = RayExecutor(address=args.ray_address,
                               num_cpus=None if args.ray_address else args.workers)
    elif args.ray_address is not None:
        raise InputError("--ray-address needs --executor ray.")
    try:
        result = run_study(spec, out=args.out, runs=args.runs, workers=args.workers,
                           fresh=args.fresh, progress=not args.no_progress,
                           executor=executor)
    except Interrupted as exc:
        print(f"robuststats study: interrupted by {exc}; finished cells are kept in "
              f"{args.runs}/{spec.name}: rerun the same command to resume", file=sys.stderr)
        return 128 + exc.signum
    finally:
        if executor is not None:
            executor.close()
    from robuststats.report import claim, records
    from robuststats.results import confidence_level, normalize_table

    hyp = normalize_table("hypotheses", result.analysis.hypotheses,
                          confidence_level=confidence_level(result.version.manifest))
    data = {"study": spec.name, "version": result.version.label,
            "path": str(result.version.path), "ok": result.ok,
            "cells_planned": result.cells_planned, "cells_reused": result.cells_reused,
            "cells_run": result.cells_run, "cells_failed": result.cells_failed,
            "models_trained": result.models_trained, "seconds": round(result.seconds, 1),
            "run_dir": str(result.run_dir),
            **({"trained_ahead": {str(k): v for k, v in result.trained_ahead.items()}}
               if result.trained_ahead else {}),
            "settings": getattr(result.analysis, "settings", None),
            "hypotheses": [{**h, "claim": claim(h)} for h in records(hyp)]}
    emit(args.format, data=data, text=lambda: _text(spec.name, result, hyp))
    if not result.ok:
        print(f"robuststats study: {result.cells_failed} cell(s) failed or missing; "
              f"tracebacks under {result.run_dir / 'failures'}", file=sys.stderr)
        return 1
    return 0


def _text(name: str, result: Any, hyp: Any) -> str:
    from robuststats.report import HYPOTHESIS_HEADERS, hypothesis_rows

    lines = [f"study {name}: {result.cells_planned} cells "
             f"({result.cells_reused} reused, {result.cells_run} run now, "
             f"{result.cells_failed} missing/failed), {result.models_trained} model(s) "
             f"trained, {result.seconds:.1f} s",
             f"results: {result.version.path}"]
    if result.trained_ahead:  # a sequential study's later seeds, run while a look waited
        seeds = ", ".join(map(str, result.trained_ahead))
        lines.append(f"trained ahead: seed(s) {seeds} ({sum(result.trained_ahead.values())} "
                     f"cell(s)), kept in {result.run_dir}, not analysed")
    rows = hypothesis_rows(hyp)
    if rows:
        lines += ["", render_table(rows, list(HYPOTHESIS_HEADERS), headers=HYPOTHESIS_HEADERS)]
    return "\n".join(lines)


def _check(args: argparse.Namespace, spec: Any) -> int:
    """``--check``: everything a run validates before its first cell, then the plan."""
    from robuststats.runs import check_checkpoints, preflight

    preflight(spec)  # builds the task and the trainer: unknown names, bad parameters
    checkpoints = {f"{c}__s{s}": str(ref.path) for (c, s), ref in check_checkpoints(spec).items()}
    seeds = spec.seed_list()
    levels = spec.evaluation.noise_levels
    data = {"study": spec.name, "valid": True, "conditions": list(spec.conditions),
            "seeds": seeds, "noise_levels": levels,
            "noise_seeds": spec.evaluation.noise_seed_list(),
            "n_items": spec.evaluation.n_items, "cells_planned": spec.n_cells(),
            "models": len(spec.conditions) * len(seeds) - len(checkpoints),
            "checkpoints": checkpoints,
            "hypotheses": [h.id for h in spec.hypotheses], "spec_hash": spec.spec_hash()}
    seq = spec.sequential
    if seq is not None:
        data["sequential"] = seq.model_dump()

    def text() -> str:
        shown = ", ".join(map(str, seeds[:10])) + (", ..." if len(seeds) > 10 else "")
        items = "all items" if spec.evaluation.n_items is None else \
            f"{spec.evaluation.n_items} items"
        return "\n".join([
            f"study {spec.name}: valid; nothing was run (--check)",
            f"  task {spec.task.name}, trainer {spec.trainer.name}, "
            f"{items} of the {spec.evaluation.split} split",
            f"  {len(spec.conditions)} condition(s): {', '.join(spec.conditions)}",
            f"  {len(seeds)} training seed(s): {shown}",
            f"  noise levels {', '.join(f'{x:g}' for x in levels)}; "
            f"{len(data['noise_seeds'])} noise seed(s) per noisy level",
            f"  {data['cells_planned']} cells, {data['models']} model(s) to train, "
            + (f"{len(checkpoints)} checkpoint(s) to load, " if checkpoints else "")
            + f"{len(spec.hypotheses)} hypothesis(es)",
            *(f"  checkpoint {job}: {path}" for job, path in list(checkpoints.items())[:20]),
            *([f"  sequential: looks after {', '.join(map(str, seq.looks))} seeds, "
               f"{seq.spending} spending, futility {seq.futility}; at most these cells and "
               "models"] if seq is not None else []),
        ])

    emit(args.format, data=data, text=text)
    return 0
