"""Which layer is running, per thread: each thread that runs the model has its own stack of
entered layers, its own depth of model calls and its own recompute layer, so sessions used
from several threads (and autograd's own threads) never see each other's position."""

from __future__ import annotations

import threading

from robuststats.engine._model_map import OUTSIDE
from robuststats.engine._replay import CheckpointRecord
from robuststats.engine._streams import in_backward

__all__ = ["LayerTracker"]


class LayerTracker:
    """Thread-local position of the model's forward: the layers entered (each with the
    checkpoint record of its forward, if any), the depth of nested calls of the model's
    entry modules, and the layer a checkpoint recompute runs in."""

    def __init__(self) -> None:
        self._tls = threading.local()

    def push(self, layer: int, record: CheckpointRecord | None) -> None:
        stack = getattr(self._tls, "layers", None)
        if stack is None:
            stack = self._tls.layers = []
        stack.append((layer, record))

    def pop(self) -> tuple[int, CheckpointRecord | None] | None:
        """The innermost entered layer and its record; ``None`` when none was entered on
        this thread."""
        stack = getattr(self._tls, "layers", None)
        return stack.pop() if stack else None

    def current(self) -> int | None:
        """Layer whose forward is running on this thread; ``OUTSIDE`` inside the model but
        outside any layer; ``None`` when the model is not running at all."""
        stack = getattr(self._tls, "layers", None)
        if stack:
            return stack[-1][0]
        if getattr(self._tls, "depth", 0) > 0:
            return OUTSIDE
        if in_backward():  # recomputing a checkpointed layer: its hooks do not run again
            return getattr(self._tls, "recompute_layer", None)
        return None

    def recompute_in(self, layer: int) -> None:
        self._tls.recompute_layer = layer

    def enter_model(self) -> None:
        self._tls.depth = getattr(self._tls, "depth", 0) + 1

    def exit_model(self) -> None:
        self._tls.depth = max(getattr(self._tls, "depth", 1) - 1, 0)
