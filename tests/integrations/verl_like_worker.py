"""A worker process shaped like verl's FSDP actor, for tests/integrations/test_verl_recipe.py:
a rollout (generation, no session), then ``update_policy`` (forward, loss, backward and an
optimizer step inside ``apply_from_env`` / ``stop_from_env``). Usage: ``python
verl_like_worker.py MODEL_DIR [--no-session]``."""

from __future__ import annotations

import sys

import torch
from transformers import AutoModelForCausalLM

from robuststats.engine import apply_from_env, stop_from_env


def update_policy(model, optimizer, batch, *, session: bool) -> None:
    if session:
        apply_from_env(model)
    try:
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
    finally:
        if session:
            stop_from_env(model)
    optimizer.step()
    optimizer.zero_grad()


def main(argv: list[str]) -> None:
    model = AutoModelForCausalLM.from_pretrained(argv[0])
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    prompt = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():  # the rollout: no session, clean
        rollout = model.generate(prompt, max_new_tokens=4, do_sample=False)
    model.train()
    update_policy(model, optimizer, rollout, session="--no-session" not in argv)


if __name__ == "__main__":
    main(sys.argv[1:])
