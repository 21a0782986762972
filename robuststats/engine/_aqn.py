"""AQN: adaptive quantization noise on RMSNorm weights (QeRL-style) and its sigma schedule.

QeRL (Huang et al. 2025, "QeRL: Beyond Efficiency -- Quantization-enhanced Reinforcement
Learning for LLMs", arXiv:2510.11696; code NVlabs/QeRL, ``get_sigma_by_step``) adds
Gaussian noise ``N(0, σ²)`` to the weights of the normalisation layers before a rollout,
with σ from a staged schedule:

- ``sigma_trend`` has ``num_stages − 1`` values decaying geometrically,
  ``σ_i = σ_start · (σ_end/σ_start)^(i/(num_stages − 2))``;
- the ``total_steps`` are cut into ``num_stages`` equal intervals of length
  ``L = total_steps / num_stages``; step ``t`` lies in interval ``k = ⌊min(t, T)/L⌋``;
- interval 0 is a warm-up with σ = 0, interval ``k ≥ 1`` uses ``σ_{min(k−1, len−1)}``.

The epoch-aware variant ("Option C", seed 002, experiment E5b) runs the same rule inside
each epoch with its own range, e.g. epoch 1: 0.05 → 0.01, epoch 2: 0.01 → 0.0005, with
``stages_per_epoch`` sigma values and one warm-up interval per epoch.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from robuststats._fields import check_whole, from_mapping
from robuststats.errors import InputError

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = ["AQNSchedule", "aqn_perturb", "geometric_trend", "sigma_by_step"]


def geometric_trend(start: float, end: float, n: int) -> list[float]:
    """``n`` values from ``start`` to ``end`` with a constant ratio (QeRL's decay)."""
    if n <= 1:
        return [float(start)]
    return [float(start) * (float(end) / float(start)) ** (i / (n - 1)) for i in range(n)]


def sigma_by_step(step: int, total_steps: int, sigma_trend: Sequence[float]) -> float:
    """σ at ``step`` for a trend over ``total_steps`` with one leading warm-up interval."""
    step = min(step, total_steps)
    intervals = len(sigma_trend) + 1
    k = int(step // (total_steps / intervals))
    if k == 0:
        return 0.0
    return float(sigma_trend[min(k - 1, len(sigma_trend) - 1)])


def _sigma(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise InputError(f"`{name}` must be a positive number, got {value!r}.")
    if not math.isfinite(float(value)):
        raise InputError(f"`{name}` must be finite, got {value!r}.")
    return float(value)


def _epoch_ranges(value: object) -> tuple[tuple[float, float], ...]:
    pairs = list(value) if isinstance(value, (list, tuple)) else None
    if pairs is None or not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in pairs):
        raise InputError(f"`epoch_ranges` must be a list of (start, end) pairs, got {value!r}.")
    return tuple((_sigma(a, f"epoch_ranges[{i}][0]"), _sigma(b, f"epoch_ranges[{i}][1]"))
                 for i, (a, b) in enumerate(pairs))


@dataclass(frozen=True)
class AQNSchedule:
    """Sigma schedule of AQN; ``schedule.sigma(step)``.

    Global (E5a): ``AQNSchedule(total_steps=116, sigma_start=0.05, sigma_end=0.0005,
    num_stages=10)``: steps 0–11 warm-up, then 9 geometric stages.
    Epoch-aware "Option C" (E5b): ``AQNSchedule(total_steps=116, epochs=2,
    epoch_ranges=[(0.05, 0.01), (0.01, 0.0005)], stages_per_epoch=5)``.
    """

    total_steps: int | None = None
    sigma_start: float = 0.05
    sigma_end: float = 0.0005
    num_stages: int = 10
    epochs: int = 1
    epoch_ranges: tuple[tuple[float, float], ...] | None = None
    stages_per_epoch: int = 5

    def __post_init__(self) -> None:
        if self.total_steps is not None:
            check_whole(self.total_steps, "total_steps", low=1)
        _sigma(self.sigma_start, "sigma_start")
        _sigma(self.sigma_end, "sigma_end")
        check_whole(self.num_stages, "num_stages", low=2, what="an integer ≥ 2")
        check_whole(self.epochs, "epochs", low=1)
        check_whole(self.stages_per_epoch, "stages_per_epoch", low=1)
        if self.epoch_ranges is not None:
            ranges = _epoch_ranges(self.epoch_ranges)
            if len(ranges) != self.epochs:
                raise InputError(
                    f"`epoch_ranges` must have one (start, end) pair per epoch ({self.epochs}), "
                    f"got {len(ranges)}."
                )
            object.__setattr__(self, "epoch_ranges", ranges)
        if self.total_steps is not None and self.total_steps < self.epochs:
            raise InputError(
                f"`total_steps` ({self.total_steps}) must be at least `epochs` ({self.epochs})."
            )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AQNSchedule:
        """Build from a mapping (e.g. a study file); unknown keys are errors. ``total_steps``
        may be omitted: a trainer fills it in with ``dataclasses.replace``."""
        return from_mapping(cls, data, "AQN schedule")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON/YAML-ready mapping; ``AQNSchedule.from_dict(s.to_dict()) == s``."""
        out = dataclasses.asdict(self)
        if self.epoch_ranges is not None:
            out["epoch_ranges"] = [list(pair) for pair in self.epoch_ranges]
        return out

    @property
    def sigma_trend(self) -> list[float]:
        """Global trend: ``num_stages − 1`` geometric values (QeRL)."""
        return geometric_trend(self.sigma_start, self.sigma_end, self.num_stages - 1)

    @property
    def steps_per_epoch(self) -> int:
        return self._steps() // self.epochs

    def _steps(self) -> int:
        if self.total_steps is None:
            raise InputError("`total_steps` is not set on this AQNSchedule; set it to the run's steps.")
        return self.total_steps

    def sigma(self, step: int) -> float:
        """σ at training step ``step`` (0-based); 0 during a warm-up interval."""
        check_whole(step, "step")
        if self.epoch_ranges is None:
            return sigma_by_step(step, self._steps(), self.sigma_trend)
        spe = self.steps_per_epoch
        epoch = min(step // spe, self.epochs - 1)
        start, end = self.epoch_ranges[epoch]
        trend = geometric_trend(start, end, self.stages_per_epoch)
        return sigma_by_step(step - epoch * spe, spe, trend)


@dataclass(frozen=True)
class AQNPerturbation:
    """What :func:`aqn_perturb` changed: module names and the sigma used."""

    sigma: float
    modules: tuple[str, ...]


@contextmanager
def aqn_perturb(
    model: nn.Module, sigma: float, *, generator: torch.Generator | None = None
) -> Iterator[AQNPerturbation]:
    """Add ``N(0, sigma²)`` to every RMSNorm/LayerNorm weight inside the block.

    The original weights are restored bit for bit on exit, also when the block raises.
    ``sigma = 0`` changes nothing. A positive ``sigma`` on a model without norm modules
    raises (perturbing nothing silently is what invalidated earlier AQN runs).
    ``generator`` is required for a positive ``sigma``: noise never comes from the global RNG.
    """
    import torch

    from robuststats.engine._model_map import build_model_map

    if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not sigma >= 0:
        raise InputError(f"`sigma` must be a non-negative number, got {sigma!r}.")
    mm = build_model_map(model)
    targets = [
        (mm.names[id(m)], m.weight)
        for m in mm.norm_modules
        if isinstance(getattr(m, "weight", None), torch.Tensor)
    ]
    if sigma == 0:
        yield AQNPerturbation(0.0, ())
        return
    if not targets:
        raise InputError("`aqn_perturb` found no RMSNorm/LayerNorm weight to perturb in `model`.")
    if generator is None:
        raise InputError("`generator` is required for aqn_perturb with sigma > 0, got None.")
    saved = [w.detach().clone() for _, w in targets]
    try:
        with torch.no_grad():
            for _, w in targets:
                # drawn where the generator lives (the CPU for a study): the same draws on
                # every device, and a CPU generator never meets a CUDA tensor
                noise = torch.randn(w.shape, generator=generator, dtype=w.dtype,
                                    device=generator.device).to(w.device)
                w.add_(noise, alpha=float(sigma))
        yield AQNPerturbation(float(sigma), tuple(n for n, _ in targets))
    finally:
        with torch.no_grad():
            for (_, w), orig in zip(targets, saved):
                w.copy_(orig)
