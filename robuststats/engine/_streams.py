"""The noise streams of one session: one :class:`~robuststats.engine._rng.NoiseStream` per
(phase, layer, device), keyed by ``(seed, phase, layer)``.

Separate streams make the noise of one layer independent of which other layers are
selected, keep backward draws from shifting forward noise, and let a checkpointed layer be
replayed alone (``_replay``). Streams are created on first use, of the spec's
``generator``: :class:`~robuststats.engine._rng.NoiseStream` (``mt``, the default) or
:class:`~robuststats.engine._philox.PhiloxStream` (``philox``), under the same keys.
"""

from __future__ import annotations

from typing import Any

import torch

from robuststats.engine._rng import NoiseStream

__all__ = ["NoiseStreams", "in_backward", "make_stream", "stream_seed"]


def in_backward() -> bool:
    """True while the autograd engine runs a backward pass on this thread (e.g. while a
    checkpointed segment is recomputed)."""
    return torch._C._current_graph_task_id() != -1


def stream_seed(seed: int, phase: str, layer: int) -> int:
    """Distinct 63-bit seeds per (seed, phase, layer): a splitmix64 finalizer of the triple."""
    x = (seed * 0x9E3779B97F4A7C15 + (layer + 2) * 0xBF58476D1CE4E5B9
         + (0 if phase == "forward" else 0x94D049BB133111EB)) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    x ^= x >> 31
    return x & 0x7FFFFFFFFFFFFFFF


def make_stream(generator: str, key: int, device: torch.device | str) -> Any:
    """A stream of ``generator`` (``"mt"`` or ``"philox"``) for the 64-bit ``key``."""
    if generator == "philox":
        from robuststats.engine._philox import PhiloxStream

        return PhiloxStream(key, device)
    return NoiseStream(key, device)


class NoiseStreams:
    """The live streams of one session. Streams draw in parallel on CPU, identically for any
    thread count (``_rng``, ``_philox``)."""

    def __init__(self, seed: int, devices: set[torch.device], generator: str = "mt") -> None:
        self.seed = seed
        self.generator = generator
        if generator == "philox":
            # refuse before the model runs: the kernel must build, the model sit on the CPU
            from robuststats.engine._philox import check_available

            check_available(devices)
        #: devices of the model's parameters: where a layer that has not drawn yet starts
        #: the streams a checkpoint record saves
        self.devices = devices
        self._live: dict[tuple[str, int, torch.device], NoiseStream] = {}

    def get(self, phase: str, layer: int, device: torch.device) -> NoiseStream:
        key = (phase, layer, device)
        g = self._live.get(key)
        if g is None:
            g = make_stream(self.generator, stream_seed(self.seed, phase, layer), device)
            self._live[key] = g
        return g

    def fresh(self, phase: str, layer: int, device: torch.device) -> NoiseStream:
        """A new stream at the start of ``(phase, layer)``, not among the live ones: a
        replay draws from copies so that the live streams are left where they are."""
        return make_stream(self.generator, stream_seed(self.seed, phase, layer), device)

    def forward_states(self, layer: int) -> dict[torch.device, Any]:
        """States of ``layer``'s forward streams on every device they exist on; when the
        layer has not drawn yet, its streams are started on the model's devices."""
        states = {
            dev: g.get_state()
            for (ph, ly, dev), g in self._live.items()
            if ph == "forward" and ly == layer
        }
        if not states:
            for dev in self.devices:
                states[dev] = self.get("forward", layer, dev).get_state()
        return states
