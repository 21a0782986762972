"""Trainers: turn (task, training condition, seed) into a model the evaluator can score.

- ``builtin``: trains the tiny Qwen2 of :mod:`robuststats.models.model` on the task's train
  split, with the condition's training-time noise and AQN schedule
  (:mod:`robuststats.models.training` holds the loop).
- ``checkpoint``: loads an existing local checkpoint (``path``) and trains nothing.

``get_trainer(name, **params)`` builds one by name (or ``package.module:factory``) with
validated parameters; the executor then calls ``trainer.train(task, condition, seed=...,
workdir=...)`` with a typed :class:`TrainingCondition` and caches the returned
:class:`TrainedModel` with ``save``/``load``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from robuststats._fields import check_whole
from robuststats.engine import AQNSchedule, NoiseSpec
from robuststats.errors import InputError
from robuststats.models.model import ModelSpec, load_pretrained
from robuststats.models.registry import ParamsSpec, Registry, resolve_params

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from robuststats.models.tasks import Task

__all__ = [
    "TRAINERS",
    "BuiltinTrainer",
    "CheckpointTrainer",
    "TrainedModel",
    "Trainer",
    "TrainingCondition",
    "available_trainers",
    "get_trainer",
    "register_trainer",
]

_INFO_FILE = "training_info.json"


class _ConditionSection(Protocol):
    """What training reads of a study's condition (the platform's ``ConditionSpec``)."""

    train_noise: NoiseSpec | None
    aqn: AQNSchedule | None
    description: str


@dataclass(frozen=True)
class TrainingCondition:
    """A training condition as a trainer sees it: name, training noise, AQN schedule.

    ``noise`` and ``aqn`` are the engine's classes; a mapping is accepted and converted
    (validated) on construction. ``aqn.total_steps`` may be ``None``: the trainer stretches
    the schedule to its own step count.
    """

    name: str
    noise: NoiseSpec | None = None
    aqn: AQNSchedule | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InputError(f"`name` must be a non-empty string, got {self.name!r}.")
        if isinstance(self.noise, Mapping):
            object.__setattr__(self, "noise", NoiseSpec.from_dict(self.noise))
        if isinstance(self.aqn, Mapping):
            object.__setattr__(self, "aqn", AQNSchedule.from_dict(self.aqn))
        if self.noise is not None and not isinstance(self.noise, NoiseSpec):
            raise InputError(f"`noise` must be a NoiseSpec, a mapping or None, got {self.noise!r}.")
        if self.aqn is not None and not isinstance(self.aqn, AQNSchedule):
            raise InputError(f"`aqn` must be an AQNSchedule, a mapping or None, got {self.aqn!r}.")

    @classmethod
    def from_spec(cls, name: str, condition: _ConditionSection) -> TrainingCondition:
        """The condition ``name`` of a study (``spec.conditions[name]``, a
        :class:`~robuststats.runs.spec.ConditionSpec`)."""
        return cls(name, condition.train_noise, condition.aqn, condition.description)


@dataclass
class TrainedModel:
    """A model, its tokenizer and what training recorded (``info``, JSON-serialisable)."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    info: dict[str, Any] = field(default_factory=dict)

    def save(self, path: str | Path) -> Path:
        """Write model, tokenizer and ``training_info.json`` to ``path``.

        Written to a sibling temporary directory first and renamed into place, so a
        killed process never leaves a half-written model at ``path``.
        """
        from robuststats.models.model import _quiet_transformers

        target = Path(path)
        if target.exists() and any(target.iterdir()):
            raise InputError(f"`path` must be a new or empty directory, got {str(target)!r}.")
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        if staging.exists():
            shutil.rmtree(staging)
        with _quiet_transformers():
            self.model.save_pretrained(staging)
            self.tokenizer.save_pretrained(staging)
        (staging / _INFO_FILE).write_text(json.dumps(self.info, indent=2, default=str),
                                          encoding="utf-8")
        if target.exists():
            target.rmdir()
        os.replace(staging, target)
        return target

    @classmethod
    def load(cls, path: str | Path) -> TrainedModel:
        """Load what :meth:`save` wrote (or any local ``save_pretrained`` directory)."""
        model, tokenizer = load_pretrained(path)
        info_file = Path(path) / _INFO_FILE
        info = json.loads(info_file.read_text(encoding="utf-8")) if info_file.is_file() else {}
        return cls(model=model, tokenizer=tokenizer, info=info)


class Trainer(ABC):
    """Extension point: ``train(task, condition, seed, workdir) -> TrainedModel``."""

    name: ClassVar[str] = ""
    #: parameter name → (validator(key, value) -> value, default)
    params_spec: ClassVar[ParamsSpec] = {}

    def __init__(self, **params: Any) -> None:
        self.params: dict[str, Any] = resolve_params("trainer", self.name, self.params_spec,
                                                     params)

    @abstractmethod
    def train(self, task: Task, condition: TrainingCondition, seed: int,
              workdir: Path | None = None, *,
              progress: Callable[[int, int], None] | None = None) -> TrainedModel:
        """Produce a trained model for ``condition`` and training ``seed``."""

    def load(self, path: str | Path) -> TrainedModel:
        """Load a model this trainer saved (used by the executor's model cache)."""
        return TrainedModel.load(path)


#: trainers by name (``register_trainer``/``get_trainer``), plus ``module:factory`` references
TRAINERS: Registry[Trainer] = Registry("trainer")


def register_trainer(name: str) -> Callable[[type[Trainer]], type[Trainer]]:
    """Class decorator: make a :class:`Trainer` available to :func:`get_trainer`."""
    return TRAINERS.register(name)


def available_trainers() -> list[str]:
    return TRAINERS.names()


def get_trainer(name: str, **params: Any) -> Trainer:
    """Build the trainer registered as ``name`` (or a ``package.module:factory``
    reference); unknown names get a "did you mean"."""
    return TRAINERS.build(name, **params)


# ------------------------------------------------------------------ validators

#: bounds of the builtin trainer's counts: a larger value is a typo, not a plan
MAX_STEPS = 10_000_000
MAX_BATCH = 100_000


def _positive_int(key: str, value: Any, high: int = MAX_STEPS) -> int:
    return check_whole(value, key, low=1, high=high)


def _batch(key: str, value: Any) -> int:
    return _positive_int(key, value, MAX_BATCH)


def _non_negative_int(key: str, value: Any) -> int:
    return check_whole(value, key, high=MAX_STEPS)


def _positive_float(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value <= 0:
        raise InputError(f"`{key}` must be a positive number, got {value!r}.")
    return float(value)


def _fraction(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise InputError(f"`{key}` must be a number in [0, 1), got {value!r}.")
    return float(value)


def _model_params(key: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"`{key}` must be a mapping of model sizes, got {value!r}.")
    return ModelSpec.from_dict(value, key=key).to_dict()


def _path(key: str, value: Any) -> Path:
    if not isinstance(value, (str, Path)) or not str(value):
        raise InputError(f"`{key}` must be a directory path, got {value!r}.")
    return Path(value)


# ------------------------------------------------------------------ builtin

@TRAINERS.register("builtin")
class BuiltinTrainer(Trainer):
    """Train the tiny Qwen2 from scratch on the task's train split (CPU, one thread).

    Next-token cross-entropy on the completion tokens only (prompt tokens are masked),
    AdamW with linear warm-up and cosine decay to 10 % of ``lr``, gradient clipping at 1.
    Parameters: ``steps``, ``lr``, ``batch_size``, ``warmup`` (fraction of steps),
    ``weight_decay``, ``model`` (:class:`~robuststats.models.model.ModelSpec` fields),
    ``train_eval_items`` (train items scored greedily at the end, 0 to skip).
    """

    params_spec: ClassVar[dict[str, tuple[Callable[[str, Any], Any], Any]]] = {
        "steps": (_positive_int, 500),
        "lr": (_positive_float, 3e-3),
        "batch_size": (_batch, 32),
        "warmup": (_fraction, 0.05),
        "weight_decay": (_fraction, 0.01),
        "model": (_model_params, {}),
        "train_eval_items": (_non_negative_int, 200),
    }

    def train(self, task: Task, condition: TrainingCondition, seed: int,
              workdir: Path | None = None, *,
              progress: Callable[[int, int], None] | None = None,
              device: str | None = None) -> TrainedModel:
        from robuststats.models.training import train_builtin

        model, tokenizer, info = train_builtin(task, condition, seed, self.params,
                                               progress=progress, device=device)
        return TrainedModel(model=model, tokenizer=tokenizer, info=info)


# ------------------------------------------------------------------ checkpoint

@TRAINERS.register("checkpoint")
class CheckpointTrainer(Trainer):
    """Use an existing local checkpoint: no training, the same model for every condition.

    ``path`` is a directory written by ``save_pretrained`` (model and tokenizer), or a
    template with ``{condition}`` and ``{seed}`` fields for one checkpoint per
    condition and seed (``ckpt/{condition}/seed{seed}``).
    """

    params_spec: ClassVar[dict[str, tuple[Callable[[str, Any], Any], Any]]] = {
        "path": (_path, None),
        "model": (lambda key, value: value, None),  # sizes are the checkpoint's own
    }

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        if self.params["path"] is None:
            raise InputError("trainer 'checkpoint' needs `path` (a local model directory).")

    def train(self, task: Task, condition: TrainingCondition, seed: int,
              workdir: Path | None = None, *,
              progress: Callable[[int, int], None] | None = None) -> TrainedModel:
        template = str(self.params["path"])
        try:
            path = Path(template.format(condition=condition.name, seed=seed))
        except (KeyError, IndexError) as exc:
            raise InputError(f"`path` template {template!r} may only use {{condition}} and "
                             f"{{seed}}, got {exc}.") from exc
        trained = TrainedModel.load(path)
        trained.info = {**trained.info, "trainer": "checkpoint", "checkpoint": str(path),
                        "condition": condition.name, "seed": seed}
        return trained


# the ``command`` trainer (a user's training command per condition × seed) registers itself
from robuststats.models import external as _external  # noqa: E402, F401

# the ``grpo`` trainer (TRL's GRPOTrainer after a supervised warm start) registers itself
from robuststats.models import grpo as _grpo  # noqa: E402, F401
