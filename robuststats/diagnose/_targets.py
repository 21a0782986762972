"""Targets of the probe: where noise goes in one evaluation (an op type, a layer, a window).

A :class:`Target` is a place; :meth:`Target.noise` turns it into the engine's
:class:`~robuststats.engine.NoiseSpec` at the probe's scale. Torch-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from robuststats.engine import NoiseSpec
from robuststats.errors import InputError

__all__ = ["Target", "layer_targets", "operator_targets", "window_targets"]


@dataclass(frozen=True)
class Target:
    """One place noise is put: ``ops`` (a preset, or one op) in ``layers`` (``None``: all).

    ``target_id`` is stable and file-name safe (``op:softmax``, ``layer:3``, ``window:3-5``).
    """

    level: str
    target_id: str
    label: str
    ops: str
    layers: tuple[int, ...] | None = None

    def noise(self, scale: float, *, kind: str = "relative_gaussian",
              noise_seed: int = 0) -> NoiseSpec:
        """The forward-only NoiseSpec of this target at ``scale``, seeded ``noise_seed``."""
        layers = None if self.layers is None else list(self.layers)
        return NoiseSpec(scale=float(scale), kind=kind, phases="forward", ops=self.ops,
                         layers=layers, seed=int(noise_seed))

    @property
    def first_layer(self) -> int | None:
        return None if not self.layers else self.layers[0]


def operator_targets(ops: Sequence[str]) -> list[Target]:
    """One target per op type, in the whole model (every layer and the modules outside)."""
    return [Target("operator", f"op:{op}", op, op, None) for op in ops]


def layer_targets(n_layers: int, ops: str) -> list[Target]:
    """One target per decoder layer: ``ops`` in that layer only."""
    return [Target("layer", f"layer:{i}", f"L{i}", ops, (i,)) for i in range(n_layers)]


def window_targets(n_layers: int, ops: str, *, window: int, stride: int = 1) -> list[Target]:
    """Windows of ``window`` consecutive layers, starting every ``stride`` layers.

    The last window ends at the last layer or before it (windows never run past the model);
    a window of 1 is a layer, so ``window`` must be at least 2.
    """
    if window < 2:
        raise InputError(f"`window` must be at least 2 (a window of 1 is the layer level), "
                         f"got {window}.")
    if stride < 1:
        raise InputError(f"`stride` must be a positive integer, got {stride}.")
    if window > n_layers:
        raise InputError(f"`window` ({window}) exceeds the model's {n_layers} layers.")
    out = []
    for start in range(0, n_layers - window + 1, stride):
        end = start + window - 1
        out.append(Target("window", f"window:{start}-{end}", f"L{start}-{end}", ops,
                          tuple(range(start, end + 1))))
    return out
