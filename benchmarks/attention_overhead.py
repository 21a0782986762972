"""Cost of attention-op noise at long context (CPU), side by side, as ratios to clean sdpa.

A Qwen2-shaped stack (hidden 256, 4 heads of 64, 2 KV heads, 2 layers), batch 1, one
forward pass under ``torch.no_grad`` (evaluation) per variant:

- ``sdpa (clean)``: the model as built (sdpa attention), no session: the reference;
- ``eager (clean)``: the model's own eager attention, no session: what any O(T²)
  attention path costs (the engine's attention used to be this for every attention op);
- ``engine attention_output``, ``engine attention_scores``, ``engine softmax``: relative
  Gaussian forward noise (scale 0.05) on that one op only;
- ``engine attention (3 ops)``: all three attention ops;
- ``engine matmul_only``: the default preset (every linear plus the two attention
  products);
- ``floor: sdpa + draws``: clean sdpa plus the Gaussian draws alone that noise on one
  T²-sized op needs (the engine's query blocks: the visible keys of each block, every
  layer), drawn by the engine's parallel noise streams: what scores or probability noise
  cannot go below without a faster random-number generator, whatever the fusion.

Time: median of interleaved repeats in one process, so drift in machine load hits every
variant alike. Peak memory: each variant runs once more in a fresh subprocess, which resets
the kernel's peak-RSS mark just before the forward pass (``/proc/self/clear_refs``) and
reports the peak resident set (``VmHWM``) minus the resident set at that moment: the
extra memory the forward needed (``resource.getrusage`` where the reset is refused). The
subprocess runs with glibc's mmap threshold fixed at 128 KiB (``MALLOC_MMAP_THRESHOLD_``;
``--malloc-default`` leaves glibc's adaptive one), so that the peak follows the tensors
alive at once rather than the allocator's history. Both at 1 torch thread and at the
default thread count.

``--generators mt philox`` adds, for the ``philox`` noise stream (``NoiseSpec.generator``),
the engine variants and the floor again (rows marked ``· philox``), timed in the same
interleaved rounds; its floor draws with :meth:`PhiloxStream.randn` (a float32 fill).

Run: ``python benchmarks/attention_overhead.py`` (1k–8k tokens; about 40 minutes on a busy
2-core machine) or ``--quick`` (1k and 2k tokens, 3 repeats, memory at 1 thread only; a
few minutes, most of it starting the memory subprocesses).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import torch

from robuststats.engine import NoiseSpec, inject
from robuststats.engine._spec import GENERATORS

VARIANTS = (
    "sdpa (clean)",
    "eager (clean)",
    "engine attention_output",
    "engine attention_scores",
    "engine softmax",
    "engine attention (3 ops)",
    "engine matmul_only",
)
FLOOR = "floor: sdpa + draws"
HEADS, LAYERS = 4, 2
_OPS = {
    "engine attention_output": ["attention_output"],
    "engine attention_scores": ["attention_scores"],
    "engine softmax": ["softmax"],
    "engine attention (3 ops)": ["attention_scores", "softmax", "attention_output"],
    "engine matmul_only": "matmul_only",
}


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def build_model(seq: int, attn: str = "sdpa", dtype: str = "float32") -> torch.nn.Module:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(
        vocab_size=1024,
        hidden_size=256,
        intermediate_size=704,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=2,
        max_position_embeddings=max(seq, 1024),
        attn_implementation=attn,
    )
    torch.manual_seed(0)
    return Qwen2ForCausalLM(cfg).eval().to(DTYPES[dtype])


_MARK = " · "


def _split(row: str) -> tuple[str, str]:
    """``"engine softmax · philox"`` → ``("engine softmax", "philox")``."""
    variant, _, generator = row.partition(_MARK)
    return variant, generator or "mt"


def rows(variants: tuple[str, ...], generators: tuple[str, ...]) -> tuple[str, ...]:
    """The table's rows: every variant, then the engine variants again per extra stream."""
    extra = tuple(f"{v}{_MARK}{g}" for g in generators if g != "mt" for v in variants if v in _OPS)
    return (*variants, *extra)


def _context(row: str, model: torch.nn.Module) -> Callable[[], AbstractContextManager]:
    variant, generator = _split(row)
    if variant in _OPS:
        spec = NoiseSpec(scale=0.05, ops=_OPS[variant], phases="forward", seed=0,
                         generator=generator)
        return lambda: inject(model, spec)
    return nullcontext


def _ids(seq: int) -> torch.Tensor:
    return torch.randint(0, 1024, (1, seq), generator=torch.Generator().manual_seed(0))


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark (Linux: ``echo 5 > /proc/self/clear_refs``)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


#: glibc's mmap threshold for the memory subprocesses (bytes). By default glibc raises the
#: threshold each time a large block is freed, after which freed blocks stay in its heap, so
#: the peak resident set depends on the order of earlier allocations (four fresh runs of the
#: same clean bf16 forward at 4k tokens read 41–56 MiB). Fixed, every allocation of 128 KiB
#: or more is mapped on its own and returned when freed, and the peak follows the tensors
#: alive at once (33.4–33.6 MiB in four runs).
MMAP_THRESHOLD = 128 * 1024


def measure_memory(variant: str, seq: int, threads: int, dtype: str = "float32", *,
                   malloc_default: bool = False) -> float:
    """Extra peak memory (MiB) of one forward, in a fresh process (glibc's mmap threshold
    fixed at :data:`MMAP_THRESHOLD` unless ``malloc_default``)."""
    cmd = [sys.executable, __file__, "--child", json.dumps([variant, seq, threads, dtype])]
    env = dict(os.environ)
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    if not malloc_default:
        env["MALLOC_MMAP_THRESHOLD_"] = str(MMAP_THRESHOLD)
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    return float(json.loads(out.stdout.strip().splitlines()[-1]))


def _peak_child(variant: str, seq: int, threads: int, dtype: str = "float32") -> float:
    if threads:
        torch.set_num_threads(threads)
    model = build_model(seq, "eager" if variant == "eager (clean)" else "sdpa", dtype)
    ids = _ids(seq)
    ctx = _context(variant, model)
    if _split(variant)[1] == "philox":
        from robuststats.engine._philox import kernel

        kernel()  # load the compiled kernel before the mark: its code is not the forward's
    with torch.no_grad():
        model(_ids(16))  # warm up lazy initialisation at a tiny size
        reset = _reset_peak()
        before = _status_kib("VmRSS")
        with ctx():
            model(ids)
    # without a reset, the peak of the whole process (imports, model build) bounds it
    peak = _status_kib("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return max(peak - before, 0) / 1024


def block_shapes(seq: int) -> list[tuple[int, int, int, int]]:
    """The score blocks of one causal attention call of the engine: ``(1, heads, rows, keys)``."""
    from robuststats.engine._attention import block_rows

    rows = block_rows(HEADS, seq, seq)
    return [(1, HEADS, min(i0 + rows, seq) - i0, min(i0 + rows, seq)) for i0 in range(0, seq, rows)]


def draw_noise(seq: int, generator: str = "mt") -> None:
    """The Gaussian draws of noise on one T²-sized attention op in every layer, alone."""
    from robuststats.engine._streams import make_stream

    stream = make_stream(generator, 0, "cpu")
    for _ in range(LAYERS):
        for shape in block_shapes(seq):
            stream.randn(shape, torch.float32)


def measure_time(
    seq: int, threads: int, repeats: int, *, variants: tuple[str, ...] = VARIANTS,
    dtype: str = "float32", generators: tuple[str, ...] = ("mt",),
) -> dict[str, float]:
    if threads:
        torch.set_num_threads(threads)
    models = {"sdpa": build_model(seq, "sdpa", dtype)}
    if "eager (clean)" in variants:
        models["eager"] = build_model(seq, "eager", dtype)
    ids = _ids(seq)
    runs: dict[str, list[float]] = {v: [] for v in rows(variants, generators)}
    for g in generators:
        runs[f"draws{_MARK}{g}"] = []
    with torch.no_grad():
        for _ in range(repeats + 1):  # the first round is a warm-up, dropped
            for g in generators:
                t0 = time.perf_counter()
                draw_noise(seq, g)
                runs[f"draws{_MARK}{g}"].append(time.perf_counter() - t0)
            for v in rows(variants, generators):
                model = models["eager" if v == "eager (clean)" else "sdpa"]
                ctx = _context(v, model)
                t0 = time.perf_counter()
                with ctx():
                    model(ids)
                runs[v].append(time.perf_counter() - t0)
    times = {v: statistics.median(r[1:]) for v, r in runs.items()}
    for g in generators:
        floor = FLOOR if g == "mt" else f"{FLOOR}{_MARK}{g}"
        times[floor] = times["sdpa (clean)"] + times.pop(f"draws{_MARK}{g}")
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1k and 2k tokens, 3 repeats")
    ap.add_argument("--seqs", type=int, nargs="*", default=None)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="float32",
                    help="the model's dtype (the floor's draws stay float32)")
    ap.add_argument("--variants", nargs="*", choices=VARIANTS, default=None,
                    help="a subset of the variants (clean sdpa is always measured)")
    ap.add_argument("--threads", type=int, nargs="*", default=None,
                    help="torch thread counts (default: 1 and the default count)")
    ap.add_argument("--generators", nargs="*", choices=GENERATORS, default=["mt"],
                    help="noise streams of the engine variants and the floor (default: mt)")
    ap.add_argument("--malloc-default", action="store_true",
                    help="measure memory with glibc's own (adaptive) mmap threshold instead of "
                         "a fixed 128 KiB one: peaks then depend on allocation history")
    ap.add_argument("--child", help=argparse.SUPPRESS)  # one memory measurement
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_peak_child(*json.loads(args.child))))
        return
    seqs = args.seqs or ([1024, 2048] if args.quick else [1024, 2048, 4096, 8192])
    repeats = args.repeats or (3 if args.quick else 5)
    variants = tuple(v for v in VARIANTS if v == VARIANTS[0] or not args.variants
                     or v in args.variants)
    default_threads = torch.get_num_threads()
    for threads in args.threads or sorted({1, default_threads}):
        # --quick: memory (nearly independent of the thread count) at 1 thread only
        memory = not args.no_memory and not (args.quick and threads != 1)
        print(f"\n## {threads} torch thread(s)\n")
        header = "| variant | " + " | ".join(f"{s} time" for s in seqs)
        if memory:
            header += " | " + " | ".join(f"{s} mem" for s in seqs)
        print(header + " |")
        print("|" + " --- |" * (1 + len(seqs) * (2 if memory else 1)))
        generators = tuple(args.generators) or ("mt",)
        if "mt" not in generators:
            generators = ("mt", *generators)
        table = rows(variants, generators)
        times = {s: measure_time(s, threads, repeats, variants=variants, dtype=args.dtype,
                                 generators=generators)
                 for s in seqs}
        mems = {}
        if memory:
            mems = {s: {v: measure_memory(v, s, threads, args.dtype,
                                          malloc_default=args.malloc_default) for v in table}
                    for s in seqs}
        for v in table:
            cells = [f"{times[s][v] / times[s]['sdpa (clean)']:.2f}×" for s in seqs]
            if mems:
                cells += [
                    f"{mems[s][v] / max(mems[s]['sdpa (clean)'], 1e-9):.2f}×" for s in seqs
                ]
            print(f"| {v} | " + " | ".join(cells) + " |")
        for g in generators:
            floor = FLOOR if g == "mt" else f"{FLOOR}{_MARK}{g}"
            cells = [f"{times[s][floor] / times[s]['sdpa (clean)']:.2f}×" for s in seqs]
            print(f"| {floor} | " + " | ".join(cells) + " |" + " |" * (len(seqs) if mems else 0))
        base = ", ".join(f"{s}: {times[s]['sdpa (clean)'] * 1e3:.0f} ms" for s in seqs)
        print(f"\nclean sdpa forward: {base}")
        if mems:
            mbase = ", ".join(f"{s}: {mems[s]['sdpa (clean)']:.0f} MiB" for s in seqs)
            print(f"clean sdpa extra peak memory: {mbase}")


if __name__ == "__main__":
    main()
