"""Matrix products of *product modules*: weights multiplied outside an ``nn.Linear``.

GPT-2's ``Conv1D`` computes ``torch.addmm(bias, x, weight)``; transformers 5's MoE experts
keep every expert's weights in one ``(n_experts, out, in)`` parameter and multiply by it
with ``F.linear`` on a slice (the eager loop), ``torch.bmm`` on gathered copies
(``batched_mm``) or ``torch._grouped_mm`` (``grouped_mm``, the default); routers call
``F.linear(x, self.weight)``. None of these passes through an ``nn.Linear``.

While a session with ``linear`` noise is open, each product module gets an instance-level
``forward`` that runs the original one under a :class:`ProductMode`: every matrix
product (see :data:`PRODUCT_NAMES`) that takes one of the module's own matrix-shaped
parameters — directly, or through views, indexing or casts of it — becomes a noisy
``linear`` op of that module. The mode also watches for the failure this exists to
prevent: weights that reach no visible product. When the module's weights go into an
opaque call (a custom ``torch.ops`` kernel, ``F.multi_head_attention_forward``) or into
no call the mode can see at all, the session records the module as *blind* and
verification fails naming it.

Convolutions are product modules too (``conv1d``/``2d``/``3d`` are products). transformers'
Mamba-family mixers pass ``self.conv1d.weight`` to ``causal_conv1d_fn`` themselves instead
of calling the module, so the parent of every convolution is watched as well
(:func:`watcher_forward`, or the parent's own product frame): a product its code computes
with a child convolution's weight is a ``linear`` op of that convolution, and a child
weight that reaches no visible product makes the convolution blind.
"""

from __future__ import annotations

import threading
import types
from typing import TYPE_CHECKING, Any

import torch
from torch.overrides import TorchFunctionMode

if TYPE_CHECKING:
    from robuststats.engine._install import Installation
    from robuststats.engine._session import NoiseSession

__all__ = ["PRODUCT_NAMES", "ProductMode", "own_products_hidden", "product_forward",
           "run_as_owner", "watcher_forward"]

#: Functions (by name) that compute matrix products.
PRODUCT_NAMES = frozenset({
    "linear", "bilinear", "matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "addmm",
    "addbmm", "baddbmm", "addmv", "mv", "einsum", "tensordot", "chain_matmul",
    "_grouped_mm", "grouped_mm", "grouped_mm_fallback", "_scaled_mm", "_scaled_grouped_mm",
    # a convolution multiplies its weight with the input's patches (im2col)
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "convolution", "_convolution",
})
# functions whose result is still "the weight" (a view, a slice, a gathered copy, a cast)
_DERIVING = frozenset({
    "__getitem__", "__get__", "transpose", "t", "permute", "view", "view_as", "reshape",
    "reshape_as", "contiguous", "to", "float", "half", "bfloat16", "double", "type",
    "narrow", "select", "index_select", "chunk", "split", "unbind", "unsqueeze", "squeeze",
    "expand", "expand_as", "flatten", "unflatten", "clone", "detach", "movedim",
    "swapaxes", "swapdims", "repeat", "gather", "take_along_dim",
})
# Python-level functions known to run matrix products out of the mode's sight
_OPAQUE = frozenset({"multi_head_attention_forward"})


def _name(func: Any) -> str:
    return getattr(func, "__name__", "") or type(func).__name__


def _tensors_of(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for t in obj if isinstance(t, torch.Tensor)]
    return []


class _Frame:
    """One call of one product module: its weights and what the mode saw them do.

    ``owners`` maps the id of each watched tensor (a weight, or a view, slice or copy of
    one) to the ``(layer, name)`` of the module that owns the weight: the frame's own
    module, or a child convolution whose weight the module's code uses directly."""

    def __init__(
        self,
        session: NoiseSession | None,
        layer: int,
        name: str,
        weights: list[Any],
        children: list[tuple[int, str, list[Any]]] = (),  # type: ignore[assignment]
    ) -> None:
        self.session = session  # None: run products unseen by outer modes, without noise
        self.layer = layer
        self.name = name
        self.owners: dict[int, tuple[int, str]] = {id(w): (layer, name) for w in weights}
        for c_layer, c_name, c_weights in children:
            for w in c_weights:
                self.owners.setdefault(id(w), (c_layer, c_name))
        self.keep: list[Any] = []  # derived tensors stay alive so their ids stay unique
        self.products = 0  # of the frame's own weights (what blindness is judged on)
        self.used = False
        self.opaque: str | None = None
        # child convolutions whose weights the code touched:
        # (layer, name) → [products, opaque call]
        self.children: dict[tuple[int, str], list[Any]] = {}

    def blind(self, session: NoiseSession) -> None:
        """Record in ``session`` the child convolutions whose weights were touched here
        but reached no product the engine could see (a custom kernel took them)."""
        for (layer, name), (products, opaque) in self.children.items():
            if products == 0 and max(session.scales("linear", layer, name)) > 0.0:
                why = (f"its weights went into {opaque}, whose matrix products the engine "
                       "cannot reach") if opaque else "its weights reached no product the engine can see"
                session.blind.setdefault(f"op 'linear' at module {name!r}", why)

    def owner(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, str] | None:
        for a in (*args, *kwargs.values()):
            if isinstance(a, torch.Tensor):
                if id(a) in self.owners:
                    return self.owners[id(a)]
            elif isinstance(a, (tuple, list)):
                for t in a:
                    if isinstance(t, torch.Tensor) and id(t) in self.owners:
                        return self.owners[id(t)]
        return None

    def derive(self, out: Any, owner: tuple[int, str]) -> None:
        for t in _tensors_of(out):
            self.owners[id(t)] = owner
            self.keep.append(t)


#: the (layer, name) of the weight-child linear whose own ``forward`` is running in this
#: thread: a parent's frame leaves that module's products to it (booked once)
_RUNNING = threading.local()


def run_as_owner(owner: tuple[int, str], fn: Any, *args: Any) -> Any:
    """``fn(*args)`` as the own call of the module ``owner`` (see :data:`_RUNNING`)."""
    prev = getattr(_RUNNING, "owner", None)
    _RUNNING.owner = owner
    try:
        return fn(*args)
    finally:
        _RUNNING.owner = prev


class ProductMode(TorchFunctionMode):
    """Routes the products of one product-module call through ``session.apply_op``."""

    def __init__(self, frame: _Frame) -> None:
        super().__init__()
        self.frame = frame

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        f = self.frame
        owner = f.owner(args, kwargs)
        if owner is None:
            return func(*args, **kwargs)
        own = owner == (f.layer, f.name)
        if not own and owner == getattr(_RUNNING, "owner", None):
            return func(*args, **kwargs)  # the child's own forward books its product
        name = _name(func)
        if name in PRODUCT_NAMES:
            f.products += own
            if not own:
                f.children.setdefault(owner, [0, None])[0] += 1
            # the engine's own work (noise, quantization) is no use of the weights that an
            # outer frame should see
            with torch._C.DisableTorchFunction():
                if f.session is None:
                    return func(*args, **kwargs)
                return _noisy_product(f, owner, func, args, kwargs)
        out = func(*args, **kwargs)
        opaque = name in _OPAQUE or isinstance(func, (torch._ops.OpOverload,
                                                      torch._ops.OpOverloadPacket))
        if name in _DERIVING:
            f.derive(out, owner)
            if not own and _tensors_of(out):  # a child's weight prepared for some call
                f.children.setdefault(owner, [0, None])
        elif not own:
            if opaque:
                child = f.children.setdefault(owner, [0, None])
                child[1] = child[1] or name
        elif opaque or isinstance(func, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            f.opaque = f.opaque or name
        else:
            f.used = True
        return out


def _noisy_product(f: _Frame, owner: tuple[int, str], func: Any, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Any:
    # operands with ≥ 2 dims get backward noise on their gradients (grad_input,
    # grad_weight), as for nn.Linear; a bias (1-D) and integer offsets pass through
    slots = [i for i, a in enumerate(args)
             if isinstance(a, torch.Tensor) and a.is_floating_point() and a.ndim >= 2]

    def run(*operands: torch.Tensor) -> torch.Tensor:
        full = list(args)
        for i, t in zip(slots, operands):
            full[i] = t
        # no mode below this one may see the product again (the session's own mode would
        # book a bmm or matmul a second time)
        with torch._C.DisableTorchFunction():
            return func(*full, **kwargs)

    session = f.session
    assert session is not None
    layer, name = owner
    session.reached.add(name)
    fs, bs = session.scales("linear", layer, name)
    if fs == 0.0 and bs == 0.0:
        return run(*(args[i] for i in slots))
    if session._operands is not None:  # input quantization, weight-only, static noise
        if fs == 0.0:
            return run(*(args[i] for i in slots))
        return session._operands.run_product(layer, name, func, args, kwargs,
                                             lambda t: id(t) in f.owners, fs)
    return session.apply_op("linear", layer, name, run, tuple(args[i] for i in slots))


def own_products_hidden(module: torch.nn.Module, fn: Any) -> Any:
    """``fn`` run so that the products it computes with ``module``'s weights are invisible
    to other modes: an ``nn.Linear`` subclass with its own ``forward`` (Falcon's
    ``FalconLinear`` computes ``x @ W.T``) gets its noise on the output, once, and the
    session's ``matmul`` mode must not book the same product again."""
    weights = [p for p in module.parameters(recurse=False)
               if p.is_floating_point() and p.ndim >= 2]

    def run(*args: Any) -> Any:
        with ProductMode(_Frame(None, 0, "", weights)):
            return fn(*args)

    return run


def _own_weights(module: torch.nn.Module) -> list[Any]:
    return [p for p in module.parameters(recurse=False)
            if p.is_floating_point() and p.ndim >= 2]


def _children(inst: Installation, module: torch.nn.Module) -> list[tuple[int, str, list[Any]]]:
    """The children (convolutions, linears it names) whose weights its code may use itself."""
    return [(inst.map.layer_of[id(c)], inst.map.names[id(c)], _own_weights(c))
            for c in inst.map.weight_children.get(id(module), ())]


def product_forward(inst: Installation, module: torch.nn.Module, prev: Any) -> Any:
    """The instance-level ``forward`` installed on a product module."""
    name = inst.map.names[id(module)]
    layer = inst.map.layer_of[id(module)]
    clean = prev if prev is not None else types.MethodType(type(module).forward, module)
    weights = _own_weights(module)
    children = _children(inst, module)

    def forward(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        s = inst.active()
        if s is None:
            return clean(*args, **kwargs)
        fs, bs = s.scales("linear", layer, name)
        if fs == 0.0 and bs == 0.0 and not children:
            # no linear noise here, but a session mode for matmul/bmm may be on: the
            # module's weight products are still not matmuls, so keep them from it
            if s.mode is None:
                return clean(*args, **kwargs)
            with ProductMode(_Frame(None, layer, name, weights)):
                return clean(*args, **kwargs)
        frame = _Frame(s, layer, name, weights, children)
        with ProductMode(frame):
            out = clean(*args, **kwargs)
        frame.blind(s)
        if fs == 0.0 and bs == 0.0:
            return out
        lookup = (not frame.products and not frame.used and frame.opaque is None
                  and any(id(t) in frame.owners for t in _tensors_of(out)))
        if lookup:
            # it returns (a view, slice or gather of) its weights without multiplying them:
            # a lookup table (Swin's relative position bias), no product to inject
            s.reached.add(name)
            return out
        if frame.opaque is None and (frame.products or frame.used):
            s.reached.add(name)  # reached, or judged blind below
        where = f"op 'linear' at module {name!r}"
        if frame.opaque is not None:
            s.blind.setdefault(where, f"its weights went into {frame.opaque}, whose matrix "
                                      "products the engine cannot reach")
        elif frame.products == 0 and not frame.used:
            s.blind.setdefault(where, "its weights were used by no call the engine can see")
        return out

    return forward


def watcher_forward(inst: Installation, module: torch.nn.Module, prev: Any) -> Any:
    """The instance-level ``forward`` of a module (not a product module itself) whose
    children include convolutions: products its own code computes with their weights
    (``causal_conv1d_fn(x, self.conv1d.weight, ...)`` in transformers' Mamba mixers) are
    ``linear`` ops of those convolutions."""
    clean = prev if prev is not None else types.MethodType(type(module).forward, module)
    children = _children(inst, module)

    def forward(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        s = inst.active()
        if s is None:
            return clean(*args, **kwargs)
        frame = _Frame(s, OUTSIDE_FRAME, "", [], children)
        with ProductMode(frame):
            out = clean(*args, **kwargs)
        frame.blind(s)
        return out

    return forward


#: the layer of a watcher frame, which owns no weights itself
OUTSIDE_FRAME = -2
