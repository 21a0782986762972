"""The ``grpo`` trainer: the embedded tiny Qwen2, warm-started by a short supervised run,
then trained with TRL's ``GRPOTrainer`` on the task's exact-match reward (CPU, minutes).

```yaml
trainer:
  name: grpo
  params: {warmup_steps: 300, steps: 40, group_size: 4, prompts_per_step: 4, beta: 0.04,
           during: [update]}
```

1. **Warm start**: the builtin supervised loop (:func:`robuststats.models.training.run_training`),
   clean, ``warmup_steps`` steps: a random model never earns a reward, so GRPO needs a
   policy that sometimes answers. Every condition of a seed starts from the same weights.
2. **GRPO** (Shao et al. 2024, arXiv:2402.03300, as TRL implements it): ``prompts_per_step``
   train prompts per step, ``group_size`` sampled completions each, group-normalised
   advantages, KL to the warm start with coefficient ``beta``. Reward: 1 when
   :meth:`Task.score` accepts the completion (exact match of the final answer), plus
   ``format_weight`` × 1 when the completion has the task's ``#### <number>`` form.
3. **Noise**: the condition's ``train_noise`` through
   :class:`robuststats.integrations.transformers.NoiseCallback` in the parts named by
   ``during`` (default: the update's forward and backward, rollout and log-probability
   passes clean, the verl setting of the notes). TRL computes the LM head's
   log-probabilities in a fused chunked function the engine cannot reach, so
   ``layer_scales: {lm_head: 0}`` is added unless the spec sets ``lm_head`` itself (and
   recorded in ``info``). The run's proof of noise is verified before the model is kept.

Deterministic per seed: model initialisation, warm-start data order and noise come from
generators seeded by the training seed; TRL seeds the global RNGs from it (restored after).
Resumable: GRPO checkpoints go to ``<workdir>/grpo`` every ``save_steps`` steps, and a
rerun with the same workdir continues from the last one (same weights as uninterrupted).
Needs ``robuststats[trl]``.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from robuststats._fields import check_whole
from robuststats.errors import InputError
from robuststats.models.trainer import (
    TRAINERS,
    TrainedModel,
    Trainer,
    TrainingCondition,
    _model_params,
)

if TYPE_CHECKING:
    from robuststats.models.tasks import Task

__all__ = ["GRPOStudyTrainer"]

_PARTS = ("rollout", "logprob", "update")


def _count(low: int, high: int = 100_000) -> Callable[[str, Any], int]:
    return lambda key, value: check_whole(value, key, low=low, high=high)


def _number(low: float, high: float = math.inf, *, open_low: bool = False
            ) -> Callable[[str, Any], float]:
    def check(key: str, value: Any) -> float:
        ok = (not isinstance(value, bool) and isinstance(value, (int, float))
              and math.isfinite(value) and (value > low if open_low else value >= low)
              and value <= high)
        if not ok:
            side = ">" if open_low else "≥"
            raise InputError(f"`{key}` must be a number {side} {low:g}"
                             + (f" and ≤ {high:g}" if math.isfinite(high) else "")
                             + f", got {value!r}.")
        return float(value)

    return check


def _during(key: str, value: Any) -> tuple[str, ...]:
    from robuststats.errors import did_you_mean

    values = [value] if isinstance(value, str) else value
    if not isinstance(values, (list, tuple)) or not values:
        raise InputError(f"`{key}` must be a list of parts among {list(_PARTS)}, got {value!r}.")
    for v in values:
        if v not in _PARTS:
            raise InputError(f"`{key}` must name parts among {list(_PARTS)}, got {v!r}"
                             f"{did_you_mean(str(v), _PARTS)}.")
    return tuple(sorted(set(values)))


@TRAINERS.register("grpo")
class GRPOStudyTrainer(Trainer):
    """Warm start (supervised, clean), then GRPO with TRL under the condition's noise."""

    name: ClassVar[str] = "grpo"
    params_spec: ClassVar[dict[str, tuple[Callable[[str, Any], Any], Any]]] = {
        "warmup_steps": (_count(0), 300),
        "warmup_lr": (_number(0, open_low=True), 3e-3),
        "warmup_batch_size": (_count(1), 32),
        "steps": (_count(1), 40),
        "group_size": (_count(2, 1024), 4),
        "prompts_per_step": (_count(1, 4096), 4),
        "beta": (_number(0), 0.04),
        "lr": (_number(0, open_low=True), 5e-4),
        "temperature": (_number(0, open_low=True), 1.0),
        "max_new_tokens": (_count(1, 512), None),
        "format_weight": (_number(0), 0.2),
        "during": (_during, ("update",)),
        "save_steps": (_count(1), 10),
        "model": (_model_params, {}),
    }

    def train(self, task: Task, condition: TrainingCondition, seed: int,
              workdir: Path | None = None, *,
              progress: Callable[[int, int], None] | None = None) -> TrainedModel:
        check_whole(seed, "seed")
        if workdir is None:
            with tempfile.TemporaryDirectory(prefix="robuststats-grpo-") as tmp:
                return self._train(task, condition, seed, Path(tmp), progress)
        return self._train(task, condition, seed, Path(workdir), progress)

    def _train(self, task: Task, condition: TrainingCondition, seed: int, workdir: Path,
               progress: Callable[[int, int], None] | None) -> TrainedModel:
        import random

        import numpy as np
        import torch

        from robuststats.models.grpo_run import run_grpo, warm_start

        started = time.perf_counter()
        p = self.params
        model, tokenizer, warm_info = warm_start(task, seed, p, workdir / "warm_start")
        # TRL seeds the global RNGs from the seed; leave the caller's state as it was
        # (TRL calls the legacy global seeding, so its legacy state is what is restored)
        py_state, np_state = random.getstate(), np.random.get_state()  # noqa: NPY002
        try:
            with torch.random.fork_rng(devices=[]):
                info = run_grpo(model, tokenizer, task, condition, seed, p, workdir,
                                progress=progress)
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)  # noqa: NPY002
        info.update(trainer="grpo", condition=condition.name, seed=seed,
                    task=task.describe(), warm_start=warm_info,
                    params={k: (list(v) if isinstance(v, tuple) else v) for k, v in p.items()},
                    wall_seconds=round(time.perf_counter() - started, 3))
        model.eval()
        return TrainedModel(model=model, tokenizer=tokenizer, info=info)
