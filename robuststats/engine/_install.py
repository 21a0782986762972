"""Per-model installation: what is patched while at least one session is open on a model.

One :class:`Installation` per model, reference-counted by feature, so that nested sessions
and sessions in several threads share one set of patches and the model is restored
exactly when the last session leaves:

- ``linear``: an instance-level ``forward`` on every ``nn.Linear`` and every product
  module (``Conv1D``, MoE experts and routers; see ``_products``), removed on exit; a
  pre-existing instance ``forward`` is kept and called;
- ``norm``: forward pre-/post-hooks on RMSNorm/LayerNorm modules (Qwen2RMSNorm never calls
  a norm function, so only the module is a reliable place);
- ``attention``: ``config._attn_implementation`` switched to the engine's registered
  attention function (restored on exit);
- always: hooks on the entry modules — the root and each module between it and the
  decoder-layer list, so that calling ``model.model(x)`` counts as running the model —
  (forward count, backward detection, "is the model running"; only the outermost call
  counts) and on each decoder layer (current layer, gradient-checkpoint replay).

Every patch asks :meth:`Installation.active` which session to serve: the innermost
session opened *in the calling thread* (inner replaces outer; the outer resumes when the
inner leaves). A thread without a session gets the clean computation. Autograd may run
the recomputation of checkpointed layers on its own threads; there the session whose
model outputs that backward (graph task) started from serves, and no other.

Patches shared by several installations (a model and its own submodule share their
``nn.Linear`` modules and their attention config) are kept in module-level registries and
rebuilt from the remaining installations when one leaves, so sessions may close in any
order. While any session is open, ``torch.compile``d code runs eagerly
(``torch.compiler.set_stance("force_eager")``): dynamo cannot trace the engine's hooks,
generators and ``TorchFunctionMode``, and eager execution injects exactly as an
uncompiled model does.
"""

from __future__ import annotations

import threading
import types
from collections import Counter
from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from robuststats.engine._hooks import (
    act_post,
    act_pre,
    child_post,
    child_pre,
    layer_pre,
    norm_post,
    norm_pre,
    parent_pre,
    path_post,
    path_pre,
)
from robuststats.engine._model_map import OUTSIDE, ModelMap
from robuststats.engine._products import (
    own_products_hidden,
    product_forward,
    run_as_owner,
    watcher_forward,
)
from robuststats.engine._session import NoiseSession
from robuststats.engine._streams import in_backward

__all__ = ["Installation", "acquire", "release"]

_LOCK = threading.RLock()
_INSTALLATIONS: dict[int, Installation] = {}
#: id(nn.Linear) → [module, its instance forward before any installation, installations]
_LINEAR: dict[int, list[Any]] = {}
#: [open installations, compiler stance before the first]
_EAGER: list[Any] = [0, None]


class Installation:
    def __init__(self, model: nn.Module, mm: ModelMap) -> None:
        self.model = model
        self.map = mm
        self.sessions: list[NoiseSession] = []
        self.tls = threading.local()
        self._features: Counter[str] = Counter()
        self._undo: dict[str, list[Any]] = {}
        # linears whose parent's code may use their weights directly (watched parents)
        self.marked: set[int] = set()

    # --- session dispatch ------------------------------------------------------------------

    def active(self) -> NoiseSession | None:
        stack = getattr(self.tls, "stack", None)
        if stack:
            return stack[-1]
        if self.sessions and in_backward():
            # an autograd thread: serve the session whose outputs this backward started
            # from (a thread without a session must not get another thread's noise)
            task = torch._C._current_graph_task_id()
            for s in reversed(self.sessions):
                if task in s.graph_tasks:
                    return s
        return None

    def push(self, session: NoiseSession) -> None:
        stack = getattr(self.tls, "stack", None)
        if stack is None:
            stack = self.tls.stack = []
        stack.append(session)
        self.sessions.append(session)

    def pop(self, session: NoiseSession) -> None:
        stack = getattr(self.tls, "stack", [])
        if session in stack:
            stack.remove(session)
        if session in self.sessions:
            self.sessions.remove(session)

    # --- features ----------------------------------------------------------------------------

    def acquire(self, features: Iterable[str]) -> None:
        for f in features:
            if self._features[f] == 0:
                self._undo[f] = getattr(self, f"_install_{f}")()
            self._features[f] += 1

    def release(self, features: Iterable[str]) -> None:
        for f in features:
            self._features[f] -= 1
            if self._features[f] == 0:
                for undo in reversed(self._undo.pop(f)):
                    undo()
                del self._features[f]

    @property
    def empty(self) -> bool:
        return not self._features

    def _install_hooks(self) -> list[Any]:
        handles = []
        for entry in self.map.entry_modules:
            handles.append(entry.register_forward_pre_hook(self._root_pre))
            handles.append(entry.register_forward_hook(self._root_post, always_call=True))
        for i, layer in enumerate(self.map.layer_modules):
            handles.append(layer.register_forward_pre_hook(layer_pre(self, i)))
            handles.append(layer.register_forward_hook(self._layer_post, always_call=True))
            for child in layer.children():
                handles.append(child.register_forward_pre_hook(child_pre(self, i)))
                handles.append(child.register_forward_hook(child_post(self), always_call=True))
        return [h.remove for h in handles]

    def _root_pre(self, module: nn.Module, args: Any) -> None:
        # entry modules nest (model → model.model): only the outermost call is a forward
        depth = getattr(self.tls, "entry_depth", 0)
        self.tls.entry_depth = depth + 1
        s = self.active()
        if s is not None and depth == 0:
            s.root_enter()

    def _root_post(self, module: nn.Module, args: Any, output: Any) -> None:
        depth = max(getattr(self.tls, "entry_depth", 1) - 1, 0)
        self.tls.entry_depth = depth
        s = self.active()
        if s is not None and depth == 0:
            s.root_exit(output)

    def _layer_post(self, module: nn.Module, args: Any, output: Any) -> None:
        s = self.active()
        if s is not None:
            s.layer_exit()

    def _install_linear(self) -> list[Any]:
        undo = []
        children = {id(c) for cs in self.map.weight_children.values() for c in cs}
        for module in self.map.linears:
            rec = _LINEAR.get(id(module))
            if rec is None or rec[0] is not module:
                rec = _LINEAR[id(module)] = [module, module.__dict__.get("forward"), []]
            rec[2].append(self)
            if id(module) in children:
                self.marked.add(id(module))
            _chain_linear(rec)
            undo.append(_unchain_linear(rec, self))
        for module in self.map.product_modules:
            prev = module.__dict__.get("forward")
            module.forward = types.MethodType(product_forward(self, module, prev), module)
            undo.append(_restore_forward(module, prev))
        for module in self.map.watched_parents:
            prev = module.__dict__.get("forward")
            module.forward = types.MethodType(watcher_forward(self, module, prev), module)
            undo.append(_restore_forward(module, prev))
        for pid, (parent, _) in self.map.weight_parents.items():
            handle = parent.register_forward_pre_hook(parent_pre(self, pid))
            undo.append(handle.remove)
        return undo

    def _install_norm(self) -> list[Any]:
        handles = []
        for module in self.map.norm_modules:
            op = self.map.norms[id(module)]
            layer = self.map.layer_of[id(module)]
            name = self.map.names[id(module)]
            handles.append(module.register_forward_pre_hook(norm_pre(self, op, layer, name)))
            handles.append(module.register_forward_hook(norm_post(self, op, layer, name)))
        return [h.remove for h in handles]

    def _install_activation(self) -> list[Any]:
        # an activation module's output is its op, whatever formula it computes (Bloom's,
        # GPT-Neo's and CLIP's tanh or sigmoid GELUs never call F.gelu); the session's mode
        # leaves F.silu / F.gelu calls inside such a module to these hooks
        handles = []
        for module, op in self.map.activations:
            layer = self.map.layer_of[id(module)]
            name = self.map.names[id(module)] if layer == OUTSIDE else self.map.layer_path(layer)
            handles.append(module.register_forward_pre_hook(act_pre(self, op, layer, name)))
            handles.append(module.register_forward_hook(act_post(self, op, layer, name),
                                                        always_call=True))
        return [h.remove for h in handles]

    def _install_paths(self) -> list[Any]:
        # functional ops outside the decoder layers are booked under the innermost running
        # module (T5's encoder, Whisper's, a BERT head), so a module prefix can match them
        handles = []
        entries = {id(m) for m in self.map.entry_modules}
        for module, name in ((m, self.map.names[i]) for i, m in self.map.outside.items()):
            if id(module) in entries:
                continue
            handles.append(module.register_forward_pre_hook(path_pre(self, name)))
            handles.append(module.register_forward_hook(path_post(self), always_call=True))
        return [h.remove for h in handles]

    def _install_attention(self) -> list[Any]:
        from robuststats.engine import _attention

        _attention.register()
        configs: dict[int, Any] = {}
        for cfg in [self.map.hf_config, *(getattr(m, "config", None) for m in self.map.attention)]:
            if cfg is not None and hasattr(cfg, "_attn_implementation"):
                configs.setdefault(id(cfg), cfg)
        undo: list[Any] = []
        for cfg in configs.values():
            _attention.switch(cfg)
            undo.append(lambda cfg=cfg: _attention.unswitch(cfg))
        for m in self.map.attention:
            _attention.owners_add(m, self)
            undo.append(lambda m=m: _attention.owners_remove(m, self))
        return undo


def _restore_forward(module: nn.Module, prev: Any) -> Any:
    def undo() -> None:
        if prev is None:
            module.__dict__.pop("forward", None)
        else:
            module.forward = prev

    return undo


def _chain_linear(rec: list[Any]) -> None:
    """Instance ``forward`` of one ``nn.Linear``: each installation's patch wrapped around
    the previous one, the first around the forward found before any installation."""
    module, prev, insts = rec
    fn = prev
    for inst in insts:
        fn = types.MethodType(_linear_forward(inst, module, fn), module)
    module.forward = fn


def _unchain_linear(rec: list[Any], inst: Installation) -> Any:
    def undo() -> None:
        module, prev, insts = rec
        if inst in insts:
            insts.remove(inst)
        if insts:
            _chain_linear(rec)
            return
        if _LINEAR.get(id(module)) is rec:
            del _LINEAR[id(module)]
        if prev is None:
            module.__dict__.pop("forward", None)
        else:
            module.forward = prev

    return undo


def _linear_forward(inst: Installation, module: nn.Module, prev: Any) -> Any:
    name = inst.map.names[id(module)]
    layer = inst.map.layer_of[id(module)]
    clean = prev if prev is not None else types.MethodType(type(module).forward, module)
    # a plain nn.Linear gets noise on grad_weight too; a subclass with its own forward
    # (e.g. a quantized linear) gets it on grad_input only
    plain = prev is None and type(module).forward is nn.Linear.forward
    hidden = clean if plain else own_products_hidden(module, clean)
    if id(module) in inst.marked:
        # a watched parent's frame must leave this module's own product to it
        inner = _linear_call(inst, layer, name, clean, plain, hidden)
        owner = (layer, name)
        return lambda self, x: run_as_owner(owner, inner, self, x)
    return _linear_call(inst, layer, name, clean, plain, hidden)


def _linear_call(inst: Installation, layer: int, name: str, clean: Any, plain: bool,
                 hidden: Any) -> Any:
    def forward(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
        s = inst.active()
        if s is None:
            return clean(x)
        s.reached.add(name)
        fs, bs = s.scales("linear", layer, name)
        if fs == 0.0 and bs == 0.0:
            return clean(x) if plain else hidden(x)
        if plain:
            return s.apply_op(
                "linear", layer, name, lambda x_, w_: F.linear(x_, w_, self.bias),
                (x, self.weight),
            )
        return s.apply_op("linear", layer, name, hidden, (x,))

    return forward


def acquire(model: nn.Module, mm: ModelMap, session: NoiseSession, features: set[str]) -> Installation:
    with _LOCK:
        _eager_acquire()
        inst = _INSTALLATIONS.get(id(model))
        if inst is None or inst.model is not model:
            inst = _INSTALLATIONS[id(model)] = Installation(model, mm)
        inst.acquire(["hooks", *sorted(features)])
        inst.push(session)
        return inst


def release(inst: Installation, session: NoiseSession, features: set[str]) -> None:
    with _LOCK:
        inst.pop(session)
        inst.release(["hooks", *sorted(features)])
        if inst.empty and _INSTALLATIONS.get(id(inst.model)) is inst:
            del _INSTALLATIONS[id(inst.model)]
        _eager_release()


def _eager_acquire() -> None:
    # compiled code runs eagerly while any session is open (process-wide: the compiler's
    # stance is global; eager execution is correct in every thread, only slower)
    if _EAGER[0] == 0:
        from torch._dynamo.eval_frame import DynamoStance, _set_stance

        _EAGER[1] = _set_stance(DynamoStance("force_eager"))
    _EAGER[0] += 1


def _eager_release() -> None:
    _EAGER[0] -= 1
    if _EAGER[0] == 0:
        from torch._dynamo.eval_frame import _set_stance

        _set_stance(_EAGER[1])
        _EAGER[1] = None
