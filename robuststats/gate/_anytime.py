"""``run_anytime_gate``: the gate's question decided on a stream of items by a confidence
sequence, for one candidate checkpoint against one baseline checkpoint.

The candidate's outcomes are read in the order of their rows (a file still being written:
the items evaluated so far); the baseline's are complete. At every gated noise level an
item enters once the candidate holds it at every noise seed the baseline was evaluated
with; its value on each side is the mean over those noise seeds. The contrast of noisy
accuracies gets the betting confidence sequence of :mod:`robuststats.stats.sequential`:
the difference ``θ_c − θ_b`` for an absolute margin, the ratio ``θ_c/θ_b`` (the ratio
sequence, exact) for a relative one. With ``L_t``, ``U_t`` its bounds after ``t`` items
and the question's null region (:func:`._questions.nulls`, on the ratio scale for a
relative margin: ``1 − d``, ``1 + d``, ``(1 − d, 1/(1 − d))``):

* non-inferiority (``d``): PASS when ``L_t > −d``, FAIL when ``U_t ≤ −d``;
* superiority (``d``): PASS when ``L_t > d``, FAIL when ``U_t ≤ d``;
* equivalence (``d``): PASS when ``−d < L_t`` and ``U_t < d``, FAIL when ``U_t ≤ −d`` or
  ``L_t ≥ d``;

otherwise UNDECIDED: keep evaluating. A decision is taken at the first item count that
reaches it and stands: the sets are nested (a running intersection), so a later PASS and
FAIL at once is possible only when the set is empty, which no value of the contrast
explains. An empty set (every contrast rejected: items not in random order, or an event of
probability at most ``alpha``) is reported as a broken assumption, ``empty_at`` the item
count where it emptied: after a decision the decision stands with a note (a ``--watch``
run already acted on it); before any decision the level is BROKEN, the gate's exit
:data:`BROKEN_EXIT`, never UNDECIDED. The sequence covers the true contrast at every item
count at once with probability ``1 − alpha``, so a PASS (or a FAIL) reached at any item
count, however often the file is re-read, is wrong with probability at most ``alpha``
(conservative for the one-sided questions, which use one side of a two-sided sequence),
when the items come in a random order (a dataset stored by difficulty breaks it).
The gate passes when every level passes, fails when some level fails, else is undecided.
A statement about these two trained checkpoints on this item stream, not about their
training recipes (the gate without ``--anytime`` answers that with several seeds).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robuststats.errors import InputError
from robuststats.gate._contrast import _check
from robuststats.gate._gate import _levels
from robuststats.gate._questions import nulls
from robuststats.gate._sources import Checkpoint, load_baseline, load_candidate

__all__ = ["ANYTIME_GATE_COLUMNS", "BROKEN_EXIT", "UNDECIDED_EXIT", "AnytimeGate", "AnytimeLevel",
           "anytime_gate_text", "anytime_verdicts", "run_anytime_gate"]

#: the exit status of an undecided gate (0 pass and 1 fail as the gate's)
UNDECIDED_EXIT = 3
#: the exit status of a gate whose sequence emptied before it decided (its assumption broke)
BROKEN_EXIT = 4
ANYTIME_GATE_COLUMNS = ("eval_noise", "noise_seeds", "items", "candidate", "baseline",
                        "contrast", "cs_low", "cs_high", "null_low", "null_high", "decision",
                        "decided_at", "empty_at")
_ORDER = "order"
STATEMENT = ("anytime-valid: about these two trained checkpoints on this item stream, not "
             "about their training recipes, and valid when the items were evaluated in a "
             "random order")


@dataclass(frozen=True)
class AnytimeLevel:
    """One gated level: items paired so far, the sequence's last bounds (the last non-empty
    ones when it emptied), the decision (``PASS``, ``FAIL``, ``UNDECIDED``, ``BROKEN``), the
    item count at which it was first reached and the one at which the set emptied (None:
    never)."""

    eval_noise: float
    noise_seeds: tuple[int, ...]
    items: int
    candidate: float
    baseline: float
    contrast: float
    cs_low: float
    cs_high: float
    null_low: float
    null_high: float
    decision: str
    decided_at: int | None
    empty_at: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v)
                for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class AnytimeGate:
    """The anytime gate's decision over its levels."""

    levels: tuple[AnytimeLevel, ...]
    question: str
    margin_type: str
    max_degradation: float
    alpha: float
    candidate: str
    baseline: str
    seed_candidate: int
    seed_baseline: int
    notes: tuple[str, ...]

    @property
    def decision(self) -> str:
        found = {lv.decision for lv in self.levels}
        if "FAIL" in found:
            return "FAIL"
        if "BROKEN" in found:
            return "BROKEN"
        return "PASS" if found == {"PASS"} else "UNDECIDED"

    @property
    def exit_code(self) -> int:
        """0 pass, 1 fail, :data:`UNDECIDED_EXIT` undecided, :data:`BROKEN_EXIT` a sequence
        emptied before deciding (2, bad input, never gets here)."""
        return {"PASS": 0, "FAIL": 1, "BROKEN": BROKEN_EXIT}.get(self.decision,
                                                                 UNDECIDED_EXIT)

    def to_dict(self) -> dict[str, Any]:
        return {"decision": self.decision, "anytime": True, "statement": STATEMENT,
                "question": self.question, "metric": "accuracy",
                "margin_type": self.margin_type, "max_degradation": self.max_degradation,
                "alpha": self.alpha, "candidate": self.candidate, "baseline": self.baseline,
                "seed_candidate": self.seed_candidate, "seed_baseline": self.seed_baseline,
                "levels": [lv.to_dict() for lv in self.levels], "notes": list(self.notes),
                "exit_code": self.exit_code}


def anytime_verdicts(low: np.ndarray, high: np.ndarray, null_low: float,
                     null_high: float | None) -> np.ndarray:
    """The decision after each item from the running bounds (module docstring)."""
    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    if null_high is None:
        passed, failed = low > null_low, high <= null_low
    else:
        passed = (low > null_low) & (high < null_high)
        failed = (high <= null_low) | (low >= null_high)
    return np.where(passed, "PASS", np.where(failed, "FAIL", "UNDECIDED"))


def standing_decision(cs: Any, null_low: float, null_high: float | None
                      ) -> tuple[str, int | None, int | None, int]:
    """``(decision, decided_at, empty_at, last)`` of a confidence sequence against the
    question's null region: the first decision reached stands (module docstring); an empty
    set before it gives BROKEN. ``last``: the index of the last non-empty bounds."""
    empty = np.flatnonzero(np.isnan(cs.low) | np.isnan(cs.high))
    end = int(empty[0]) if len(empty) else len(cs.low)
    verdicts = anytime_verdicts(cs.low[:end], cs.high[:end], null_low, null_high)
    decided = np.flatnonzero(verdicts != "UNDECIDED")
    empty_at = int(cs.n[end]) if len(empty) else None
    last = max(end - 1, 0)
    if len(decided):
        return str(verdicts[decided[0]]), int(cs.n[decided[0]]), empty_at, last
    return ("BROKEN" if empty_at is not None else "UNDECIDED"), None, empty_at, last


def empty_note(where: str, level: AnytimeLevel) -> str:
    """The note of a level whose sequence emptied: the broken assumption, what stands."""
    stands = (f"the {level.decision} reached at item {level.decided_at} stands"
              if level.decided_at is not None else "nothing was decided before it")
    return (f"{where}: the confidence sequence became empty at item {level.empty_at}: no "
            f"value of the contrast fits this stream, so its assumption is broken (items "
            f"not in a random order, or an event of probability at most alpha); {stands}. "
            "Check the item order before relying on this gate.")


def _one_seed(rows: Any, chosen: int | None, flag: str, who: str) -> int:
    seeds = sorted({int(s) for s in rows["seed"]})
    if chosen is not None:
        if chosen not in seeds:
            raise InputError(f"`{flag}` {chosen} is not among the {who}'s seeds {seeds}.")
        return chosen
    if len(seeds) != 1:
        raise InputError(f"`{flag}`: --anytime compares one trained model on each side and "
                         f"the {who} has seeds {seeds}: name one.")
    return seeds[0]


def _per_item(rows: Any, noise_seeds: tuple[int, ...]) -> Any:
    """Mean correctness and last position of each item that holds every noise seed."""
    part = rows[rows["noise_seed"].isin(noise_seeds)]
    grouped = part.groupby("item_id").agg(correct=("correct", "mean"), order=(_ORDER, "max"),
                                          draws=("noise_seed", "nunique"))
    return grouped[grouped["draws"] == len(noise_seeds)].reset_index()


def run_anytime_gate(candidate: str, baseline: str, *, max_degradation: float,
                     question: str = "non-inferiority", metric: str = "accuracy",
                     margin_type: str = "relative", alpha: float = 0.05,
                     eval_noise: Sequence[float] | None = None,
                     baseline_condition: str | None = None,
                     candidate_condition: str | None = None,
                     seed: int | None = None, baseline_seed: int | None = None,
                     root: str | Path = "results", label: str | None = None) -> AnytimeGate:
    """Decide the gate's question for one candidate model against one baseline model on
    the items the candidate's outcomes hold so far (module docstring).

    ``seed``/``baseline_seed``: the training seed of each side (needed when a side has
    several; the baseline's defaults to the candidate's when it has that seed).
    ``label``: how to name the candidate (a snapshot of a growing file is read in its place).
    """
    from robuststats.analysis import order_drift, order_drift_note, paired_stream
    from robuststats.stats.sequential import (
        betting_confidence_sequence,
        retention_confidence_sequence,
    )

    metric, margin_type, d, alpha, _ = _check(metric, margin_type, max_degradation, alpha,
                                              "independent", question)
    if metric != "accuracy":
        raise InputError("`metric`: --anytime decides the noisy accuracy of the two models on "
                         "a stream of items (their difference, or ratio for a relative "
                         "margin); retention, a ratio of ratios, has no sequence here: "
                         "use --metric accuracy.")
    base = load_baseline(baseline, condition=baseline_condition, root=root)
    levels = _levels(base, metric, eval_noise)
    source = load_candidate(candidate, condition=candidate_condition, root=root,
                            order_column=_ORDER)
    if isinstance(source, Checkpoint) or _ORDER not in source.outcomes.columns:
        raise InputError(f"CANDIDATE {candidate!r}: --anytime reads outcomes in the order "
                         "they were written (an outcomes file or a run directory); a "
                         "checkpoint or harness output is gated without --anytime.")
    seed_c = _one_seed(source.outcomes, seed, "candidate_seed", "candidate")
    if baseline_seed is None and seed_c in set(base.outcomes["seed"]):
        baseline_seed = seed_c
    seed_b = _one_seed(base.outcomes, baseline_seed, "baseline_seed", "baseline")
    cand = source.outcomes[source.outcomes["seed"] == seed_c]
    ref = base.outcomes[base.outcomes["seed"] == seed_b].assign(**{_ORDER: 0})
    relative = margin_type == "relative"
    low_null, high_null = nulls(question, d, relative)
    if relative:
        low_null, high_null = math.exp(low_null), \
            None if high_null is None else math.exp(high_null)
    out, notes = [], [f"{STATEMENT}: candidate seed {seed_c} against baseline seed {seed_b}."]
    for lv in levels:
        draws = tuple(sorted({int(k) for k in ref.loc[ref["eval_noise"] == lv, "noise_seed"]}))
        at_level = cand[cand["eval_noise"] == lv]
        lacking = sorted(set(draws) - {int(k) for k in at_level["noise_seed"]})
        if len(at_level) and lacking:
            notes.append(f"eval_noise {lv:g}: the candidate has no outcomes yet for noise seed "
                         f"{', '.join(map(str, lacking))} of the baseline's "
                         f"{', '.join(map(str, draws))}; an item counts once it has all.")
        c_items = _per_item(at_level, draws)
        b_items = _per_item(ref[ref["eval_noise"] == lv], draws)
        stray = sorted(set(c_items["item_id"]) - set(b_items["item_id"]))
        if stray:
            raise InputError(f"protocol mismatch: the candidate holds items the baseline "
                             f"was not evaluated on at eval_noise {lv:g} ({len(stray)}, e.g. "
                             f"{', '.join(map(repr, stray[:3]))}).")
        _, x, y = paired_stream(c_items, b_items, _ORDER)
        if not len(x):
            out.append(AnytimeLevel(lv, draws, 0, math.nan, math.nan, math.nan, -math.inf,
                                    math.inf, low_null, math.nan if high_null is None
                                    else high_null, "UNDECIDED", None))
            continue
        drift = order_drift(x, y)
        if drift is not None:
            notes.append(order_drift_note(f"eval_noise {lv:g}", drift))
        cs = (retention_confidence_sequence if relative else betting_confidence_sequence)(
            x, y, alpha=alpha)
        decision, decided_at, empty_at, last = standing_decision(cs, low_null, high_null)
        out.append(AnytimeLevel(
            lv, draws, len(x), float(x.mean()), float(y.mean()), float(cs.estimate[-1]),
            float(cs.low[last]), float(cs.high[last]), low_null,
            math.nan if high_null is None else high_null, decision, decided_at, empty_at))
        if empty_at is not None:
            notes.append(empty_note(f"eval_noise {lv:g}", out[-1]))
    total, counts = len(set(base.outcomes["item_id"])), sorted({lv.items for lv in out})
    if total > counts[-1]:
        paired = f"{counts[0]} to {counts[-1]}" if len(counts) > 1 else f"{counts[0]}"
        notes.append(f"{paired} of the baseline's {total} items paired so far.")
    return AnytimeGate(tuple(out), question, margin_type, d, alpha,
                       label or source.describe(), base.describe(), seed_c, seed_b,
                       tuple(notes))


def _value(v: float, ratio: bool, signed: bool = False) -> str:
    if v is None or not math.isfinite(v):
        return "inf" if v == math.inf else "-inf" if v == -math.inf else "-"
    if ratio:
        return f"{v:.3f}"
    return f"{100 * v:+.1f}%" if signed else f"{100 * v:.1f}%"


def anytime_gate_text(result: AnytimeGate, *, markdown: bool = False) -> str:
    """The decision, one row per level and the notes (a Markdown table with ``markdown``)."""
    from robuststats._format import fmt_noise, render_table

    ratio = result.margin_type == "relative"
    level = f"{100 * (1 - result.alpha):g}%"
    rows = []
    for lv in result.levels:
        null = _value(lv.null_low, ratio, not ratio)
        if math.isfinite(lv.null_high):
            null = f"({null}, {_value(lv.null_high, ratio, not ratio)})"
        rows.append({"eval_noise": fmt_noise(lv.eval_noise), "items": str(lv.items),
                     "candidate": _value(lv.candidate, False),
                     "baseline": _value(lv.baseline, False),
                     "contrast": _value(lv.contrast, ratio, not ratio),
                     f"{level} sequence": f"[{_value(lv.cs_low, ratio, not ratio)}, "
                                          f"{_value(lv.cs_high, ratio, not ratio)}]",
                     "null": null, "decision": lv.decision,
                     "decided at": "-" if lv.decided_at is None else str(lv.decided_at)})
    columns = list(rows[0]) if rows else []
    contrast = "candidate/baseline noisy accuracy" if ratio else \
        "candidate − baseline noisy accuracy"
    verdict = {"PASS": "PASS", "FAIL": "FAIL",
               "BROKEN": "BROKEN: the confidence sequence emptied before deciding"}.get(
        result.decision, "UNDECIDED: keep evaluating")
    head = (f"gate (anytime, {result.question}, {contrast}): {verdict}\n"
            f"candidate: {result.candidate} (seed {result.seed_candidate})\n"
            f"baseline:  {result.baseline} (seed {result.seed_baseline})")
    if markdown:
        table = "\n".join(["| " + " | ".join(columns) + " |",
                           "|" + "---|" * len(columns),
                           *("| " + " | ".join(r[c] for c in columns) + " |" for r in rows)])
        notes = "\n".join(f"- {n}" for n in result.notes)
        title, *sides = head.splitlines()
        return f"**{title}**\n\n" + "  \n".join(sides) + f"\n\n{table}\n\n{notes}"
    table = render_table(rows, columns)
    return head + "\n\n" + table + "\n\n" + "\n".join(f"note: {n}" for n in result.notes)
