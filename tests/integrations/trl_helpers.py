"""A tiny Qwen2, its tokenizer and data for the trainer-callback tests (no hub)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from robuststats.models.model import build_model, build_tokenizer
from robuststats.models.tasks import get_task

SIZES = {"hidden_size": 32, "intermediate_size": 64}
WIDTH = 48


def task() -> Any:
    return get_task("arithmetic", n_items=20, n_train=64)


def tiny(seed: int = 0) -> tuple[Any, Any]:
    tok = build_tokenizer(task().vocabulary())
    return build_model(tok, SIZES, seed=seed), tok


def lm_dataset(tok: Any) -> Any:
    from datasets import Dataset

    t = task()
    rows = []
    for item in t.items("train"):
        ids = tok(item.prompt + t.target(item), add_special_tokens=False)["input_ids"][:WIDTH]
        ids = ids + [tok.pad_token_id] * (WIDTH - len(ids))
        rows.append({"input_ids": ids,
                     "labels": [i if i != tok.pad_token_id else -100 for i in ids]})
    return Dataset.from_list(rows)


def trainer_args(out: Path, **changes: Any) -> Any:
    from transformers import TrainingArguments

    options: dict[str, Any] = dict(
        max_steps=4, per_device_train_batch_size=8, gradient_accumulation_steps=2,
        save_steps=2, logging_steps=1, report_to=[], use_cpu=True, seed=0,
        learning_rate=1e-3, disable_tqdm=True, save_strategy="steps")
    options.update(changes)
    return TrainingArguments(str(out), **options)


def saved_tiny(path: Path) -> Path:
    """The tiny model saved where TRL can load it (and its reference copy) by path."""
    model, tok = tiny()
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def prompt_dataset() -> tuple[Any, list[Any]]:
    from datasets import Dataset

    items = task().items("train")
    return Dataset.from_list([{"prompt": it.prompt, "item": i}
                              for i, it in enumerate(items)]), items


def grpo_args(out: Path, **changes: Any) -> Any:
    from trl import GRPOConfig

    options: dict[str, Any] = dict(
        max_steps=2, per_device_train_batch_size=4, num_generations=4,
        max_completion_length=6, beta=0.04, save_steps=2, logging_steps=1, report_to=[],
        use_cpu=True, seed=0, learning_rate=1e-3, disable_tqdm=True)
    options.update(changes)
    return GRPOConfig(str(out), **options)
