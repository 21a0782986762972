"""Gradient-checkpoint replay: the recompute of a checkpointed layer draws the noise its
forward drew.

transformers checkpoints a decoder layer's ``forward`` and recomputes it during backward.
Fresh noise in the recompute would make the gradient belong to a different forward than
the loss. So each checkpointed forward of a layer leaves a :class:`CheckpointRecord`: the
states of the layer's forward streams at its start and, at its end, the number of draws it
made. Forward draws inside a backward pass (the recompute) come from copies of the saved
streams, newest record first, for that many draws; the live streams are not touched.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any

import torch

from robuststats.engine._rng import NoiseStream
from robuststats.engine._streams import NoiseStreams, in_backward

__all__ = ["CheckpointRecord", "CheckpointReplay", "Replay"]

#: draws of a replay whose forward had not ended when its recompute began: no limit
_UNBOUNDED = 1 << 62


@dataclass
class CheckpointRecord:
    """One checkpointed forward of one layer."""

    #: the layer's forward-stream states at the start, per device
    states: dict[torch.device, Any]
    #: the layer's forward draws before this forward
    start: int
    #: draws this forward made; ``None`` until it ends
    n_draws: int | None = None


@dataclass
class Replay:
    """The recompute of one record: streams restored from its states, and the draws left."""

    streams: dict[torch.device, NoiseStream]
    left: int
    #: the recompute it serves (see :func:`_recompute`), ``None`` when unknown
    recompute: Any = None


def _recompute() -> Any:
    """The recompute running on this thread, as torch's non-reentrant checkpoint identifies
    it: the pack hook of its ``_recomputation_hook`` (a new one for each recompute) on top
    of the saved-tensors hooks; ``None`` elsewhere (a reentrant checkpoint)."""
    try:
        top = torch._C._autograd._top_saved_tensors_default_hooks(True)
    except (AttributeError, RuntimeError, TypeError):  # a torch without it: count draws only
        return None
    if top is None:
        return None
    pack = top[0]
    return pack if "_recomputation_hook" in getattr(pack, "__qualname__", "") else None


class CheckpointReplay:
    """Records of checkpointed forwards per layer (the last 64) and the replay running for
    each layer."""

    def __init__(self, streams: NoiseStreams) -> None:
        self._streams = streams
        self._saved: dict[int, deque[CheckpointRecord]] = defaultdict(lambda: deque(maxlen=64))
        self._draws: dict[int, int] = defaultdict(int)  # forward draws per layer, outside backward
        self._running: dict[int, Replay] = {}
        #: forward draws in a backward with no record to replay: recomputes of checkpointed
        #: functions other than whole layers, which get fresh noise
        self.unreplayed = 0

    def enter(self, layer: int, module: torch.nn.Module) -> CheckpointRecord | None:
        """At a layer's forward: a new record when transformers checkpoints it (grad
        enabled, training mode, its ``gradient_checkpointing`` switch on, not itself a
        recompute), else ``None``."""
        if not (
            torch.is_grad_enabled()
            and module.training
            and getattr(module, "gradient_checkpointing", False)
            and not in_backward()
        ):
            return None
        record = CheckpointRecord(self._streams.forward_states(layer), self._draws[layer])
        self._saved[layer].append(record)
        return record

    def exit(self, layer: int, record: CheckpointRecord) -> None:
        """At the end of the forward that made ``record``."""
        record.n_draws = self._draws[layer] - record.start

    def forward_stream(self, layer: int, device: torch.device) -> NoiseStream:
        """The stream of one forward draw of ``layer``: the live one outside backward; in a
        recompute, the replay of the newest record not yet replayed.

        A new replay starts with each recompute: when torch's non-reentrant checkpoint
        runs a new recompute (its recomputation hook changed), or, where the recompute
        cannot be told (reentrant checkpointing, which always recomputes the whole
        forward), when the current replay has made all its draws. Counting draws alone is
        not enough: with early stop (torch's default) a recompute ends as soon as it has
        rebuilt the tensors backward needs, before the forward's last draws, and the next
        recompute would continue the wrong record (two checkpointed forwards and one
        backward gave gradients 10 % off)."""
        if not in_backward():
            self._draws[layer] += 1
            return self._streams.get("forward", layer, device)
        replay = self._running.get(layer)
        current = _recompute()
        if replay is None or (replay.recompute is not current if current is not None
                              else replay.left <= 0):
            saved = self._saved.get(layer)
            if not saved:
                self.unreplayed += 1
                return self._streams.get("forward", layer, device)
            record = saved.pop()
            replay = self._running[layer] = Replay(
                {dev: self._streams.fresh("forward", layer, dev).set_state(state)
                 for dev, state in record.states.items()},
                record.n_draws if record.n_draws is not None else _UNBOUNDED,
                current,
            )
        replay.left -= 1
        g = replay.streams.get(device)
        if g is None:
            g = replay.streams[device] = self._streams.fresh("forward", layer, device)
        return g
