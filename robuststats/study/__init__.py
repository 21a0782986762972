"""The ``study`` command: a study file's matrix run on the platform, analysed, published.

The platform's names a study uses (:class:`StudySpec`, :func:`plan`, :class:`RunLedger`)
are re-exported here for convenience; they live in :mod:`robuststats.runs`, the tasks,
trainers and evaluator in :mod:`robuststats.models`.

Names are imported on first use, so ``import robuststats.study`` (and ``robuststats
analyze``) never imports torch; only training and evaluation do.
"""

from __future__ import annotations

from robuststats._lazy import lazy_exports

# eager: light (no torch), and the function ``plan`` must shadow the submodule ``plan``
from robuststats.runs.plan import Cell, TrainJob, plan
from robuststats.runs.spec import AnalysisSpec, ConditionSpec, EvaluationSpec, StudySpec

__all__ = [
    "Analysis",
    "AnalysisSpec",
    "Cell",
    "ConditionSpec",
    "EvaluationSpec",
    "RunLedger",
    "StudyRun",
    "StudySpec",
    "TrainJob",
    "TrainingCondition",
    "analyze_outcomes",
    "evaluate",
    "generate_greedy",
    "get_task",
    "get_trainer",
    "plan",
    "run_study",
    "write_version",
]

_LAZY = {
    "Analysis": "robuststats.analysis",
    "analyze_outcomes": "robuststats.analysis",
    "RunLedger": "robuststats.runs.ledger",
    "StudyRun": "robuststats.study.runner",
    "run_study": "robuststats.study.runner",
    "write_version": "robuststats.study.runner",
    "get_task": "robuststats.models.tasks",
    "get_trainer": "robuststats.models.trainer",
    "TrainingCondition": "robuststats.models.trainer",
    "evaluate": "robuststats.models.evaluate",
    "generate_greedy": "robuststats.models.generation",
}


__getattr__, __dir__ = lazy_exports("robuststats.study", _LAZY, globals())
