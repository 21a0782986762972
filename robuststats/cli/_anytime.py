"""``robuststats analyze SOURCE --anytime``: confidence sequences of one pair of models over a
stream of items, once or watching a growing outcomes file.

The statistics are :func:`robuststats.analysis.anytime_table`; this module reads the
source (only its complete lines: a file being written may end in half a row), prints, and
runs the watch loop. Exit status of ``--watch``: 0 when every monitored comparison is
decided, 3 when ``--timeout`` passes first (undecided), 130 when interrupted; without
``--watch`` the table is a report (exit 0).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from robuststats.cli import _options as opts
from robuststats.cli._output import emit, fmt_pct, render_table, to_jsonable
from robuststats.cli._types import positive_float

__all__ = ["INTERRUPTED", "OPTIONS", "UNDECIDED", "check", "complete_source", "run", "watch"]

#: exit status of --watch when --timeout passes with a comparison undecided
UNDECIDED = 3
#: exit status when the watch is interrupted (Ctrl-C), as a shell reports SIGINT
INTERRUPTED = 130
_ORDER = "order"
_TEXT = {".csv", ".tsv", ".tab", ".jsonl", ".ndjson"}


OPTIONS = opts.Group(
    "anytime-valid monitoring (--anytime)",
    "Instead of the tables: for one fixed pair of trained models (CONDITION:SEED), the "
    "betting confidence sequence (Waudby-Smith & Ramdas 2023) of their accuracy difference "
    "at every noise cell both have, and of each one's retention (noisy/clean accuracy), over "
    "the items in the order of the file's rows (an item counts once both cells hold it). "
    "The bounds hold at every item count at once: re-running on a growing file, or "
    "--watch, and stopping when a sequence excludes the tested value is valid, when the "
    "items were evaluated in a random order (a shuffled item list). A statement "
    "about these models on this item stream, not about their training procedures (that "
    "is the seed-random t of a study). docs/statistics.md §11.", [
        opts.option("--anytime", action="store_true",
                    help="print the confidence sequences of one pair of models (not the "
                         "tables): items paired so far, estimate, anytime-valid interval, "
                         "whether it excludes the tested value and at which item count it "
                         "first did"),
        opts.option("--pair", nargs=2, metavar=("A", "B"),
                    help="the two models to compare, each CONDITION (one seed) or "
                         "CONDITION:SEED (required when the outcomes hold more than two)"),
        opts.option("--margin", type=float, metavar="D",
                    help="test each difference A − B against D instead of 0 (absolute, in "
                         "accuracy: 0.02 is 2 points)"),
        opts.option("--retention-null", type=float, metavar="R",
                    help="test each retention against R instead of 1"),
        opts.option("--monitor", choices=("all", "noisy", "difference", "retention"),
                    help="which comparisons to report and wait for: all (default), noisy "
                         "(every one at a noisy level, not the clean difference), "
                         "difference or retention"),
        opts.option("--watch", type=positive_float, metavar="SECONDS",
                    help="re-read the growing SOURCE every SECONDS until every comparison "
                         "is decided (exit 0); exit 3 at --timeout, 130 when interrupted"),
        opts.option("--timeout", type=positive_float, metavar="SECONDS",
                    help="with --watch: stop undecided after SECONDS (exit 3)"),
    ])

#: analyze's flags that --anytime does not use (it refuses them rather than ignore them)
_UNUSED = ("study", "reference", "multiplicity", "mcnemar", "n_resamples", "rng_seed", "out")
_ANYTIME_ONLY = ("pair", "margin", "retention_null", "monitor", "watch", "timeout")


def check(args: argparse.Namespace) -> None:
    """Flags that need --anytime, or that --anytime cannot use: one line, before reading."""
    from robuststats.errors import InputError

    if not args.anytime:
        given = [opts.flag(n) for n in _ANYTIME_ONLY if getattr(args, n) is not None]
        if given:
            raise InputError(f"{', '.join(given)}: only with --anytime (anytime-valid "
                             "monitoring of one pair of models).")
        return
    unused = [opts.flag(n) for n in _UNUSED if getattr(args, n, None) not in (None, False)]
    if unused:
        raise InputError(f"{', '.join(unused)}: not used by --anytime, which reports the "
                         "confidence sequences of one pair of models, not the tables.")
    if args.timeout is not None and args.watch is None:
        raise InputError("--timeout: only with --watch SECONDS.")
    if args.margin is not None and not -1 <= args.margin <= 1:
        raise InputError(f"--margin: must lie in [-1, 1] (a difference of accuracies), got "
                         f"{args.margin!r}.")
    if args.retention_null is not None and not 0 <= args.retention_null < math.inf:
        raise InputError(f"--retention-null: must be a finite number >= 0 (a ratio of "
                         f"accuracies), got "
                         f"{args.retention_null!r}.")
    alpha = _alpha(args)
    if not 0 < alpha < 1:
        raise InputError(f"--alpha: must lie in (0, 1), got {alpha!r}.")


def _alpha(args: argparse.Namespace) -> float:
    if args.alpha is not None:
        return float(args.alpha)
    return 1.0 - args.confidence_level if args.confidence_level is not None else 0.05


@contextlib.contextmanager
def complete_source(source: Path, *, say_partial: bool = True) -> Iterator[Path | None]:
    """A text outcomes file read up to its last line break (a file being written may end in
    half a row), as a copy in a temporary directory; None while it holds no complete row.
    Any other source (parquet, a directory) is yielded as it is. An error inside names
    ``source``, not the copy. ``say_partial``: a last line without its line break, left
    out, is said on stderr (a finished file may simply lack the final line break)."""
    from robuststats.errors import InputError

    if source.is_dir() or source.suffix.lower() not in _TEXT:
        yield source if source.exists() else None
        return
    try:
        data = source.read_bytes()
    except FileNotFoundError:
        yield None
        return
    complete = data[:data.rfind(b"\n") + 1]
    if say_partial and data[len(complete):].strip():
        print(f"note: the last line of {str(source)!r} has no line break yet: left out as "
              "a row still being written.", file=sys.stderr)
    header = 0 if source.suffix.lower() in (".jsonl", ".ndjson") else 1
    if sum(1 for line in complete.splitlines() if line.strip()) <= header:
        yield None
        return
    with tempfile.TemporaryDirectory() as tmp:
        part = Path(tmp) / f"{source.stem}{source.suffix.lower()}"
        part.write_bytes(complete)
        try:
            yield part
        except InputError as exc:
            raise InputError(str(exc).replace(str(part), str(source)),
                             details=exc.details) from None


def _snapshot(source: Path, *, say_partial: bool = True) -> Any:
    """The outcomes with each row's position in ``order``, or None while the source has
    no complete row yet."""
    from robuststats.outcomes import read_outcomes

    with complete_source(source, say_partial=say_partial) as part:
        return None if part is None else read_outcomes(part, order_column=_ORDER)


def _table(args: argparse.Namespace, outcomes: Any) -> Any:
    from robuststats.analysis import anytime_table

    return anytime_table(outcomes, pair=tuple(args.pair) if args.pair else None,
                         alpha=_alpha(args), margin=args.margin or 0.0,
                         retention_null=1.0 if args.retention_null is None
                         else args.retention_null, monitor=args.monitor or "all",
                         order=_ORDER)


def _data(args: argparse.Namespace, table: Any) -> dict[str, Any]:
    from robuststats.analysis import ANYTIME_STATEMENT

    # JSON has no infinity (a non-finite number is null): an upper bound that is +inf, a
    # valid "unbounded" answer for retention, is told apart from an empty set here
    table = table.assign(cs_high_unbounded=[bool(v == float("inf")) for v in table["cs_high"]])
    return {"source": str(args.source), "statement": ANYTIME_STATEMENT,
            "alpha": _alpha(args), "decided": bool(len(table)) and bool(table["decided"].all()),
            "anytime": table}


def _ratio(value: Any) -> str:
    return "inf" if value == float("inf") else fmt_pct(value)


def text(table: Any, statement: str) -> str:
    """The anytime table for people: percent, the interval in brackets."""
    records = table.to_dict(orient="records")
    for r in records:
        fmt = fmt_pct if r["comparison"] == "difference" else _ratio
        r["interval"] = f"[{fmt(r['cs_low'])}, {fmt(r['cs_high'])}]"
        r["estimate"] = fmt(r["estimate"]) if r["estimate"] == r["estimate"] else "-"
        r["null"] = fmt(r["null"])
        r["decided"] = r["direction"] or "no"
        r["decided_at"] = "-" if r["decided_at"] is None or r["decided_at"] != r["decided_at"] \
            else int(r["decided_at"])
    columns = ["comparison", "model_a", "model_b", "eval_noise", "noise_seed", "items",
               "estimate", "interval", "null", "decided", "decided_at"]
    level = 1.0 - float(table["alpha"].iloc[0]) if len(table) else None
    head = f"== anytime ({level:.0%}) ==" if level is not None else "== anytime =="
    return f"{head}\n{statement}.\n" + render_table(records, columns)


def run(args: argparse.Namespace) -> int:
    """``analyze --anytime``: once (exit 0), or ``--watch`` until decided."""
    from robuststats.analysis import ANYTIME_STATEMENT
    from robuststats.errors import InputError

    source = Path(args.source)
    if args.watch is None:
        outcomes = _snapshot(source)
        if outcomes is None:
            raise InputError(f"SOURCE {str(source)!r} holds no complete row of outcomes yet "
                             "(use --watch SECONDS to wait for them).")
        table = _table(args, outcomes)
        if table.empty:
            raise InputError(f"--{'monitor' if args.monitor else 'anytime'}: nothing to "
                             "monitor: the models share no such cell, or have no noisy cell "
                             "beside a clean one (eval_noise 0).")
        _warn_order(table)
        emit(args.format, data=_data(args, table), text=lambda: text(table, ANYTIME_STATEMENT))
        return 0
    shown: list[Any] = [None]
    state = {"what": "no comparison yet"}

    def step() -> int | None:
        outcomes = _snapshot(source, say_partial=False)
        table = None if outcomes is None or _absent(args, outcomes) else _table(args, outcomes)
        if table is None or table.empty:
            return None
        key = tuple(table["items"])
        check_growing(shown[0], key, source)
        if key != shown[0]:
            if shown[0] is None:
                _warn_order(table)
            shown[0] = key
            _print_update(args, table)
        if bool(table["decided"].all()):
            print(f"robuststats analyze: decided after {sum(key)} paired items "
                  f"({len(key)} comparison(s)).", file=sys.stderr)
            return 0
        state["what"] = f"{int((~table['decided']).sum())} of {len(table)} comparison(s) " \
                        "undecided"
        return None

    return watch(step, every=args.watch, timeout=args.timeout, command="analyze",
                 source=source, what=lambda: state["what"])


def _warn_order(table: Any) -> None:
    """One stderr line per stream whose outcomes trend with position: the sequences assume
    a random item order (docs/statistics.md §11); the numbers are printed all the same."""
    from robuststats.analysis import order_drift_note

    for name, drift in table.attrs.get("order_drift", []):
        print(f"robuststats analyze: warning: {order_drift_note(name, drift)}",
              file=sys.stderr)


def check_growing(before: tuple[int, ...] | None, now: tuple[int, ...], source: Path) -> None:
    """Refuse a watched file that lost items: a confidence sequence covers one stream that
    only grows, and a rewritten or truncated file starts another (exit 2)."""
    from robuststats.errors import InputError

    if before is None or len(before) != len(now):
        return
    if any(n < b for b, n in zip(before, now)):
        raise InputError(f"SOURCE {str(source)!r} lost items while watched ({sum(now)} paired "
                         f"items, {sum(before)} before): a confidence sequence covers one "
                         "stream that only grows; a rewritten file starts a new stream (run "
                         "again to watch it from its first item).")


def watch(step: Callable[[], int | None], *, every: float, timeout: float | None,
          command: str, source: Path, what: Callable[[], str]) -> int:
    """Call ``step`` every ``every`` seconds until it returns an exit status; at ``timeout``
    seconds :data:`UNDECIDED` (``what()`` says what is left), on Ctrl-C :data:`INTERRUPTED`,
    each with one line on stderr."""
    start = time.monotonic()
    try:
        while True:
            code = step()
            if code is not None:
                return code
            if timeout is not None and time.monotonic() - start >= timeout:
                print(f"robuststats {command}: --timeout {timeout:g} s passed: {what()}; "
                      f"keep evaluating (exit {UNDECIDED}).", file=sys.stderr)
                return UNDECIDED
            time.sleep(every)
    except KeyboardInterrupt:
        print(f"robuststats {command}: interrupted while watching {str(source)!r}; the last "
              f"result printed stands (exit {INTERRUPTED}).", file=sys.stderr)
        return INTERRUPTED


def _absent(args: argparse.Namespace, outcomes: Any) -> bool:
    """While watching, a --pair model with no row yet is waited for."""
    from robuststats.analysis import find_model, models_of

    models = models_of(outcomes)
    return bool(args.pair) and any(find_model(t, models, "--pair") is None for t in args.pair)


def _print_update(args: argparse.Namespace, table: Any) -> None:
    from robuststats.analysis import ANYTIME_STATEMENT

    if args.format == "json":  # one JSON object a line, one line an update
        print(json.dumps(to_jsonable(_data(args, table))), flush=True)
    else:
        print(text(table, ANYTIME_STATEMENT) + "\n", flush=True)
