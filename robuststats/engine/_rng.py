"""Noise streams: Gaussian draws that use every CPU thread and stay the same whatever their number.

A CPU ``torch.Generator`` is one Mersenne Twister: ``torch.randn`` fills a tensor serially on
one core while the matmuls around it use all of them. A :class:`NoiseStream` splits each draw
into fixed chunks of :data:`CHUNK` elements (of the flattened tensor). Chunk ``i`` of every
draw comes from the stream's own generator number ``i``, so which numbers land where depends
only on the stream key and the sizes of the draws, never on the thread count; the chunks are
filled by a thread pool (``torch.get_num_threads()`` workers, the calling thread included).

Each chunk generator is a Mersenne Twister whose full 624-word state is expanded from a 64-bit
key by splitmix64 (Steele, Lea & Flood 2014). ``manual_seed`` would use only the low 32 bits
of a seed (``at::mt19937`` seeds from a ``uint32``), and with thousands of generators in a
study a 32-bit birthday collision (two chunks with identical noise) becomes likely. The state
layout is checked once against ``manual_seed``; should a future torch change it, the streams
fall back to ``manual_seed`` with a ``RuntimeWarning``.

On a GPU the device generator is already parallel (Philox): one generator per stream draws
the whole tensor. A stream's state (:meth:`NoiseStream.get_state`) is what gradient
checkpointing needs to replay a layer's draws.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    from robuststats.engine._philox import PhiloxStream

__all__ = ["CHUNK", "NoiseStream", "mix64", "randn"]

#: elements per chunk (512 KiB of float32): large enough that seeding and thread hand-off
#: are a few per cent of the draw, small enough that a 1024-wide activation splits in two
CHUNK = 1 << 17

_MASK64 = 0xFFFFFFFFFFFFFFFF
_MT_WORDS = 624
_MT_OFFSET = 24  # bytes before the 624 state words in CPUGeneratorImplState (seed, left, seeded, next)
_IDX = np.arange(1, _MT_WORDS + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)


def mix64(*parts: int) -> int:
    """A 64-bit key from integers: splitmix64 finalizer applied over the parts in turn."""
    x = 0
    for p in parts:
        x = (x + (int(p) & _MASK64) * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & _MASK64
        x ^= x >> 30
        x = (x * 0xBF58476D1CE4E5B9) & _MASK64
        x ^= x >> 27
        x = (x * 0x94D049BB133111EB) & _MASK64
        x ^= x >> 31
    return x


def _mt_words(key: int) -> np.ndarray:
    """624 32-bit Mersenne Twister state words (as uint64) expanded from ``key`` (splitmix64)."""
    x = _IDX + np.uint64(key & _MASK64)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    x &= np.uint64(0xFFFFFFFF)
    if not x.any():  # the one state a Mersenne Twister must not have
        x[0] = 1
    return x


class _StateMaker:
    """Builds CPU generator states from 64-bit keys; remembers recent ones (sessions repeat keys)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._template: np.ndarray | None = None
        self._full_state: bool | None = None
        self._cache: OrderedDict[int, torch.Tensor] = OrderedDict()

    def _check_layout(self) -> None:
        g = torch.Generator().manual_seed(12345)
        state = g.get_state().numpy().copy()
        words = [12345]
        for i in range(1, _MT_WORDS):  # at::mt19937's init_with_uint32
            p = words[-1]
            words.append((1812433253 * (p ^ (p >> 30)) + i) & 0xFFFFFFFF)
        stored = state[_MT_OFFSET:_MT_OFFSET + 8 * _MT_WORDS].view("<u8")
        self._full_state = bool(np.array_equal(stored, np.array(words, dtype=np.uint64)))
        self._template = state
        if not self._full_state:
            warnings.warn("this torch's CPU generator state layout is unknown: noise streams "
                          "fall back to manual_seed (32-bit seeds)", RuntimeWarning, stacklevel=3)

    def state(self, key: int) -> torch.Tensor | None:
        with self._lock:
            if self._full_state is None:
                self._check_layout()
            if not self._full_state:
                return None
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
            assert self._template is not None
            state = self._template.copy()
            state[:8] = np.array([key], dtype="<u8").view(np.uint8)  # initial_seed: for the record
            state[_MT_OFFSET:_MT_OFFSET + 8 * _MT_WORDS] = _mt_words(key).astype("<u8").view(np.uint8)
            tensor = torch.from_numpy(state)
            self._cache[key] = tensor
            if len(self._cache) > 4096:
                self._cache.popitem(last=False)
            return tensor


_STATES = _StateMaker()


def seeded_generator(key: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A generator on ``device`` whose state is determined by the 64-bit ``key``."""
    device = torch.device(device)
    g = torch.Generator(device=device)
    if device.type == "cpu":
        state = _STATES.state(key)
        if state is not None:
            g.set_state(state)
            return g
    g.manual_seed(key & _MASK64)
    return g


class _Pool:
    """One process-wide thread pool, sized to ``torch.get_num_threads()`` on use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._size = 0
        self._pid = 0

    def get(self, n: int) -> ThreadPoolExecutor:
        with self._lock:
            if self._pid != os.getpid():
                # a forked child inherits the pool object but not its threads: submitting to
                # it would wait forever, so the child builds its own
                self._pool, self._pid = None, os.getpid()
            if self._pool is None or self._size != n:
                if self._pool is not None:
                    self._pool.shutdown(wait=False)
                self._pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="robuststats-rng")
                self._size = n
            return self._pool


_POOL = _Pool()


class NoiseStream:
    """A reproducible source of N(0, 1) draws for one (seed, phase, layer, device).

    ``randn(shape, dtype)`` returns a fresh tensor; chunk ``i`` of the flattened draw comes
    from chunk generator ``i`` of this stream (created on first use from ``mix64(key, i)``),
    so the result depends on the key and the history of draw sizes only.
    """

    def __init__(self, key: int, device: torch.device | str = "cpu") -> None:
        self.key = int(key) & _MASK64
        self.device = torch.device(device)
        self._gens: list[torch.Generator] = []

    def _chunk_gen(self, i: int) -> torch.Generator:
        while len(self._gens) <= i:
            self._gens.append(seeded_generator(mix64(self.key, len(self._gens)), self.device))
        return self._gens[i]

    def randn(self, shape: torch.Size | tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        out = torch.empty(shape, dtype=dtype, device=self.device)
        n = out.numel()
        if self.device.type != "cpu" or n <= CHUNK:
            return out.normal_(generator=self._chunk_gen(0))
        flat = out.view(-1)
        gens = [self._chunk_gen(i) for i in range(-(-n // CHUNK))]

        def fill(i: int) -> None:
            flat[i * CHUNK:(i + 1) * CHUNK].normal_(generator=gens[i])

        _run_chunks(len(gens), fill)
        return out

    def perturb_relative_(self, y: torch.Tensor, scale: float) -> torch.Tensor:
        """``y ← y + scale·ε·y`` in place, with ε the numbers :meth:`randn` would draw for
        ``y``; returns ``(‖y‖², ‖scale·ε·y‖²)`` of the unperturbed ``y`` (float64).

        Each chunk is drawn, multiplied, measured and added while it is in cache, by the
        thread that drew it: one pass over ``y`` instead of five, all in parallel. The
        result is bitwise that of ``y.add_(randn(...).mul_(y), alpha=scale)``. ``y`` must be
        a contiguous CPU tensor.

        A bfloat16 or float16 ``y`` takes the engine's low-precision rule in the same pass:
        ε is drawn in float32 (the numbers :meth:`randn` would draw for ``y.float()``), the
        noisy value ``yf + scale·ε·yf`` is computed in float32 from ``yf = y.float()`` and
        rounded once to ``y``'s dtype, and the second norm is that of the *realised* error
        (rounded result − ``yf``, in float32): bitwise the values of the unfused form, seven
        passes over ``y`` fewer.
        """
        flat = y.view(-1)
        n = flat.numel()
        gens = [self._chunk_gen(i) for i in range(max(-(-n // CHUNK), 1))]
        parts: list[torch.Tensor | None] = [None] * len(gens)
        low = y.dtype in (torch.bfloat16, torch.float16)

        def fill(i: int) -> None:
            yi = flat[i * CHUNK:(i + 1) * CHUNK]
            if low:
                yf = yi.float()
                e = torch.empty_like(yf).normal_(generator=gens[i]).mul_(yf)
                out = torch.add(yf, e, alpha=scale).to(y.dtype)
                realised = out.float().sub_(yf)
                parts[i] = torch.stack((torch.linalg.vector_norm(yf),
                                        torch.linalg.vector_norm(realised)))
                yi.copy_(out)
                return
            e = torch.empty_like(yi).normal_(generator=gens[i]).mul_(yi)
            parts[i] = torch.stack((torch.linalg.vector_norm(yi),
                                    torch.linalg.vector_norm(e) * scale))
            yi.add_(e, alpha=scale)

        _run_chunks(len(gens), fill)
        return torch.stack(parts).double().square_().sum(dim=0)  # type: ignore[arg-type]

    def get_state(self) -> dict[int, torch.Tensor]:
        """Snapshot of the chunk generators used so far (unused ones start from their key)."""
        return {i: g.get_state() for i, g in enumerate(self._gens)}

    def set_state(self, state: dict[int, Any]) -> NoiseStream:
        self._gens = []
        for i in range(max(state, default=-1) + 1):
            g = self._chunk_gen(i)
            if i in state:
                g.set_state(state[i])
        return self


def _fill_share(fill: Any, indices: range) -> None:
    for i in indices:
        fill(i)


def _fill_share_as(inference: bool, grad: bool, fill: Any, indices: range) -> None:
    """:func:`_fill_share` in a pool thread, under the calling thread's inference and grad
    modes (both are thread-local: a pool thread would otherwise update an inference tensor
    outside inference mode, which torch refuses)."""
    with torch.inference_mode(inference), torch.set_grad_enabled(grad):
        _fill_share(fill, indices)


def _run_chunks(k: int, fill: Any) -> None:
    """``fill(i)`` for chunks ``0..k-1``, spread over ``torch.get_num_threads()`` threads
    (the calling thread included: workers take chunks 1, 1 + t, …)."""
    threads = min(torch.get_num_threads(), k)
    if threads <= 1:
        _fill_share(fill, range(k))
        return
    pool = _POOL.get(threads - 1)
    modes = (torch.is_inference_mode_enabled(), torch.is_grad_enabled())
    futures = [pool.submit(_fill_share_as, *modes, fill, range(j, k, threads))
               for j in range(1, threads)]
    _fill_share(fill, range(0, k, threads))
    for f in futures:
        f.result()


def randn(
    shape: torch.Size | tuple[int, ...],
    generator: NoiseStream | PhiloxStream | torch.Generator | None,
    dtype: torch.dtype,
    device: torch.device,
) -> torch.Tensor:
    """N(0, 1) draws from a noise stream (a :class:`NoiseStream`, or the ``philox`` stream's
    ``PhiloxStream``, which has the same ``randn``) or a plain ``torch.Generator`` (or the
    global RNG)."""
    if generator is None or isinstance(generator, torch.Generator):
        return torch.randn(shape, generator=generator, dtype=dtype, device=device)
    return generator.randn(shape, dtype)
