"""``robuststats divergence SOURCE``: per-layer divergence between two runs of one model.

Three forms, told apart by SOURCE and ``--capture``:

- ``SOURCE --candidate COND [--reference COND]``: both runs in this process (in-process);
- ``SOURCE --capture FILE [--reference COND | --candidate COND]``: run one condition and
  write its capture (for a comparison made later, or on another machine);
- ``CAPTURE --candidate CAPTURE``: compare two captures (SOURCE is the reference's);
  ``DUMP --candidate DUMP`` the same for two msprobe dumps.

This module parses, checks what the forms share, runs the first and prints a comparison;
the two capture forms are in :mod:`robuststats.cli._divergence_captures`.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from robuststats.cli import _options as opts
from robuststats.cli._output import emit, fmt_number, render_table
from robuststats.cli._types import int_in, non_negative_int, open_unit, positive_float, positive_int

__all__ = ["add_parser", "run"]

_EXAMPLE = """\
examples:
  robuststats divergence ckpts/qwen --reference fp32 --candidate bf16
  robuststats divergence ckpts/qwen --candidate nvfp4_weights --max-mape 0.05 \\
      --sensitivity results/e8_matrix.diagnose/v1/sensitivity.json
  robuststats divergence studies/e8_smoke.yaml --condition E8c --candidate bf16+cuda
  robuststats divergence ckpts/gpu --candidate '{checkpoint: ckpts/npu, name: npu}'

two machines (capture one run on each, compare anywhere):
  robuststats divergence ckpts/qwen --reference bf16+cuda --capture gpu.npz   # GPU host
  robuststats divergence ckpts/qwen --candidate bf16+npu --capture npu.npz    # NPU host
  robuststats divergence gpu.npz --candidate npu.npz --max-mape 0.05
  robuststats divergence dump_gpu/step0/rank0 --candidate dump_npu/step0/rank0  # msprobe

conditions: dtypes fp32, bf16, fp16; devices cpu, cuda, cuda:N; error models
nvfp4_weights, mxfp4_weights, fp8_e4m3_inputs, int8_inputs, nvfp4_inputs,
relative_gaussian@0.05, ... (robuststats.engine.eval_kinds); 'clean'; joined with '+'.
A mapping (inline YAML or a .yaml/.json file) takes name, dtype, device, noise (a kind or
a NoiseSpec mapping), level, ops, noise_seed, checkpoint. See docs/divergence.md.
"""


def _modules(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"must be comma-separated module types or names, got "
                                         f"{text!r}")
    return names


#: a sketch size (robuststats.divergence._capture.MAX_SKETCH, without importing numpy)
_sketch_size = int_in(2, 1 << 20)

#: --fit-ops: the engine's ops (NoiseSpec.ops, fit_noise's ops=) of each choice
_FIT_OPS = {"matmul_only": "matmul_only", "linear_only": "linear", "all": "all_ops"}

#: the sketch of a capture (its options apply to --capture only): option, type, metavar,
#: default, what it sets
_SKETCH = (
    ("subset_size", _sketch_size, "K", 1024,
     "element positions kept per item and module for MAPE, median APE and WAPE"),
    ("projection_dim", _sketch_size, "k", 256,
     "dimension of the sign projection per item and module for rel RMS and cosine; relative "
     "SD of |b-a|^2 at most sqrt(2/k)"),
    ("sketch_seed", non_negative_int, "N", 0,
     "seed of the positions and projections; both captures of a comparison need the same"),
)


#: the options, in the order --help lists them
_OPTIONS = [
    opts.option("source", metavar="SOURCE",
                help="a study file (.yaml: the model of --condition and --seed, its evaluation "
                     "items), a model directory (save_pretrained, with its tokenizer), a "
                     "capture file (the reference run, compared with the capture of --candidate) "
                     "or an msprobe dump directory (compared with the dump of --candidate)"),
    opts.option("--reference", metavar="COND", help="the reference run (default fp32)"),
    opts.option("--candidate", metavar="COND",
                help="the compared run, e.g. bf16, nvfp4_weights, bf16+cuda, or a mapping; a "
                     "capture file when SOURCE is one"),
    opts.option("--capture", metavar="FILE",
                help="run one condition (--reference, or --candidate) and write its capture to "
                     "FILE (e.g. gpu.npz) instead of comparing"),
    *(opts.option(opts.flag(dest), type=kind, metavar=metavar,
                  help=f"capture: {what} (default {default})")
      for dest, kind, metavar, default, what in _SKETCH),
    opts.option("--items", type=positive_int, metavar="N",
                help="first N items (default 64 for a model directory, the study's evaluation "
                     "items for a study)"),
    opts.option("--texts", metavar="FILE",
                help="texts to run instead: one per line, or JSONL with 'text' (or 'prompt' "
                     "and 'solution')"),
    opts.option("--condition", metavar="NAME",
                help="study: training condition whose model is compared (default: first)"),
    opts.option("--seed", type=non_negative_int, metavar="N",
                help="study: training seed (default: the first)"),
    opts.option("--modules", type=_modules, metavar="LIST",
                help="compare only these module types or names (e.g. residual,mlp.down_proj; "
                     "default: all)"),
    opts.option("--max-mape", type=positive_float, metavar="X",
                help="MAPE bound of the exceedance table (default 0.05)"),
    opts.option("--sensitivity", metavar="FILE",
                help="the diagnostic probe's sensitivity.json/.yaml: order flagged modules "
                     "with sensitive layers first"),
    opts.option("--eps", type=open_unit, metavar="E",
                help="MAPE guard: |b-a| / (|a| + E*RMS(a)) (default 0.01)"),
    opts.option("--batch-size", type=positive_int, metavar="N",
                help="items per forward pass (default 8)"),
    opts.option("--max-length", type=positive_int, metavar="T",
                help="truncate each text to T tokens"),
    opts.option("--no-local", action="store_true",
                help="skip the local pass (each layer on the reference's input); no "
                     "accumulation verdict then"),
    opts.option("--interval", choices=("t", "bootstrap"),
                help="interval over items: t (from the running statistics) or percentile "
                     "bootstrap (default t)"),
    opts.option("--confidence-level", type=open_unit, metavar="L",
                help="level of every interval (default 0.95)"),
    opts.option("--fit-noise", metavar="FILE",
                help="fit per-layer relative Gaussian noise scales whose simulated divergence "
                     "on the reference model matches the measured one, and write them as a "
                     "NoiseSpec YAML (with intervals and a lack-of-fit verdict) to FILE"),
    opts.option("--checkpoint", metavar="DIR",
                help="--fit-noise from two captures: the model directory the captures were "
                     "made from, at its new place (checked against both captures' SHA-256; "
                     "--texts FILE relocates their texts the same way)"),
    opts.option("--fit-places", choices=("layer", "module"),
                help="--fit-noise: one scale per decoder layer, or per linear module of each "
                     "layer and one for its other products (default layer)"),
    opts.option("--fit-ops", choices=tuple(_FIT_OPS),
                help="--fit-noise: the ops the fitted noise is on: every matrix product "
                     "(matmul_only: linear modules and attention's two products), the linear "
                     "modules only (linear_only: a device whose attention products are exact) "
                     "or every op the engine reaches (all) (default matmul_only)"),
    opts.option("--fit-tolerance", type=positive_float, metavar="X",
                help="--fit-noise: a site whose interval of measured / simulated lies outside "
                     "1 +- X misfits (default 0.1)"),
    opts.option("--device", metavar="DEV",
                help="--fit-noise: where the simulations run: cpu, cuda, cuda:N, npu, npu:N "
                     "(default: the device the reference ran on; never a silent fallback to "
                     "the CPU)"),
    opts.option("--name", metavar="NAME",
                help="result name (default: the study's or the model directory's)"),
    opts.out(default=None),
    opts.runs("study: run directories with cached models (default runs/)", default=None),
    opts.NO_PROGRESS,
    opts.FORMAT,
]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    return opts.add_command(
        subparsers, "divergence", run, options=_OPTIONS,
        help="compare a model's activations layer by layer between two runs (dtypes, "
             "devices, error models, checkpoints)",
        description=(
            "Run one model on the same items under a reference and a candidate condition "
            "and compare, item by item, the output of every decoder layer (the residual "
            "stream) and of the modules inside it: MAPE, relative RMS error and cosine "
            "similarity with intervals over items, how the divergence accumulates through "
            "depth (measured against the additive, quadrature and compounding predictions), "
            "and the modules whose MAPE may exceed --max-mape, sensitive layers first when "
            "--sensitivity is given. Writes OUT/<name>.divergence/v<N>/ (tables, report.md, "
            "report.json, figures/depth.png, manifest). With --capture FILE, runs one "
            "condition and writes a compact capture file instead (exact norms and a seeded "
            "sketch per item and module); two captures, made on two machines, are compared "
            "with 'robuststats divergence CAPTURE --candidate CAPTURE'."),
        epilog=_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)


# flags that belong to one form only; a flag given where it does nothing is an error
_SOURCE_ONLY = ("items", "texts", "condition", "seed", "batch_size", "max_length", "runs")
_COMPARE_ONLY = ("max_mape", "sensitivity", "eps", "interval", "confidence_level", "name",
                 "out", "fit_noise", "fit_places", "fit_ops", "fit_tolerance", "device")
_CAPTURE_ONLY = tuple(dest for dest, *_ in _SKETCH)
_DEFAULTS = {"reference": "fp32", "max_mape": 0.05, "eps": 0.01, "batch_size": 8,
             "interval": "t", "confidence_level": 0.95, "out": "results", "runs": "runs",
             "fit_places": "layer", "fit_ops": "matmul_only", "fit_tolerance": 0.1,
             **{dest: default for dest, _, _, default, _ in _SKETCH}}


def _refuse(args: argparse.Namespace, keys: tuple[str, ...], why: str) -> None:
    for key in keys:
        if getattr(args, key) not in (None, False):
            raise _flag_error(opts.flag(key), why)


def _resolve(args: argparse.Namespace) -> None:
    for key, value in _DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, value)


@contextmanager
def _progress(args: argparse.Namespace, total: int, desc: str) -> Iterator[Any]:
    """The progress bar of one pass over ``total`` items (None with --no-progress)."""
    from robuststats.runs.progress import close, progress_bar

    bar = progress_bar(not args.no_progress, total, 0, unit="item", desc=desc)
    try:
        yield bar
    finally:
        close(bar)


def _sensitivity(args: argparse.Namespace) -> Any:
    """The layer sensitivities of --sensitivity, or None."""
    from robuststats.config.sensitivity import read_layer_sensitivity

    return read_layer_sensitivity(args.sensitivity, name="--sensitivity") \
        if args.sensitivity else None


def run(args: argparse.Namespace) -> int:
    from robuststats.divergence import is_capture, is_dump

    if is_dump(args.source):
        from robuststats.cli._divergence_captures import compare_two_dumps

        return compare_two_dumps(args)
    if is_capture(args.source) or (args.source.lower().endswith(".npz")
                                   and args.capture is None):
        from robuststats.cli._divergence_captures import compare_two

        return compare_two(args)
    if args.capture is not None:
        from robuststats.cli._divergence_captures import capture_one

        return capture_one(args)
    if args.candidate is None:
        raise _flag_error("--candidate", "required: the condition compared with --reference "
                          "(or --capture FILE to capture one run)")
    _refuse(args, _CAPTURE_ONLY, "sets a capture's sketch; give it with --capture FILE")
    _refuse(args, ("checkpoint",), "relocates the model of a fit from two captures; here "
            "SOURCE is the model")
    check_fit_flags(args)
    _resolve(args)
    return _run_in_process(args)


def check_fit_flags(args: argparse.Namespace) -> None:
    """``--fit-places``/``--fit-ops``/``--fit-tolerance`` need ``--fit-noise``, whose file
    must be a .yaml/.yml/.json path in an existing directory."""
    from pathlib import Path

    if args.fit_noise is None:
        _refuse(args, ("fit_places", "fit_ops", "fit_tolerance", "device"),
                "applies to --fit-noise FILE")
        return
    target = Path(args.fit_noise)
    if target.suffix.lower() not in (".yaml", ".yml", ".json") or target.is_dir() \
            or not target.parent.is_dir():
        raise _flag_error("--fit-noise", f"{args.fit_noise!r} must be a .yaml or .json file "
                          "in an existing directory")
    if target.exists() and (target.resolve() == Path(args.source).resolve()):
        raise _flag_error("--fit-noise", "would overwrite SOURCE")


def fit_and_write(args: argparse.Namespace, div: Any, src: Any, reference: Any) -> Any:
    """The fitted error model of ``div`` on ``src``'s model and items, written to
    ``--fit-noise`` (None without the flag)."""
    if args.fit_noise is None:
        return None
    from robuststats.divergence import fit_noise

    with _progress(args, 0, "noise fit: simulated runs") as bar:
        def step(_what: str) -> None:
            if bar is not None:
                bar(1)

        fit = fit_noise(src.model, src.tokenizer, src.texts, div, item_ids=src.item_ids,
                        reference=reference, places=args.fit_places,
                        ops=_FIT_OPS[args.fit_ops], tolerance=args.fit_tolerance,
                        confidence_level=args.confidence_level,
                        batch_size=args.batch_size if isinstance(args.batch_size, int) else 8,
                        max_length=args.max_length, device=args.device, progress=step)
    from pathlib import Path

    from robuststats._atomic import atomic_write_bytes

    atomic_write_bytes(Path(args.fit_noise), fit.to_yaml().encode("utf-8"))
    return fit


def _checked_source(args: argparse.Namespace) -> str:
    """SOURCE's kind, after checking it, the texts file and the source-only flags."""
    from robuststats.divergence import check_source, read_texts

    kind = check_source(args.source)
    if args.texts is not None:
        read_texts(args.texts, name="--texts")
    if kind == "model" and (args.condition is not None or args.seed is not None):
        raise _flag_error("--condition", "--condition and --seed choose a study's model; "
                          "SOURCE is a model directory")
    if kind == "study":
        opts.check_output_dirs(args, "runs")
    return kind


def _load(args: argparse.Namespace, kind: str) -> Any:
    from robuststats.divergence import load_source

    n_items = args.items if args.items is not None else (64 if kind == "model" else None)
    return load_source(args.source, n_items=n_items, texts=args.texts,
                       condition=args.condition, seed=args.seed, runs=args.runs)


def _run_in_process(args: argparse.Namespace) -> int:
    from robuststats.divergence import check_device, check_source, parse_condition

    # every input is checked before a model is loaded or anything is computed
    kind = check_source(args.source)
    ref = parse_condition(args.reference, name="--reference")
    cand = parse_condition(args.candidate, name="--candidate")
    check_device(ref, "--reference")
    check_device(cand, "--candidate")
    if ref.checkpoint is not None:
        raise _flag_error("--reference", "a checkpoint goes with the candidate; the "
                          "reference is SOURCE's model")
    if cand.checkpoint is not None:
        check_source(cand.checkpoint, name="--candidate.checkpoint")
    if args.fit_noise is not None:
        from robuststats.divergence import fit_device

        fit_device(ref, args.device)
    sensitivity = _sensitivity(args)
    _checked_source(args)
    opts.check_output_dirs(args, "out")
    src = _load(args, kind)
    candidate_model = None
    if cand.checkpoint is not None:
        from robuststats.models.model import load_pretrained

        candidate_model, _ = load_pretrained(cand.checkpoint, key="--candidate.checkpoint")
    return _compare(args, src, ref, cand, candidate_model, sensitivity)


def _flag_error(flag: str, message: str) -> Exception:
    from robuststats.errors import InputError

    return InputError(f"`{flag}`: {message}.")


def _compare(args: argparse.Namespace, src: Any, ref: Any, cand: Any, candidate_model: Any,
             sensitivity: Any) -> int:
    from robuststats.divergence import compare_runs, result_identity

    # the result names its model, candidate checkpoint and texts by SHA-256 as well as path
    source = {**src.info, **result_identity(src.info, texts_file=args.texts,
                                            candidate_checkpoint=cand.checkpoint)}

    with _progress(args, len(src.texts), "divergence") as bar:
        div = compare_runs(src.model, src.tokenizer, src.texts, item_ids=src.item_ids,
                           reference=ref, candidate=cand, candidate_model=candidate_model,
                           modules=args.modules, batch_size=args.batch_size,
                           max_length=args.max_length, local=not args.no_local, eps=args.eps,
                           confidence_level=args.confidence_level, interval=args.interval,
                           progress=bar)
    fit = fit_and_write(args, div, src, ref)
    return publish(args, div, args.name or src.name, sensitivity, source, fit)


def publish(args: argparse.Namespace, div: Any, name: str, sensitivity: Any,
            source: dict[str, Any], noise_fit: Any = None) -> int:
    from robuststats.divergence import summary, write_divergence

    version = write_divergence(div, out=args.out, name=name, max_mape=args.max_mape,
                               sensitivity=sensitivity, source=source, noise_fit=noise_fit)
    data = {**summary(div, max_mape=args.max_mape, sensitivity=sensitivity),
            "version": version.label, "path": str(version.path), "source": source}
    if noise_fit is not None:
        from robuststats.divergence import fit_summary

        data["noise_fit"] = {**fit_summary(noise_fit), "file": str(args.fit_noise)}
    emit(args.format, data=data, text=lambda: _text(div, data))
    return 0


def _text(div: Any, data: dict[str, Any]) -> str:
    from robuststats.divergence import verdict_text

    lines = [f"divergence of {div.candidate.name} ({div.candidate.describe()}) from "
             f"{div.reference.name} ({div.reference.describe()}): {div.n_items} items, "
             f"{div.n_layers} layers, {div.seconds:.1f} s",
             f"results: {data['path']}", verdict_text(div.fit)]
    lines += [f"note: {n}" for n in div.notes]
    fit = data.get("noise_fit")
    if fit is not None:
        lines += ["", f"fitted relative Gaussian per {fit['places']} -> {fit['file']}: "
                      f"{fit['verdict']} ({len(fit['misfit_sites'])} misfit sites)"]
        lines += [f"  {r['place']}: scale {fmt_number(r['scale'])} "
                  f"[{fmt_number(r['scale_ci_low'])}, {fmt_number(r['scale_ci_high'])}]"
                  for r in fit["scales"][:40]]
    depth = ["layer", "rel_rms", "local_rel_rms", "additive", "mape", "cosine"]
    lines += ["", "residual stream by layer (accumulated; local = the layer alone):",
              render_table(data["depth"], depth, headers={"local_rel_rms": "local"},
                           formats={**dict.fromkeys(depth[1:5], fmt_number),
                                    "cosine": lambda v: fmt_number(v, ".6f")})]
    ex = data["exceeding"]
    lines += ["", f"modules whose MAPE may exceed {data['max_mape']:g} ({len(ex)}):"]
    if ex:
        rows = [{"rank": r["rank"], "module": r["site"], "verdict": r["verdict"],
                 "mape": fmt_number(r["mape"]), "ci": f"[{fmt_number(r['mape_ci_low'])}, "
                 f"{fmt_number(r['mape_ci_high'])}]", "sensitivity": fmt_number(r["sensitivity"]),
                 "sensitive": "yes" if r["sensitive"] else ""} for r in ex[:15]]
        lines.append(render_table(rows, ["rank", "module", "verdict", "mape", "ci",
                                         "sensitivity", "sensitive"]))
        if len(ex) > 15:
            lines.append(f"... {len(ex) - 15} more in exceeding.csv")
    else:
        lines.append("  none: every module's MAPE interval lies at or below the bound")
    one = data.get("one_side")
    if one:  # msprobe dumps of two stacks: what one of them calls and the other does not
        lines += ["", f"calls in one dump only, not compared ({len(one)} rows; one_side.csv):",
                  render_table(one[:15], ["side", "site", "call", "caller", "n_calls",
                                          "shape"])]
        if len(one) > 15:
            lines.append(f"... {len(one) - 15} more in one_side.csv")
    return "\n".join(lines)
