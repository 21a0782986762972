"""Where activations are compared: the residual stream after each decoder layer, and the
modules inside and around the layers.

Layers and names follow the engine's model map (``inject(model, NoiseSpec(scale=0)).map``),
so a site's layer index is the one ``NoiseSpec(layers=...)`` and the diagnostic probe use:

- ``residual``: the output of decoder layer ``i`` (the residual stream after it);
- inside layer ``i``: every linear or product module (attention q/k/v/o, MLP projections,
  GPT-2's ``Conv1D``), every norm, the attention module and the layer's direct children
  (``self_attn``, ``mlp``), typed by their path inside the layer (``self_attn.q_proj``);
- outside the layers (layer −1): the input embedding, norms (the final norm) and linear
  modules (``lm_head``: the logits).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from robuststats.errors import InputError, did_you_mean

__all__ = ["RESIDUAL", "Site", "find_sites", "first_tensor", "layer_input"]

#: module type of a decoder layer's output
RESIDUAL = "residual"


@dataclass(frozen=True)
class Site:
    """One compared activation: a module's output (``name``), its layer and its type."""

    name: str
    layer: int
    module_type: str


def find_sites(model: Any, *, modules: Sequence[str] | None = None, name: str = "modules"
               ) -> tuple[list[Site], Any]:
    """The sites of ``model`` (module docstring) and the engine's model map.

    ``modules`` keeps the sites whose type or name matches one of its entries (a type such
    as ``residual`` or ``mlp.down_proj``, a full module name, or a name suffix at a dot
    boundary); an entry that matches nothing is an :class:`InputError` naming ``name``.
    """
    from torch import nn

    from robuststats.engine import NoiseSpec, inject

    mm = inject(model, NoiseSpec(scale=0.0)).map
    wanted: set[int] = {id(m) for m in mm.linears} | {id(m) for m in mm.product_modules} \
        | {id(m) for m in mm.norm_modules} | {id(m) for m in mm.attention}
    layer_ids = {id(m): i for i, m in enumerate(mm.layer_modules)}
    embed = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    sites: list[Site] = []
    seen: set[int] = set()
    for path, module in model.named_modules():
        if id(module) in seen:
            continue
        seen.add(id(module))
        layer = mm.layer_of.get(id(module), -1)
        if id(module) in layer_ids:
            sites.append(Site(path, layer_ids[id(module)], RESIDUAL))
            continue
        if layer >= 0:
            prefix = mm.layer_path(layer)
            rel = path[len(prefix) + 1:] if path.startswith(prefix + ".") else path
            child = "." not in rel
            if id(module) in wanted or (child and not isinstance(module, nn.Dropout)
                                        and _has_parameters(module)):
                sites.append(Site(path, layer, rel))
        elif id(module) in wanted or (embed is not None and module is embed):
            if module is not model:
                sites.append(Site(path, -1, path))
    if modules:
        sites = _select(sites, modules, name)
    return sites, mm


def _has_parameters(module: Any) -> bool:
    return any(True for _ in module.parameters())


def _select(sites: list[Site], patterns: Sequence[str], name: str) -> list[Site]:
    keep: list[Site] = []
    for pattern in patterns:
        hits = [s for s in sites if pattern in (s.module_type, s.name)
                or s.name.endswith("." + pattern)]
        if not hits:
            choices = sorted({s.module_type for s in sites})
            raise InputError(f"`{name}`: {pattern!r} matches no compared module"
                             f"{did_you_mean(pattern, choices)}; module types: "
                             f"{', '.join(choices)}.")
        keep += [s for s in hits if s not in keep]
    order = {s: i for i, s in enumerate(sites)}
    return sorted(keep, key=order.__getitem__)


def first_tensor(output: Any) -> Any | None:
    """The activation a module returned: the tensor itself, the first tensor of a tuple or
    list, or the logits / first tensor of a ``ModelOutput``; None if there is none."""
    import torch

    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)):
        for item in output:
            if isinstance(item, torch.Tensor):
                return item
        return None
    if isinstance(output, dict):
        for item in output.values():
            if isinstance(item, torch.Tensor):
                return item
    return None


def layer_input(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any | None:
    """The hidden states a decoder layer was called with (first positional argument, or
    the ``hidden_states`` keyword)."""
    import torch

    if args and isinstance(args[0], torch.Tensor):
        return args[0]
    value = kwargs.get("hidden_states")
    return value if isinstance(value, torch.Tensor) else None


def replace_layer_input(args: tuple[Any, ...], kwargs: dict[str, Any], value: Any
                        ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    import torch

    if args and isinstance(args[0], torch.Tensor):
        return (value, *args[1:]), kwargs
    return args, {**kwargs, "hidden_states": value}
