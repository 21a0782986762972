"""A tiny Qwen2 scored on agreement with its own clean output, and a planted sensitivity.

No training: the task's reference for each prompt is the clean model's own greedy
completion, so clean accuracy is 1 by construction and a drop is the share of items whose
output noise changed. That makes a planted sensitivity visible in seconds. Imported by the
tests of this directory as ``probe_models``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AgreementTask:
    """Items whose reference is a model's clean completion; right = same first tokens."""

    test_items: tuple
    train_items: tuple

    def items(self, split: str) -> list:
        return list(self.test_items if split == "test" else self.train_items)

    def target(self, item) -> str:
        return item.solution

    def score(self, item, completion: str) -> bool:
        return completion.startswith(item.solution)


def agreement_setup(n_items: int = 40, n_layers: int = 4, seed: int = 0,
                    new_tokens: int = 4, gain: float = 3.0):
    """(trained, task) for a randomly initialised tiny Qwen2 of ``n_layers`` layers.

    Matrix weights are scaled by ``gain``: at Qwen2's initialisation every prompt decodes
    to the same token; at 3× the outputs depend on the prompt (24 distinct completions of
    40 arithmetic prompts).
    """
    import torch

    from robuststats.models.generation import generate_greedy
    from robuststats.models.model import build_model, build_tokenizer
    from robuststats.models.tasks import Item, get_task
    from robuststats.models.trainer import TrainedModel

    base = get_task("arithmetic", n_items=n_items, n_train=64, seed=0)
    tokenizer = build_tokenizer(base.vocabulary())
    model = build_model(tokenizer, {"num_layers": n_layers}, seed=seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 2:
                p.mul_(gain)
    items = base.items("test") + base.items("train")
    completions = generate_greedy(model, tokenizer, [it.prompt for it in items],
                                  max_new_tokens=new_tokens, batch_size=64)
    refs = [Item(it.item_id, it.prompt, c, c) for it, c in zip(items, completions)]
    task = AgreementTask(tuple(refs[:n_items]), tuple(refs[n_items:]))
    return TrainedModel(model=model, tokenizer=tokenizer), task


def plant_cancellation(model, layer: int, gain: float = 100.0, seed: int = 0) -> None:
    """Make ``down_proj`` of ``layer`` ill-conditioned without changing its function.

    ``y = (W + A)x − Ax`` with ``|A| ≈ gain·|W|``: the clean result is ``Wx`` (up to
    rounding), but relative noise on each of the two products is ``gain`` times larger than
    on ``Wx`` itself, as in a computation that cancels large terms.
    """
    import torch
    from torch import nn

    mlp = model.model.layers[layer].mlp
    old = mlp.down_proj
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(old.weight.shape, generator=gen) * old.weight.abs().mean() * gain

    class Cancelling(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.big = nn.Linear(old.in_features, old.out_features, bias=False)
            self.cancel = nn.Linear(old.in_features, old.out_features, bias=False)
            with torch.no_grad():
                self.big.weight.copy_(old.weight.double().add(a.double()).float())
                self.cancel.weight.copy_(a)

        def forward(self, x):
            return self.big(x) - self.cancel(x)

    mlp.down_proj = Cancelling()
