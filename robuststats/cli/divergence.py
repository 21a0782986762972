"""``robuststats divergence SOURCE``: per-layer divergence between two runs of one model.

Three forms, told apart by SOURCE and ``--capture``:

- ``SOURCE --candidate COND [--reference COND]``: both runs in this process (in-process);
- ``SOURCE --capture FILE [--reference COND | --candidate COND]``: run one condition and
  write its capture (for a comparison made later, or on another machine);
- ``CAPTURE --candidate CAPTURE``: compare two captures (SOURCE is the reference's).
"""

from __future__ import annotations

import argparse
from typing import Any

from robuststats.cli._output import add_format_option, emit, render_table
from robuststats.cli._types import non_negative_int, open_unit, positive_float, positive_int

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


def _at_least_2(text: str) -> int:
    high = 1 << 20  # robuststats.divergence._capture.MAX_SKETCH, without importing numpy
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 2 <= value <= high:
        raise argparse.ArgumentTypeError(f"must be an integer in [2, {high}], got {text!r}")
    return value


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "divergence", help="compare a model's activations layer by layer between two runs "
                           "(dtypes, devices, error models, checkpoints)",
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
    p.add_argument("source", metavar="SOURCE",
                   help="a study file (.yaml: the model of --condition and --seed, its "
                        "evaluation items), a model directory (save_pretrained, with its "
                        "tokenizer), or a capture file (the reference run, compared with "
                        "the capture of --candidate)")
    p.add_argument("--reference", metavar="COND",
                   help="the reference run (default fp32)")
    p.add_argument("--candidate", metavar="COND",
                   help="the compared run, e.g. bf16, nvfp4_weights, bf16+cuda, or a "
                        "mapping; a capture file when SOURCE is one")
    p.add_argument("--capture", metavar="FILE",
                   help="run one condition (--reference, or --candidate) and write its "
                        "capture to FILE (e.g. gpu.npz) instead of comparing")
    p.add_argument("--subset-size", type=_at_least_2, metavar="K",
                   help="capture: element positions kept per item and module for MAPE, "
                        "median APE and WAPE (default 1024)")
    p.add_argument("--projection-dim", type=_at_least_2, metavar="k",
                   help="capture: dimension of the sign projection per item and module "
                        "for rel RMS and cosine; relative SD of |b-a|^2 at most sqrt(2/k) "
                        "(default 256)")
    p.add_argument("--sketch-seed", type=non_negative_int, metavar="N",
                   help="capture: seed of the positions and projections; both captures "
                        "of a comparison need the same (default 0)")
    p.add_argument("--items", type=positive_int, metavar="N",
                   help="first N items (default 64 for a model directory, the study's "
                        "evaluation items for a study)")
    p.add_argument("--texts", metavar="FILE",
                   help="texts to run instead: one per line, or JSONL with 'text' (or "
                        "'prompt' and 'solution')")
    p.add_argument("--condition", metavar="NAME",
                   help="study: training condition whose model is compared (default: first)")
    p.add_argument("--seed", type=non_negative_int, metavar="N",
                   help="study: training seed (default: the first)")
    p.add_argument("--modules", type=_modules, metavar="LIST",
                   help="compare only these module types or names (e.g. residual,"
                        "mlp.down_proj; default: all)")
    p.add_argument("--max-mape", type=positive_float, metavar="X",
                   help="MAPE bound of the exceedance table (default 0.05)")
    p.add_argument("--sensitivity", metavar="FILE",
                   help="the diagnostic probe's sensitivity.json/.yaml: order flagged "
                        "modules with sensitive layers first")
    p.add_argument("--eps", type=open_unit, metavar="E",
                   help="MAPE guard: |b-a| / (|a| + E*RMS(a)) (default 0.01)")
    p.add_argument("--batch-size", type=positive_int, metavar="N",
                   help="items per forward pass (default 8)")
    p.add_argument("--max-length", type=positive_int, metavar="T",
                   help="truncate each text to T tokens")
    p.add_argument("--no-local", action="store_true",
                   help="skip the local pass (each layer on the reference's input); no "
                        "accumulation verdict then")
    p.add_argument("--interval", choices=("t", "bootstrap"),
                   help="interval over items: t (from the running statistics) or "
                        "percentile bootstrap (default t)")
    p.add_argument("--confidence-level", type=open_unit, metavar="L",
                   help="level of every interval (default 0.95)")
    p.add_argument("--name", metavar="NAME",
                   help="result name (default: the study's or the model directory's)")
    p.add_argument("--out", metavar="DIR",
                   help="result store root (default results/)")
    p.add_argument("--runs", metavar="DIR",
                   help="study: run directories with cached models (default runs/)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (on stderr)")
    add_format_option(p)
    p.set_defaults(run=run)
    return p


# flags that belong to one form only; a flag given where it does nothing is an error
_SOURCE_ONLY = ("items", "texts", "condition", "seed", "batch_size", "max_length", "runs")
_COMPARE_ONLY = ("max_mape", "sensitivity", "eps", "interval", "confidence_level", "name",
                 "out")
_CAPTURE_ONLY = ("subset_size", "projection_dim", "sketch_seed")
_DEFAULTS = {"reference": "fp32", "max_mape": 0.05, "eps": 0.01, "batch_size": 8,
             "interval": "t", "confidence_level": 0.95, "out": "results", "runs": "runs",
             "subset_size": 1024, "projection_dim": 256, "sketch_seed": 0}


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _refuse(args: argparse.Namespace, keys: tuple[str, ...], why: str) -> None:
    for key in keys:
        if getattr(args, key) not in (None, False):
            raise _flag_error(_flag(key), why)


def _resolve(args: argparse.Namespace) -> None:
    for key, value in _DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, value)


def run(args: argparse.Namespace) -> int:
    from robuststats.divergence import is_capture

    if is_capture(args.source) or (args.source.lower().endswith(".npz")
                                   and args.capture is None):
        return _run_captures(args)
    if args.capture is not None:
        return _run_capture(args)
    if args.candidate is None:
        raise _flag_error("--candidate", "required: the condition compared with --reference "
                          "(or --capture FILE to capture one run)")
    _refuse(args, _CAPTURE_ONLY, "sets a capture's sketch; give it with --capture FILE")
    _resolve(args)
    return _run_in_process(args)


def _checked_source(args: argparse.Namespace) -> tuple[str, Any]:
    """SOURCE's kind and the texts file, checked before anything is loaded."""
    from robuststats.divergence import check_source, read_texts
    from robuststats.runs import check_output_dir

    kind = check_source(args.source)
    if args.texts is not None:
        read_texts(args.texts, name="--texts")
    if kind == "model" and (args.condition is not None or args.seed is not None):
        raise _flag_error("--condition", "--condition and --seed choose a study's model; "
                          "SOURCE is a model directory")
    if kind == "study":
        check_output_dir(args.runs, "--runs")
    return kind, args.texts


def _load(args: argparse.Namespace, kind: str) -> Any:
    from robuststats.divergence import load_source

    n_items = args.items if args.items is not None else (64 if kind == "model" else None)
    return load_source(args.source, n_items=n_items, texts=args.texts,
                       condition=args.condition, seed=args.seed, runs=args.runs)


def _run_in_process(args: argparse.Namespace) -> int:
    from robuststats.config.sensitivity import read_layer_sensitivity
    from robuststats.divergence import check_device, check_source, parse_condition
    from robuststats.runs import check_output_dir

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
    sensitivity = read_layer_sensitivity(args.sensitivity, name="--sensitivity") \
        if args.sensitivity else None
    _checked_source(args)
    check_output_dir(args.out, "--out")
    src = _load(args, kind)
    candidate_model = None
    if cand.checkpoint is not None:
        from robuststats.models.model import load_pretrained

        candidate_model, _ = load_pretrained(cand.checkpoint, key="--candidate.checkpoint")
    return _compare(args, src, ref, cand, candidate_model, sensitivity)


def _run_capture(args: argparse.Namespace) -> int:
    """``SOURCE --capture FILE``: one run of one condition, written as a capture."""
    from pathlib import Path

    from robuststats.divergence import capture_run, check_device, parse_condition
    from robuststats.runs import progress_bar

    _refuse(args, _COMPARE_ONLY, "applies when comparing; a capture holds one run (give it "
            "when comparing the captures)")
    _refuse(args, ("no_local",), "a capture holds one run; it has no local pass")
    if args.reference is not None and args.candidate is not None:
        raise _flag_error("--capture", "a capture holds one run: give --reference or "
                          "--candidate, not both")
    flag = "--candidate" if args.candidate is not None else "--reference"
    _resolve(args)
    cond = parse_condition(args.candidate if flag == "--candidate" else args.reference,
                           name=flag)
    if cond.checkpoint is not None:
        raise _flag_error(f"{flag}.checkpoint", "a capture runs SOURCE's model; capture the "
                          "other checkpoint with it as SOURCE")
    check_device(cond, flag)
    target = Path(args.capture)
    if target.is_dir() or not target.parent.is_dir():
        raise _flag_error("--capture", f"{args.capture!r} must be a file in an existing "
                          "directory")
    kind, _ = _checked_source(args)
    if target.resolve() == Path(args.source).resolve():
        raise _flag_error("--capture", "would overwrite SOURCE")
    src = _load(args, kind)
    bar = progress_bar(not args.no_progress, len(src.texts), 0, unit="item", desc="capture")
    try:
        info = capture_run(src.model, src.tokenizer, src.texts, target, condition=cond,
                           item_ids=src.item_ids, modules=args.modules,
                           batch_size=args.batch_size, max_length=args.max_length,
                           subset_size=args.subset_size, projection_dim=args.projection_dim,
                           sketch_seed=args.sketch_seed, source={**src.info, "name": src.name},
                           progress=bar)
    finally:
        if bar is not None:
            bar.close()
    h = info.header
    data = {"capture": str(info.path), "bytes": info.n_bytes,
            "bytes_per_item": round(info.bytes_per_item, 1), "n_items": info.n_items,
            "n_sites": info.n_sites, "condition": h["condition"], "sketch": h["sketch"],
            "model": h["model"], "machine": {k: v for k, v in h["machine"].items()
                                             if k != "environment"},
            "seconds": round(info.seconds, 2), "notes": h["notes"]}
    emit(args.format, data=data, text=lambda: _capture_text(data, cond))
    return 0


def _capture_text(data: dict[str, Any], cond: Any) -> str:
    sk = data["sketch"]
    lines = [f"captured {cond.name} ({cond.describe()}): {data['n_items']} items, "
             f"{data['n_sites']} modules, {data['seconds']:.1f} s",
             f"file: {data['capture']} ({data['bytes'] / 1e6:.2f} MB, "
             f"{data['bytes_per_item'] / 1e3:.1f} kB per item)",
             f"sketch: {sk['subset_size']} positions and a {sk['projection_dim']}-dimensional "
             f"projection per item and module, seed {sk['seed']}",
             f"model: {data['model']['architecture']}, {data['model']['n_parameters']} "
             f"parameters, weights {data['model']['weights_sha256'][:16]}",
             f"machine: {data['machine']['host']}, {data['machine']['device_name']}",
             "compare with: robuststats divergence REFERENCE_CAPTURE --candidate "
             "CANDIDATE_CAPTURE"]
    lines += [f"note: {n}" for n in data["notes"]]
    return "\n".join(lines)


def _run_captures(args: argparse.Namespace) -> int:
    """``CAPTURE --candidate CAPTURE``: compare two captures."""
    from pathlib import Path

    from robuststats.config.sensitivity import read_layer_sensitivity
    from robuststats.divergence import CaptureReader, compare_captures, store_name
    from robuststats.runs import check_output_dir, progress_bar

    why = "SOURCE is a capture: the items, batches and sketch were fixed when it was captured"
    _refuse(args, _SOURCE_ONLY, why)
    _refuse(args, _CAPTURE_ONLY, why)
    if args.capture is not None:
        raise _flag_error("--capture", "SOURCE is a capture already; capture from a model "
                          "directory or a study file")
    if args.reference is not None:
        raise _flag_error("--reference", "SOURCE is the reference's capture; give the other "
                          "capture with --candidate")
    _refuse(args, ("no_local",), "captures have no local pass; it is never run")
    if args.candidate is None:
        raise _flag_error("--candidate", "required: the capture compared with SOURCE's")
    if not Path(args.candidate).is_file():
        raise _flag_error("--candidate", f"SOURCE is a capture, so --candidate must be "
                          f"another capture file; {args.candidate!r} is not a file")
    _resolve(args)
    sensitivity = read_layer_sensitivity(args.sensitivity, name="--sensitivity") \
        if args.sensitivity else None
    check_output_dir(args.out, "--out")
    with CaptureReader(args.source, name="SOURCE") as reader:
        header = reader.header
    bar = progress_bar(not args.no_progress, len(header["items"]["ids"]), 0, unit="item",
                       desc="compare")
    try:
        div = compare_captures(args.source, args.candidate, modules=args.modules,
                               eps=args.eps, confidence_level=args.confidence_level,
                               interval=args.interval, names=("SOURCE", "--candidate"),
                               progress=bar)
    finally:
        if bar is not None:
            bar.close()
    origin = header.get("source") if isinstance(header.get("source"), dict) else {}
    name = args.name or origin.get("name") or Path(args.source).stem
    source = {"kind": "captures", "reference": str(args.source),
              "candidate": str(args.candidate), "model": header.get("source")}
    return _publish(args, div, store_name(str(name)), sensitivity, source)


def _flag_error(flag: str, message: str) -> Exception:
    from robuststats.errors import InputError

    return InputError(f"`{flag}`: {message}.")


def _compare(args: argparse.Namespace, src: Any, ref: Any, cand: Any, candidate_model: Any,
             sensitivity: Any) -> int:
    from robuststats.divergence import compare_runs
    from robuststats.runs import progress_bar

    bar = progress_bar(not args.no_progress, len(src.texts), 0, unit="item",
                       desc="divergence")
    try:
        div = compare_runs(src.model, src.tokenizer, src.texts, item_ids=src.item_ids,
                           reference=ref, candidate=cand, candidate_model=candidate_model,
                           modules=args.modules, batch_size=args.batch_size,
                           max_length=args.max_length, local=not args.no_local, eps=args.eps,
                           confidence_level=args.confidence_level, interval=args.interval,
                           progress=bar)
    finally:
        if bar is not None:
            bar.close()
    return _publish(args, div, args.name or src.name, sensitivity, src.info)


def _publish(args: argparse.Namespace, div: Any, name: str, sensitivity: Any,
             source: dict[str, Any]) -> int:
    from robuststats.divergence import summary, verdict_text, write_divergence

    version = write_divergence(div, out=args.out, name=name, max_mape=args.max_mape,
                               sensitivity=sensitivity, source=source)
    data = {**summary(div, max_mape=args.max_mape, sensitivity=sensitivity),
            "version": version.label, "path": str(version.path), "source": source}
    emit(args.format, data=data, text=lambda: _text(div, data, verdict_text))
    return 0


def _g(value: Any) -> str:
    return "-" if value is None or value != value else f"{value:.4g}"


def _text(div: Any, data: dict[str, Any], verdict_text: Any) -> str:
    lines = [f"divergence of {div.candidate.name} ({div.candidate.describe()}) from "
             f"{div.reference.name} ({div.reference.describe()}): {div.n_items} items, "
             f"{div.n_layers} layers, {div.seconds:.1f} s",
             f"results: {data['path']}", verdict_text(div.fit)]
    lines += [f"note: {n}" for n in div.notes]
    depth = [{"layer": r["layer"], "rel_rms": _g(r["rel_rms"]),
              "local": _g(r["local_rel_rms"]), "additive": _g(r["additive"]),
              "mape": _g(r["mape"]), "cosine": f"{r['cosine']:.6f}"
              if r["cosine"] is not None else "-"} for r in data["depth"]]
    lines += ["", "residual stream by layer (accumulated; local = the layer alone):",
              render_table(depth, ["layer", "rel_rms", "local", "additive", "mape", "cosine"])]
    ex = data["exceeding"]
    lines += ["", f"modules whose MAPE may exceed {data['max_mape']:g} ({len(ex)}):"]
    if ex:
        rows = [{"rank": r["rank"], "module": r["site"], "verdict": r["verdict"],
                 "mape": _g(r["mape"]), "ci": f"[{_g(r['mape_ci_low'])}, "
                 f"{_g(r['mape_ci_high'])}]", "sensitivity": _g(r["sensitivity"]),
                 "sensitive": "yes" if r["sensitive"] else ""} for r in ex[:15]]
        lines.append(render_table(rows, ["rank", "module", "verdict", "mape", "ci",
                                         "sensitivity", "sensitive"]))
        if len(ex) > 15:
            lines.append(f"... {len(ex) - 15} more in exceeding.csv")
    else:
        lines.append("  none: every module's MAPE interval lies at or below the bound")
    return "\n".join(lines)
