"""A small external training command, as a study's ``command`` trainer runs it.

Trains the tiny Qwen2 on the arithmetic task for a few steps with the noise the study put in
``ROBUSTSTATS_NOISE`` (picked up by the engine in each process that trains) and the AQN
schedule in ``ROBUSTSTATS_AQN``, then saves model and tokenizer with ``save_pretrained``.

    python train_tiny.py --output DIR --seed N [--steps 3] [--mode ok|fail|no-inject|
                                               no-output|child]

``--mode child`` also trains in a second process (multiprocessing, spawn) that inherits the
environment and opens its own session, as a Ray or torchrun worker would.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import sys
from pathlib import Path

SIZES = {"hidden_size": 32, "intermediate_size": 64, "num_layers": 2, "num_heads": 2,
         "num_kv_heads": 1}


def _setup(seed: int):
    import torch

    from robuststats.models.model import build_model, build_tokenizer
    from robuststats.models.tasks import TASKS

    torch.set_num_threads(1)
    task = TASKS.build("arithmetic", seed=0, n_items=20, n_train=64)
    tokenizer = build_tokenizer(task.vocabulary())
    model = build_model(tokenizer, SIZES, seed=seed)
    return torch, task, tokenizer, model


def _train(model, tokenizer, task, steps: int, seed: int) -> list[float]:
    """A few AdamW steps of next-token loss, inside the environment's noise and AQN."""
    import torch

    from robuststats.engine import aqn_perturb
    from robuststats.models.external import aqn_from_env

    items = task.items("train")[:16]
    texts = [it.prompt + task.target(it) for it in items]
    batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    aqn = aqn_from_env()
    if aqn is not None:
        aqn = dataclasses.replace(aqn, total_steps=steps)
    gen = torch.Generator().manual_seed(seed)
    sigmas = []
    model.train()
    for step in range(steps):
        sigma = aqn.sigma(step) if aqn is not None else 0.0
        sigmas.append(sigma)
        with aqn_perturb(model, sigma, generator=gen):
            loss = model(**batch, labels=labels).loss
            loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()
    return sigmas


def _child(seed: int) -> None:
    from robuststats.engine import apply_from_env, stop_from_env

    _, task, tokenizer, model = _setup(seed + 1000)
    apply_from_env(model)
    _train(model, tokenizer, task, 2, seed)
    stop_from_env(model)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--mode", default="ok",
                        choices=["ok", "fail", "no-inject", "no-output", "child"])
    args = parser.parse_args(argv)
    print(f"training seed {args.seed} into {args.output}", flush=True)
    if args.mode == "fail":
        print("loss is nan at step 2", flush=True)
        print("RuntimeError: training diverged", file=sys.stderr, flush=True)
        return 3
    from robuststats.engine import apply_from_env, stop_from_env

    _, task, tokenizer, model = _setup(args.seed)
    child = None
    if args.mode == "child":
        child = multiprocessing.get_context("spawn").Process(target=_child, args=(args.seed,))
        child.start()
    if args.mode != "no-inject":
        apply_from_env(model)
    sigmas = _train(model, tokenizer, task, args.steps, args.seed)
    if args.mode != "no-inject":
        stop_from_env(model)
    if child is not None:
        child.join()
        if child.exitcode != 0:
            return 4
    if args.mode == "no-output":
        return 0
    out = Path(args.output)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "aqn_sigmas.json").write_text(json.dumps(sigmas))
    print("saved", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
