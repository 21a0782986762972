"""Overhead of robuststats.engine noise on a Qwen2-shaped stack (CPU), side by side.

Variants, timed in one process with interleaved repeats (so drift in machine load hits
all of them alike), medians reported:

- ``clean``: no session;
- ``engine scale=0``: ``inject`` with scale 0 (installs nothing);
- ``engine fwd linear``: relative Gaussian forward noise on every ``nn.Linear``;
- ``naive``: the seeds' style, ``F.linear`` monkey-patched globally to return
  ``y + randn_like(y) * y.abs() * s`` (global RNG, three extra passes and allocations).

Both a forward pass (``torch.no_grad``, as in evaluation) and forward+backward (training)
are measured. Run: ``python benchmarks/engine_overhead.py [--hidden 1024 --layers 4]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager, nullcontext

import torch
import torch.nn.functional as F

from robuststats.engine import NoiseSpec, inject


def build_model(hidden: int, layers: int, vocab: int) -> torch.nn.Module:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=int(hidden * 2.75),  # Qwen2.5's ratio (1536 → 8960 is 5.8; 0.5B uses 4864/896)
        num_hidden_layers=layers,
        num_attention_heads=hidden // 64,
        num_key_value_heads=max(hidden // 256, 1),
        max_position_embeddings=1024,
    )
    torch.manual_seed(0)
    return Qwen2ForCausalLM(cfg).eval()


@contextmanager
def naive_linear_noise(scale: float):
    """The seeds' global patch: every F.linear call gets fresh noise from the global RNG."""
    original = F.linear

    def noisy_linear(x, w, b=None):
        y = original(x, w, b)
        return y + torch.randn_like(y) * y.abs() * scale

    F.linear = noisy_linear
    try:
        yield
    finally:
        F.linear = original


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: leave default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    model = build_model(args.hidden, args.layers, args.vocab)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), generator=torch.Generator().manual_seed(0))
    spec = NoiseSpec(scale=0.05, ops=["linear"], phases="forward", seed=0)
    variants: dict[str, Callable[[], AbstractContextManager]] = {
        "clean": nullcontext,
        "engine scale=0": lambda: inject(model, spec.replace(scale=0.0)),
        "engine fwd linear": lambda: inject(model, spec),
        "naive (seeds-style)": lambda: naive_linear_noise(0.05),
    }

    def fwd() -> None:
        with torch.no_grad():
            model(ids)

    def fwd_bwd() -> None:
        model.zero_grad(set_to_none=True)
        model(ids, labels=ids).loss.backward()

    print(
        f"Qwen2 stack: hidden={args.hidden}, layers={args.layers}, vocab={args.vocab}, "
        f"batch×seq={args.batch}×{args.seq}, torch threads={torch.get_num_threads()}, "
        f"repeats={args.repeats} (interleaved)"
    )
    for label, step in [("forward (no_grad)", fwd), ("forward+backward", fwd_bwd)]:
        for ctx in variants.values():  # warm-up
            with ctx():
                step()
        times: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(args.repeats):
            for name, ctx in variants.items():
                with ctx():
                    t0 = time.perf_counter()
                    step()
                    times[name].append(time.perf_counter() - t0)
        base = statistics.median(times["clean"])
        print(f"\n{label}")
        print(f"  {'variant':<22}{'median ms':>10}{'ratio':>8}")
        for name, ts in times.items():
            med = statistics.median(ts)
            print(f"  {name:<22}{med * 1e3:>10.1f}{med / base:>8.3f}")


if __name__ == "__main__":
    main()
