"""Scale lookup of one session: the (forward, backward) scale of each op at each module.

A site's scale is the spec's phase scale times a multiplier from ``layer_scales``: the
longest module-name prefix that matches the site's module, else the site's layer index,
else 1. Lookups are cached per ``(op, layer, module name)``: the hooks ask on every call.
"""

from __future__ import annotations

from robuststats.engine._model_map import ModelMap
from robuststats.engine._spec import NoiseSpec

__all__ = ["ScaleTable"]

#: ops with no module of their own (see :meth:`ScaleTable.required`)
_FUNCTIONAL = frozenset({"matmul", "bmm", "softmax", "silu", "gelu"})


class ScaleTable:
    """Selected ops and layers of a spec, with its phase scales and multipliers."""

    def __init__(self, spec: NoiseSpec, mm: ModelMap) -> None:
        self.map = mm
        self.phase_scales = spec.phase_scales
        self.ops = frozenset(spec.op_set)
        self.layers = spec.layer_indices
        self._preset = isinstance(spec.ops, str)
        self._layer_set = None if self.layers is None else frozenset(self.layers)
        self._module_scales = {
            k: v for k, v in (spec.layer_scales or {}).items() if isinstance(k, str)
        }
        self._index_scales = {
            k: v for k, v in (spec.layer_scales or {}).items() if isinstance(k, int)
        }
        self._cache: dict[tuple[str, int, str], tuple[float, float]] = {}

    def scales(self, op: str, layer: int, name: str) -> tuple[float, float]:
        """(forward, backward) scale of ``op`` at module ``name`` in ``layer``; (0, 0) when
        the op or layer is not selected."""
        key = (op, layer, name)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if op not in self.ops or (
            self._layer_set is not None and layer not in self._layer_set
        ):
            res = (0.0, 0.0)
        else:
            mult = self._multiplier(layer, name)
            res = (self.phase_scales["forward"] * mult, self.phase_scales["backward"] * mult)
        self._cache[key] = res
        return res

    def _multiplier(self, layer: int, name: str) -> float:
        best, best_len = None, -1
        for prefix, mult in self._module_scales.items():
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = mult, len(prefix)
        if best is not None:
            return best
        return self._index_scales.get(layer, 1.0)

    def required(self, layer: int, phase: str) -> bool:
        """Whether ``layer`` must receive an injection in ``phase``: some module in it that
        anchors a requested op (a linear or product module, a norm, an attention module,
        an activation) has a positive scale there, after multipliers. Functional ops with
        no module of their own (``matmul``, ``bmm``, a softmax outside attention) make a
        layer required only when the spec names its ops explicitly: a preset does not
        promise that every layer computes one (``nn.Sequential(Linear, ReLU, Linear)``)."""
        i = 0 if phase == "forward" else 1
        for ly, op, name in self.map.sites:
            if ly == layer and op in self.ops and self.scales(op, ly, name)[i] > 0:
                return True
        if self._preset:
            return False
        path = self.map.layer_path(layer)
        return any(op in _FUNCTIONAL and self.scales(op, layer, path)[i] > 0 for op in self.ops)
