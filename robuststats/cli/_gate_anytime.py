"""``robuststats gate ... --anytime``: one candidate model against one baseline model, decided
on the candidate's stream of items (:func:`robuststats.gate.run_anytime_gate`), once or
watching the candidate's outcomes file grow (``--watch``).

Exit status: 0 PASS, 1 FAIL, 3 UNDECIDED (keep evaluating; with ``--watch``, at
``--timeout``), 4 BROKEN (a confidence sequence emptied before deciding: the stream broke
its assumption), 130 interrupted, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from robuststats.cli import _options as opts
from robuststats.cli._anytime import check_growing, watch
from robuststats.cli._output import emit, to_jsonable
from robuststats.cli._types import positive_float

__all__ = ["ONLY", "WATCH", "run"]

WATCH = [
    opts.option("--watch", type=positive_float, metavar="SECONDS",
                help="with --anytime: re-read the growing CANDIDATE file every SECONDS until "
                     "the gate is decided (exit 0 PASS, 1 FAIL)"),
    opts.option("--timeout", type=positive_float, metavar="SECONDS",
                help="with --watch: stop undecided after SECONDS (exit 3)"),
]
#: flags that only --anytime uses
ONLY = ("candidate_seed", "baseline_seed", "watch", "timeout")
#: flags that --anytime refuses rather than ignore: (dest, its default)
_NOT_ANYTIME = (("seeds", None), ("seed_pairing", "auto"), ("out", None), ("runs", None))


def _check(args: argparse.Namespace) -> None:
    from robuststats.errors import InputError

    if not args.anytime:
        given = [opts.flag(d) for d in ONLY if getattr(args, d) is not None]
        raise InputError(f"{', '.join(given)}: only with --anytime (without it the gate uses "
                         "every seed; --seeds picks the candidate's).")
    given = [opts.flag(d) for d, default in _NOT_ANYTIME if getattr(args, d) != default]
    if given:
        raise InputError(f"{', '.join(given)}: not used by --anytime, which compares one "
                         "trained model on each side (--candidate-seed, --baseline-seed) and "
                         "writes no result version.")
    if args.timeout is not None and args.watch is None:
        raise InputError("--timeout: only with --watch SECONDS.")


def _once(args: argparse.Namespace, question: str, margin: float,
          flags: Callable[[str], str], *, watching: bool) -> Any:
    """The gate on the candidate's complete rows so far; None (watching) while it has none."""
    from robuststats.cli._anytime import complete_source
    from robuststats.errors import InputError
    from robuststats.gate import run_anytime_gate

    with complete_source(Path(args.candidate), say_partial=not watching) as part:
        if part is None:
            if watching:
                return None
            raise InputError(f"CANDIDATE {args.candidate!r} holds no complete row of "
                             "outcomes yet (use --watch SECONDS to wait for them).")
        try:
            return run_anytime_gate(
                str(part), args.baseline, max_degradation=margin, question=question,
                metric=args.metric, margin_type=args.margin_type, alpha=args.alpha,
                eval_noise=args.eval_noise, baseline_condition=args.baseline_condition,
                candidate_condition=args.candidate_condition, seed=args.candidate_seed,
                baseline_seed=args.baseline_seed, root=args.root,
                label=f"outcomes {args.candidate}")
        except InputError as exc:
            raise InputError(flags(str(exc))) from None


def _show(args: argparse.Namespace, result: Any, *, watching: bool) -> None:
    from robuststats.gate import anytime_gate_text

    if args.format == "json":
        if watching:  # one JSON object a line, one line an update
            print(json.dumps(to_jsonable(result.to_dict())), flush=True)
        else:
            emit("json", data=result.to_dict(), text="")
    else:
        print(anytime_gate_text(result, markdown=args.format == "markdown")
              + ("\n" if watching else ""), flush=True)


def _say(result: Any) -> None:
    for lv in result.levels:
        if lv.empty_at is not None:
            print(f"robuststats gate: eval_noise {lv.eval_noise:g}: the confidence sequence "
                  f"became empty at item {lv.empty_at} (broken assumption: items not in a "
                  f"random order?); "
                  + (f"the {lv.decision} at item {lv.decided_at} stands."
                     if lv.decided_at is not None else "nothing was decided."),
                  file=sys.stderr)
    if result.decision == "BROKEN":
        print(f"robuststats gate: BROKEN (exit {result.exit_code}): a confidence sequence "
              "emptied before deciding; check the item order.", file=sys.stderr)
    elif result.decision == "UNDECIDED":
        print(f"robuststats gate: UNDECIDED (exit {result.exit_code}): keep evaluating.",
              file=sys.stderr)
    elif result.decision == "FAIL":
        t = next(t for t in result.levels if t.decision == "FAIL")
        print(f"robuststats gate: FAIL (exit 1): eval_noise {t.eval_noise:g}: the confidence "
              f"sequence lies on the failing side after {t.decided_at} items.", file=sys.stderr)


def run(args: argparse.Namespace, question: str, margin: float,
        flags: Callable[[str], str]) -> int:
    """``gate --anytime``, once or ``--watch``: flags are checked before anything is read;
    ``flags`` rewrites a library message's parameter names as the flags."""
    _check(args)
    if args.watch is None:
        result = _once(args, question, margin, flags, watching=False)
        _show(args, result, watching=False)
        _say(result)
        return result.exit_code
    shown: list[Any] = [None]
    last: list[Any] = [None]

    def step() -> int | None:
        result = _once(args, question, margin, flags, watching=True)
        if result is None:
            return None
        last[0] = result
        key = tuple(lv.items for lv in result.levels)
        check_growing(shown[0], key, Path(args.candidate))
        if key != shown[0]:
            shown[0] = key
            _show(args, result, watching=True)
        if result.decision == "UNDECIDED":
            return None
        _say(result)
        return result.exit_code

    def what() -> str:
        if last[0] is None:
            return "no outcome row yet"
        return f"UNDECIDED after {', '.join(str(lv.items) for lv in last[0].levels)} items"

    return watch(step, every=args.watch, timeout=args.timeout, command="gate",
                 source=Path(args.candidate), what=what)
