"""Nanoseconds per Gaussian: the ``philox`` stream's fused kernel beside torch's generator (CPU).

For one tensor of ``--numel`` elements (default 512 × 4864, the output of Qwen2.5-0.5B's
gate projection at 512 tokens), side by side in one process, interleaved repeats, medians:

- ``normal_``: ``torch.Tensor.normal_`` with one CPU generator (a Mersenne Twister);
- ``normal_ + mul + add``: relative noise unfused, ``y.add_(normal_(…).mul_(y), alpha=s)``;
- ``mt stream perturb``: the default stream's chunked, threaded, fused pass
  (``NoiseStream.perturb_relative_``, what the engine runs today);
- ``philox normal_``: the ``philox`` stream's float32 fill (``PhiloxStream.randn``);
- ``philox perturb``: its fused pass (``PhiloxStream.perturb_relative_``): draw, multiply,
  add and both norms in one pass over ``y``.

First the kernel's build from a cold cache (a temporary directory): wall time and the
compiler's CPU time. Then the law of ``--law`` draws of the philox stream: mean, variance, skewness, excess
kurtosis, a Kolmogorov–Smirnov test against N(0, 1), and the tail counts beyond 2–5 σ
against their expectation.

Run: ``python benchmarks/philox_draws.py [--threads 1 2] [--repeats 9] [--law 10000000]``.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from robuststats.engine import _philox
from robuststats.engine._philox import PhiloxStream
from robuststats.engine._rng import NoiseStream


def per_draw(numel: int, dtype: torch.dtype, repeats: int) -> dict[str, float]:
    y0 = torch.randn(numel, generator=torch.Generator().manual_seed(0)).to(dtype)
    y = y0.clone()
    buf = torch.empty(numel)
    g = torch.Generator().manual_seed(0)
    mt, ph = NoiseStream(5), PhiloxStream(5)
    cases = {
        "normal_": lambda: buf.normal_(generator=g),
        "normal_ + mul + add": lambda: y.add_(torch.empty_like(y).normal_(generator=g).mul_(y),
                                              alpha=0.05),
        "mt stream perturb": lambda: mt.perturb_relative_(y, 0.05),
        "philox normal_": lambda: ph.randn((numel,), torch.float32),
        "philox perturb": lambda: ph.perturb_relative_(y, 0.05),
    }
    runs: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(repeats + 1):
        for name, fn in cases.items():
            y.copy_(y0)
            t0 = time.perf_counter()
            fn()
            runs[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v[1:]) / numel * 1e9 for k, v in runs.items()}


def cold_build() -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as cache:
        t0 = time.perf_counter()
        _philox._Library(_philox.build_library(Path(cache)))
        wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print(f"kernel build, cold cache: {wall:.2f} s wall, {cpu:.2f} s compiler CPU\n")


def law(n: int) -> None:
    from scipy import stats

    z = PhiloxStream(20260).randn((n,), torch.float32).double().numpy()
    print(f"\n{n:,} draws: mean {z.mean():+.2e} (SE {1 / np.sqrt(n):.1e}), variance "
          f"{z.var():.6f} (SE {np.sqrt(2 / n):.1e}), skewness {stats.skew(z):+.2e} "
          f"(SE {np.sqrt(6 / n):.1e}), excess kurtosis {stats.kurtosis(z):+.2e} "
          f"(SE {np.sqrt(24 / n):.1e}), KS p = {stats.kstest(z, 'norm').pvalue:.3f}, "
          f"max |z| {np.abs(z).max():.2f}")
    for k in (2, 3, 4, 5):
        print(f"|z| > {k}: {int((np.abs(z) > k).sum())} seen, "
              f"{n * 2 * stats.norm.sf(k):.1f} expected")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--numel", type=int, default=512 * 4864)
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--law", type=int, default=10_000_000, help="draws for the law (0: skip)")
    args = ap.parse_args()
    cold_build()
    names = ("normal_", "normal_ + mul + add", "mt stream perturb", "philox normal_",
             "philox perturb")
    print("| threads | dtype | " + " | ".join(names) + " |")
    print("| --- | --- |" + " --- |" * len(names))
    for threads in args.threads:
        torch.set_num_threads(threads)
        for dtype in (torch.float32, torch.bfloat16):
            t = per_draw(args.numel, dtype, args.repeats)
            print(f"| {threads} | {str(dtype).removeprefix('torch.')} | "
                  + " | ".join(f"{t[k]:.2f}" for k in names) + " |", flush=True)
    if args.law:
        law(args.law)


if __name__ == "__main__":
    main()
