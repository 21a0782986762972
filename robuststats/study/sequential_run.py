"""Running a sequential study: train the seeds of each look, analyse, stop or go on.

Look ``k`` runs the cells of the first ``sequential.looks[k]`` seeds of ``seeds`` (every
finished cell, and every trained model, is reused from the run directory), analyses the
driving hypotheses with :func:`robuststats.stats.sequential.analyse_look` and stops when
each is decided or futile. The decisions are a deterministic function of the stored
outcomes, so a killed run, rerun, passes the finished looks again without training and
goes on at the look it was in. With more than one worker, later seeds may train while a
look waits for its own (``sequential.run_ahead``, :mod:`robuststats.study.sequential_ahead`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from robuststats.errors import InputError
from robuststats.runs import ExecutionReport
from robuststats.runs.plan import Cell
from robuststats.runs.spec import StudySpec

__all__ = ["SequentialRun", "options_of", "replay_looks", "run_looks", "sequential_tables",
           "with_repeated_intervals"]


@dataclass(frozen=True)
class SequentialRun:
    """The looks a sequential study ran: the cells of the last, and one row per hypothesis
    and look (table ``sequential_looks``)."""

    cells: list[Cell]
    report: ExecutionReport
    looks: pd.DataFrame
    stopped_at: int
    n_seeds: int
    reused: set[Cell]
    #: seeds that could run past the look being waited for (0: the barrier path)
    run_ahead: int = 0
    #: finished cells of seeds past the last look analysed, ``{seed: cells}``: kept in the
    #: run directory, never analysed in this version
    ahead: dict[int, int] = dataclasses.field(default_factory=dict)


def driving(spec: StudySpec) -> list[Any]:
    seq = spec.sequential
    assert seq is not None
    return [h for h in spec.hypotheses if seq.drive is None or h.id in seq.drive]


def options_of(spec: StudySpec) -> Any:
    """The :class:`~robuststats.stats.sequential.SequentialOptions` of a study."""
    from robuststats.stats.sequential import SequentialOptions

    seq = spec.sequential
    assert seq is not None
    m = len(driving(spec))
    split = m if spec.analysis.multiplicity not in (None, "none") else 1
    return SequentialOptions(tuple(seq.looks), alpha=1.0 - spec.analysis.confidence_level,
                             spending=seq.spending, futility=seq.futility, beta=seq.beta,
                             beta_spending=seq.beta_spending, effect=seq.effect, split=split,
                             drift=seq.drift)


def run_looks(spec: StudySpec, ledger: Any, cells: list[Cell], items: list[str],
              done: set[Cell], *, workers: int, execute: Any, progress: Any,
              executor: Any = None) -> SequentialRun:
    """Run the looks of ``spec.sequential`` until the study stops (see the module doc).

    With more than one worker (or an ``executor`` that streams jobs) and
    ``run_ahead_seeds`` above 0, the run-ahead path
    (:func:`~robuststats.study.sequential_ahead.run_looks_ahead`); else each look runs its
    pending cells through ``execute`` and waits for all of them."""
    from robuststats.config.sequential import run_ahead_seeds
    from robuststats.runs.stream import open_stream

    seq = spec.sequential
    assert seq is not None
    # Ray's workers are its CPUs; `workers` is what a local Ray was started with
    ahead = run_ahead_seeds(seq, workers=workers, jobs_per_seed=len(spec.conditions))
    stream = open_stream(ledger, spec, workers=workers, executor=executor,
                         progress=progress) if ahead else None
    if stream is not None:
        from robuststats.study.sequential_ahead import run_looks_ahead

        return run_looks_ahead(spec, ledger, cells, items, done, stream=stream, ahead=ahead)
    seeds = spec.seed_list()
    reports: list[Any] = []
    look_cells: list[Cell] = []

    def outcomes_at(look: int, n: int) -> pd.DataFrame | str:
        nonlocal look_cells
        chosen = set(seeds[:n])
        look_cells = [c for c in cells if c.seed in chosen]
        finished_before = ledger.finished(look_cells, items=items)
        pending = [c for c in look_cells if c not in finished_before]
        reports.append(execute(ledger, spec, pending, workers=workers, progress=progress))
        return look_outcomes(ledger, look, n, look_cells, items, in_flight=[])

    looks = _walk_looks(spec, outcomes_at)
    used = {c.seed for c in look_cells}
    from robuststats.study.sequential_ahead import trained_ahead

    return SequentialRun(look_cells, ExecutionReport.combined(reports), looks,
                         int(looks["look"].max()), len(used), done & set(look_cells),
                         ahead=trained_ahead(ledger, cells, items, used, seeds))


def look_outcomes(ledger: Any, look: int, n: int, look_cells: list[Cell], items: list[str],
                  *, in_flight: list[int]) -> pd.DataFrame | str:
    """The outcomes of a look whose cells have all run (or why there are none: failed
    cells), logged in the run directory's events as ``look_analysed`` with the seeds
    ``in_flight`` (later seeds still training: the run-ahead path)."""
    outcomes = ledger.outcomes(look_cells, items=items)
    finished = ledger.finished(look_cells, items=items)
    ledger.log_event({"event": "look_analysed", "look": look, "n_seeds": n,
                      "seeds_in_flight": in_flight})
    if len(finished) < len(look_cells):
        return f"{len(look_cells) - len(finished)} cell(s) of this look failed"
    return outcomes


def replay_looks(spec: StudySpec, outcomes: pd.DataFrame) -> pd.DataFrame:
    """The table of looks of a sequential study recomputed from its stored ``outcomes``
    (``robuststats analyze`` of a sequential version): look ``k`` takes the rows of the
    first ``looks[k]`` seeds of ``spec``, and the replay stops where the study did. The
    decisions are the same function of the same outcomes as in the run."""
    seeds = spec.seed_list()
    present = set(outcomes["seed"].unique())
    cell_keys = [c for c in ("condition", "eval_noise", "noise_seed") if c in outcomes]
    # the cells every seed has in the stored outcomes: a seed lacking one of them is a look
    # whose cells did not all finish, where the run would have stopped
    every = set(outcomes[cell_keys].drop_duplicates().itertuples(index=False, name=None))

    def outcomes_at(look: int, n: int) -> pd.DataFrame | str:
        chosen = seeds[:n]
        missing = sorted(set(chosen) - present)
        if missing:
            return f"the outcomes hold no rows of seed(s) {missing}"
        rows = outcomes[outcomes["seed"].isin(chosen)]
        lacking = _lacking_cells(rows, chosen, cell_keys, every)
        if lacking:
            return lacking
        return rows

    return _walk_looks(spec, outcomes_at)


def _lacking_cells(rows: pd.DataFrame, seeds: list[int], keys: list[str],
                   every: set[tuple[Any, ...]]) -> str | None:
    """Why the look on ``rows`` (the outcomes of ``seeds``) is not the planned one: the
    seeds that lack a cell (condition, eval_noise, noise_seed) other seeds have; None when
    each seed has them all. Analysed anyway, the look would pair only the shared seeds
    under the planned seed count."""
    held = rows.groupby("seed")[keys].apply(
        lambda g: set(g.drop_duplicates().itertuples(index=False, name=None)))
    short = {int(s): sorted(every - held.get(s, set()), key=str) for s in seeds
             if every - held.get(s, set())}
    if not short:
        return None
    parts = []
    for seed, cells in sorted(short.items()):
        named = ", ".join("/".join(f"{k} {v}" for k, v in zip(keys, c, strict=True))
                          for c in cells[:2])
        more = f" and {len(cells) - 2} more" if len(cells) > 2 else ""
        parts.append(f"seed {seed} has no rows of {named}{more}")
    return (f"unequal seeds per condition: {'; '.join(parts)} (the look would pair "
            f"fewer than its {len(seeds)} seeds)")


def _walk_looks(spec: StudySpec, outcomes_at: Any) -> pd.DataFrame:
    """The table of looks: at each look, ``outcomes_at(look, n_seeds)`` gives the outcomes
    of its seeds (or why there are none: the look is STOPPED), the driving hypotheses not
    yet decided are decided, and the walk ends once none goes on. A hypothesis that crossed
    a bound (or its futility bound) is frozen at that look: its last row is its decision,
    with the stage-wise p-value of the look it crossed at; later looks, run for the others,
    do not analyse it again (a crossing, once made, is the design's decision)."""
    seq = spec.sequential
    assert seq is not None
    rows: list[dict[str, Any]] = []
    frozen: set[str] = set()
    for look, n in enumerate(seq.looks, start=1):
        active = [h for h in driving(spec) if h.id not in frozen]
        outcomes = outcomes_at(look, n)
        if isinstance(outcomes, str):
            rows.append(_stopped(active, look, n, outcomes))
            break
        decisions = _decide(spec, outcomes, look, active)
        rows += decisions
        frozen |= {d["id"] for d in decisions if d["decision"] != "CONTINUE"}
        if all(d["decision"] != "CONTINUE" for d in decisions):
            break
    return pd.DataFrame(rows)


def _decide(spec: StudySpec, outcomes: pd.DataFrame, look: int, hypotheses: list[Any]
            ) -> list[dict[str, Any]]:
    """The decisions of ``hypotheses`` at ``look`` on the outcomes of its seeds."""
    from robuststats.stats.sequential import analyse_look

    seq = spec.sequential
    assert seq is not None
    try:
        decisions = analyse_look(hypotheses, outcomes, look, options_of(spec),
                                 confidence_level=spec.analysis.confidence_level,
                                 n_resamples=spec.analysis.n_resamples,
                                 rng_seed=spec.analysis.rng_seed, clean_noise=0.0)
    except InputError as exc:
        raise InputError(f"{spec.where(('sequential',))}: look {look} "
                         f"({seq.looks[look - 1]} seeds): {exc}") from None
    return [dataclasses.asdict(d) for d in decisions]


def _stopped(hyps: list[Any], look: int, n: int, why: str) -> dict[str, Any]:
    return {"id": ",".join(h.id for h in hyps), "look": look, "n_seeds": n,
            "decision": "STOPPED",
            "reason": f"{why}: the study stops here and its driving hypotheses stay "
                      "INCONCLUSIVE"}


def with_repeated_intervals(hypotheses: pd.DataFrame, looks: pd.DataFrame,
                            spec: StudySpec) -> pd.DataFrame:
    """The ``hypotheses`` table with each driving hypothesis' interval, verdict and reason
    replaced by its repeated confidence interval and decision at the look it stopped. A
    study STOPPED at a look (failed cells, missing seeds) leaves its driving hypotheses
    INCONCLUSIVE with the repeated interval of the last look it analysed (none before the
    first) and no p-value: no fixed-design verdict stands in for the plan. Each hypothesis
    takes its own last row: one decided at an earlier look keeps that look's decision."""
    last = looks.drop_duplicates("id", keep="last")
    out = hypotheses.copy()
    seq = spec.sequential
    assert seq is not None
    split = options_of(spec).split
    multiplicity = f"sequential {seq.spending} spending over {len(seq.looks)} looks"
    for row in last.itertuples(index=False):
        if row.decision == "STOPPED":
            _stopped_rows(out, looks, row, len(seq.looks), multiplicity)
            continue
        at = out.index[out["id"] == row.id]
        if not len(at):
            continue
        verdict = row.decision if row.decision in ("VERIFIED", "FALSIFIED") else "INCONCLUSIVE"
        reason = row.reason if row.decision != "FUTILE" else f"futile: {row.reason}"
        out.loc[at, ["ci_low", "ci_high", "ci_level", "ci_method", "verdict", "reason"]] = [
            row.ci_low, row.ci_high, row.ci_level, row.ci_method, verdict,
            f"look {row.look} of {len(seq.looks)} ({row.n_seeds} seeds): {reason}"]
        # the stage-wise ordering p-value of the look it stopped at, on the design at α/m
        # (Bonferroni over the m driving hypotheses, as the bounds)
        out.loc[at, ["pvalue", "pvalue_adjusted"]] = [row.pvalue,
                                                      min(1.0, split * row.pvalue)]
        out.loc[at, "multiplicity"] = f"{multiplicity}, stage-wise p"
    return out


def _stopped_rows(out: pd.DataFrame, looks: pd.DataFrame, row: Any, n_looks: int,
                  multiplicity: str) -> None:
    analysed = looks[looks["decision"] != "STOPPED"]
    for hid in str(row.id).split(","):
        at = out.index[out["id"] == hid]
        if not len(at):
            continue
        before = analysed[analysed["id"] == hid]
        ci = [math.nan, math.nan, math.nan, "none: no look was analysed"]
        if len(before):
            b = before.iloc[-1]
            ci = [b["ci_low"], b["ci_high"], b["ci_level"],
                  f"{b['ci_method']} (look {int(b['look'])})"]
        out.loc[at, ["ci_low", "ci_high", "ci_level", "ci_method", "verdict", "reason",
                     "pvalue", "pvalue_adjusted", "multiplicity"]] = [
            *ci, "INCONCLUSIVE", f"look {row.look} of {n_looks} ({row.n_seeds} seeds): "
            f"STOPPED: {row.reason}", math.nan, math.nan, multiplicity]


def sequential_tables(analysis: Any, looks: pd.DataFrame, spec: StudySpec) -> Any:
    """``analysis`` with the repeated intervals in ``hypotheses`` and the table of looks."""
    return dataclasses.replace(
        analysis, hypotheses=with_repeated_intervals(analysis.hypotheses, looks, spec),
        extra={**analysis.extra, "sequential_looks": looks})
