"""``robuststats gate CANDIDATE --baseline REPORT --max-degradation M``: the CI robustness gate.

Exit 0 when the candidate is shown non-inferior at every gated noise level, 1 when it is
not, 2 on bad input (one line naming the flag, before any model is loaded). Parses, calls
:func:`robuststats.gate.run_gate` and prints; imports nothing heavy at module level.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from robuststats.cli import _gate_anytime
from robuststats.cli import _options as opts
from robuststats.cli._output import emit
from robuststats.cli._types import alpha, non_negative_float

__all__ = ["add_parser", "run"]

FORMATS = ("text", "table", "json", "markdown")

EPILOG = """\
examples:
  robuststats gate ckpts/latest --baseline results/e8_matrix/v2 --baseline-condition E8a \\
      --max-degradation 0.15
      evaluate the checkpoint under E8a's protocol (task, items, error model, noise levels
      and seeds); pass when its retention is shown to be more than 85 % of E8a's at every
      noisy level (one-sided 95 % lower bound of retention ratio − 1 above −0.15)
  robuststats gate new_outcomes.parquet --baseline e8_matrix/v2 --baseline-condition E8a \\
      --max-degradation 0.02 --margin-type absolute --metric accuracy --format markdown
      outcomes already evaluated elsewhere; at most 2 accuracy points lost under noise
  robuststats gate ckpts/run{seed} --seeds 3 --baseline e8_matrix --baseline-condition E8a \\
      --max-degradation 0.1 --out results
      three candidate checkpoints (seeds 0-2), and a versioned result under results/
  robuststats gate new.parquet --baseline e8_matrix/v2 --baseline-condition E8a \\
      --min-improvement 0.05
      pass only when the candidate's retention is shown to be more than 5 % above E8a's
  robuststats gate new.parquet --baseline e8_matrix/v2 --baseline-condition E8a \\
      --equivalence 0.03 --margin-type absolute --metric accuracy
      pass only when the noisy accuracies are shown to differ by less than 3 points

  robuststats gate growing.csv --baseline e8_matrix/v2 --baseline-condition E8a \
      --max-degradation 0.02 --margin-type absolute --metric accuracy --anytime
      one candidate checkpoint's outcomes as they are written, item by item: PASS or FAIL
      as soon as the confidence sequence of the accuracy difference decides, else exit 3
      (undecided: keep evaluating); re-running on the grown file stays valid

exit status: 0 pass, 1 fail (the question's claim not shown), 2 bad input; with --anytime
also 3 undecided (keep evaluating; with --watch: at --timeout) and 130 interrupted.
Exactly one margin flag: --max-degradation (non-inferiority), --min-improvement
(superiority) or --equivalence (TOST: each one-sided test at alpha, so the (1 − 2·alpha)
interval must lie inside the margin; relative: the ratio inside (1 − D, 1/(1 − D))).
--max-degradation M is relative by default: the candidate must keep more than (1 − M) of
the baseline's retention; --margin-type absolute reads it as retention (or accuracy)
points. Plan the size of a gate with `robuststats power --gate`. Details: docs/gate.md.
"""


def _seeds(text: str) -> int | list[int]:
    """``N`` (seeds 0..N-1) or a comma-separated list ``0,3,7``."""
    try:
        if "," in text:
            values = [int(t) for t in text.split(",")]
            if any(v < 0 for v in values) or len(set(values)) != len(values):
                raise ValueError
            return values
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a count N or distinct seeds 0,1,2, got "
                                         f"{text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a count N >= 1 or a list 0,1,2, got {text!r}")
    return value


#: the options, in the order --help lists them
_OPTIONS = [
    opts.option("candidate", metavar="CANDIDATE",
                help="a Hugging Face checkpoint directory (or a template with {seed} / a glob, "
                     "one directory per seed), a result version, a run directory or an "
                     "outcomes file (.parquet/.csv/.tsv/.jsonl)"),
    opts.option("--baseline", required=True, metavar="REPORT",
                help="the baseline's result version: a directory, or STUDY / STUDY/vN under "
                     "--root; a study's version or an earlier gate's"),
    opts.option("--max-degradation", type=non_negative_float, metavar="M",
                help="non-inferiority (the default question): H0 θc/θb ≤ 1 − M (relative) or "
                     "θc − θb ≤ −M (absolute); pass when the one-sided (1 − alpha) lower "
                     "bound of θc/θb − 1 (or θc − θb) lies above −M"),
    opts.option("--min-improvement", type=non_negative_float, metavar="D",
                help="superiority by a margin instead: H0 θc/θb ≤ 1 + D (relative) or "
                     "θc − θb ≤ D (absolute); pass when the one-sided (1 − alpha) lower "
                     "bound lies above +D (D = 0: plain superiority)"),
    opts.option("--equivalence", type=non_negative_float, metavar="D",
                help="equivalence within D instead, two one-sided tests (TOST): H0 "
                     "|log θc/θb| ≥ −log(1 − D) (relative) or |θc − θb| ≥ D (absolute); "
                     "pass when both one-sided (1 − alpha) bounds lie inside the margin, "
                     "i.e. the (1 − 2·alpha) interval does"),
    opts.option("--margin-type", choices=("relative", "absolute"), default="relative",
                help="how --max-degradation is read (default relative)"),
    opts.option("--metric", choices=("retention", "accuracy"), default="retention",
                help="retention = noisy/clean accuracy (default), or the noisy accuracy"),
    opts.option("--alpha", type=alpha, default=0.05, metavar="A",
                help="level of each one-sided test (default 0.05: 95%% lower bounds)"),
    opts.option("--eval-noise", type=non_negative_float, nargs="+", metavar="S",
                help="noise levels to gate (default: every noisy level of the baseline)"),
    opts.option("--baseline-condition", metavar="NAME",
                help="the baseline study's condition (needed when it has several)"),
    opts.option("--candidate-condition", metavar="NAME",
                help="the candidate's condition when its outcomes hold several"),
    opts.option("--seeds", type=_seeds, metavar="N|LIST",
                help="the candidate's training seeds: for a {seed} checkpoint template the "
                     "seeds to evaluate (default: the baseline's), for outcomes the subset to use"),
    opts.option("--anytime", action="store_true",
                help="decide on a stream of items: one candidate model against one baseline "
                     "model, by the anytime-valid confidence sequence (Waudby-Smith & Ramdas "
                     "2023) of their noisy-accuracy difference (absolute margin) or ratio "
                     "(relative), over the candidate's outcomes in the order of its rows; "
                     "PASS/FAIL once the sequence lies on one side, else exit 3 (undecided: "
                     "keep evaluating). About these checkpoints, not their training recipes; "
                     "valid for items evaluated in a random order; needs --metric accuracy"),
    opts.option("--candidate-seed", type=int, metavar="S",
                help="with --anytime: the candidate's training seed (when it has several)"),
    opts.option("--baseline-seed", type=int, metavar="S",
                help="with --anytime: the baseline's training seed (default the candidate's, "
                     "or the baseline's only one)"),
    *_gate_anytime.WATCH,
    opts.option("--seed-pairing", choices=("auto", "paired", "independent"), default="auto",
                help="auto (default): pair seeds by label when both sides have the same seeds, "
                     "else treat them as independent runs"),
    opts.out("also write a versioned result DIR/<study>.gate/v<N>/", default=None),
    opts.option("--root", default="results", metavar="DIR",
                help="result store for STUDY/vN references (default results/)"),
    opts.runs("keep the candidate's run directory here (default: a temporary one)", default=None),
    opts.workers("worker processes evaluating a checkpoint (default 1)"),
    opts.NO_PROGRESS,
    opts.option("--format", choices=FORMATS, default="text",
                help="text (default; table is the same), json or markdown"),
]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    return opts.add_command(
        subparsers, "gate", run, options=_OPTIONS,
        help="CI robustness gate: is a candidate non-inferior to (or better than, or "
             "equivalent to) a baseline under its noise protocol? (exit 0 pass, 1 fail, "
             "2 bad input)",
        description=(
            "Evaluate a candidate checkpoint under a baseline's noise protocol (or read its "
            "outcomes), and decide non-inferiority of its retention (or accuracy) with "
            "a one-sided test at every noisy level of the protocol. The gate passes only "
            "when every one-sided (1 − alpha) lower bound of the candidate-vs-baseline "
            "contrast lies above −max-degradation. --min-improvement asks superiority by a "
            "margin, --equivalence equivalence within one (TOST), with the same seed and "
            "item handling."
        ),
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)


def run(args: argparse.Namespace) -> int:
    from robuststats.errors import InputError
    from robuststats.gate import gate_markdown, gate_text, run_gate, write_gate

    question, flag, margin = _question(args)
    if args.anytime or any(getattr(args, d) is not None for d in _gate_anytime.ONLY):
        return _gate_anytime.run(args, question, margin, lambda m: _flags(m, flag))
    opts.check_output_dirs(args, "out", "runs")
    try:
        result = run_gate(
            args.candidate, args.baseline, max_degradation=margin, question=question,
            metric=args.metric, margin_type=args.margin_type, alpha=args.alpha,
            eval_noise=args.eval_noise, baseline_condition=args.baseline_condition,
            candidate_condition=args.candidate_condition, seeds=args.seeds,
            pairing=args.seed_pairing, root=args.root, runs=args.runs,
            workers=args.workers, progress=not args.no_progress)
    except InputError as exc:
        raise InputError(_flags(str(exc), flag)) from None
    version = write_gate(result, args.out) if args.out is not None else None
    data = {**result.to_dict(), "exit_code": result.exit_code,
            "version": None if version is None else version.label,
            "path": None if version is None else str(version.path)}
    tail = "" if version is None else f"\nresult: {version.path}"
    if args.format == "markdown":
        print(gate_markdown(result) + tail)
    else:
        emit("json" if args.format == "json" else "table", data=data,
             text=lambda: gate_text(result) + tail)
    if not result.passed:
        print(f"robuststats gate: FAIL (exit 1): {result.tests and _first_fail(result)}",
              file=sys.stderr)
    return result.exit_code


def _first_fail(result: Any) -> str:
    t = next(t for t in result.tests if not t.passed)
    return f"eval_noise {t.eval_noise:g}: {t.reason}"


#: library parameter -> the flag that sets it (errors name the flag)
_FLAGS = {"max_degradation": "--max-degradation", "margin_type": "--margin-type",
          "metric": "--metric", "alpha": "--alpha", "eval_noise": "--eval-noise",
          "seeds": "--seeds", "pairing": "--seed-pairing", "baseline_seed": "--baseline-seed",
          "candidate_seed": "--candidate-seed"}


def _flags(message: str, margin_flag: str = "--max-degradation") -> str:
    import re

    names = {**_FLAGS, "max_degradation": margin_flag}
    return re.sub(r"`([a-z_]+)`", lambda m: f"`{names.get(m.group(1), m.group(1))}`", message)


#: the margin flags and the question each asks
_QUESTIONS = {"max_degradation": "non-inferiority", "min_improvement": "superiority",
              "equivalence": "equivalence"}


def _question(args: argparse.Namespace) -> tuple[str, str, float]:
    """``(question, its flag, the margin)``: exactly one margin flag is given."""
    from robuststats.errors import InputError

    given = [dest for dest in _QUESTIONS if getattr(args, dest) is not None]
    flags = ", ".join(opts.flag(d) for d in _QUESTIONS)
    if not given:
        raise InputError(f"{flags}: give one margin: the question the gate asks "
                         "(non-inferiority, superiority or equivalence).")
    if len(given) > 1:
        raise InputError(f"{' and '.join(opts.flag(d) for d in given)}: give one margin, "
                         "not several: each asks another question.")
    dest = given[0]
    return _QUESTIONS[dest], opts.flag(dest), getattr(args, dest)
