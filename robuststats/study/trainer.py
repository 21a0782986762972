"""Trainers: turn (task, training condition, seed) into a model the evaluator can score.

- ``builtin``: trains the tiny Qwen2 of :mod:`robuststats.study.model` on the task's train
  split, with the condition's training-time noise injected through the engine
  (``inject`` around every forward + backward) and, when set, AQN weight noise on the
  RMSNorm weights (``aqn_perturb`` with the schedule's sigma for the step).
- ``checkpoint``: loads an existing local checkpoint (``path``) and trains nothing.

``get_trainer(name, **params)`` builds one by name with validated parameters; the
executor then calls ``trainer.train(task, condition, seed=..., workdir=...)`` and caches
the returned :class:`TrainedModel` with ``save``/``load``.

Determinism: the same seed gives the same weights. Model initialisation, data order and
AQN draws come from ``torch.Generator`` objects seeded from the training seed; training
noise uses the noise spec's seed combined with the training seed (numpy ``SeedSequence``),
so two seeds of one condition see different noise and a rerun sees the same noise.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from robuststats.errors import InputError, closest_match
from robuststats.study.model import ModelSpec, build_model, build_tokenizer, load_pretrained

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from robuststats.engine import NoiseSpec
    from robuststats.study.tasks import Item, Task

__all__ = [
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
_AQN_STREAM = 0xA9A


@dataclass(frozen=True)
class TrainingCondition:
    """A training condition: its name, training-time noise and optional AQN schedule.

    ``aqn`` may be an ``AQNSchedule`` or a mapping of its fields (``total_steps`` may be
    omitted: the schedule is stretched to the trainer's step count).
    """

    name: str
    noise: NoiseSpec | None = None
    aqn: Any = None


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
        from robuststats.study.model import _quiet_transformers

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
    params_spec: ClassVar[dict[str, tuple[Callable[[str, Any], Any], Any]]] = {}

    def __init__(self, **params: Any) -> None:
        for key in params:
            if key not in self.params_spec:
                close = closest_match(key, self.params_spec)
                hint = f" (did you mean {close!r}?)" if close else ""
                raise InputError(f"unknown parameter {key!r} for trainer {self.name!r}{hint}; "
                                 f"accepted: {', '.join(sorted(self.params_spec))}.")
        self.params: dict[str, Any] = {
            key: (check(key, params[key]) if key in params else default)
            for key, (check, default) in self.params_spec.items()
        }

    @abstractmethod
    def train(self, task: Task, condition: TrainingCondition, seed: int,
              workdir: Path | None = None, *,
              progress: Callable[[int, int], None] | None = None) -> TrainedModel:
        """Produce a trained model for ``condition`` and training ``seed``."""

    def load(self, path: str | Path) -> TrainedModel:
        """Load a model this trainer saved (used by the executor's model cache)."""
        return TrainedModel.load(path)


_REGISTRY: dict[str, type[Trainer]] = {}


def register_trainer(name: str) -> Callable[[type[Trainer]], type[Trainer]]:
    """Class decorator: make a :class:`Trainer` available to :func:`get_trainer`."""

    def decorator(cls: type[Trainer]) -> type[Trainer]:
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return decorator


def available_trainers() -> list[str]:
    return sorted(_REGISTRY)


def get_trainer(name: str, **params: Any) -> Trainer:
    """Build the trainer registered as ``name``; unknown names get a "did you mean"."""
    if name not in _REGISTRY:
        close = closest_match(name, _REGISTRY)
        hint = f" (did you mean {close!r}?)" if close else ""
        raise InputError(f"unknown trainer {name!r}{hint}; "
                         f"available: {', '.join(available_trainers())}.")
    return _REGISTRY[name](**params)


# ------------------------------------------------------------------ validators

def _positive_int(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"`{key}` must be a positive integer, got {value!r}.")
    return int(value)


def _non_negative_int(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"`{key}` must be a non-negative integer, got {value!r}.")
    return int(value)


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


def training_noise_seed(noise_seed: int, seed: int) -> int:
    """Seed of the training-noise generators: the spec's seed mixed with the training seed."""
    import numpy as np

    return int(np.random.SeedSequence([int(noise_seed), int(seed)]).generate_state(1)[0]
               & 0x7FFFFFFF)


# ------------------------------------------------------------------ builtin

@register_trainer("builtin")
class BuiltinTrainer(Trainer):
    """Train the tiny Qwen2 from scratch on the task's train split (CPU, one thread).

    Next-token cross-entropy on the completion tokens only (prompt tokens are masked),
    AdamW with linear warm-up and cosine decay to 10 % of ``lr``, gradient clipping at 1.
    Parameters: ``steps``, ``lr``, ``batch_size``, ``warmup`` (fraction of steps),
    ``weight_decay``, ``model`` (:class:`~robuststats.study.model.ModelSpec` fields),
    ``train_eval_items`` (train items scored greedily at the end, 0 to skip).
    """

    params_spec: ClassVar[dict[str, tuple[Callable[[str, Any], Any], Any]]] = {
        "steps": (_positive_int, 500),
        "lr": (_positive_float, 3e-3),
        "batch_size": (_positive_int, 32),
        "warmup": (_fraction, 0.05),
        "weight_decay": (_fraction, 0.01),
        "model": (_model_params, {}),
        "train_eval_items": (_non_negative_int, 200),
    }

    def train(self, task: Task, condition: TrainingCondition, seed: int,
              workdir: Path | None = None, *,
              progress: Callable[[int, int], None] | None = None) -> TrainedModel:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise InputError(f"`seed` must be a non-negative integer, got {seed!r}.")
        items = task.items("train")
        if not items:
            raise InputError(f"task {task.name!r} has an empty train split.")
        tokenizer = build_tokenizer(task.vocabulary())
        model = build_model(tokenizer, self.params["model"], seed=seed)
        started = time.perf_counter()
        info = run_training(model, tokenizer, task, items, condition, seed=seed,
                            params=self.params, progress=progress)
        info["wall_seconds"] = round(time.perf_counter() - started, 3)
        info.update(trainer="builtin", condition=condition.name, seed=seed,
                    task=task.describe(), params=_jsonable(self.params),
                    n_parameters=sum(p.numel() for p in model.parameters()))
        if self.params["train_eval_items"]:
            info["train_accuracy"] = _train_accuracy(
                model, tokenizer, task, items[: self.params["train_eval_items"]])
        model.eval()
        return TrainedModel(model=model, tokenizer=tokenizer, info=info)


def run_training(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, task: Task,
                 items: list[Item], condition: TrainingCondition, *, seed: int,
                 params: Mapping[str, Any],
                 progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """The optimisation loop of :class:`BuiltinTrainer`; returns the ``info`` record."""
    import contextlib

    import torch

    steps, batch_size = params["steps"], params["batch_size"]
    input_ids, labels = _encode(tokenizer, task, items)
    data_rng = torch.Generator().manual_seed(int(seed))
    optimizer = torch.optim.AdamW(model.parameters(), lr=params["lr"], betas=(0.9, 0.98),
                                  weight_decay=params["weight_decay"])
    warmup = max(1, int(params["warmup"] * steps))

    def lr_factor(step: int) -> float:
        # linear warm-up, then cosine decay to 10 % (Loshchilov & Hutter 2017, SGDR)
        if step < warmup:
            return (step + 1) / warmup
        done = (step - warmup) / max(1, steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * done))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    noise_ctx, noise_spec = _noise_context(model, condition, seed)
    aqn = _aqn_schedule(condition, steps)
    # a stream of its own, distinct from the data-order stream of any training seed
    aqn_rng = torch.Generator().manual_seed(training_noise_seed(_AQN_STREAM, seed))
    losses: list[float] = []
    sigmas: list[float] = []
    order = torch.randperm(len(items), generator=data_rng)
    cursor = 0
    model.train()
    with noise_ctx as session:
        for step in range(steps):
            if cursor + batch_size > len(order):  # next epoch: fresh order, same generator
                order, cursor = torch.randperm(len(items), generator=data_rng), 0
            index = order[cursor : cursor + batch_size]
            cursor += batch_size
            x, y = _trim(input_ids[index], labels[index])
            sigma = float(aqn.sigma(step)) if aqn is not None else 0.0
            sigmas.append(sigma)
            perturb: Any = contextlib.nullcontext()
            if sigma > 0:
                from robuststats.engine import aqn_perturb

                perturb = aqn_perturb(model, sigma, generator=aqn_rng)
            with perturb:
                logits = model(input_ids=x).logits
                loss = torch.nn.functional.cross_entropy(
                    logits[:, :-1].reshape(-1, logits.shape[-1]), y[:, 1:].reshape(-1),
                    ignore_index=-100)
                loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(float(loss.detach()))
            if progress is not None:
                progress(step + 1, steps)
    model.eval()
    info: dict[str, Any] = {"loss": _loss_summary(losses), "steps": steps,
                            "epochs": round(steps * batch_size / len(items), 3),
                            "train_items": len(items)}
    if noise_spec is not None:
        info["train_noise"] = noise_spec.to_dict()
        info["injection_stats"] = _injection_summary(session.stats)
    if aqn is not None:
        info["aqn"] = {"schedule": _describe(aqn), "requested": _describe(condition.aqn),
                       "sigma_max": max(sigmas),
                       "sigma_mean": sum(sigmas) / len(sigmas),
                       "steps_perturbed": sum(s > 0 for s in sigmas)}
    return info


def _encode(tokenizer: PreTrainedTokenizerBase, task: Task,
            items: list[Item]) -> tuple[Any, Any]:
    """Right-padded ``(n, L)`` token ids and labels (``-100`` on prompt and padding).

    Prompt and completion are tokenized separately, as at generation time, where the
    model continues the tokenized prompt.
    """
    import torch

    rows, label_rows = [], []
    for item in items:
        prompt = tokenizer(item.prompt, add_special_tokens=False)["input_ids"]
        target = tokenizer(task.target(item), add_special_tokens=False)["input_ids"]
        target = [*target, tokenizer.eos_token_id]
        rows.append(prompt + target)
        label_rows.append([-100] * len(prompt) + target)
    width = max(len(r) for r in rows)
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows], dtype=torch.long)
    labels = torch.tensor([r + [-100] * (width - len(r)) for r in label_rows], dtype=torch.long)
    return input_ids, labels


def _trim(x: Any, y: Any) -> tuple[Any, Any]:
    """Drop columns that are padding in every row of the batch (shorter batches, faster)."""
    used = int((y != -100).any(dim=0).nonzero().max()) + 1
    return x[:, :used], y[:, :used]


def _noise_context(model: PreTrainedModel, condition: TrainingCondition,
                   seed: int) -> tuple[Any, NoiseSpec | None]:
    import contextlib

    spec = condition.noise
    if spec is None or not spec.is_active:
        return contextlib.nullcontext(), None
    from robuststats.engine import inject

    spec = spec.replace(seed=training_noise_seed(spec.seed, seed))
    return inject(model, spec), spec


def _aqn_schedule(condition: TrainingCondition, steps: int) -> Any:
    """The condition's AQN schedule stretched to this run's ``steps``.

    A study file cannot know the trainer's step count, so ``total_steps`` may be omitted
    from a mapping; a schedule written for another length is rescaled to ``steps`` (its
    stages keep their relative positions) and the original length is kept in ``info``.
    """
    import dataclasses

    aqn = condition.aqn
    if aqn is None:
        return None
    from robuststats.engine import AQNSchedule

    if isinstance(aqn, Mapping):
        aqn = AQNSchedule.from_dict(aqn)
    if not isinstance(aqn, AQNSchedule):
        raise InputError(f"`aqn` must be an AQNSchedule or a mapping, got {aqn!r}.")
    if aqn.total_steps != steps:
        aqn = dataclasses.replace(aqn, total_steps=steps)
    return aqn


def _describe(value: Any) -> Any:
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value))
    return _jsonable(value)


def _loss_summary(losses: list[float]) -> dict[str, Any]:
    k = max(1, min(20, len(losses) // 10))
    stride = max(1, len(losses) // 20)
    return {"initial": sum(losses[:k]) / k, "final": sum(losses[-k:]) / k,
            "min": min(losses), "curve": [round(v, 4) for v in losses[::stride]],
            "curve_stride": stride}


def _injection_summary(stats: Any) -> dict[str, Any]:
    """Injection counts by phase and op (the proof that the requested noise was applied)."""
    summary: dict[str, Any] = {"total": int(stats["count"].sum())}
    for column in ("phase", "op"):
        if column in stats:
            summary[f"by_{column}"] = {str(k): int(v) for k, v in
                                       stats.groupby(column)["count"].sum().items()}
    return summary


def _train_accuracy(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, task: Task,
                    items: list[Item]) -> float:
    from robuststats.study.evaluate import default_max_new_tokens, generate_greedy

    completions = generate_greedy(model, tokenizer, [i.prompt for i in items],
                                  max_new_tokens=default_max_new_tokens(tokenizer, task, items),
                                  batch_size=128)
    return sum(task.score(i, c) for i, c in zip(items, completions)) / len(items)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


# ------------------------------------------------------------------ checkpoint

@register_trainer("checkpoint")
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
