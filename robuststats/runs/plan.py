"""The plan of a study: cells = condition × seed × eval_noise × noise_seed.

A cell is the unit that is evaluated and stored; a training job is the unit that is trained
(one model per ``(condition, seed)``, shared by all of that model's cells). Clean cells
(``eval_noise == 0``) are deterministic, so they get a single noise seed, ``0``: repeating
them would add identical rows that inflate ``n`` without adding information. So do the
cells of a deterministic error model (a number format, ``EvaluationKind.deterministic``).
"""

from __future__ import annotations

from dataclasses import dataclass

from robuststats.outcomes import cell_key
from robuststats.runs.spec import StudySpec

__all__ = ["Cell", "TrainJob", "jobs", "plan"]


@dataclass(frozen=True, order=True)
class TrainJob:
    """One model to train: a condition and a training seed."""

    condition: str
    seed: int

    @property
    def key(self) -> str:
        return f"{self.condition}__s{self.seed}"


@dataclass(frozen=True, order=True)
class Cell:
    """One evaluation: a trained model (condition, seed) under one inference-noise draw."""

    condition: str
    seed: int
    eval_noise: float
    noise_seed: int

    @property
    def job(self) -> TrainJob:
        return TrainJob(self.condition, self.seed)

    @property
    def key(self) -> str:
        """File-name-safe identifier, stable across runs (``E8c__s3__n0.05__ns1``)."""
        return cell_key(self.condition, self.seed, self.eval_noise, self.noise_seed)

    @property
    def is_clean(self) -> bool:
        return self.eval_noise == 0.0


def plan(spec: StudySpec) -> list[Cell]:
    """All cells of ``spec`` in a stable order: condition, seed, noise level, noise seed."""
    cells: list[Cell] = []
    for condition in spec.conditions:
        for seed in spec.seed_list():
            for level in spec.evaluation.noise_levels:
                draws = spec.evaluation.draws(level, spec.eval_kind(condition))
                for ns in draws:
                    cells.append(Cell(condition, seed, float(level), int(ns)))
    return cells


def jobs(cells: list[Cell]) -> dict[TrainJob, list[Cell]]:
    """Group cells by the model they need, keeping plan order."""
    grouped: dict[TrainJob, list[Cell]] = {}
    for cell in cells:
        grouped.setdefault(cell.job, []).append(cell)
    return grouped
