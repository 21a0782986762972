"""Overhead of robuststats.engine on a GPU, side by side with clean, as one table of ratios.

Run by ``benchmarks/gpu.sh`` (which runs the engine's CUDA tests first). Three groups, each
timed in one process with interleaved repeats (medians), every variant opening its own
session per repeat and timing that session's second step (the first one quantizes
weights and warms kernels up):

- ``linear``: a Qwen2-shaped stack in bf16 at hidden 1536 (Qwen2.5-1.5B's widths:
  intermediate 8960, 12 heads, 2 KV heads) and 3584 (Qwen2.5-7B's: 18944, 28, 4), 2 layers,
  8 × 512 tokens; relative Gaussian noise (scale 0.05) on every linear, forward
  (``no_grad``) and forward+backward (forward noise, and noise in both phases).
- ``attention``: hidden 1536, 2 layers, batch 1 at 4k and 16k tokens, bf16, sdpa; noise on
  ``attention_output``, ``attention_scores``, ``softmax`` and the default ``matmul_only``.
- ``quantization``: input quantization at hidden 1536, forward: W4A4 NVFP4 and MXFP4
  (``target: inputs``), W8A8 fp8 per row, W4A16 NVFP4 (``target: weights``).

The aims of issue 25: linear noise ≤ 1.05× clean, attention noise ≤ 1.5× at 4k tokens.
``--device cpu --tiny`` runs every step at tiny sizes (a check of the script, no timing
claim).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import torch

from robuststats.engine import NoiseSpec, inject

Variants = dict[str, Callable[[], AbstractContextManager]]


def build(hidden: int, inter: int, heads: int, kv: int, *, layers: int, vocab: int,
          positions: int, device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=inter,
                      num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=kv, max_position_embeddings=positions,
                      attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM(cfg)
    return model.to(dtype).eval()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(step: Callable[[], None], variants: Variants, repeats: int,
            device: torch.device) -> dict[str, float]:
    """Median seconds of each variant's second step, variants interleaved per repeat."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, ctx in variants.items():
            with ctx():
                step()
                _sync(device)
                t0 = time.perf_counter()
                step()
                _sync(device)
                times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def linear_rows(args: argparse.Namespace, device: torch.device) -> list[tuple]:
    rows = []
    for hidden, inter, heads, kv in args.linear_shapes:
        model = build(hidden, inter, heads, kv, layers=2, vocab=args.vocab,
                      positions=args.seq, device=device, dtype=torch.bfloat16)
        ids = torch.randint(0, args.vocab, (args.batch, args.seq), device=device,
                            generator=torch.Generator(device).manual_seed(0))
        spec = NoiseSpec(scale=0.05, ops=["linear"], seed=0)

        def fwd(model=model, ids=ids) -> None:
            with torch.no_grad():
                model(ids)

        def fwd_bwd(model=model, ids=ids) -> None:
            model.zero_grad(set_to_none=True)
            model(ids, labels=ids).loss.backward()

        table = measure(fwd, {"clean": nullcontext,
                              "noise on every linear": lambda s=spec, m=model: inject(m, s)},
                        args.repeats, device)
        rows += _rows(f"linear h{hidden} bf16 fwd", table)
        model.train()
        both = spec.replace(phases="both")
        table = measure(fwd_bwd, {
            "clean": nullcontext,
            "noise on every linear, forward": lambda s=spec, m=model: inject(m, s),
            "noise on every linear, both phases": lambda s=both, m=model: inject(m, s),
        }, args.repeats, device)
        rows += _rows(f"linear h{hidden} bf16 fwd+bwd", table)
        del model
        _free(device)
    return rows


def attention_rows(args: argparse.Namespace, device: torch.device) -> list[tuple]:
    rows = []
    hidden, inter, heads, kv = args.linear_shapes[0]
    for seq in args.seqs:
        model = build(hidden, inter, heads, kv, layers=2, vocab=args.vocab, positions=seq,
                      device=device, dtype=torch.bfloat16)
        ids = torch.randint(0, args.vocab, (1, seq), device=device,
                            generator=torch.Generator(device).manual_seed(0))

        def fwd(model=model, ids=ids) -> None:
            with torch.no_grad():
                model(ids)

        variants: Variants = {"sdpa (clean)": nullcontext}
        for name, ops in [("attention_output", ["attention_output"]),
                          ("attention_scores", ["attention_scores"]),
                          ("softmax", ["softmax"]), ("matmul_only", "matmul_only")]:
            spec = NoiseSpec(scale=0.05, ops=ops, seed=0)
            variants[f"noise on {name}"] = lambda s=spec, m=model: inject(m, s)
        rows += _rows(f"attention {seq // 1024 or seq}{'k' if seq >= 1024 else ''} tokens "
                      "bf16 fwd", measure(fwd, variants, max(args.repeats // 2, 2), device))
        del model
        _free(device)
    return rows


def quant_rows(args: argparse.Namespace, device: torch.device) -> list[tuple]:
    hidden, inter, heads, kv = args.linear_shapes[0]
    model = build(hidden, inter, heads, kv, layers=2, vocab=args.vocab, positions=args.seq,
                  device=device, dtype=torch.bfloat16)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), device=device,
                        generator=torch.Generator(device).manual_seed(0))

    def fwd() -> None:
        with torch.no_grad():
            model(ids)

    specs = {
        "W4A4 NVFP4 (inputs)": NoiseSpec(scale=1.0, kind="nvfp4", target="inputs", ops="linear"),
        "W4A4 MXFP4 (inputs)": NoiseSpec(scale=1.0, kind="mxfp4", target="inputs", ops="linear"),
        "W8A8 fp8 per row (inputs)": NoiseSpec(scale=1.0, kind="fp8_e4m3", target="inputs",
                                               ops="linear", granularity="row"),
        "W4A16 NVFP4 (weights)": NoiseSpec(scale=1.0, kind="nvfp4", target="weights",
                                           ops="linear"),
    }
    variants: Variants = {"clean": nullcontext}
    for name, spec in specs.items():
        variants[name] = lambda s=spec: inject(model, s)
    return _rows(f"quantization h{hidden} bf16 fwd", measure(fwd, variants, args.repeats, device))


def _rows(group: str, table: dict[str, float]) -> list[tuple]:
    base = next(iter(table.values()))
    return [(group, name, t * 1e3, t / base) for name, t in table.items()]


def _free(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="tiny sizes (a check of the script)")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--only", nargs="*", default=["linear", "attention", "quantization"])
    args = ap.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu_overhead: no CUDA device (use --device cpu --tiny to check the script)")
    if args.tiny:
        args.linear_shapes = [(64, 176, 2, 1), (128, 352, 4, 2)]
        args.seqs, args.batch, args.seq, args.vocab = [256, 512], 2, 32, 256
        args.repeats = args.repeats or 2
    else:
        args.linear_shapes = [(1536, 8960, 12, 2), (3584, 18944, 28, 4)]
        args.seqs, args.batch, args.seq, args.vocab = [4096, 16384], 8, 512, 4096
        args.repeats = args.repeats or 10
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"# engine overhead on {name}, torch {torch.__version__}, repeats {args.repeats} "
          "(interleaved, medians; ratio = variant / the group's first row)\n")
    rows = []
    for group, fn in [("linear", linear_rows), ("attention", attention_rows),
                      ("quantization", quant_rows)]:
        if group in args.only:
            t0 = time.perf_counter()
            rows += fn(args, device)
            print(f"[{group}: {time.perf_counter() - t0:.0f} s]", flush=True)
    print("\n| benchmark | variant | median ms | / clean |\n| --- | --- | --- | --- |")
    for group, variant, ms, ratio in rows:
        print(f"| {group} | {variant} | {ms:.2f} | {ratio:.3f} |")
    lin = [r for r in rows if r[0].startswith("linear") and r[1] != "clean"]
    att = [r for r in rows if r[0].startswith("attention 4k") and "clean" not in r[1]]
    if lin:
        print(f"\nlinear noise: worst {max(r[3] for r in lin):.3f}× clean (aim ≤ 1.05×)")
    if att:
        print(f"attention noise at 4k tokens: worst {max(r[3] for r in att):.3f}× sdpa "
              "(aim ≤ 1.5×)")


if __name__ == "__main__":
    main()
