"""A `TorchFunctionMode` that reaches functional ops: matmul, bmm, softmax, silu, gelu.

It sees ``torch.matmul``, ``a @ b`` (``Tensor.__matmul__`` arrives as ``Tensor.matmul``),
``torch.mm``, ``torch.addmm`` and ``torch.einsum`` (booked as ``matmul``), ``torch.bmm`` and
``torch.baddbmm`` (booked as ``bmm``), ``F.softmax``/``Tensor.softmax``, ``F.silu`` (what ``nn.SiLU`` and
transformers' ``SiLUActivation`` call) and ``F.gelu``. The mode is entered only by a
session that requests one of these ops, only in that session's thread, and it injects
only while that session's model is running (so a softmax in user code between forward
calls is never perturbed). Calls inside the engine's attention function are left to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from robuststats.engine._model_map import OUTSIDE

if TYPE_CHECKING:
    from robuststats.engine._install import Installation
    from robuststats.engine._session import NoiseSession

__all__ = ["FUNCTIONAL_OPS", "NoiseMode", "remove_mode"]


def _funcs() -> dict[Any, str]:
    table: dict[Any, str] = {}
    for obj, op in [
        (torch.matmul, "matmul"),
        (torch.Tensor.matmul, "matmul"),
        (torch.Tensor.__matmul__, "matmul"),
        (torch.Tensor.__rmatmul__, "matmul"),
        # other spellings of the same products (Bloom's attention uses baddbmm; Mamba-2
        # mixers einsum): a preset that promises every matrix product must see them
        (torch.mm, "matmul"),
        (torch.Tensor.mm, "matmul"),
        (torch.addmm, "matmul"),
        (torch.Tensor.addmm, "matmul"),
        (torch.einsum, "matmul"),
        (torch.bmm, "bmm"),
        (torch.Tensor.bmm, "bmm"),
        (torch.baddbmm, "bmm"),
        (torch.Tensor.baddbmm, "bmm"),
        (F.softmax, "softmax"),
        (torch.softmax, "softmax"),
        (torch.Tensor.softmax, "softmax"),
        (F.silu, "silu"),
        (F.gelu, "gelu"),
    ]:
        table[obj] = op
    for name, op in [("matmul", "matmul"), ("mm", "matmul"), ("addmm", "matmul"),
                     ("bmm", "bmm"), ("baddbmm", "bmm"), ("softmax", "softmax")]:
        base = getattr(torch._C, "TensorBase", None)
        if base is not None and hasattr(base, name):
            table[getattr(base, name)] = op
    return table


_FUNCS = _funcs()
_ACTIVATIONS = frozenset({"silu", "gelu"})
#: Ops this mode can reach.
FUNCTIONAL_OPS = frozenset(_FUNCS.values())


class NoiseMode(TorchFunctionMode):
    """Routes requested functional ops of one session through ``session.apply_op``."""

    def __init__(self, inst: Installation, session: NoiseSession) -> None:
        super().__init__()
        self.inst = inst
        self.session = session
        self.ops = session.ops & FUNCTIONAL_OPS
        # attention products requested: an sdpa call of the model's own (not the engine's
        # attention function) hides them, and verification must say so
        self.watch_sdpa = bool(session.ops & {"attention_scores", "attention_output"})

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        op = _FUNCS.get(func)
        if op is None or op not in self.ops:
            if func is F.scaled_dot_product_attention and self.watch_sdpa:
                self._note_hidden_attention()
            return func(*args, **kwargs)
        s = self.session
        tls = self.inst.tls
        if self.inst.active() is not s or getattr(tls, "in_attention", False):
            return func(*args, **kwargs)
        if op in _ACTIVATIONS and getattr(tls, "in_act", 0) > 0:
            return func(*args, **kwargs)  # inside an activation module: its hooks inject
        layer = s.current_layer()
        if layer is None:  # the model is not running: user code, sampling, loss
            return func(*args, **kwargs)
        if layer == OUTSIDE:  # booked under the innermost running module ("" at the root)
            paths = getattr(tls, "paths", None)
            name = paths[-1] if paths else ""
        else:
            name = s.map.layer_path(layer)
        return s.apply_op(op, layer, name, lambda *a: func(*a, **kwargs), tuple(args))

    def _note_hidden_attention(self) -> None:
        s = self.session
        if self.inst.active() is not s or getattr(self.inst.tls, "in_attention", False):
            return
        layer = s.current_layer()
        if layer is not None:
            s.blind.setdefault(
                f"op 'attention_scores' in F.scaled_dot_product_attention (layer {layer})",
                "sdpa called by the model itself computes both attention products unseen",
            )


def remove_mode(mode: TorchFunctionMode) -> bool:
    """Take ``mode`` off this thread's torch-function mode stack wherever it sits, keeping
    the modes above it in order (``mode.__exit__`` would pop whatever is on top, which is
    another session's mode when sessions close out of order). False if it is not there."""
    above = []
    found = False
    while torch._C._len_torch_function_stack() > 0:
        top = torch._C._pop_torch_function_stack()
        if top is mode:
            found = True
            break
        above.append(top)
    for m in reversed(above):
        torch._C._push_on_torch_function_stack(m)
    return found
