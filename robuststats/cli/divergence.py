"""``robuststats divergence SOURCE``: per-layer divergence between two runs of one model."""

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

conditions: dtypes fp32, bf16, fp16; devices cpu, cuda, cuda:N; error models
nvfp4_weights, mxfp4_weights, fp8_e4m3_inputs, int8_inputs, nvfp4_inputs,
relative_gaussian@0.05, ... (robuststats.study.eval_kinds); 'clean'; joined with '+'.
A mapping (inline YAML or a .yaml/.json file) takes name, dtype, device, noise (a kind or
a NoiseSpec mapping), level, ops, noise_seed, checkpoint. See docs/divergence.md.
"""


def _modules(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"must be comma-separated module types or names, got "
                                         f"{text!r}")
    return names


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
            "report.json, figures/depth.png, manifest)."),
        epilog=_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", metavar="SOURCE",
                   help="a study file (.yaml: the model of --condition and --seed, its "
                        "evaluation items) or a model directory (save_pretrained, with its "
                        "tokenizer)")
    p.add_argument("--reference", default="fp32", metavar="COND",
                   help="the reference run (default fp32)")
    p.add_argument("--candidate", required=True, metavar="COND",
                   help="the compared run, e.g. bf16, nvfp4_weights, bf16+cuda, or a mapping")
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
    p.add_argument("--max-mape", type=positive_float, default=0.05, metavar="X",
                   help="MAPE bound of the exceedance table (default 0.05)")
    p.add_argument("--sensitivity", metavar="FILE",
                   help="the diagnostic probe's sensitivity.json/.yaml: order flagged "
                        "modules with sensitive layers first")
    p.add_argument("--eps", type=open_unit, default=0.01, metavar="E",
                   help="MAPE guard: |b-a| / (|a| + E*RMS(a)) (default 0.01)")
    p.add_argument("--batch-size", type=positive_int, default=8, metavar="N",
                   help="items per forward pass (default 8)")
    p.add_argument("--max-length", type=positive_int, metavar="T",
                   help="truncate each text to T tokens")
    p.add_argument("--no-local", action="store_true",
                   help="skip the local pass (each layer on the reference's input); no "
                        "accumulation verdict then")
    p.add_argument("--interval", choices=("t", "bootstrap"), default="t",
                   help="interval over items: t (from the running statistics) or "
                        "percentile bootstrap (default t)")
    p.add_argument("--confidence-level", type=open_unit, default=0.95, metavar="L",
                   help="level of every interval (default 0.95)")
    p.add_argument("--name", metavar="NAME",
                   help="result name (default: the study's or the model directory's)")
    p.add_argument("--out", default="results", metavar="DIR",
                   help="result store root (default results/)")
    p.add_argument("--runs", default="runs", metavar="DIR",
                   help="study: run directories with cached models (default runs/)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (on stderr)")
    add_format_option(p)
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    from robuststats.divergence._conditions import parse_condition
    from robuststats.divergence._runner import check_device
    from robuststats.divergence._sensitivity import read_layer_sensitivity
    from robuststats.divergence._sources import check_source, load_source, read_texts
    from robuststats.study.runner import check_output_dir

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
    if args.texts is not None:
        read_texts(args.texts, name="--texts")
    if kind == "model" and (args.condition is not None or args.seed is not None):
        raise _flag_error("--condition", "--condition and --seed choose a study's model; "
                          "SOURCE is a model directory")
    check_output_dir(args.out, "--out")
    if kind == "study":
        check_output_dir(args.runs, "--runs")
    n_items = args.items if args.items is not None else (64 if kind == "model" else None)
    src = load_source(args.source, n_items=n_items, texts=args.texts,
                      condition=args.condition, seed=args.seed, runs=args.runs)
    candidate_model = None
    if cand.checkpoint is not None:
        from robuststats.study.model import load_pretrained

        candidate_model, _ = load_pretrained(cand.checkpoint, key="--candidate.checkpoint")
    return _compare(args, src, ref, cand, candidate_model, sensitivity)


def _flag_error(flag: str, message: str) -> Exception:
    from robuststats.errors import InputError

    return InputError(f"`{flag}`: {message}.")


def _compare(args: argparse.Namespace, src: Any, ref: Any, cand: Any, candidate_model: Any,
             sensitivity: Any) -> int:
    from robuststats.divergence._report import summary, verdict_text, write_divergence
    from robuststats.divergence._runner import compare_runs
    from robuststats.study.runner import progress_bar

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
    version = write_divergence(div, out=args.out, name=args.name or src.name,
                               max_mape=args.max_mape, sensitivity=sensitivity,
                               source=src.info)
    data = {**summary(div, max_mape=args.max_mape, sensitivity=sensitivity),
            "version": version.label, "path": str(version.path), "source": src.info}
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
