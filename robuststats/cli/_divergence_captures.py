"""The capture forms of ``robuststats divergence``: ``SOURCE --capture FILE`` runs one
condition and writes its capture; ``CAPTURE --candidate CAPTURE`` compares two captures.

Part of :mod:`robuststats.cli.divergence`, which parses, checks the flags every form shares
and dispatches here.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from robuststats.cli import _options as opts
from robuststats.cli._output import emit
from robuststats.cli.divergence import (
    _CAPTURE_ONLY,
    _COMPARE_ONLY,
    _SOURCE_ONLY,
    _checked_source,
    _flag_error,
    _load,
    _progress,
    _refuse,
    _resolve,
    _sensitivity,
    check_fit_flags,
    fit_and_write,
    publish,
)

__all__ = ["capture_one", "compare_two", "compare_two_dumps"]


def capture_one(args: argparse.Namespace) -> int:
    """``SOURCE --capture FILE``: one run of one condition, written as a capture."""
    from robuststats.divergence import capture_run, check_device, parse_condition

    _refuse(args, _COMPARE_ONLY, "applies when comparing; a capture holds one run (give it "
            "when comparing the captures)")
    _refuse(args, ("no_local",), "a capture holds one run; it has no local pass")
    _refuse(args, ("checkpoint",), "relocates the model of a fit from two captures; a "
            "capture runs SOURCE's model")
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
    kind = _checked_source(args)
    if target.resolve() == Path(args.source).resolve():
        raise _flag_error("--capture", "would overwrite SOURCE")
    src = _load(args, kind)
    from robuststats.divergence import source_identity

    # what the model and texts are, so a fit finds them again wherever they are moved
    identity = source_identity(src.info, args.texts)
    with _progress(args, len(src.texts), "capture") as bar:
        info = capture_run(src.model, src.tokenizer, src.texts, target, condition=cond,
                           item_ids=src.item_ids, modules=args.modules,
                           batch_size=args.batch_size, max_length=args.max_length,
                           subset_size=args.subset_size, projection_dim=args.projection_dim,
                           sketch_seed=args.sketch_seed,
                           source={**src.info, "name": src.name, "texts_file": args.texts,
                                   **identity},
                           progress=bar)
    data = info.summary()
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


def _two_files(args: argparse.Namespace, what: str, plural: str) -> None:
    """The checks of a comparison of two files (captures or dumps) made elsewhere."""
    why = f"SOURCE is {what}: the items, batches and sketch were fixed when it was written"
    # with --fit-noise, --runs finds a study's model and --texts relocates the captures'
    # texts (the capture names its source; --checkpoint relocates its model)
    relocation = ("runs", "texts") if args.fit_noise is not None else ()
    _refuse(args, tuple(k for k in _SOURCE_ONLY if k not in relocation), why)
    if args.checkpoint is not None and args.fit_noise is None:
        raise _flag_error("--checkpoint", "relocates the captures' model for --fit-noise FILE")
    _refuse(args, _CAPTURE_ONLY, why)
    if args.capture is not None:
        raise _flag_error("--capture", f"SOURCE is {what} already; capture from a model "
                          "directory or a study file")
    if args.reference is not None:
        raise _flag_error("--reference", f"SOURCE is the reference's {what.split()[-1]}; "
                          "give the other one with --candidate")
    _refuse(args, ("no_local",), f"{plural} have no local pass; it is never run")
    if args.candidate is None:
        raise _flag_error("--candidate", f"required: the {what.split()[-1]} compared with "
                          "SOURCE's")


def compare_two_dumps(args: argparse.Namespace) -> int:
    """``DUMP --candidate DUMP``: compare two msprobe dumps."""
    from robuststats.divergence import compare_dumps, is_dump, store_name

    _two_files(args, "an msprobe dump", "dumps")
    if args.fit_noise is not None:
        raise _flag_error("--fit-noise", "a dump holds no texts to simulate on: fit from two "
                          "captures, or in process (SOURCE a model directory or study file)")
    check_fit_flags(args)
    if not is_dump(args.candidate):
        raise _flag_error("--candidate", f"SOURCE is an msprobe dump, so --candidate must be "
                          f"another; {args.candidate!r} holds no dump.json")
    _resolve(args)
    sensitivity = _sensitivity(args)
    opts.check_output_dirs(args, "out")
    div = compare_dumps(args.source, args.candidate, modules=args.modules, eps=args.eps,
                        confidence_level=args.confidence_level, interval=args.interval,
                        names=("SOURCE", "--candidate"))
    name = args.name or Path(args.source).resolve().name
    source = {"kind": "msprobe dumps", "reference": str(args.source),
              "candidate": str(args.candidate)}
    return publish(args, div, store_name(str(name)), sensitivity, source)


def compare_two(args: argparse.Namespace) -> int:
    """``CAPTURE --candidate CAPTURE``: compare two captures."""
    from robuststats.divergence import CaptureReader, compare_captures, store_name

    _two_files(args, "a capture", "captures")
    if not Path(args.candidate).is_file():
        raise _flag_error("--candidate", f"SOURCE is a capture, so --candidate must be "
                          f"another capture file; {args.candidate!r} is not a file")
    check_fit_flags(args)
    _resolve(args)
    sensitivity = _sensitivity(args)
    opts.check_output_dirs(args, "out")
    with CaptureReader(args.source, name="SOURCE") as reader:
        header = reader.header
    inputs = None
    if args.fit_noise is not None:
        from robuststats.divergence import condition_from_dict, fit_device, fit_inputs

        # where the fit will run: the reference's device unless --device says; refused here
        # when this machine lacks it, before anything is loaded
        recorded = header.get("condition")
        fit_device(condition_from_dict(recorded if isinstance(recorded, dict) else {}),
                   args.device)

        # the model and texts both captures were made from, found and verified by their
        # SHA-256 before anything is loaded or compared
        with CaptureReader(args.candidate, name="--candidate") as reader:
            other = reader.header
        inputs = fit_inputs(header, other, checkpoint=args.checkpoint, texts=args.texts,
                            runs=args.runs, names=("SOURCE", "--candidate"))
    # loaded and checked against both captures before the comparison is computed
    src = None if inputs is None else _fit_model(inputs, header, other, args)
    with _progress(args, len(header["items"]["ids"]), "compare") as bar:
        div = compare_captures(args.source, args.candidate, modules=args.modules,
                               eps=args.eps, confidence_level=args.confidence_level,
                               interval=args.interval, names=("SOURCE", "--candidate"),
                               progress=bar)
    origin = header.get("source") if isinstance(header.get("source"), dict) else {}
    name = args.name or origin.get("name") or Path(args.source).stem
    source = {"kind": "captures", "reference": str(args.source),
              "candidate": str(args.candidate), "model": header.get("source")}
    fit = None
    if src is not None:
        source["fit_inputs"] = src.info
        fit = fit_and_write(args, div, src, None)
    return publish(args, div, store_name(str(name)), sensitivity, source, fit)


def _fit_model(inputs: Any, reference: dict[str, Any], candidate: dict[str, Any],
               args: argparse.Namespace) -> Any:
    """The verified model and texts of a fit from captures, loaded; the weights and the
    tokenizer are checked against both captures once loaded."""
    from robuststats.divergence import Source, check_loaded, load_source

    if inputs.checkpoint is not None:
        from robuststats.models.model import load_pretrained

        flag = "--checkpoint" if args.checkpoint is not None else "--fit-noise"
        model, tokenizer = load_pretrained(inputs.checkpoint, key=flag)
        where = str(inputs.checkpoint)
    else:
        src = load_source(**inputs.study, n_items=len(inputs.texts))
        model, tokenizer, flag = src.model, src.tokenizer, "--fit-noise"
        where = str(inputs.study["source"])
    note = check_loaded(model, tokenizer, (("SOURCE", reference), ("--candidate", candidate)),
                        flag=flag, where=where, file_difference=inputs.file_difference)
    origin = {**inputs.origin, **({"note": note} if note is not None else {})}
    return Source(model, tokenizer, list(inputs.texts), list(inputs.item_ids),
                  Path(where).name, origin)
