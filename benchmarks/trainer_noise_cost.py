"""Cost of noise-aware training in Hugging Face trainers: an SFT step (``transformers.Trainer``)
and a GRPO step (TRL's ``GRPOTrainer``) with noise off and on, side by side.

Each variant trains ``--steps`` optimizer steps in a fresh trainer; a step is timed from
``on_step_begin`` to ``on_step_end`` (the GRPO step includes its rollout and
log-probability passes), the first step of each trainer is dropped, and the variants run
interleaved for ``--repeats`` rounds. Printed: the median step time per variant and its
ratio to the clean variant of the same trainer, with the load average before and after.

    python benchmarks/trainer_noise_cost.py --hidden 256 --layers 4 --steps 6 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments

from robuststats.integrations.transformers import add_noise
from robuststats.models.model import build_model, build_tokenizer
from robuststats.models.tasks import get_task

NOISE = {"scale": 0.05, "phases": "both", "seed": 0}
GRPO_NOISE = {**NOISE, "layer_scales": {"lm_head": 0}}


class StepTimer(TrainerCallback):
    def __init__(self) -> None:
        self.times: list[float] = []
        self._t = 0.0

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._t = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.times.append(time.perf_counter() - self._t)


def _model(sizes: dict[str, int], task: Any) -> tuple[Any, Any]:
    tok = build_tokenizer(task.vocabulary())
    return build_model(tok, sizes, seed=0), tok


def sft_step(sizes: dict[str, int], steps: int, noise: dict[str, Any] | None,
             out: Path) -> list[float]:
    from datasets import Dataset

    task = get_task("arithmetic", n_items=20, n_train=256)
    model, tok = _model(sizes, task)
    rows = []
    for item in task.items("train"):
        ids = tok(item.prompt + task.target(item), add_special_tokens=False)["input_ids"][:64]
        ids = ids + [tok.pad_token_id] * (64 - len(ids))
        rows.append({"input_ids": ids, "labels": [i if i != tok.pad_token_id else -100
                                                  for i in ids]})
    args = TrainingArguments(str(out), max_steps=steps, per_device_train_batch_size=16,
                             report_to=[], use_cpu=True, save_strategy="no",
                             disable_tqdm=True, logging_steps=10_000, seed=0)
    trainer = Trainer(model=model, args=args, train_dataset=Dataset.from_list(rows))
    timer = StepTimer()
    trainer.add_callback(timer)
    if noise is not None:
        add_noise(trainer, noise)
    trainer.train()
    return timer.times[1:]


def grpo_step(sizes: dict[str, int], steps: int, noise: dict[str, Any] | None,
              during: list[str], out: Path) -> list[float]:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    task = get_task("arithmetic", n_items=20, n_train=256)
    base = out / "base"
    if not base.exists():
        model, tok = _model(sizes, task)
        model.save_pretrained(base)
        tok.save_pretrained(base)
    items = task.items("train")
    data = Dataset.from_list([{"prompt": it.prompt, "item": i} for i, it in enumerate(items)])

    def reward(completions: list[str], item: list[int], **kwargs: Any) -> list[float]:
        return [float(task.score(items[i], c)) for i, c in zip(item, completions)]

    from transformers import AutoTokenizer

    args = GRPOConfig(str(out / "grpo"), max_steps=steps, per_device_train_batch_size=16,
                      num_generations=4, max_completion_length=16, beta=0.04,
                      report_to=[], use_cpu=True, save_strategy="no", disable_tqdm=True,
                      logging_steps=10_000, seed=0, gradient_checkpointing=False)
    trainer = GRPOTrainer(model=str(base), reward_funcs=[reward], args=args,
                          train_dataset=data, processing_class=AutoTokenizer.from_pretrained(base))
    timer = StepTimer()
    trainer.add_callback(timer)
    if noise is not None:
        add_noise(trainer, noise, during=during)
    trainer.train()
    return timer.times[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    a = parser.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    sizes = {"hidden_size": a.hidden, "intermediate_size": a.hidden * 3, "num_layers": a.layers,
             "num_heads": 4, "num_kv_heads": 2}
    variants = {
        ("SFT", "clean"): lambda d: sft_step(sizes, a.steps, None, d),
        ("SFT", "callback, scale 0"): lambda d: sft_step(sizes, a.steps, {"scale": 0.0}, d),
        ("SFT", "update noise, fwd+bwd"): lambda d: sft_step(sizes, a.steps, NOISE, d),
        ("GRPO", "clean"): lambda d: grpo_step(sizes, a.steps, None, [], d),
        ("GRPO", "update noise, fwd+bwd"): lambda d: grpo_step(sizes, a.steps, GRPO_NOISE,
                                                                ["update"], d),
        ("GRPO", "rollout+logprob+update noise"): lambda d: grpo_step(
            sizes, a.steps, GRPO_NOISE, ["rollout", "logprob", "update"], d),
    }
    times: dict[tuple[str, str], list[float]] = {k: [] for k in variants}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.repeats):
            for key, run in variants.items():
                times[key] += run(Path(tmp) / f"{key[0]}-{r}-{len(times[key])}")
            # the table so far after every round: a run cut short still reports
            _table(times, a, r + 1, load_before, os.getloadavg())


def _table(times: dict[tuple[str, str], list[float]], a: argparse.Namespace, rounds: int,
           load_before: tuple[float, ...], load_after: tuple[float, ...]) -> None:
    print(f"hidden {a.hidden}, {a.layers} layers, {a.steps} steps × {rounds} of {a.repeats} "
          f"rounds, threads {torch.get_num_threads()}; load average {load_before[0]:.1f} → "
          f"{load_after[0]:.1f}", flush=True)
    print("| trainer | variant | median step (ms) | ratio to clean |")
    print("| --- | --- | --- | --- |")
    for (trainer, variant), ts in times.items():
        median = statistics.median(ts)
        clean = statistics.median(times[(trainer, "clean")])
        print(f"| {trainer} | {variant} | {1000 * median:.0f} | {median / clean:.3f} |",
              flush=True)


if __name__ == "__main__":
    main()
