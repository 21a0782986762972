"""Error models on the operands of matrix products (``NoiseSpec.target`` 'inputs' / 'weights').

``target="inputs"`` fake-quantizes both operands of each selected product (weights and
activations, e.g. W8A8 or W4A4) along their contraction dimensions and computes the product
in float32 from the dequantized values, as a low-precision kernel multiplies exact products
of its codes and accumulates in float32; the result is cast back to the operands' dtype.
For ``linear`` the bias is added in float32 too.

``target="weights"`` changes only the weight of each selected ``linear``: quantized
(weight-only, W4A16 as in QeRL's NVFP4A16) or perturbed by static Gaussian noise
``W·(1 + s·ε)`` (``relative_gaussian``) or ``W + s·ε`` (``absolute_gaussian``) with ε drawn
once per (noise seed, parameter name): the same perturbation on every call, like a device's
programming error. The product then runs in the model's dtype, as a W4A16 kernel
dequantizes its weights to the activation dtype.

Nothing is written into the model: the perturbed weight is computed on first use and kept
for the session (a float32 copy of each quantized weight for 'inputs', a copy in the
weight's dtype for 'weights'); it is recomputed, with the same ε, when the parameter changes
(an optimizer step bumps its version). Gradients pass straight through to the parameters
and activations (``x + (q(x) − x).detach()``). Scales below 1 interpolate,
``x + s·(q(x) − x)``; layer multipliers apply as for every error model.

Statistics book each call as one injection; ``rms_noise_ratio`` is ‖q(x) − x‖ / ‖x‖ over the
operands that were changed (both for 'inputs', the weight for 'weights').
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from robuststats.engine._formats import QUANT_FORMATS, check_format
from robuststats.engine._quantize import _fake_quantize
from robuststats.engine._rng import mix64
from robuststats.engine._streams import in_backward, make_stream
from robuststats.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Callable

    from robuststats.engine._session import NoiseSession

__all__ = ["OperandNoise"]

_STATIC_TAG = 0x57A71C  # separates static weight streams from the per-call streams

#: Products a product module (``Conv1D``, MoE experts and routers, a convolution) computes
#: with its weights: function name → positions in ``args`` of the two matrix operands and
#: their contraction dimensions. ``None`` is a convolution weight ``(out, in/groups,
#: *kernel)``, contracted over every dimension after the first (its scales are shared along
#: that flattened dimension); a convolution's input is contracted over its channels (dim 1).
_PRODUCT_OPERANDS: dict[str, tuple[tuple[int, int], tuple[int | None, int | None]]] = {
    "linear": ((0, 1), (-1, -1)),
    **{f: ((0, 1), (-1, -2)) for f in ("mm", "matmul", "__matmul__", "bmm", "_grouped_mm",
                                       "grouped_mm")},
    **{f: ((1, 2), (-1, -2)) for f in ("addmm", "baddbmm", "addbmm")},
    "__rmatmul__": ((1, 0), (-1, -2)),  # W.__rmatmul__(x) is x @ W
    **{f: ((0, 1), (1, None)) for f in ("conv1d", "conv2d", "conv3d")},
}


def _name_key(name: str) -> int:
    """A stable 64-bit key of a parameter's name (Python's ``hash`` of a str is salted)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")


class OperandNoise:
    """The operand error model of one session (``target`` 'inputs' or 'weights')."""

    def __init__(self, session: NoiseSession) -> None:
        spec = session.spec
        self.session = session
        self.target = spec.target
        self.kind = spec.kind
        self.is_format = spec.kind in QUANT_FORMATS
        if self.is_format:
            self.granularity, self.block_size = check_format(
                spec.kind, spec.granularity, spec.block_size, spec.ties)
        self.ties = spec.ties
        self.seed = spec.seed
        self.generator = spec.generator
        # id(parameter) -> (version, data_ptr, scale, perturbed weight, (‖W‖², ‖e‖²))
        self._cache: dict[int, tuple[Any, ...]] = {}
        self._modules: dict[str, torch.nn.Module] = {}

    # --- one product -------------------------------------------------------------------------

    def run(self, op: str, layer: int, name: str, fn: Callable[..., torch.Tensor],
            tensors: tuple[Any, ...], scale: float) -> torch.Tensor:
        if op == "linear":
            if len(tensors) < 2:
                raise InputError(
                    f"target {self.target!r} needs the weight of linear {name!r}, but its class "
                    "has its own forward; use target 'output' for this module.")
            roles, dims = ("act", "weight"), (-1, -1)
        else:
            b = tensors[1] if len(tensors) > 1 else None
            roles = tuple("weight" if isinstance(t, torch.nn.Parameter) else "act"
                          for t in tensors[:2])
            dims = (-1, -2 if isinstance(b, torch.Tensor) and b.ndim > 1 else -1)
        norms: list[torch.Tensor] = []
        used: list[Any] = list(tensors)
        for i, (role, dim) in enumerate(zip(roles, dims)):
            t = tensors[i]
            if not (isinstance(t, torch.Tensor) and t.is_floating_point()):
                continue
            if role == "weight":
                w, n2 = self._weight(t, name, dim, scale)
                used[i] = w if not (t.requires_grad and torch.is_grad_enabled()) else \
                    t.to(w.dtype) + (w - t.detach().to(w.dtype))
                norms.append(n2)
            elif self.target == "inputs":
                q, n2 = self._activation(t, dim, scale)
                used[i] = q if not (t.requires_grad and torch.is_grad_enabled()) else \
                    t.float() + (q - t.detach().float())
                norms.append(n2)
        if norms and not in_backward():  # a checkpoint recompute is not booked twice
            total = norms[0] if len(norms) == 1 else torch.stack(norms).sum(dim=0)
            self.session._book(layer, op, "forward", total)
        if self.target == "weights":
            return fn(*used)
        dtype = tensors[0].dtype
        if op == "linear":
            bias = getattr(self._module(name), "bias", None)
            out = F.linear(used[0], used[1], None if bias is None else bias.float())
        else:
            used = [u.float() if isinstance(u, torch.Tensor) and u.is_floating_point() else u
                    for u in used]
            out = fn(*used)
        return out.to(dtype) if isinstance(out, torch.Tensor) and out.dtype != dtype else out

    def run_product(self, layer: int, name: str, func: Any, args: tuple[Any, ...],
                    kwargs: dict[str, Any], is_weight: Callable[[torch.Tensor], bool],
                    scale: float) -> Any:
        """One product that a product module computes with its weights (``func(*args,
        **kwargs)``, e.g. GPT-2's ``addmm(bias, x, W)`` with ``W`` of shape ``(in, out)``):
        each operand is quantized along its own contraction dimension, which the function
        defines (:data:`_PRODUCT_OPERANDS`); ``is_weight`` tells the module's weights (and
        views, slices or copies of them) from activations."""
        from robuststats.engine._products import _name

        fname = _name(func)
        entry = _PRODUCT_OPERANDS.get(fname)
        if entry is None or max(entry[0]) >= len(args):
            raise InputError(
                f"target {self.target!r} cannot act on the operands of {fname} in module "
                f"{name!r}: the engine does not know which dimensions it contracts. Use "
                f"target 'output' there, or switch the module off with "
                f"layer_scales={{{name!r}: 0}}.")
        used = list(args)
        norms: list[torch.Tensor] = []
        for i, dim in zip(*entry):
            t = args[i]
            if not (isinstance(t, torch.Tensor) and t.is_floating_point()):
                continue
            grad = t.requires_grad and torch.is_grad_enabled()
            if is_weight(t):
                param = isinstance(t, torch.nn.Parameter)
                if not param and not self.is_format:
                    raise InputError(
                        f"static weight noise (target 'weights', kind {self.kind!r}) needs "
                        f"the weight of module {name!r} itself, but {fname} gets a view or "
                        "copy of it (MoE experts slice and gather theirs), for which a fixed "
                        "error per weight element is not defined; use a number format, or "
                        f"layer_scales={{{name!r}: 0}}.")
                # a view or gathered copy is quantized on every call: its id and storage
                # may be reused by a different slice, so it is never cached
                w, n2 = self._weight(t, name, dim, scale, cache=param)
                used[i] = t.to(w.dtype) + (w - t.detach().to(w.dtype)) if grad else w
                norms.append(n2)
            elif self.target == "inputs":
                q, n2 = self._activation(t, dim, scale)  # type: ignore[arg-type]
                used[i] = t.float() + (q - t.detach().float()) if grad else q
                norms.append(n2)
        if norms and not in_backward():
            total = norms[0] if len(norms) == 1 else torch.stack(norms).sum(dim=0)
            self.session._book(layer, "linear", "forward", total)
        dtype = args[entry[0][0]].dtype
        if self.target == "inputs":  # the product (and its bias) in float32
            used = [u.float() if isinstance(u, torch.Tensor) and u.is_floating_point() else u
                    for u in used]
            kwargs = {k: v.float() if isinstance(v, torch.Tensor) and v.is_floating_point()
                      else v for k, v in kwargs.items()}
        with torch._C.DisableTorchFunction():  # no other mode books this product again
            out = func(*used, **kwargs)
        return out.to(dtype) if isinstance(out, torch.Tensor) and out.dtype != dtype else out

    # --- operands ------------------------------------------------------------------------------

    def _quantize(self, t: torch.Tensor, dim: int | None, scale: float) -> torch.Tensor:
        if dim is None:  # a convolution weight: scales along (in/groups, *kernel), flattened
            flat = t.reshape(t.shape[0], -1)
            return self._quantize(flat, -1, scale).reshape(t.shape)
        q = _fake_quantize(t, self.kind, self.granularity, self.block_size, self.ties, dim)
        if scale != 1.0:  # x + s·(q − x), computed in q (x may be the caller's own tensor)
            x = t.detach().float()
            q = q.sub_(x).mul_(scale).add_(x)
        return q

    def _activation(self, t: torch.Tensor, dim: int, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            q = self._quantize(t, dim, scale)
            x = t.detach().float()
            n2 = torch.stack((torch.linalg.vector_norm(x), torch.linalg.vector_norm(q - x)))
            return q, n2.double().square_()

    def _weight(self, w: torch.Tensor, name: str, dim: int | None, scale: float,
                cache: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        key = id(w)
        stamp = (w._version, w.data_ptr(), tuple(w.shape), dim, scale)
        hit = self._cache.get(key) if cache else None
        if hit is not None and hit[0] == stamp:
            return hit[1], hit[2]
        with torch.no_grad():
            wd = w.detach()
            if self.is_format:
                q = self._quantize(wd, dim, scale)
                if self.target == "weights":
                    q = q.to(w.dtype)  # weight-only kernels dequantize to the model dtype
                err = q.float() - wd.float()
            else:
                # static noise: ε fixed per (seed, parameter name), drawn again identically
                # whenever the parameter changed
                stream = make_stream(self.generator, mix64(self.seed, _STATIC_TAG, _name_key(name)),
                                     w.device)
                eps = stream.randn(wd.shape, torch.float32)
                e = eps.mul_(wd.float()) if self.kind == "relative_gaussian" else eps
                q = (wd.float() + scale * e).to(w.dtype)
                err = q.float() - wd.float()
            n2 = torch.stack((torch.linalg.vector_norm(wd.float()), torch.linalg.vector_norm(err)))
            n2 = n2.double().square_()
        if cache:
            self._cache[key] = (stamp, q, n2)
        return q, n2

    def _module(self, name: str) -> torch.nn.Module:
        m = self._modules.get(name)
        if m is None:
            m = self._modules[name] = self.session.model.get_submodule(name)
        return m
