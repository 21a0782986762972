"""The floor of forward noise on a linear layer (CPU): the draws alone, beside the engine.

Relative Gaussian forward noise costs one N(0, 1) draw and one multiply-add per output
element; the product costs 2·k flops per element. This benchmark times, side by side in one
process (interleaved repeats, medians), for one ``nn.Linear`` at the widths of the users'
scale benchmark (``benchmarks/scale.py``: Qwen2.5-0.5B and Qwen2.5-1.5B, the gate
projection ``hidden → intermediate`` and the down projection back), ``tokens`` rows:

- ``clean``: the layer's forward, no session;
- ``draws``: the N(0, 1) draws of its output alone, in float32, by the engine's parallel
  noise streams (``NoiseStream.randn``): what the noise cannot cost less than with the
  engine's generator, however well it were fused;
- ``engine``: the layer's forward inside ``inject`` (relative Gaussian 0.05 on ``linear``,
  ``no_grad``), the session opened outside the timed call.

Printed: ``engine / clean``, ``floor = (clean + draws) / clean``, and ``excess`` =
``(engine − clean − draws) / draws``: the share of the noise's cost that is not the draws
(0 means forward noise costs exactly its draws).

With ``--generators mt philox`` the draws and the engine are timed for each noise stream
(``NoiseSpec.generator``) in the same interleaved rounds, one row per stream: ``mt`` (the
default chunked Mersenne Twisters) and ``philox`` (the fused counter-based kernel, whose
``draws`` are :meth:`PhiloxStream.randn`, a float32 fill). ``engine / floor`` is the
engine's time over the floor's.

Run: ``python benchmarks/forward_floor.py [--tokens 512] [--threads 1 2] [--dtypes float32 bfloat16]
[--generators mt philox]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from robuststats.engine import NoiseSpec, inject
from robuststats.engine._spec import GENERATORS
from robuststats.engine._streams import make_stream

#: (model, layer, in_features, out_features) at the users' scale
SHAPES = (
    ("Qwen2.5-0.5B", "gate_proj", 896, 4864),
    ("Qwen2.5-0.5B", "down_proj", 4864, 896),
    ("Qwen2.5-1.5B", "gate_proj", 1536, 8960),
    ("Qwen2.5-1.5B", "down_proj", 8960, 1536),
)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def measure(k: int, n: int, tokens: int, dtype: torch.dtype, repeats: int,
            generators: tuple[str, ...] = ("mt",)) -> dict[str, float]:
    torch.manual_seed(0)
    layer = torch.nn.Linear(k, n, bias=False).to(dtype)
    x = torch.randn(tokens, k).to(dtype)
    streams = {g: make_stream(g, 1, "cpu") for g in generators}
    specs = {g: NoiseSpec(scale=0.05, ops=["linear"], seed=0, generator=g) for g in generators}
    runs: dict[str, list[float]] = {"clean": []}
    for g in generators:
        runs[f"draws:{g}"], runs[f"engine:{g}"] = [], []
        with torch.no_grad(), inject(layer, specs[g], verify=False):
            pass  # warm-up: the first session's imports (and the philox kernel's build)
    with torch.no_grad():
        for _ in range(repeats + 1):
            t0 = time.perf_counter()
            layer(x)
            runs["clean"].append(time.perf_counter() - t0)
            for g in generators:
                t0 = time.perf_counter()
                streams[g].randn((tokens, n), torch.float32)
                runs[f"draws:{g}"].append(time.perf_counter() - t0)
                with inject(layer, specs[g]):
                    t0 = time.perf_counter()
                    layer(x)
                    runs[f"engine:{g}"].append(time.perf_counter() - t0)
    return {v: statistics.median(r[1:]) for v, r in runs.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--dtypes", nargs="*", choices=sorted(DTYPES), default=["float32", "bfloat16"])
    ap.add_argument("--generators", nargs="*", choices=GENERATORS, default=["mt"])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    print("| model | layer | dtype | threads | generator | clean ms | draws ms | engine / clean "
          "| floor | engine / floor | excess |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for threads in args.threads:
        torch.set_num_threads(threads)
        for dt in args.dtypes:
            for model, name, k, n in SHAPES:
                t = measure(k, n, args.tokens, DTYPES[dt], args.repeats, tuple(args.generators))
                c = t["clean"]
                for g in args.generators:
                    d, e = t[f"draws:{g}"], t[f"engine:{g}"]
                    print(f"| {model} | {name} | {dt} | {threads} | {g} | {c * 1e3:.1f} | "
                          f"{d * 1e3:.1f} | {e / c:.3f} | {(c + d) / c:.3f} | {e / (c + d):.3f} | "
                          f"{(e - c - d) / d:+.2f} |", flush=True)


if __name__ == "__main__":
    main()
