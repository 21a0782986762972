"""Cost of training noise per step of the builtin trainer, side by side in one process.

The demo's training step (tiny Qwen2 from ``robuststats.models.model``, a batch of the
arithmetic task, cross-entropy, backward, AdamW) with relative Gaussian noise on every matrix
product (``ops: matmul_only``, both phases, 5 %), in these variants:

- ``clean``: no session;
- ``<stream> previous``: tracked outputs and gradients noised as the engine did before the
  out-of-place fused pass (draw, multiply, two norms, add; each a separate pass);
- ``<stream> engine``: the engine as it is: for ``philox`` one C pass that draws,
  multiplies, measures and adds into a new tensor; for ``mt`` the same separate passes as
  before (its chunked pass plus a copy cost more at these sizes), so that pair runs the same
  code and is a control that should read 1.0;

for the default stream (``mt``) and the counter-based one (``philox``). Both forms give
bitwise the same weights (``tests/engine/test_fused_training.py``). The variants run
interleaved, a block of steps each per round inside one session (as the trainer holds one
session for its run), on the same model and batch (weights restored before each block);
printed are the median milliseconds of a step (wall and CPU of this process) and ratios to
the clean step and to the previous form.

    python benchmarks/training_step_noise.py --rounds 12 --steps 5 --threads 1
    python benchmarks/training_step_noise.py --hidden 256 --layers 4 --batch 16
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from robuststats.engine import NoiseSpec, inject
from robuststats.engine._ledger import LOW_PRECISION
from robuststats.engine._philox import PhiloxStream
from robuststats.models.model import build_model, build_tokenizer
from robuststats.models.tasks import get_task
from robuststats.models.training import _encode, _trim


def _unfused(stream: Any, y: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The previous form: draw, multiply, two norms (as the ledger's ``record``), add."""
    with torch.no_grad():
        if y.dtype in LOW_PRECISION:
            yf = y.float()
            e = stream.randn(y.shape, torch.float32).mul_(yf)
            out = torch.add(yf, e, alpha=scale).to(y.dtype)
            realised = out.float().sub_(yf)
            norms = torch.stack((torch.linalg.vector_norm(yf), torch.linalg.vector_norm(realised)))
            return out, norms.double().square_()
        e = stream.randn(y.shape, y.dtype).mul_(y)
        norms = torch.stack((torch.linalg.vector_norm(y), torch.linalg.vector_norm(e) * scale))
        return torch.add(y, e, alpha=scale), norms.double().square_()


@contextlib.contextmanager
def _form(fused: bool):
    if fused:
        yield
        return
    saved = PhiloxStream.perturbed  # the default stream has no one-pass form to replace
    try:
        PhiloxStream.perturbed = _unfused  # type: ignore[method-assign]
        yield
    finally:
        PhiloxStream.perturbed = saved  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--steps", type=int, default=5, help="steps per variant and round")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--hidden", type=int, default=64, help="model width (demo: 64)")
    p.add_argument("--layers", type=int, default=2, help="depth (demo: 2)")
    p.add_argument("--batch", type=int, default=32, help="items per step (demo: 32)")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    task = get_task("arithmetic", seed=0, n_items=50, n_train=2000)
    tok = build_tokenizer(task.vocabulary())
    sizes = {"hidden_size": args.hidden, "num_layers": args.layers,
             "intermediate_size": 3 * args.hidden}
    model = build_model(tok, sizes, seed=0).to(getattr(torch, args.dtype))
    model.train()
    ids, labels = _encode(tok, task, task.items("train")[: args.batch])
    x, y = _trim(ids, labels)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    variants: dict[str, tuple[Any, bool]] = {"clean": (None, True)}
    for gen in ("mt", "philox"):
        spec = NoiseSpec(scale=0.05, ops="matmul_only", phases="both", seed=1, generator=gen)
        variants[f"{gen} previous"] = (spec, False)
        variants[f"{gen} engine"] = (spec, True)

    def step() -> None:
        logits = model(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]).float(), y[:, 1:].reshape(-1),
            ignore_index=-100)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    wall: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    load = os.getloadavg()[0]
    for r in range(args.rounds + 1):
        for name, (spec, fused) in variants.items():
            model.load_state_dict(start)
            # one session around a block of steps, as the trainer holds one for its run
            ctx = inject(model, spec) if spec is not None else contextlib.nullcontext()
            with _form(fused), ctx:
                for _ in range(args.steps):
                    w, c = time.perf_counter(), time.process_time()
                    step()
                    w, c = time.perf_counter() - w, time.process_time() - c
                    if r >= 1:  # one warm-up round
                        wall[name].append(w)
                        cpu[name].append(c)
    med = {k: statistics.median(v) * 1e3 for k, v in wall.items()}
    medc = {k: statistics.median(v) * 1e3 for k, v in cpu.items()}
    print(f"hidden {args.hidden}, {args.layers} layers, batch {args.batch} × {x.shape[1]} tokens, "
          f"{args.dtype}, {args.threads} thread(s), {args.rounds} rounds of {args.steps} steps; "
          f"load average "
          f"{load:.2f} → {os.getloadavg()[0]:.2f}")
    print("| variant | wall ms | CPU ms | / clean | / previous |")
    print("| --- | --- | --- | --- | --- |")
    for name in variants:
        base = name.replace("engine", "previous") if name.endswith(" engine") else None
        vs = f"{med[name] / med[base]:.3f}" if base else ""
        print(f"| {name} | {med[name]:.2f} | {medc[name]:.2f} | {med[name] / med['clean']:.3f} "
              f"| {vs} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
