"""Static map of a model: decoder layers, and which modules anchor which ops.

Built once per session. A *layer* is one element of the model's decoder-layer list.
For a Hugging Face model it is the layer list of the language model (``get_decoder()``:
``model.model.layers``, ``model.model.language_model.layers`` in a vision-language model,
never a vision tower's blocks), whatever classes its elements have (hybrid models mix
attention and Mamba layers). For plain torch modules it is the first ``nn.ModuleList`` of
same-class blocks, or the children of a root ``nn.Sequential``. Modules outside that list
(embeddings, ``lm_head``, a final norm, a vision tower) belong to layer ``-1``.

*Product modules* are the modules other than ``nn.Linear`` that own a matrix-shaped
weight and multiply by it in their own ``forward``: transformers' ``Conv1D`` (GPT-2),
MoE experts holding stacked ``(n_experts, out, in)`` weights, MoE routers, a
``nn.Bilinear``, and convolutions (``nn.Conv1d``/``2d``/``3d`` and the transposed ones: a
product of the weight with the input's patches; Mamba's depthwise ``conv1d`` too).
Embeddings (a lookup) and norms are not product modules.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

from torch import nn
from torch.nn.modules.batchnorm import _NormBase
from torch.nn.modules.conv import _ConvNd
from torch.nn.parameter import UninitializedParameter

from robuststats.errors import InputError, did_you_mean

__all__ = ["OUTSIDE", "ModelMap", "build_model_map"]

#: Layer index used for modules outside the decoder-layer list.
OUTSIDE = -1

_PREFERRED_LIST_NAMES = ("layers", "h", "blocks", "layer")


#: torch's normalization bases (``nn.modules.normalization``, ``nn.modules.batchnorm``,
#: ``nn.modules.instancenorm``): mean-and-variance normalizations are ``layer_norm`` ops
_NORM_BASES = (nn.LayerNorm, nn.GroupNorm, _NormBase)


def _norm_op(module: nn.Module) -> str | None:
    """``rms_norm`` / ``layer_norm`` for a normalization module, else None.

    A norm is recognised by its base class (``nn.RMSNorm``; ``nn.LayerNorm``,
    ``nn.GroupNorm``, batch and instance norms) or, for the many models that write their
    own (``Qwen2RMSNorm``, ``MambaRMSNormGated``, ``Llama4TextL2Norm``, ``T5LayerNorm``), by
    being a leaf module with no matrix-shaped weight whose class name contains ``Norm``:
    root-mean-square ones (``RMS``/``Rms``/``L2`` in the name) are ``rms_norm``, the rest
    ``layer_norm``.
    """
    if isinstance(module, nn.RMSNorm):
        return "rms_norm"
    if isinstance(module, _NORM_BASES):
        return "layer_norm"
    name = type(module).__name__
    if "Norm" not in name or next(module.children(), None) is not None:
        return None
    if any(p.ndim >= 2 for p in module.parameters(recurse=False)):
        return None
    low = name.lower()
    return "rms_norm" if "rms" in low or "l2norm" in low else "layer_norm"


def _activation_op(module: nn.Module) -> str | None:
    """``silu`` / ``gelu`` for an activation module (by class name: ``nn.SiLU``,
    ``nn.GELU``, transformers' ``GELUActivation``, ``NewGELUActivation``, ``BloomGelu``,
    ``QuickGELUActivation``, ...), whatever formula its ``forward`` computes."""
    if next(module.children(), None) is not None:
        return None
    name = type(module).__name__.lower()
    if "silu" in name or "swish" in name:
        return "silu"
    if "gelu" in name:
        return "gelu"
    return None


def _is_attention(module: nn.Module) -> bool:
    # transformers attention modules dispatch through `config._attn_implementation`
    return type(module).__name__.endswith("Attention") and hasattr(module, "config")


def _is_plain_linear(module: nn.Module) -> bool:
    """An ``nn.Linear`` whose class keeps ``nn.Linear.forward`` (one ``F.linear``)."""
    return isinstance(module, nn.Linear) and type(module).forward is nn.Linear.forward


def _is_product_module(module: nn.Module) -> bool:
    """A module other than a plain ``nn.Linear`` that owns a floating parameter of ≥ 2
    dims (a convolution included; a lazy one only once its weight is initialised). An
    ``nn.Linear`` subclass with its own ``forward`` is one (PhiMoE's and Llama 4's routers
    return tuples; Falcon's ``FalconLinear`` computes ``x @ W.T``): its products with its
    weight are its ``linear`` ops, whatever it returns."""
    if _is_plain_linear(module) or isinstance(module, (nn.Embedding, nn.EmbeddingBag)):
        return False
    if _norm_op(module) is not None or "Embedding" in type(module).__name__:
        return False
    return any(
        not isinstance(p, UninitializedParameter) and p.is_floating_point() and p.ndim >= 2
        for p in module.parameters(recurse=False)
    )


@dataclass
class ModelMap:
    """Names, layer indices and op anchors of one model (keys are ``id(module)``)."""

    layer_prefix: str | None
    n_layers: int
    layer_modules: list[nn.Module]
    names: dict[int, str]
    layer_of: dict[int, int]
    linears: list[nn.Module] = field(default_factory=list)
    product_modules: list[nn.Module] = field(default_factory=list)
    # id(parent) → children whose weights the parent's own code may multiply: every
    # convolution (transformers' Mamba-family mixers pass ``self.conv1d.weight`` to a conv
    # function instead of calling the module) and every linear that the parent's class
    # names as ``self.<child>.weight`` (Mamba's ``self.dt_proj.weight @ x``); the parent's
    # forward is watched for products with those weights
    weight_children: dict[int, list[nn.Module]] = field(default_factory=dict)
    # parents of such children that are not product modules themselves
    watched_parents: list[nn.Module] = field(default_factory=list)
    # id(parent) → its children that are linears or product modules (every one of them
    # must be reached in a forward in which its parent ran)
    weight_parents: dict[int, tuple[nn.Module, list[nn.Module]]] = field(default_factory=dict)
    # id → module, for the modules outside the decoder layers
    outside: dict[int, nn.Module] = field(default_factory=dict)
    # the activation modules and their ops ("silu" / "gelu")
    activations: list[tuple[nn.Module, str]] = field(default_factory=list)
    norms: dict[int, str] = field(default_factory=dict)  # id → "rms_norm" | "layer_norm"
    norm_modules: list[nn.Module] = field(default_factory=list)
    attention: list[nn.Module] = field(default_factory=list)
    # op → set of layer indices that structurally contain it (drives preset verification)
    anchors: dict[str, set[int]] = field(default_factory=dict)
    # (layer, op, name) of every place a module anchors an op; ``name`` is the key its
    # scale is looked up under (the module's name; the layer's path for activations,
    # which are reached as functional calls)
    sites: list[tuple[int, str, str]] = field(default_factory=list)
    # the root and every module between it and the layer list (``model``, ``model.model``,
    # ``model.model.language_model``): calling any of them runs the layers
    entry_modules: list[nn.Module] = field(default_factory=list)
    hf_config: object | None = None
    # transformers models whose attention dispatches through AttentionInterface
    attention_backend: bool = False

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


def _hf_model(model: nn.Module) -> nn.Module | None:
    """The transformers model: ``model`` itself, or the outermost transformers model
    inside a plain wrapper (a value head, an RL policy wrapper)."""
    for module in model.modules():
        if hasattr(module, "config") and hasattr(type(module), "_supports_attention_backend"):
            return module
    return None


def _hf_decoder(model: nn.Module) -> nn.Module | None:
    """The language model of a transformers model (``get_decoder()``), or None."""
    if not hasattr(model, "config"):
        return None
    get = getattr(model, "get_decoder", None)
    if not callable(get):
        return None
    try:
        decoder = get()
    except Exception:  # some models raise for "no decoder"; fall back to the generic search
        return None
    return decoder if isinstance(decoder, nn.Module) else None


def _expected_layers(model: nn.Module) -> int | None:
    cfg = getattr(model, "config", None)
    get_text = getattr(cfg, "get_text_config", None)
    try:
        text = get_text(decoder=True) if callable(get_text) else cfg
    except Exception:
        text = cfg
    n = getattr(text, "num_hidden_layers", None)
    return n if isinstance(n, int) and n > 0 else None


def _find_layer_list(model: nn.Module) -> tuple[str | None, list[nn.Module]]:
    names = {id(m): n for n, m in model.named_modules()}
    hf = _hf_model(model)
    decoder = _hf_decoder(hf) if hf is not None else None
    if decoder is not None and id(decoder) in names:
        # the language model's own list, mixed classes allowed (Jamba: attention and Mamba
        # layers); its length is the config's num_hidden_layers when the config says so
        expected = _expected_layers(hf)  # type: ignore[arg-type]
        lists = [
            (n, m) for n, m in decoder.named_modules()
            if isinstance(m, nn.ModuleList) and len(m) > 0
            and n.rsplit(".", 1)[-1] in _PREFERRED_LIST_NAMES
        ]
        for _, m in sorted(lists, key=lambda nm: nm[0].count(".")):
            if expected is None or len(m) == expected:
                return names[id(m)], list(m)
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


def _entry_modules(model: nn.Module, prefix: str | None) -> list[nn.Module]:
    entries = [model]
    if prefix:
        parts = prefix.split(".")[:-1]  # ancestors of the list, not the list itself
        module = model
        for part in parts:
            module = getattr(module, part, None)
            if not isinstance(module, nn.Module):
                break
            entries.append(module)
    return entries


_WEIGHT_REF = re.compile(r"self\.(\w+)\.weight\b")
_NAMED: dict[type, frozenset[str]] = {}


def _weights_named(cls: type) -> frozenset[str]:
    """Attribute names ``x`` for which the source of ``cls`` (and its bases up to
    ``nn.Module``) mentions ``self.x.weight``: children whose weight it may use directly."""
    hit = _NAMED.get(cls)
    if hit is None:
        found: set[str] = set()
        for klass in cls.__mro__:
            if klass in (nn.Module, object) or klass.__module__.startswith("torch."):
                continue
            try:
                found.update(_WEIGHT_REF.findall(inspect.getsource(klass)))
            except (OSError, TypeError):  # no source (built in, generated): nothing named
                continue
        hit = _NAMED[cls] = frozenset(found)
    return hit


def build_model_map(model: nn.Module) -> ModelMap:
    """Walk ``model`` once and record names, layers and op anchors."""
    if not isinstance(model, nn.Module):
        raise InputError(f"`model` must be a torch.nn.Module, got {type(model).__name__}.")
    prefix, layer_modules = _find_layer_list(model)
    layer_ids = {id(m): i for i, m in enumerate(layer_modules)}
    names: dict[int, str] = {}
    layer_of: dict[int, int] = {}
    mm = ModelMap(prefix, len(layer_modules), layer_modules, names, layer_of)
    hf = _hf_model(model)
    mm.hf_config = getattr(hf if hf is not None else model, "config", None)
    mm.attention_backend = bool(getattr(type(hf), "_supports_attention_backend", False))
    mm.entry_modules = _entry_modules(model, prefix)
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
        if layer == OUTSIDE:
            mm.outside[id(module)] = module
        op, key = None, name
        if _is_plain_linear(module):
            mm.linears.append(module)
            op = "linear"
        elif (norm := _norm_op(module)) is not None:
            mm.norms[id(module)] = norm
            mm.norm_modules.append(module)
            op = norm
        elif (act := _activation_op(module)) is not None:
            mm.activations.append((module, act))
            # inside a layer an activation is booked under the layer's path, like the
            # functional calls there; outside the layers under its own name
            op, key = act, (None if layer != OUTSIDE else name)
        elif _is_attention(module):
            mm.attention.append(module)
            for a in ("attention_scores", "softmax", "attention_output"):
                mm.anchors.setdefault(a, set()).add(layer)
                mm.sites.append((layer, a, name))
        if op is None and _is_product_module(module):
            mm.product_modules.append(module)
            op = "linear"
        if op is not None:
            mm.anchors.setdefault(op, set()).add(layer)
            mm.sites.append((layer, op, mm.layer_path(layer) if key is None else key))
    by_name = {n: m for n, m in model.named_modules()}
    products = {id(m) for m in mm.product_modules}
    for module in [*mm.linears, *mm.product_modules]:
        name = names[id(module)]
        parent = by_name.get(name.rsplit(".", 1)[0] if "." in name else "")
        if parent is None or parent is module:
            continue
        mm.weight_parents.setdefault(id(parent), (parent, []))[1].append(module)
        if not isinstance(module, _ConvNd):
            child = name.rsplit(".", 1)[-1]
            if child not in _weights_named(type(parent)):
                continue
        if id(parent) not in mm.weight_children and id(parent) not in products:
            mm.watched_parents.append(parent)
        mm.weight_children.setdefault(id(parent), []).append(module)
    return mm
