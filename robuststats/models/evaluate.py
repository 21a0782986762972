"""Batched greedy evaluation of a causal LM on task items, optionally under inference noise.

Completions come from :func:`robuststats.models.generation.generate_greedy` (one prefill
forward, then one single-token forward per generated token, never a hidden extra pass).

With ``noise`` set, generation runs inside ``robuststats.engine.inject`` with the noise
spec's seed replaced by ``noise_seed``, forward phase only (generation has no backward
pass), and verification on: if a requested op received no injection the call fails
instead of reporting clean accuracy as noisy accuracy.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from robuststats._fields import check_whole
from robuststats.errors import InputError
from robuststats.models.generation import default_max_new_tokens, generate_greedy

if TYPE_CHECKING:
    import pandas as pd

    from robuststats.engine import NoiseSpec
    from robuststats.models.tasks import Item, Task
    from robuststats.models.trainer import TrainedModel

__all__ = ["evaluate"]


def evaluate(
    trained: TrainedModel,
    task: Task,
    items: Sequence[Item] | None = None,
    *,
    noise: NoiseSpec | None = None,
    noise_seed: int = 0,
    batch_size: int = 64,
    max_new_tokens: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Score greedy completions of ``items`` (default: the task's test split).

    Returns one row per item with columns ``item_id``, ``correct`` (0/1) and
    ``completion``. ``df.attrs`` holds ``eval_noise`` (the scale, 0.0 when clean),
    ``noise_seed``, ``max_new_tokens``, ``batch_size``, ``seconds``, ``injections`` (total
    count) and ``injection_stats``: the engine's session stats (one record per layer × op ×
    phase with ``count``, ``rms_noise_ratio`` and ``target_scale``), empty when clean. The
    study executor stores them beside the cell's outcomes.

    Noisy outcomes depend on ``noise_seed`` and on ``batch_size`` (the batch decides which
    random numbers meet which item); with both fixed they are reproducible.
    """
    import pandas as pd

    if items is None:
        items = task.items("test")
    items = list(items)
    if not items:
        raise InputError("`items` must not be empty.")
    check_whole(noise_seed, "noise_seed")
    model, tokenizer = trained.model, trained.tokenizer
    # a task may render prompts with the model's tokenizer (a chat template) and set how
    # generation stops (stop strings, the end of a "#### N" answer, a token budget)
    render = getattr(task, "render_prompt", None)
    prompts = [render(item, tokenizer) if render else item.prompt for item in items]
    options = dict(getattr(task, "generation_options", dict)())
    task_budget = options.pop("max_new_tokens", None)
    if max_new_tokens is None:
        max_new_tokens = task_budget or default_max_new_tokens(tokenizer, task, items)
    attrs: dict[str, Any] = {"noise_seed": int(noise_seed), "batch_size": batch_size,
                             "max_new_tokens": max_new_tokens}
    started = time.perf_counter()
    if noise is None or float(noise.scale) == 0.0:
        completions = generate_greedy(model, tokenizer, prompts, max_new_tokens=max_new_tokens,
                                      batch_size=batch_size, progress=progress, **options)
        attrs.update(eval_noise=0.0, injections=0, injection_stats=[])
    else:
        from robuststats.engine import inject

        spec = noise.replace(seed=int(noise_seed), phases="forward")
        with inject(model, spec, verify=True) as session:
            completions = generate_greedy(model, tokenizer, prompts,
                                          max_new_tokens=max_new_tokens,
                                          batch_size=batch_size, progress=progress, **options)
        stats = session.stats
        attrs.update(eval_noise=float(spec.scale), noise=spec.to_dict(),
                     injections=int(stats["count"].sum()) if "count" in stats else None,
                     injection_stats=stats.to_dict(orient="records"))
    attrs["seconds"] = time.perf_counter() - started
    frame = pd.DataFrame({
        "item_id": [item.item_id for item in items],
        "correct": [int(task.score(item, text)) for item, text in zip(items, completions)],
        "completion": completions,
    })
    frame.attrs.update(attrs)
    return frame
