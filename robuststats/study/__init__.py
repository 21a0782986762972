"""Studies: validated study files, plans, a resumable executor, analysis of item outcomes.

Names are imported on first use, so ``import robuststats.study`` (and ``robuststats
analyze``) never imports torch; only training and evaluation do.
"""

from __future__ import annotations

from robuststats._lazy import lazy_exports

# eager: light (no torch), and the function ``plan`` must shadow the submodule ``plan``
from robuststats.study.plan import Cell, TrainJob, plan
from robuststats.study.spec import AnalysisSpec, ConditionSpec, EvaluationSpec, StudySpec

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
    "RunLedger": "robuststats.study.ledger",
    "StudyRun": "robuststats.study.runner",
    "run_study": "robuststats.study.runner",
    "write_version": "robuststats.study.runner",
    "get_task": "robuststats.study.tasks",
    "get_trainer": "robuststats.study.trainer",
    "TrainingCondition": "robuststats.study.trainer",
    "evaluate": "robuststats.study.evaluate",
    "generate_greedy": "robuststats.study.generation",
}


__getattr__, __dir__ = lazy_exports("robuststats.study", _LAZY, globals())
