"""Static map of a model: decoder layers, and which modules anchor which ops.

Built once per session. A *layer* is one element of the model's decoder-layer list
(Hugging Face: ``model.model.layers[i]``); for plain torch modules, the first
``nn.ModuleList`` of same-class blocks, or the children of a root ``nn.Sequential``.
Modules outside that list (embeddings, ``lm_head``, a final norm) belong to layer ``-1``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import nn

from robuststats.errors import InputError, did_you_mean

__all__ = ["OUTSIDE", "ModelMap", "build_model_map"]

#: Layer index used for modules outside the decoder-layer list.
OUTSIDE = -1

_PREFERRED_LIST_NAMES = ("layers", "h", "blocks", "layer")


def _norm_op(module: nn.Module) -> str | None:
    name = type(module).__name__
    if isinstance(module, nn.RMSNorm) or name.endswith("RMSNorm"):
        return "rms_norm"
    if isinstance(module, nn.LayerNorm) or name.endswith("LayerNorm"):
        return "layer_norm"
    return None


def _activation_op(module: nn.Module) -> str | None:
    name = type(module).__name__.lower()
    if "silu" in name or "swish" in name:
        return "silu"
    if "gelu" in name:
        return "gelu"
    return None


def _is_attention(module: nn.Module) -> bool:
    # transformers attention modules dispatch through `config._attn_implementation`
    return type(module).__name__.endswith("Attention") and hasattr(module, "config")


@dataclass
class ModelMap:
    """Names, layer indices and op anchors of one model (keys are ``id(module)``)."""

    layer_prefix: str | None
    n_layers: int
    layer_modules: list[nn.Module]
    names: dict[int, str]
    layer_of: dict[int, int]
    linears: list[nn.Module] = field(default_factory=list)
    norms: dict[int, str] = field(default_factory=dict)  # id → "rms_norm" | "layer_norm"
    norm_modules: list[nn.Module] = field(default_factory=list)
    attention: list[nn.Module] = field(default_factory=list)
    # op → set of layer indices that structurally contain it (drives preset verification)
    anchors: dict[str, set[int]] = field(default_factory=dict)
    hf_config: object | None = None

    def layer_path(self, layer: int) -> str:
        if layer == OUTSIDE or self.layer_prefix is None:
            return ""
        return f"{self.layer_prefix}.{layer}" if self.layer_prefix else str(layer)

    def check_layers(self, layers: tuple[int, ...] | None, name: str = "layers") -> None:
        if layers is None:
            return
        if self.n_layers == 0:
            raise InputError(
                f"`{name}` selects layers {list(layers)}, but the model has no decoder-layer "
                "list (no nn.ModuleList of blocks and no nn.Sequential root)."
            )
        bad = [i for i in layers if i >= self.n_layers]
        if bad:
            raise InputError(
                f"`{name}` contains unknown layer index {bad[0]}; the model has "
                f"{self.n_layers} layers (0–{self.n_layers - 1})."
            )

    def check_module_prefix(self, key: str) -> None:
        for n in self.names.values():
            if n == key or n.startswith(key + "."):
                return
        raise InputError(f"`layer_scales` must name modules of the model, got {key!r}"
                         f"{did_you_mean(key, self.names.values())}.")


def _find_layer_list(model: nn.Module) -> tuple[str | None, list[nn.Module]]:
    candidates: list[tuple[str, nn.ModuleList]] = []
    for name, module in model.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) > 0:
            kinds = {type(m) for m in module}
            if len(kinds) == 1:
                candidates.append((name, module))
    for name, module in candidates:
        if name.rsplit(".", 1)[-1] in _PREFERRED_LIST_NAMES:
            return name, list(module)
    if candidates:
        name, module = candidates[0]
        return name, list(module)
    if isinstance(model, nn.Sequential) and len(model) > 0:
        return "", list(model)
    return None, []


def build_model_map(model: nn.Module) -> ModelMap:
    """Walk ``model`` once and record names, layers and op anchors."""
    if not isinstance(model, nn.Module):
        raise InputError(f"`model` must be a torch.nn.Module, got {type(model).__name__}.")
    prefix, layer_modules = _find_layer_list(model)
    layer_ids = {id(m): i for i, m in enumerate(layer_modules)}
    names: dict[int, str] = {}
    layer_of: dict[int, int] = {}
    mm = ModelMap(prefix, len(layer_modules), layer_modules, names, layer_of)
    mm.hf_config = getattr(model, "config", None)
    # named_modules is depth-first, so a block is seen before its children
    stack: list[tuple[str, int]] = []
    for name, module in model.named_modules(remove_duplicate=False):
        if id(module) in names:
            continue
        names[id(module)] = name
        while stack and not (name == stack[-1][0] or name.startswith(stack[-1][0] + ".")):
            stack.pop()
        if id(module) in layer_ids:
            stack.append((name, layer_ids[id(module)]))
        layer = stack[-1][1] if stack else OUTSIDE
        layer_of[id(module)] = layer
        op = None
        if isinstance(module, nn.Linear):
            mm.linears.append(module)
            op = "linear"
        elif (norm := _norm_op(module)) is not None:
            mm.norms[id(module)] = norm
            mm.norm_modules.append(module)
            op = norm
        elif (act := _activation_op(module)) is not None:
            op = act
        elif _is_attention(module):
            mm.attention.append(module)
            for a in ("attention_scores", "softmax", "attention_output"):
                mm.anchors.setdefault(a, set()).add(layer)
        if op is not None:
            mm.anchors.setdefault(op, set()).add(layer)
    return mm
