"""The optimisation loop of the builtin trainer (tiny Qwen2 from scratch, CPU).

Next-token cross-entropy on the completion tokens only (prompt tokens are masked), AdamW
with linear warm-up and cosine decay to 10 % of ``lr``, gradient clipping at 1. The
condition's training-time noise is injected through the engine (``inject`` around every
forward + backward) and, when set, AQN weight noise on the RMSNorm weights (``aqn_perturb``
with the schedule's sigma for the step).

Determinism: the same seed gives the same weights. Model initialisation, data order and
AQN draws come from ``torch.Generator`` objects seeded from the training seed; training
noise uses the noise spec's seed combined with the training seed (numpy ``SeedSequence``),
so two seeds of one condition see different noise and a rerun sees the same noise.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robuststats._fields import check_whole
from robuststats.errors import InputError
from robuststats.models.generation import default_max_new_tokens, generate_greedy
from robuststats.models.model import build_model, build_tokenizer

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from robuststats.engine import AQNSchedule, NoiseSpec
    from robuststats.models.tasks import Item, Task
    from robuststats.models.trainer import TrainingCondition

__all__ = ["run_training", "train_builtin", "training_noise_seed"]

_AQN_STREAM = 0xA9A


def training_noise_seed(noise_seed: int, seed: int) -> int:
    """Seed of the training-noise generators: the spec's seed mixed with the training seed."""
    import numpy as np

    return int(np.random.SeedSequence([int(noise_seed), int(seed)]).generate_state(1)[0]
               & 0x7FFFFFFF)


def train_builtin(task: Task, condition: TrainingCondition, seed: int,
                  params: Mapping[str, Any], *,
                  progress: Callable[[int, int], None] | None = None,
                  device: str | None = None
                  ) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, dict[str, Any]]:
    """Build the tiny model for ``task`` and train it: ``(model, tokenizer, info)``.

    ``params`` are the builtin trainer's validated parameters (``steps``, ``lr``,
    ``batch_size``, ``warmup``, ``weight_decay``, ``model``, ``train_eval_items``).
    ``device``: where it trains (None: the CPU). The initial weights and the data order are
    drawn on the CPU either way, so two devices start from the same model.
    """
    check_whole(seed, "seed")
    items = task.items("train")
    if not items:
        raise InputError(f"task {task.name!r} has an empty train split.")
    tokenizer = build_tokenizer(task.vocabulary())
    model = build_model(tokenizer, params["model"], seed=seed)
    if device is not None:
        model.to(device)
    started = time.perf_counter()
    info = run_training(model, tokenizer, task, items, condition, seed=seed,
                        params=params, progress=progress)
    if device is not None:
        info["device"] = device
    info["wall_seconds"] = round(time.perf_counter() - started, 3)
    info.update(trainer="builtin", condition=condition.name, seed=seed,
                task=task.describe(), params=_jsonable(params),
                n_parameters=sum(p.numel() for p in model.parameters()))
    if params["train_eval_items"]:
        info["train_accuracy"] = _train_accuracy(
            model, tokenizer, task, items[: params["train_eval_items"]])
    model.eval()
    return model, tokenizer, info


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
    # foreach: one call per update step for all tensors instead of a Python loop over them;
    # the same kernels in the same order, so bitwise the weights of the loop (tested)
    optimizer = torch.optim.AdamW(model.parameters(), lr=params["lr"], betas=(0.9, 0.98),
                                  weight_decay=params["weight_decay"], foreach=True)
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
            x, y = x.to(model.device), y.to(model.device)
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

    # two batched calls, not two per item (each text gets the ids it gets alone)
    prompts = tokenizer([item.prompt for item in items], add_special_tokens=False)["input_ids"]
    targets = tokenizer([task.target(item) for item in items],
                        add_special_tokens=False)["input_ids"]
    rows, label_rows = [], []
    for prompt, target in zip(prompts, targets):
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


def _aqn_schedule(condition: TrainingCondition, steps: int) -> AQNSchedule | None:
    """The condition's AQN schedule stretched to this run's ``steps``.

    A study file cannot know the trainer's step count, so ``total_steps`` may be omitted
    from a mapping; a schedule written for another length is rescaled to ``steps`` (its
    stages keep their relative positions) and the original length is kept in ``info``.
    """
    aqn = condition.aqn
    if aqn is None:
        return None
    if aqn.total_steps != steps:
        aqn = dataclasses.replace(aqn, total_steps=steps)
    return aqn


def _describe(value: Any) -> Any:
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
