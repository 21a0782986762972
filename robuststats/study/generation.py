"""Greedy decoding of a causal LM, batched, with a KV cache written out step by step.

Decoding is greedy with a KV cache, written out here (one model call per generated token,
explicit attention mask and position ids) instead of going through ``model.generate``.
On the tiny model both take the same time on a CPU (measured in docs/tasks_and_models.md);
the explicit loop makes what runs under a noise session plain: one prefill forward, then
one single-token forward per step, never a hidden extra pass. It is tested to give the
same tokens as ``generate`` with ``do_sample=False``. Prompts are left-padded; position ids
follow the attention mask, so a padded prompt sees exactly the positions it would see alone.

Used by the evaluator (:mod:`robuststats.study.evaluate`) and by the builtin trainer's
train-accuracy check (:mod:`robuststats.study.training`); it imports neither.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from robuststats.errors import InputError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from robuststats.study.tasks import Item, Task

__all__ = ["default_max_new_tokens", "generate_greedy"]


def generate_greedy(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    *,
    max_new_tokens: int,
    batch_size: int = 64,
    progress: Callable[[int, int], None] | None = None,
) -> list[str]:
    """Greedy completions of ``prompts`` (special tokens removed), in input order.

    Each batch stops when every sequence has produced the EOS token or after
    ``max_new_tokens`` tokens. ``progress(done, total)`` is called after each batch.
    """
    import torch

    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) \
            or max_new_tokens < 1:
        raise InputError(f"`max_new_tokens` must be a positive integer, got {max_new_tokens!r}.")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"`batch_size` must be a positive integer, got {batch_size!r}.")
    eos_id = tokenizer.eos_token_id
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_id
    if tokenizer.padding_side != "left":
        tokenizer.padding_side = "left"
    was_training = model.training
    model.eval()
    completions: list[str] = []
    try:
        with torch.inference_mode():
            for start in range(0, len(prompts), batch_size):
                batch = list(prompts[start : start + batch_size])
                completions.extend(
                    _greedy_batch(model, tokenizer, batch, max_new_tokens, eos_id, pad_id))
                if progress is not None:
                    progress(min(start + batch_size, len(prompts)), len(prompts))
    finally:
        model.train(was_training)
    return completions


def _greedy_batch(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    max_new_tokens: int,
    eos_id: int | None,
    pad_id: int,
) -> list[str]:
    import torch

    encoded = tokenizer(prompts, padding=True, return_tensors="pt", add_special_tokens=False)
    input_ids = encoded["input_ids"]
    mask = encoded["attention_mask"]
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                use_cache=True, logits_to_keep=1)
    cache = out.past_key_values
    n = input_ids.shape[0]
    generated = torch.full((n, max_new_tokens), pad_id, dtype=torch.long)
    finished = torch.zeros(n, dtype=torch.bool)
    next_positions = positions[:, -1:] + 1
    for step in range(max_new_tokens):
        tokens = out.logits[:, -1, :].argmax(dim=-1)
        tokens = torch.where(finished, torch.full_like(tokens, pad_id), tokens)
        generated[:, step] = tokens
        if eos_id is not None:
            finished |= tokens == eos_id
        if bool(finished.all()) or step == max_new_tokens - 1:
            break
        mask = torch.cat([mask, torch.ones((n, 1), dtype=mask.dtype)], dim=1)
        out = model(input_ids=tokens[:, None], attention_mask=mask, position_ids=next_positions,
                    past_key_values=cache, use_cache=True, logits_to_keep=1)
        cache = out.past_key_values
        next_positions = next_positions + 1
    texts = []
    for row in generated.tolist():
        if eos_id is not None and eos_id in row:
            row = row[: row.index(eos_id)]
        texts.append(tokenizer.decode(row, skip_special_tokens=True))
    return texts


def default_max_new_tokens(tokenizer: PreTrainedTokenizerBase, task: Task,
                           items: Sequence[Item]) -> int:
    """Room for the longest reference completion of ``items`` plus a margin, capped at 512.

    Only the length of the references is used, never their content.
    """
    longest = max((len(tokenizer(task.target(item), add_special_tokens=False)["input_ids"])
                   for item in items), default=1)
    return min(512, int(longest * 1.5) + 4)
