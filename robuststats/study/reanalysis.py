"""A study's tables recomputed from stored item outcomes, without models
(``robuststats analyze``).

:func:`stored_study` reads the study a result version (or run directory) was made from,
:func:`reanalyze` analyses outcomes as the study run does (hypotheses, and a sweep's
dose-response tables) and :func:`write_reanalysis` publishes the result as an
analysis-only version. Never imports torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from robuststats.analysis import Analysis, AnalysisOptions, analyze_outcomes
from robuststats.errors import InputError
from robuststats.results import ResultVersion, seal_problem
from robuststats.runs.spec import StudySpec

__all__ = ["reanalyze", "stored_study", "write_reanalysis"]


def stored_study(source: Path) -> StudySpec | None:
    """The resolved study stored in ``source``'s ``manifest.json`` (a result version) or
    ``spec.json`` (a run directory), or None when it holds neither. A manifest whose seal
    or spec hash no longer matches is refused: a changed version is not analysed."""
    for candidate in (source / "manifest.json", source / "spec.json"):
        if candidate.is_file():
            try:
                stored = json.loads(candidate.read_text(encoding="utf-8"))
            except (ValueError, OSError, RecursionError) as exc:
                raise InputError(f"{candidate}: not a readable JSON manifest ({exc}).") from None
            if not isinstance(stored, dict):
                raise InputError(f"{candidate}: a manifest must hold a JSON object, got "
                                 f"{type(stored).__name__}.")
            if candidate.name == "manifest.json":
                problem = seal_problem(stored)
                if problem is not None:
                    raise InputError(f"{candidate}: {problem}; `robuststats results verify` "
                                     "lists every difference, and a changed version is not "
                                     "analysed.")
            spec = stored.get("spec")
            if spec is not None and not isinstance(spec, dict):
                raise InputError(f"{candidate}: `spec` must be a JSON object (the resolved "
                                 f"study), got {type(spec).__name__}.")
            if spec is None:
                return None
            spec = {k: v for k, v in spec.items() if k != "spec_format"}
            return StudySpec.from_dict(spec, source=str(source))
    return None


def reanalyze(outcomes: pd.DataFrame, spec: StudySpec | None, *, options: AnalysisOptions,
              holes: str = "drop") -> Analysis:
    """:func:`~robuststats.analysis.analyze_outcomes` with ``spec``'s hypotheses (each of
    whose conditions must be in the outcomes) and, for a sweep, its dose-response tables
    refitted from the same outcomes as the study run does; for a sequential study, its looks
    replayed on the outcomes and its driving hypotheses decided at the look it stops."""
    known = set(outcomes["condition"])
    hypotheses = list(spec.hypotheses) if spec is not None else []
    for h in hypotheses:
        for side in (h.a, h.b):
            if side not in known:
                raise InputError(f"hypothesis {h.id}: condition {side!r} is not in the "
                                 f"outcomes (conditions: {sorted(known)}).")
    analysis = analyze_outcomes(outcomes, hypotheses=hypotheses, options=options,
                                holes=holes)
    if spec is not None and spec.sweep is not None:
        from dataclasses import replace

        from robuststats.study.sweep_run import dose_tables

        analysis = replace(analysis, extra={**analysis.extra, **dose_tables(outcomes, spec)})
    if spec is not None and spec.sequential is not None:
        from robuststats.study.sequential_run import replay_looks, sequential_tables

        analysis = sequential_tables(analysis, replay_looks(spec, outcomes), spec)
    return analysis


def write_reanalysis(out: str | Path, source: str | Path, outcomes: pd.DataFrame,
                     analysis: Analysis, spec: StudySpec | None, options: AnalysisOptions
                     ) -> ResultVersion:
    """Publish ``analysis`` as a new analysis-only version under ``out/<study>/`` (the
    study ``analysis`` when there is no spec), recording where its outcomes came from.
    Without a spec, the manifest records each condition's protocol as far as the source
    recorded it (``protocols``, :func:`robuststats.outcomes.outcomes_protocol`: a harness's
    task, options and items digest, the noise levels and seeds), so the version can be a
    gate's baseline."""
    from robuststats.study.runner import write_version

    name = spec.name if spec is not None else "analysis"
    meta: dict[str, Any] = {
        "analysis_only": True, "source": str(source),
        "spec": spec.resolved() if spec else None,
        "spec_hash": spec.spec_hash() if spec else None,
        "analysis": analysis.settings, "alpha": options.alpha,
        "confidence_level": options.confidence_level, "multiplicity": options.multiplicity}
    if spec is None:  # no study records the protocol: the outcomes' source does
        from robuststats.outcomes import outcomes_protocol

        meta["harness"] = outcomes.attrs.get("harness")
        meta["protocols"] = {str(c): outcomes_protocol(outcomes, c)
                             for c in sorted(set(outcomes["condition"]))}
    return write_version(out, name, outcomes, analysis, meta)
