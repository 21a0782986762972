"""``run_gate``: read both sides, hold the protocol fixed, evaluate if needed, decide.

The gate passes only when the candidate is non-inferior (or superior by, or equivalent
within, the margin: :mod:`._questions`) at every gated noise level. Each level is a test
at ``alpha`` (:func:`._contrast.gate_test`; equivalence: two one-sided tests, each at
``alpha``); requiring all of them to pass is an intersection–union test, whose level is ``alpha`` without any
multiplicity adjustment (Berger 1982, Technometrics 24:295–300): the gate can only pass
wrongly if some level passes wrongly, and each does so with probability at most ``alpha``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robuststats._validation import check_choice, check_int, check_number
from robuststats.errors import InputError
from robuststats.gate._contrast import GateTest, _check, gate_test
from robuststats.gate._protocol import Protocol, protocol_differences, unrecorded
from robuststats.gate._sources import Baseline, Checkpoint, Side, load_baseline, load_candidate
from robuststats.glossary import TABLE_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["GATE_COLUMNS", "GateResult", "run_gate"]

#: columns of the gate's table, in order (one row per gated noise level)
GATE_COLUMNS = TABLE_COLUMNS["gate"]
SEED_PAIRINGS = ("auto", "paired", "independent")
#: an absolute margin above 1 − NEAR_ZERO of the baseline's metric puts the null near 0
NEAR_ZERO = 0.25


@dataclass(frozen=True)
class GateResult:
    """The gate's decision and everything it rests on.

    ``passed`` is True only when every level's test passed (``tests``). ``outcomes`` holds
    both sides' rows under the conditions ``candidate`` and ``baseline``.
    """

    passed: bool
    tests: tuple[GateTest, ...]
    metric: str
    question: str
    margin_type: str
    max_degradation: float
    alpha: float
    pairing: str
    baseline: str
    candidate: str
    baseline_kind: str
    candidate_kind: str
    protocol: Protocol
    seeds_candidate: tuple[Any, ...]
    seeds_baseline: tuple[Any, ...]
    n_items: int
    notes: tuple[str, ...]
    outcomes: pd.DataFrame = field(repr=False)
    spec: dict[str, Any] | None = field(default=None, repr=False)
    spec_condition: str | None = None
    evaluation: dict[str, Any] | None = field(default=None, repr=False)
    injections: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def decision(self) -> str:
        return "PASS" if self.passed else "FAIL"

    @property
    def exit_code(self) -> int:
        """0 pass, 1 fail (2, bad input, never gets this far)."""
        return 0 if self.passed else 1

    def to_frame(self) -> pd.DataFrame:
        """One row per gated noise level, in :data:`GATE_COLUMNS` order."""
        import pandas as pd

        return pd.DataFrame([t.to_dict() for t in self.tests], columns=list(GATE_COLUMNS))

    def to_dict(self) -> dict[str, Any]:
        """Plain record of the decision (the JSON output and the version's ``gate.json``)."""
        return {"decision": self.decision, "passed": self.passed, "metric": self.metric,
                "question": self.question, "margin_type": self.margin_type,
                "max_degradation": self.max_degradation,
                "alpha": self.alpha, "confidence_level": 1.0 - self.alpha,
                "pairing": self.pairing, "baseline": self.baseline,
                "baseline_kind": self.baseline_kind, "candidate": self.candidate,
                "candidate_kind": self.candidate_kind, "protocol": self.protocol.to_dict(),
                "seeds_candidate": list(self.seeds_candidate),
                "seeds_baseline": list(self.seeds_baseline), "n_items": self.n_items,
                "levels": [t.to_dict() for t in self.tests], "notes": list(self.notes),
                "evaluation": self.evaluation}


def _levels(base: Baseline, metric: str, eval_noise: Sequence[float] | None) -> list[float]:
    have = base.protocol.noise_levels
    if metric == "retention" and 0.0 not in have:
        raise InputError(f"`--metric` retention needs clean outcomes, and the baseline "
                         f"{base.label} has no eval_noise 0 (levels: "
                         f"{', '.join(f'{v:g}' for v in have)}).")
    if eval_noise is None:
        levels = [lv for lv in have if lv > 0]
        if not levels:
            raise InputError(f"the baseline {base.label} has no noisy level (only eval_noise 0, "
                             "as harness logs of clean evaluations): to gate the clean "
                             "accuracy, pass --metric accuracy --eval-noise 0.")
        return levels
    out = []
    for value in eval_noise:
        v = check_number(value, "eval_noise", low=0.0)
        match = [h for h in have if math.isclose(h, v, rel_tol=1e-9, abs_tol=1e-12)]
        if not match:
            raise InputError(f"`--eval-noise` {v:g} is not a level of the baseline "
                             f"{base.label} (levels: {', '.join(f'{h:g}' for h in have)}).")
        if match[0] == 0.0 and metric == "retention":
            raise InputError("`--eval-noise` 0: retention at the clean level is 1 by "
                             "definition; gate noisy levels, or use --metric accuracy.")
        out.append(match[0])
    return sorted(set(out))


def _item_check(base: pd.DataFrame, cand: pd.DataFrame, where: str) -> None:
    a, b = set(map(str, base["item_id"])), set(map(str, cand["item_id"]))
    if a != b:
        only_a, only_b = sorted(a - b), sorted(b - a)
        raise InputError(
            f"protocol mismatch: the candidate ({where}) was evaluated on other items than "
            f"the baseline: {len(only_a)} only in the baseline (e.g. "
            f"{', '.join(map(repr, only_a[:3])) or '-'}), {len(only_b)} only in the "
            f"candidate (e.g. {', '.join(map(repr, only_b[:3])) or '-'}).")


def _noise_seeds(rows: pd.DataFrame, levels: list[float]) -> list[int]:
    """The noise seeds of ``rows`` at the gated ``levels`` (at a clean level, the noise seed
    the outcomes carry, 0 when a file has no such column)."""
    return sorted({int(v) for v in rows.loc[rows["eval_noise"].isin(levels), "noise_seed"]})


def _cell_check(rows: pd.DataFrame, levels: list[float], who: str) -> None:
    """Every training seed of a side has the same noise seeds at each gated level: a seed
    without one of them is a missing cell, and a gate never decides on part of its protocol
    (as a failed cell of an evaluated checkpoint)."""
    for lv in levels:
        part = rows[rows["eval_noise"] == lv]
        have = {seed: set(g["noise_seed"]) for seed, g in part.groupby("seed")}
        every = set().union(*have.values()) if have else set()
        for seed, drawn in have.items():
            if drawn != every:
                lacking = ", ".join(str(v) for v in sorted(every - drawn))
                raise InputError(f"{who}: seed {seed} has no outcomes for noise_seed {lacking} "
                                 f"at eval_noise {lv:g}, which its other seeds have (a missing "
                                 "cell); the gate does not decide on part of a protocol.")


def _seed_values(seeds: Any) -> list[int] | None:
    """The candidate's seeds, within a study's bounds (a count or a list of at most
    ``MAX_SEEDS``, each a seed value a study accepts)."""
    from robuststats.config.bounds import MAX_SEEDS, check_count
    from robuststats.config.fields import MAX_SEED_VALUE

    if seeds is None:
        return None
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        return list(range(check_count(seeds, "seeds", MAX_SEEDS)))
    seeds = list(seeds)
    if len(seeds) > MAX_SEEDS:
        raise InputError(f"`seeds` must list at most {MAX_SEEDS:,} seeds, got "
                         f"{len(seeds):,}.")
    values = [check_int(s, "seeds", low=0, high=MAX_SEED_VALUE) for s in seeds]
    if not values or len(set(values)) != len(values):
        raise InputError(f"`seeds` must be a count or a list of distinct seeds, got {seeds!r}.")
    return values


def _matrices(side: Side, levels: list[float], metric: str
              ) -> tuple[Any, dict[float, Any], tuple[str, ...]]:
    """``(row seeds, {level: (n_seeds, n_items)})`` of one side, items sorted."""
    from robuststats.outcomes import align_series

    wanted = ([0.0] if metric == "retention" else []) + levels
    aligned = align_series(side.outcomes, [(side.condition, lv) for lv in wanted],
                           by="seed", holes="raise")
    return aligned.rows, {lv: aligned.values[(side.condition, lv)] for lv in wanted}, \
        aligned.item_ids


def run_gate(candidate: str, baseline: str, *, max_degradation: float,
             metric: str = "retention", margin_type: str = "relative", alpha: float = 0.05,
             question: str = "non-inferiority",
             eval_noise: Sequence[float] | None = None, baseline_condition: str | None = None,
             candidate_condition: str | None = None, seeds: Any = None,
             pairing: str = "auto", root: str | Path = "results",
             runs: str | Path | None = None, workers: int = 1,
             progress: bool | Callable[[int, int], Any] = False) -> GateResult:
    """Decide whether ``candidate`` is non-inferior to ``baseline`` under its protocol.

    Parameters
    ----------
    candidate : str
        A checkpoint directory (or a ``{seed}`` template/glob), a result version, a run
        directory or an outcomes file.
    baseline : str
        A result version (directory, or ``STUDY``/``STUDY/vN`` under ``root``) of a study or
        of an earlier gate.
    max_degradation : float
        The margin d (see :mod:`robuststats.gate._contrast` for its two readings).
    metric, margin_type, alpha
        As :func:`robuststats.gate.gate_test`.
    question : {"non-inferiority", "superiority", "equivalence"}
        Worse by less than d (default), better by more than d, or within d
        (:mod:`robuststats.gate._questions`); the seeds and items enter every question
        the same way.
    eval_noise : sequence of float, optional
        Noise levels to gate (default: every noisy level of the baseline).
    baseline_condition, candidate_condition : str, optional
        The condition to read when a version or file holds several.
    seeds : int or list of int, optional
        The candidate's training seeds: for a checkpoint template, the seeds to evaluate
        (default the baseline's); for outcomes, the subset to use.
    pairing : {"auto", "paired", "independent"}
        ``auto`` pairs seeds row by row when both sides have the same seed labels (≥ 2),
        else treats them as independent runs.
    root, runs, workers, progress
        Result store root for ``STUDY/vN`` references; where the candidate's run directory
        goes (default a temporary one, removed afterwards); worker processes; progress.

    Returns
    -------
    GateResult
        Every input is checked before any model is loaded or evaluated; an inconsistent
        one is an :class:`~robuststats.errors.InputError` naming it.
    """
    metric, margin_type, m, alpha, _ = _check(metric, margin_type, max_degradation, alpha,
                                              "independent", question)
    pairing = check_choice(pairing, "pairing", SEED_PAIRINGS)
    seed_list = _seed_values(seeds)
    base = load_baseline(baseline, condition=baseline_condition, root=root)
    levels = _levels(base, metric, eval_noise)
    wanted = sorted(({0.0} if metric == "retention" else set()) | set(levels))
    source = load_candidate(candidate, condition=candidate_condition, root=root)
    notes: list[str] = []
    base_rows = base.outcomes[base.outcomes["eval_noise"].isin(wanted)]
    evaluation = injections = None
    if isinstance(source, Checkpoint):
        from robuststats.gate._checkpoint import (
            candidate_spec,
            evaluate_checkpoint,
            same_model_note,
        )

        templated = "{seed" in source.pattern
        if seed_list is None:
            seed_list = [int(s) for s in base.seeds] if templated else [0]
        elif not templated and len(seed_list) > 1:
            raise InputError(f"`--seeds`: CANDIDATE {source.pattern!r} is one checkpoint "
                             "directory, one model; name several with a template such as "
                             "ckpts/seed{seed}.")
        if base.spec is None:
            raise InputError(f"`--baseline` {base.label} records no study spec to evaluate "
                             "the checkpoint under.")
        spec_condition = _spec_condition(base)
        spec = candidate_spec(base.spec, spec_condition, source.pattern, seed_list, levels)
        outcomes, injections, evaluation = evaluate_checkpoint(
            spec, runs=runs, workers=workers, progress=progress)
        if (note := same_model_note(evaluation, base.models, base.label)) is not None:
            notes.append(note)
        outcomes = outcomes.assign(condition="candidate")
        cand = Side("candidate", "checkpoint", source.pattern, "candidate", outcomes,
                    base.protocol, None)
    else:
        if source.protocol is not None:
            diffs = protocol_differences(base.protocol, source.protocol, wanted)
            if diffs:
                raise InputError(f"protocol mismatch between the baseline ({base.describe()}) "
                                 f"and the candidate ({source.describe()}): "
                                 + "; ".join(diffs) + ".")
            trusted = unrecorded(base.protocol, source.protocol)
            if trusted:
                notes.append(f"the {' and the '.join(trusted)} of the protocol "
                             f"{'is' if len(trusted) == 1 else 'are'} not recorded on both "
                             "sides (harness output records no error model): the gate trusts "
                             "they are the same; what both record was compared.")
        else:
            present = sorted({float(v) for v in source.outcomes["eval_noise"]})
            lacking = [lv for lv in wanted if not any(math.isclose(lv, p, abs_tol=1e-12)
                                                      for p in present)]
            if lacking:
                raise InputError(f"protocol mismatch: the candidate ({source.describe()}) has no "
                                 f"outcomes at eval_noise {', '.join(f'{v:g}' for v in lacking)} "
                                 f"(its levels: {', '.join(f'{v:g}' for v in present)}).")
            notes.append(f"the candidate {source.label} is an outcomes file, which records no "
                         f"protocol: the gate trusts that it was evaluated like the baseline "
                         f"({base.protocol.task}, {base.protocol.error_model}); its items "
                         "and noise levels were checked.")
        rows = source.outcomes[source.outcomes["eval_noise"].isin(wanted)]
        if seed_list is not None:
            absent = sorted(set(seed_list) - set(rows["seed"]))
            if absent:
                raise InputError(f"`--seeds` {absent} not among the candidate's seeds "
                                 f"{sorted(set(rows['seed']))}.")
            rows = rows[rows["seed"].isin(seed_list)]
        cand = replace(source, outcomes=rows.reset_index(drop=True))
    cand_rows = cand.outcomes[cand.outcomes["eval_noise"].isin(wanted)]
    drawn = _noise_seeds(base_rows, levels), _noise_seeds(cand_rows, levels)
    if drawn[0] != drawn[1]:
        notes.append(f"noise seeds differ (baseline {drawn[0]}, candidate {drawn[1]}): each "
                     "side's items are averaged over its own.")
    _item_check(base_rows, cand_rows, cand.label)
    _cell_check(base_rows, levels, f"the baseline ({base.describe()})")
    _cell_check(cand_rows, levels, f"the candidate ({cand.describe()})")
    b_seeds, b_mats, b_items = _matrices(replace(base, outcomes=base_rows), levels, metric)
    c_seeds, c_mats, c_items = _matrices(replace(cand, outcomes=cand_rows), levels, metric)
    if b_items != c_items:  # both sorted, the same set: a different order is impossible
        raise InputError("internal: candidate and baseline items did not align.")
    resolved = _pairing(pairing, list(c_seeds), list(b_seeds))
    tests = []
    for lv in levels:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t = gate_test(c_mats.get(0.0), c_mats[lv], b_mats.get(0.0), b_mats[lv],
                          max_degradation=m, metric=metric, margin_type=margin_type,
                          alpha=alpha, pairing=resolved, eval_noise=lv, question=question)
        notes += [f"eval_noise {lv:g}: {w.message}" for w in caught]
        tests.append(t)
    notes += _design_notes(tests, list(c_seeds), list(b_seeds))
    import pandas as pd

    both = pd.concat([cand_rows.assign(condition="candidate"),
                      base_rows.assign(condition="baseline")], ignore_index=True)
    return GateResult(
        passed=all(t.passed for t in tests), tests=tuple(tests), metric=metric,
        question=question, margin_type=margin_type, max_degradation=m, alpha=alpha,
        pairing=resolved,
        baseline=base.describe(), candidate=cand.describe(), baseline_kind=base.kind,
        candidate_kind=cand.kind, protocol=base.protocol,
        seeds_candidate=tuple(c_seeds), seeds_baseline=tuple(b_seeds),
        n_items=len(b_items), notes=tuple(notes), spec=base.spec,
        spec_condition=_spec_condition(base), evaluation=evaluation, outcomes=both,
        injections=injections)


def _spec_condition(base: Side) -> str:
    """The baseline's condition in its study spec (a gate result records it)."""
    return base.spec_condition or base.condition or "candidate"


def _pairing(pairing: str, c_seeds: list[Any], b_seeds: list[Any]) -> str:
    same = c_seeds == b_seeds
    if pairing == "paired" and not same:
        raise InputError(f"`--seed-pairing` paired needs the same training seeds on both "
                         f"sides, got candidate {c_seeds} and baseline {b_seeds}.")
    if pairing == "auto":
        return "paired" if same and len(c_seeds) > 1 else "independent"
    return pairing


def _design_notes(tests: list[GateTest], c_seeds: list[Any], b_seeds: list[Any]
                  ) -> list[str]:
    notes = []
    design = tests[0].design if tests else ""
    if design == "one model each":
        notes.append(
            "one trained model on each side: seed-to-seed variation of a training recipe "
            "cannot be estimated, so the interval compares these two models on these items "
            "only; another run of the same recipe may differ by more. Give the baseline "
            "several training seeds.")
    elif design == "candidate seed borrowed":
        notes.append(
            f"the candidate is {len(c_seeds)} trained model; its seed-to-seed variation is "
            f"taken to be the baseline's ({len(b_seeds)} seeds): the interval allows for "
            "another run of the same recipe landing anywhere in that spread. A recipe that "
            "varies more between seeds than the baseline's passes too often (a 1.5x seed SD "
            "gave 7 % false passes at alpha 0.05, docs/gate.md); gate several candidate "
            "seeds to estimate it.")
    elif design == "baseline seed borrowed":
        notes.append(
            f"the baseline is one trained model; its seed-to-seed variation is taken to be "
            f"the candidate's ({len(c_seeds)} seeds).")
    elif design == "independent seeds":
        notes.append("candidate and baseline seeds are different runs (treated as independent; "
                     "Welch–Satterthwaite over the two seed variances).")
    elif design == "paired seeds":
        notes.append(f"seeds paired by label ({', '.join(map(str, c_seeds))}): conditions with "
                     "the same seed share initialisation and data order.")
    for t in tests:
        null = t.baseline - t.max_degradation
        if (t.question == "non-inferiority" and t.margin_type == "absolute"
                and math.isfinite(t.baseline) and t.baseline > 0
                and null < NEAR_ZERO * t.baseline):
            notes.append(
                f"eval_noise {t.eval_noise:g}: the absolute margin {t.max_degradation:g} leaves "
                f"a candidate on the margin with {t.metric} {max(null, 0.0):.3g}, near 0, where "
                "the t bound passes too often (docs/gate.md); a relative margin is tested on "
                "the log scale, which holds its level there.")
        if t.underpowered and math.isfinite(t.power_at_margin):
            plan = " (plan with `robuststats power --gate`)" \
                if t.question == "non-inferiority" else ""
            notes.append(
                f"eval_noise {t.eval_noise:g}: underpowered: a candidate exactly as good as the "
                f"baseline passes with probability {t.power_at_margin:.2f}; the smallest margin "
                f"with 80 % power at this size is {t.detectable_degradation:.3g}{plan}.")
    return notes
