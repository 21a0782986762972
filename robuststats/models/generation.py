"""Greedy decoding of a causal LM, batched, with a KV cache written out step by step.

Decoding is greedy with a KV cache, written out here (one model call per generated token,
explicit attention mask and position ids) instead of going through ``model.generate``.
On the tiny model both take the same time on a CPU (measured in docs/tasks_and_models.md);
the explicit loop makes what runs under a noise session plain: one prefill forward, then
one single-token forward per step, never a hidden extra pass. It is tested to give the
same tokens as ``generate`` with ``do_sample=False``. Prompts are left-padded; position ids
follow the attention mask, so a padded prompt sees exactly the positions it would see alone.

Throughput on a CPU: prompts are batched in order of length (less padding), and a row
leaves the batch when it is done (an end-of-sequence token, a stop string, or the end of
its ``#### N`` answer; rows are dropped once a quarter of the batch has finished, since
dropping copies the KV cache), so the batch shrinks instead of carrying finished rows to
the longest completion. Under noise, which random numbers meet which item depends on the batch,
so noisy outcomes depend on ``batch_size`` (and on this order), and are reproducible.

Used by the evaluator (:mod:`robuststats.models.evaluate`) and by the builtin trainer's
train-accuracy check (:mod:`robuststats.models.training`); it imports neither.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from robuststats._fields import check_whole
from robuststats.errors import InputError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from robuststats.models.tasks import Item, Task

__all__ = ["default_max_new_tokens", "generate_greedy"]

#: finished rows are dropped from a batch once they are 1/COMPACT_FRACTION of it
COMPACT_FRACTION = 4


def generate_greedy(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    *,
    max_new_tokens: int,
    batch_size: int = 64,
    progress: Callable[[int, int], None] | None = None,
    stop: Callable[[str], int | None] | None = None,
    stop_strings: Sequence[str] = (),
    sort_by_length: bool = True,
) -> list[str]:
    """Greedy completions of ``prompts`` (special tokens removed), in input order.

    A row stops at an end-of-sequence token (the tokenizer's and the model's
    ``generation_config.eos_token_id``, which may be several), at the first of
    ``stop_strings``, where ``stop(text)`` returns an index (the completion is cut there,
    e.g. :func:`robuststats.models.answers.stop_after_answer`), or after
    ``max_new_tokens`` tokens. Finished rows leave the batch (their KV cache is dropped),
    so a batch costs what its unfinished rows cost. With ``sort_by_length`` prompts are
    batched in order of token length (less padding); completions come back in input order
    either way. ``progress(done, total)`` is called after each batch.
    """
    import torch

    check_whole(max_new_tokens, "max_new_tokens", low=1)
    check_whole(batch_size, "batch_size", low=1)
    if isinstance(stop_strings, str) or not all(isinstance(s, str) and s for s in stop_strings):
        raise InputError(f"`stop_strings` must be a list of non-empty strings, got "
                         f"{stop_strings!r}.")
    eos_ids = _eos_ids(model, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else \
        (min(eos_ids) if eos_ids else 0)
    if tokenizer.padding_side != "left":
        tokenizer.padding_side = "left"
    order = list(range(len(prompts)))
    if sort_by_length and len(prompts) > batch_size:
        lengths = [len(ids) for ids in
                   tokenizer(list(prompts), add_special_tokens=False)["input_ids"]]
        order.sort(key=lambda i: lengths[i])
    rules = _StopRules(tokenizer, stop, tuple(stop_strings))
    was_training = model.training
    model.eval()
    completions: list[str] = [""] * len(prompts)
    try:
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                chosen = order[start : start + batch_size]
                texts = _greedy_batch(model, tokenizer, [prompts[i] for i in chosen],
                                      max_new_tokens, eos_ids, pad_id, rules)
                for i, text in zip(chosen, texts):
                    completions[i] = text
                if progress is not None:
                    progress(min(start + batch_size, len(prompts)), len(prompts))
    finally:
        model.train(was_training)
    return completions


def _eos_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> frozenset[int]:
    """End-of-sequence ids: the tokenizer's and the generation config's (an instruct model
    ends its turn with one and pads with another, e.g. Qwen2.5's ``<|im_end|>``)."""
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    config = getattr(model, "generation_config", None)
    extra = getattr(config, "eos_token_id", None) if config is not None else None
    if isinstance(extra, int):
        ids.add(extra)
    elif isinstance(extra, (list, tuple)):
        ids.update(int(i) for i in extra)
    return frozenset(ids)


class _StopRules:
    """When a row is done, and where its completion is cut.

    Checked on the decoded last :data:`TAIL` tokens of each unfinished row after every
    step (a stop string or an answer ends within them); the final text is then cut at the
    first stop in the whole completion.
    """

    TAIL = 48

    def __init__(self, tokenizer: PreTrainedTokenizerBase,
                 stop: Callable[[str], int | None] | None, strings: tuple[str, ...]) -> None:
        self.tokenizer, self.stop, self.strings = tokenizer, stop, strings
        self.active = stop is not None or bool(strings)

    def done(self, tokens: list[int]) -> bool:
        tail = self.tokenizer.decode(tokens[-self.TAIL:], skip_special_tokens=True)
        if any(s in tail for s in self.strings):
            return True
        return self.stop is not None and self.stop(tail) is not None

    def cut(self, text: str) -> str:
        ends = [text.find(s) for s in self.strings if s in text]
        if self.stop is not None and (at := self.stop(text)) is not None:
            ends.append(at)
        return text[: min(ends)] if ends else text


def _greedy_batch(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    max_new_tokens: int,
    eos_ids: frozenset[int],
    pad_id: int,
    rules: _StopRules,
) -> list[str]:
    import torch

    encoded = tokenizer(prompts, padding=True, return_tensors="pt", add_special_tokens=False)
    device = model.device  # a checkpoint may live on a GPU
    input_ids = encoded["input_ids"].to(device)
    mask = encoded["attention_mask"].to(device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                use_cache=True, logits_to_keep=1)
    cache_kw = _cache_keyword(model)
    cache = _cache_of(out)
    n = input_ids.shape[0]
    generated: list[list[int]] = [[] for _ in range(n)]
    rows = list(range(n))  # batch position -> prompt index, for the rows in the batch
    done = [False] * n
    next_positions = positions[:, -1:] + 1
    eos = torch.tensor(sorted(eos_ids), dtype=torch.long, device=device)
    for step in range(max_new_tokens):
        tokens = out.logits[:, -1, :].argmax(dim=-1)
        ended = torch.isin(tokens, eos).tolist()
        for j, (row, token) in enumerate(zip(rows, tokens.tolist())):
            if done[j]:
                continue
            if ended[j]:
                done[j] = True
                continue
            generated[row].append(token)
            if rules.active and rules.done(generated[row]):
                done[j] = True
        if all(done) or step == max_new_tokens - 1:
            break
        if sum(done) * COMPACT_FRACTION >= len(done):
            # finished rows leave the batch, with their KV cache, once they are a quarter of
            # it (compacting copies the cache: not after every single row)
            keep = [j for j, d in enumerate(done) if not d]
            index = torch.tensor(keep, dtype=torch.long, device=device)
            cache.batch_select_indices(index)
            tokens, mask, next_positions = tokens[index], mask[index], next_positions[index]
            rows, done = [rows[j] for j in keep], [False] * len(keep)
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
        out = model(input_ids=tokens[:, None], attention_mask=mask, position_ids=next_positions,
                    use_cache=True, logits_to_keep=1, **{cache_kw: cache})
        cache = _cache_of(out)
        next_positions = next_positions + 1
    texts = [tokenizer.decode(row, skip_special_tokens=True) for row in generated]
    return [rules.cut(text) for text in texts] if rules.active else texts


def default_max_new_tokens(tokenizer: PreTrainedTokenizerBase, task: Task,
                           items: Sequence[Item]) -> int:
    """Room for the longest reference completion of ``items`` plus a margin, capped at 512.

    Only the length of the references is used, never their content.
    """
    # one batched call (each text gets the ids it gets alone): a call per item took about
    # 5 % of an evaluation cell of the tiny model
    targets = [task.target(item) for item in items]
    ids = tokenizer(targets, add_special_tokens=False)["input_ids"] if targets else []
    longest = max((len(row) for row in ids), default=1)
    return min(512, int(longest * 1.5) + 4)


def _cache_keyword(model: Any) -> str:
    """The forward's name for the KV cache: ``cache`` (transformers ≥ 5.24, where
    ``past_key_values`` is deprecated with a FutureWarning) or ``past_key_values``."""
    import inspect

    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def _cache_of(out: Any) -> Any:
    """The KV cache of a forward's output, under either name."""
    if "cache" in out:
        return out["cache"]
    return out.past_key_values
