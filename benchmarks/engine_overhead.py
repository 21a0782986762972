"""Overhead of robuststats.engine on a Qwen2-shaped stack (CPU), side by side.

Variants, timed in one process with interleaved repeats (so drift in machine load hits all
of them alike), medians reported, as ratios to ``clean`` and to the ``naive`` patch:

- ``clean``: no session;
- ``engine scale=0``: ``inject`` with scale 0 (installs nothing);
- ``engine fwd linear``: relative Gaussian forward noise on every ``nn.Linear``, noise drawn
  in parallel chunks (``robuststats.engine._rng``);
- ``engine, serial RNG``: the same with chunking switched off (one generator fills each
  tensor, as before the parallel streams): what the parallel draw buys;
- ``naive``: the seeds' style, ``F.linear`` monkey-patched globally to return
  ``y + randn_like(y) * y.abs() * s`` (global RNG, three extra passes and allocations);
- input quantization (forward only): ``W8A8 fp8 row`` (``target="inputs"``, fp8 e4m3,
  per-row scales), ``W4A4 nvfp4`` (``target="inputs"``), ``W4A16 nvfp4``
  (``target="weights"``: quantized weights computed once per session) and ``static
  weights`` (``target="weights"``, relative Gaussian drawn once).

Forward passes run under ``torch.no_grad`` (evaluation); forward+backward is a training step
without the optimizer. Each repeat opens a session and times its second step (steady state,
as in an evaluation cell whose session spans a whole generation); the last column gives the
first step, which also quantizes or perturbs the weights of the ``weights`` variants. Every (hidden, threads) configuration is a separate table; thread
count 0 means the machine's default. Run:
``python benchmarks/engine_overhead.py --hidden 1024 2048 --threads 1 0``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager, nullcontext

import torch
import torch.nn.functional as F

from robuststats.engine import NoiseSpec, _rng, inject


def build_model(hidden: int, layers: int, vocab: int) -> torch.nn.Module:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=int(hidden * 2.75),  # Qwen2.5's ratio (0.5B: 896 → 4864 is 5.4)
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


@contextmanager
def serial_rng(model: torch.nn.Module, spec: NoiseSpec):
    """The engine with one generator per tensor (chunks larger than any tensor)."""
    chunk = _rng.CHUNK
    _rng.CHUNK = 1 << 62
    try:
        with inject(model, spec):
            yield
    finally:
        _rng.CHUNK = chunk


def variants(model: torch.nn.Module, training: bool) -> dict[str, Callable[[], AbstractContextManager]]:
    spec = NoiseSpec(scale=0.05, ops=["linear"], phases="forward", seed=0)
    out: dict[str, Callable[[], AbstractContextManager]] = {
        "clean": nullcontext,
        "engine scale=0": lambda: inject(model, spec.replace(scale=0.0)),
        "engine fwd linear": lambda: inject(model, spec),
        "engine, serial RNG": lambda: serial_rng(model, spec),
        "naive (seeds-style)": lambda: naive_linear_noise(0.05),
    }
    if not training:
        quant = {
            "W8A8 fp8 row": NoiseSpec(scale=1.0, kind="fp8_e4m3", target="inputs", ops="linear",
                                      granularity="row"),
            "W4A4 nvfp4": NoiseSpec(scale=1.0, kind="nvfp4", target="inputs", ops="linear"),
            "W4A16 nvfp4": NoiseSpec(scale=1.0, kind="nvfp4", target="weights", ops="linear"),
            "static weights": NoiseSpec(scale=0.05, target="weights", ops="linear"),
        }
        for name, q in quant.items():
            out[name] = lambda q=q: inject(model, q)
    return out


def run_config(args: argparse.Namespace, hidden: int, threads: int) -> None:
    torch.set_num_threads(threads or args.default_threads)
    model = build_model(hidden, args.layers, args.vocab)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq),
                        generator=torch.Generator().manual_seed(0))

    def fwd() -> None:
        with torch.no_grad():
            model(ids)

    def fwd_bwd() -> None:
        model.zero_grad(set_to_none=True)
        model(ids, labels=ids).loss.backward()

    print(f"\n## hidden={hidden}, layers={args.layers}, batch×seq={args.batch}×{args.seq}, "
          f"vocab={args.vocab}, torch threads={torch.get_num_threads()}, "
          f"repeats={args.repeats} (interleaved, medians)")
    for label, step, training in [("forward (no_grad)", fwd, False),
                                  ("forward+backward", fwd_bwd, True)]:
        table = variants(model, training)
        # a session per repeat; the timed step is its second, as in an evaluation cell,
        # whose session spans many forwards (weights quantized or perturbed once per
        # session are then reused); ``first step`` times the session's first step instead
        times: dict[str, list[float]] = {k: [] for k in table}
        first: dict[str, list[float]] = {k: [] for k in table}
        for _ in range(args.repeats):
            for name, ctx in table.items():
                with ctx():
                    t0 = time.perf_counter()
                    step()
                    t1 = time.perf_counter()
                    step()
                    times[name].append(time.perf_counter() - t1)
                    first[name].append(t1 - t0)
        base = statistics.median(times["clean"])
        naive = statistics.median(times["naive (seeds-style)"])
        print(f"\n{label}")
        print("| variant | median ms | / clean | / naive | first step / clean |\n"
              "| --- | --- | --- | --- | --- |")
        base_first = statistics.median(first["clean"])
        for name, ts in times.items():
            med = statistics.median(ts)
            f1 = statistics.median(first[name]) / base_first
            print(f"| {name} | {med * 1e3:.1f} | {med / base:.3f} | {med / naive:.3f} | "
                  f"{f1:.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, nargs="+", default=[1024])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 0],
                    help="torch thread counts to measure (0: the machine's default)")
    args = ap.parse_args()
    args.default_threads = torch.get_num_threads()
    for hidden in args.hidden:
        for threads in args.threads:
            run_config(args, hidden, threads)


if __name__ == "__main__":
    main()
