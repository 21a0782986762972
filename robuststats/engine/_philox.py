"""The ``philox`` noise stream: counter-based Gaussian draws fused into one C pass.

Opt-in (``NoiseSpec(generator="philox")``); the default stream (``"mt"``, :mod:`._rng`) is
unchanged. Version 1 of the stream, the layout of ``_philox.c``:

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
  multiple of 1024 at or after p + n.

Each value depends on (key, position) alone, so a draw is the same for any thread count
and any split into calls. The kernel is plain C (no torch or Python headers): on first use
it is compiled with the host C compiler (``$CC``, else ``cc``; ``-O3 -march=native
-ffp-contract=off -fno-math-errno``, no fast-math, no OpenMP: every operation is one IEEE
rounding, so the values do not depend on the instruction set) into a shared library, cached
per user (``$ROBUSTSTATS_CACHE_DIR``, else ``$XDG_CACHE_HOME/robuststats``, else
``~/.cache/robuststats``) under a name keyed by the source, the compiler and the CPU kind,
and loaded with :mod:`ctypes`. A build writes a temporary file and renames it into place,
so processes that build at once each get a whole library. ctypes releases the GIL during a
call, so a draw is split into whole tiles over ``torch.get_num_threads()`` threads (the
calling thread and the engine's thread pool, which a forked child rebuilds), and the norms
of the fused pass are summed per tile and then over tiles in tile order: bitwise the same
for any thread count (a NaN norm is always the positive quiet NaN). When the kernel cannot be built, selecting the stream raises
:class:`GeneratorUnavailableError`; there is no fallback to another stream.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

import torch

from robuststats.engine import _rng
from robuststats.errors import InputError

__all__ = ["TILE", "GeneratorUnavailableError", "PhiloxStream", "check_available", "check_generator",
           "kernel"]

#: stream positions per tile (256 Philox blocks of 4 words)
TILE = 1024

_SOURCE = Path(__file__).with_name("_philox.c")
_FLAGS = ["-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-shared", "-fPIC",
          "-fvisibility=hidden"]
_MASK64 = 0xFFFFFFFFFFFFFFFF
#: dtype codes of ``rs_philox_perturb_into``
_DTYPES = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}
#: a call of fewer tiles runs on the calling thread alone (thread hand-off costs more)
_MIN_PARALLEL_TILES = 8


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


def _cache_dir() -> Path:
    """Where built kernels are kept: ``$ROBUSTSTATS_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/robuststats``, else ``~/.cache/robuststats``."""
    if os.environ.get("ROBUSTSTATS_CACHE_DIR"):
        return Path(os.environ["ROBUSTSTATS_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "robuststats"


def _compiler() -> tuple[str, str]:
    """The C compiler (``$CC``, else ``cc``) as a path, and its version line."""
    name = os.environ.get("CC") or "cc"
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"C compiler {name!r} not found")
    version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    return path, (version.stdout.splitlines() or [""])[0]


def build_library(cache_dir: Path | None = None) -> Path:
    """The kernel's shared library: from the cache when there, else compiled into it.

    The file name hashes the source, the compiler (path and version) and its flags, and the
    CPU kind. The compiler writes a temporary file in the cache directory that
    :func:`os.replace` then renames into place, so a concurrent build by another process
    leaves one whole library whichever finishes last, and no reader sees a partial file."""
    source = _SOURCE.read_bytes()
    cc, version = _compiler()
    ident = "\0".join([hashlib.sha256(source).hexdigest(), cc, version, *_FLAGS, _cpu_tag()])
    key = hashlib.sha256(ident.encode()).hexdigest()[:16]
    directory = cache_dir or _cache_dir()
    target = directory / f"philox_v1_{key}.so"
    if target.exists():
        return target
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        done = subprocess.run([cc, *_FLAGS, "-o", tmp, str(_SOURCE), "-lm"], capture_output=True,
                              text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"{Path(cc).name} failed: {done.stderr.strip() or done.stdout.strip()}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def _tiles(start: int, n: int) -> tuple[int, int]:
    """The tiles ``[t0, t1)`` that stream positions ``[start, start + n)`` touch."""
    t0 = start // TILE
    return t0, ((start + n - 1) // TILE + 1 if n else t0)


def _split(t0: int, t1: int, run: Any) -> None:
    """``run(lo, hi)`` over whole-tile ranges covering ``[t0, t1)``, on
    ``torch.get_num_threads()`` threads: the calling thread and the engine's pool
    (:mod:`._rng`, rebuilt in a forked child). The ranges write disjoint memory."""
    tiles = t1 - t0
    threads = min(torch.get_num_threads(), tiles)
    if threads <= 1 or tiles < _MIN_PARALLEL_TILES:
        run(t0, t1)
        return
    cuts = [t0 + tiles * i // threads for i in range(threads + 1)]
    pool = _rng._POOL.get(threads - 1)
    futures = [pool.submit(run, cuts[i], cuts[i + 1]) for i in range(1, threads)]
    run(cuts[0], cuts[1])
    for f in futures:
        f.result()


class _Library:
    """The loaded kernel: ``normal_``, ``perturb_relative_`` and ``block``, called on
    contiguous CPU tensors through their data pointers."""

    def __init__(self, path: Path) -> None:
        lib = ctypes.CDLL(str(path))
        i64, u64, ptr = ctypes.c_int64, ctypes.c_uint64, ctypes.c_void_p
        self._normal = lib.rs_philox_normal
        self._normal.argtypes = [ptr, i64, u64, u64, i64, i64]
        self._normal.restype = None
        self._perturb = lib.rs_philox_perturb_into
        self._perturb.argtypes = [ptr, ptr, ctypes.c_int, i64, u64, u64, ctypes.c_float, i64,
                                  i64, ptr]
        self._perturb.restype = ctypes.c_int
        self._sum_parts = lib.rs_philox_sum_parts
        self._sum_parts.argtypes = [ptr, i64, ptr]
        self._sum_parts.restype = None
        self._block = lib.rs_philox_block
        self._block.argtypes = [ptr, ptr, ptr]
        self._block.restype = None
        self.path = path

    def normal_(self, out: torch.Tensor, key: int, offset: int) -> None:
        """N(0, 1) draws at stream positions ``[offset, offset + numel)`` into a contiguous
        float32 CPU tensor."""
        if out.device.type != "cpu" or not out.is_contiguous() or out.dtype != torch.float32:
            raise RuntimeError("philox normal_: a contiguous float32 CPU tensor is required")
        n = out.numel()
        if n == 0:
            return
        p, k, start = out.data_ptr(), key & _MASK64, offset & _MASK64
        t0, t1 = _tiles(start, n)
        _split(t0, t1, lambda lo, hi: self._normal(p, n, k, start, lo, hi))

    def perturb_into(self, y: torch.Tensor, out: torch.Tensor, key: int, offset: int,
                     scale: float) -> torch.Tensor:
        """``out ← fma(ε·y, scale, y)`` in one pass, ε the draws at ``[offset, offset +
        numel)``; ``out`` is ``y`` (in place) or a contiguous tensor of ``y``'s dtype and
        size that does not overlap it. Returns float64 ``(‖y‖², ‖realised error‖²)`` of the
        unperturbed ``y``."""
        if y.device.type != "cpu" or not y.is_contiguous():
            raise RuntimeError("philox perturb: a contiguous CPU tensor is required")
        code = _DTYPES.get(y.dtype)
        if code is None:
            raise RuntimeError("philox perturb: float32, bfloat16 or float16 required")
        if (out.dtype != y.dtype or out.shape != y.shape or not out.is_contiguous()
                or out.device.type != "cpu"):
            raise RuntimeError("philox perturb: the output must be a contiguous CPU tensor of "
                               "the input's dtype and shape")
        n = y.numel()
        src, dst, k, start = y.data_ptr(), out.data_ptr(), key & _MASK64, offset & _MASK64
        size = n * y.element_size()
        if src != dst and src < dst + size and dst < src + size:
            # the C loop reads each element before it writes it, so only the exact alias is
            # safe: a shifted one would read values the pass has already written
            raise RuntimeError("philox perturb: the output overlaps the input without being it")
        t0, t1 = _tiles(start, n)
        parts = torch.empty(2 * (t1 - t0), dtype=torch.float64)  # every slot is written
        base, width = parts.data_ptr(), parts.element_size()
        s = float(scale)

        def run(lo: int, hi: int) -> None:
            self._perturb(src, dst, code, n, k, start, s, lo, hi, base + 2 * width * (lo - t0))

        _split(t0, t1, run)
        norms = torch.empty(2, dtype=torch.float64)
        self._sum_parts(base, t1 - t0, norms.data_ptr())
        return norms

    def block(self, counter: list[int], key: list[int]) -> list[int]:
        """The four output words of Philox4x32-10 for one counter and key."""
        if len(counter) != 4 or len(key) != 2:
            raise RuntimeError("philox block: 4 counter words, 2 key words")
        words = ctypes.c_uint32 * 4
        c, out = words(*(w & 0xFFFFFFFF for w in counter)), words()
        k = (ctypes.c_uint32 * 2)(*(w & 0xFFFFFFFF for w in key))
        self._block(c, k, out)
        return list(out)


class _Kernel:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._module: Any = None
        self._error: str | None = None

    def build(self) -> Any:
        return _Library(build_library())

    def get(self) -> Any:
        with self._lock:
            if self._module is None and self._error is None:
                try:
                    self._module = self.build()
                except Exception as exc:  # any build failure is the same refusal
                    reason = " ".join(str(exc).split())[:200] or type(exc).__name__
                    self._error = ("generator 'philox' needs its C kernel, which could not be "
                                   f"built here ({reason}); install a C compiler or use "
                                   "generator 'mt'.")
            if self._error is not None:
                raise GeneratorUnavailableError(self._error)
            return self._module


_KERNEL = _Kernel()


def kernel() -> Any:
    """The loaded kernel (built on first call, or loaded from the cache);
    :class:`GeneratorUnavailableError` when it cannot be built."""
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
            norms = self._k.perturb_into(y, y, _signed(self.key), self._take(y.numel()),
                                         float(scale))
            # written through its data pointer: bump the version as an in-place op would, so
            # that autograd still refuses a saved tensor that this pass changed
            torch.autograd.graph.increment_version(y)
            return norms
        e = self.randn(y.shape, torch.float32).to(y.dtype).mul_(y)
        norms = torch.stack((torch.linalg.vector_norm(y), torch.linalg.vector_norm(e) * scale))
        y.add_(e, alpha=scale)
        return norms.double().square_()

    def perturbed(self, y: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
        """``(y + scale·(ε·y), norms)`` out of place: the values and norms of
        :meth:`perturb_relative_` in a new tensor, ``y`` left as it is (one pass that reads
        ``y`` and writes the result, for outputs autograd tracks and for gradients)."""
        if (y.device.type != "cpu" or not y.is_contiguous()
                or y.dtype not in (torch.float32, torch.bfloat16, torch.float16)):
            out = y.detach().clone(memory_format=torch.contiguous_format)
            return out, self.perturb_relative_(out, scale)
        out = torch.empty_like(y, memory_format=torch.contiguous_format)
        if y.numel() == 0:
            return out, torch.zeros(2, dtype=torch.float64)
        norms = self._k.perturb_into(y.detach(), out, _signed(self.key),
                                     self._take(y.numel()), float(scale))
        return out, norms

    def get_state(self) -> dict[str, int]:
        """The stream's position: all that gradient checkpointing needs to replay it."""
        return {"position": self.position}

    def set_state(self, state: dict[str, Any]) -> PhiloxStream:
        self.position = int(state["position"])
        return self


def philox_block(counter: tuple[int, int, int, int], key: tuple[int, int]) -> tuple[int, ...]:
    """The four output words of Philox4x32-10 for one counter and key, by the kernel."""
    return tuple(w & 0xFFFFFFFF for w in kernel().block(list(counter), list(key)))
