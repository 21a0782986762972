"""The seeds' adaptive rule on a sensitivity profile (files are read by
:mod:`robuststats.config.sensitivity`)."""

from __future__ import annotations

from collections.abc import Mapping

from robuststats.errors import InputError

__all__ = ["heuristic_multipliers"]


def heuristic_multipliers(scores: Mapping[int, float], n_layers: int, *, sensitive_above: float,
                          robust_below: float, sensitive_factor: float,
                          robust_factor: float) -> dict[int, float]:
    """Seed 003 §4.3: ``sensitive_factor`` where score > ``sensitive_above``,
    ``robust_factor`` where score < ``robust_below``, 1 elsewhere and for unscored layers."""
    beyond = sorted(k for k in scores if k >= n_layers)
    if beyond:
        raise InputError(f"sensitivity profile names layer {beyond[0]}, but the model has "
                         f"{n_layers} decoder layers (0-{n_layers - 1}).")
    out = {}
    for layer in range(n_layers):
        s = scores.get(layer)
        if s is None:
            out[layer] = 1.0
        elif s > sensitive_above:
            out[layer] = sensitive_factor
        elif s < robust_below:
            out[layer] = robust_factor
        else:
            out[layer] = 1.0
    return out
