"""The ``philox`` noise stream: counter-based Gaussian draws fused into one C++ pass.

Opt-in (``NoiseSpec(generator="philox")``); the default stream (``"mt"``, :mod:`._rng`) is
unchanged. Version 1 of the stream, the layout of ``_philox.cpp``:

- words: Philox4x32-10 (Salmon, Moraes, Dror & Shaw 2011, "Parallel random numbers: as
  easy as 1, 2, 3"), keyed by the stream's 64-bit key (``_streams.stream_seed``: seed,
  phase, layer) as (low word, high word);
- position ``a`` of the stream (tile ``T = a // 1024``, ``j = a % 1024``) takes the block
  of counter ``(256·T + j % 256, 0, 0)`` — low word, high word, 0, 0 — and lane ``j // 256``;
- N(0, 1) by Box–Muller: lanes 0/1 are ``r(w0)·cos θ(w1)`` / ``r(w0)·sin θ(w1)``, lanes
  2/3 the same of ``(w2, w3)``, with ``r(w) = √(−2 ln u)``, ``u = fl(w >> 1)·2⁻³¹ + 2⁻³²``
  in (0, 1] (so |z| ≤ 6.66), and ``θ(w) = 2π·(w >> 8)/2²⁴``; ln, sin and cos are
  polynomials in float32 arithmetic (errors below 10⁻⁶ relative);
- each draw of ``n`` elements takes positions ``[p, p + n)`` and moves ``p`` to the next
  multiple of 1024 at or after ``p + n``.

Each value depends on (key, position) alone, so a draw is the same for any thread count
and any split into calls. The kernel is compiled on first use with the host compiler
(``torch.utils.cpp_extension``, ``-O3 -ffp-contract=off``, no fast-math: every operation is
one IEEE rounding, so the values do not depend on the instruction set) and cached in
torch's extensions directory. When it cannot be built, selecting the stream raises
:class:`GeneratorUnavailableError`; there is no fallback to another stream.
"""

from __future__ import annotations

import hashlib
import platform
import threading
from pathlib import Path
from typing import Any

import torch

from robuststats.errors import InputError

__all__ = ["TILE", "GeneratorUnavailableError", "PhiloxStream", "check_available", "check_generator",
           "kernel"]

#: stream positions per tile (256 Philox blocks of 4 words)
TILE = 1024

_SOURCE = Path(__file__).with_name("_philox.cpp")
_FLAGS = ["-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-fopenmp"]
_MASK64 = 0xFFFFFFFFFFFFFFFF


class GeneratorUnavailableError(InputError):
    """The ``philox`` stream was selected but its kernel cannot be built or used here."""


def _signed(x: int) -> int:
    x &= _MASK64
    return x - (1 << 64) if x >= 1 << 63 else x


def _cpu_tag() -> str:
    """Short hash of the CPU's features: ``-march=native`` code is only for this CPU kind."""
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                flags = line
                break
    except OSError:
        pass
    return hashlib.sha256(f"{platform.machine()} {flags}".encode()).hexdigest()[:10]


class _Kernel:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._module: Any = None
        self._error: str | None = None

    def build(self) -> Any:
        from torch.utils.cpp_extension import load_inline

        return load_inline(name=f"robuststats_philox_v1_{_cpu_tag()}",
                           cpp_sources=[_SOURCE.read_text()], extra_cflags=_FLAGS,
                           extra_ldflags=["-fopenmp"])

    def get(self) -> Any:
        with self._lock:
            if self._module is None and self._error is None:
                try:
                    self._module = self.build()
                except Exception as exc:  # any build failure is the same refusal
                    reason = " ".join(str(exc).split())[:200] or type(exc).__name__
                    self._error = ("generator 'philox' needs its C++ kernel, which could not be "
                                   f"built here ({reason}); install a C++ compiler or use "
                                   "generator 'mt'.")
            if self._error is not None:
                raise GeneratorUnavailableError(self._error)
            return self._module


_KERNEL = _Kernel()


def kernel() -> Any:
    """The compiled kernel module (built on first call); :class:`GeneratorUnavailableError`
    when it cannot be built."""
    return _KERNEL.get()


def check_available(devices: Any) -> None:
    """Raise :class:`GeneratorUnavailableError` unless the kernel builds and every device
    in ``devices`` is the CPU."""
    others = sorted(str(d) for d in devices if torch.device(d).type != "cpu")
    if others:
        raise GeneratorUnavailableError(f"generator 'philox' draws on the CPU only; the model "
                                        f"has parameters on {others[0]} (use generator 'mt').")
    kernel()


def check_generator(generator: str, device: str | None = None) -> None:
    """Raise :class:`GeneratorUnavailableError` unless noise stream ``generator`` can draw
    on ``device`` (default the CPU) here: for ``philox``, its kernel is built (or loaded
    from the cache) now, so that a run refuses before it computes anything."""
    if generator == "philox":
        check_available({torch.device(device or "cpu")})


class PhiloxStream:
    """A reproducible source of N(0, 1) draws for one (seed, phase, layer): the interface of
    :class:`~robuststats.engine._rng.NoiseStream` over the Philox v1 layout (module doc)."""

    generator = "philox"

    def __init__(self, key: int, device: torch.device | str = "cpu") -> None:
        self.key = int(key) & _MASK64
        self.device = torch.device(device)
        if self.device.type != "cpu":
            raise GeneratorUnavailableError(
                f"generator 'philox' draws on the CPU only; got a tensor on {self.device} "
                "(use generator 'mt' on other devices).")
        self.position = 0
        self._k = kernel()

    def _take(self, n: int) -> int:
        start = self.position
        self.position = start + -(-n // TILE) * TILE
        return start

    def randn(self, shape: torch.Size | tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """Draws for ``shape``, computed in float32 and rounded once to ``dtype``."""
        out = torch.empty(shape, dtype=torch.float32)
        if out.numel():
            self._k.normal_(out, _signed(self.key), self._take(out.numel()))
        return out if dtype == torch.float32 else out.to(dtype)

    def perturb_relative_(self, y: torch.Tensor, scale: float) -> torch.Tensor:
        """``y ← y + scale·(ε·y)`` in place in one pass, ε the numbers :meth:`randn` would
        draw for ``y``; returns float64 ``(‖y‖², ‖realised error‖²)`` of the unperturbed
        ``y``. float32, bfloat16 and float16 go through the fused kernel (low precision in
        float32, rounded once, the error measured after rounding); other dtypes take the
        same draws through torch."""
        if y.device.type != "cpu" or not y.is_contiguous():
            raise GeneratorUnavailableError("generator 'philox' perturbs contiguous CPU tensors "
                                            f"only; got one on {y.device}.")
        if y.dtype in (torch.float32, torch.bfloat16, torch.float16):
            if y.numel() == 0:
                return torch.zeros(2, dtype=torch.float64)
            norms = self._k.perturb_relative_(y, _signed(self.key), self._take(y.numel()),
                                              float(scale))
            # written through its data pointer: bump the version as an in-place op would, so
            # that autograd still refuses a saved tensor that this pass changed
            torch.autograd.graph.increment_version(y)
            return norms
        e = self.randn(y.shape, torch.float32).to(y.dtype).mul_(y)
        norms = torch.stack((torch.linalg.vector_norm(y), torch.linalg.vector_norm(e) * scale))
        y.add_(e, alpha=scale)
        return norms.double().square_()

    def get_state(self) -> dict[str, int]:
        """The stream's position: all that gradient checkpointing needs to replay it."""
        return {"position": self.position}

    def set_state(self, state: dict[str, Any]) -> PhiloxStream:
        self.position = int(state["position"])
        return self


def philox_block(counter: tuple[int, int, int, int], key: tuple[int, int]) -> tuple[int, ...]:
    """The four output words of Philox4x32-10 for one counter and key, by the kernel."""
    return tuple(w & 0xFFFFFFFF for w in kernel().block(list(counter), list(key)))
