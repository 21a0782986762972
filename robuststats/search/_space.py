"""The search space: one log-uniform multiplier per decoder layer (or per layer × block),
the noise budget of a configuration, and the noise spec a configuration stands for.

A *place* is what one multiplier scales. ``space: layer`` has one place per decoder layer,
keyed in ``layer_scales`` by its index. ``space: block`` has one place per sub-module of a
layer that holds requested ops (Qwen2: ``self_attn`` with its four projections and both
attention products, ``mlp`` with its three projections), keyed by module name; ops reached
at the layer itself (a functional ``silu``, a bare ``matmul``) get a per-layer place too.
Modules outside the decoder layers (``lm_head``) keep the base scale.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from robuststats.errors import InputError

if TYPE_CHECKING:
    from robuststats.engine import NoiseSpec

__all__ = ["Place", "SearchSpace", "budget", "discover_space"]


@dataclass(frozen=True)
class Place:
    """One searched multiplier: Optuna parameter ``param``, ``layer_scales`` key ``key``."""

    param: str
    layer: int
    key: int | str
    module: str

    def to_dict(self) -> dict[str, Any]:
        return {"param": self.param, "layer": self.layer, "key": self.key,
                "module": self.module}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Place:
        return cls(str(d["param"]), int(d["layer"]), d["key"], str(d["module"]))


@dataclass(frozen=True)
class SearchSpace:
    """The places of a model and the log-uniform range of their multipliers."""

    places: tuple[Place, ...]
    low: float
    high: float
    n_layers: int

    @property
    def params(self) -> list[str]:
        return [p.param for p in self.places]

    def distributions(self) -> dict[str, Any]:
        import optuna

        return {p.param: optuna.distributions.FloatDistribution(self.low, self.high, log=True)
                for p in self.places}

    def suggest(self, trial: Any) -> dict[str, float]:
        return {p.param: trial.suggest_float(p.param, self.low, self.high, log=True)
                for p in self.places}

    def uniform(self) -> dict[str, float]:
        return {p.param: 1.0 for p in self.places}

    def from_layers(self, per_layer: Mapping[int, float]) -> dict[str, float]:
        """Every place of layer ``i`` gets ``per_layer[i]``, clipped to the range."""
        return {p.param: min(max(float(per_layer.get(p.layer, 1.0)), self.low), self.high)
                for p in self.places}

    def layer_scales(self, params: Mapping[str, float]) -> dict[int | str, float]:
        missing = [p.param for p in self.places if p.param not in params]
        if missing:
            raise InputError(f"configuration lacks the multiplier of {missing[0]!r}.")
        return {p.key: float(params[p.param]) for p in self.places}

    def noise(self, base: NoiseSpec, params: Mapping[str, float]) -> NoiseSpec:
        """``base`` with the configuration's multipliers (merged over any ``layer_scales``
        the base already has, such as an error model's ``lm_head: 0``)."""
        merged = dict(base.layer_scales or {})
        merged.update(self.layer_scales(params))
        return base.replace(layer_scales=merged)

    def table(self, params: Mapping[str, float], base_scale: float) -> list[dict[str, Any]]:
        """One record per place: layer, module, key, multiplier and absolute scale."""
        return [{"layer": p.layer, "module": p.module, "key": p.key, "param": p.param,
                 "multiplier": float(params[p.param]),
                 "scale": float(params[p.param]) * base_scale} for p in self.places]

    def to_dict(self) -> dict[str, Any]:
        return {"places": [p.to_dict() for p in self.places], "low": self.low,
                "high": self.high, "n_layers": self.n_layers}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SearchSpace:
        return cls(tuple(Place.from_dict(p) for p in d["places"]), float(d["low"]),
                   float(d["high"]), int(d["n_layers"]))


def budget(params: Mapping[str, float], base_scale: float) -> float:
    """The noise budget of a configuration: ``base_scale`` × the geometric mean multiplier.

    Geometric, because precision is logarithmic: halving the noise of one layer costs a
    bit there and doubling another's frees one, so ``log2(budget/base_scale)`` is the mean
    number of bits of precision the configuration gives up (or keeps, when negative)
    compared with the uniform scale.
    """
    values = [float(v) for v in params.values()]
    if not values:
        return float(base_scale)
    return float(base_scale) * math.exp(sum(math.log(v) for v in values) / len(values))


def discover_space(model: Any, ops: Sequence[str], space: str, low: float,
                   high: float) -> SearchSpace:
    """The places of ``model`` for a noise spec on ``ops`` (names from the engine's map)."""
    from robuststats.engine import build_model_map

    mm = build_model_map(model)
    if mm.n_layers == 0:
        raise InputError("the model has no decoder-layer list: a per-layer search needs one.")
    wanted = set(ops)
    places: list[Place] = []
    for layer in range(mm.n_layers):
        path = mm.layer_path(layer)
        if space == "layer":
            places.append(Place(f"layer_{layer}", layer, layer, path))
            continue
        blocks: list[str] = []
        at_layer = False
        for ly, op, name in mm.sites:
            if ly != layer or op not in wanted:
                continue
            child = name[len(path) + 1:].split(".")[0] if name.startswith(path + ".") else ""
            if not child:
                at_layer = True
            elif child not in blocks:
                blocks.append(child)
        if at_layer or not blocks:
            places.append(Place(f"layer_{layer}", layer, layer, path))
        places.extend(Place(f"layer_{layer}.{b}", layer, f"{path}.{b}", f"{path}.{b}")
                      for b in blocks)
    return SearchSpace(tuple(places), float(low), float(high), mm.n_layers)
