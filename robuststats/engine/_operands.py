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
from robuststats.engine._rng import NoiseStream, mix64
from robuststats.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Callable

    from robuststats.engine._session import NoiseSession

__all__ = ["OperandNoise"]

_STATIC_TAG = 0x57A71C  # separates static weight streams from the per-call streams


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
        # id(parameter) -> (version, data_ptr, scale, perturbed weight, (‖W‖², ‖e‖²))
        self._cache: dict[int, tuple[Any, ...]] = {}
        self._modules: dict[str, torch.nn.Module] = {}

    # --- one product -------------------------------------------------------------------------

    def run(self, op: str, layer: int, name: str, fn: Callable[..., torch.Tensor],
            tensors: tuple[Any, ...], scale: float) -> torch.Tensor:
        from robuststats.engine._session import in_backward

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

    # --- operands ------------------------------------------------------------------------------

    def _quantize(self, t: torch.Tensor, dim: int, scale: float) -> torch.Tensor:
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

    def _weight(self, w: torch.Tensor, name: str, dim: int, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
        key = id(w)
        stamp = (w._version, w.data_ptr(), scale)
        hit = self._cache.get(key)
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
                stream = NoiseStream(mix64(self.seed, _STATIC_TAG, _name_key(name)), w.device)
                eps = stream.randn(wd.shape, torch.float32)
                e = eps.mul_(wd.float()) if self.kind == "relative_gaussian" else eps
                q = (wd.float() + scale * e).to(w.dtype)
                err = q.float() - wd.float()
            n2 = torch.stack((torch.linalg.vector_norm(wd.float()), torch.linalg.vector_norm(err)))
            n2 = n2.double().square_()
        self._cache[key] = (stamp, q, n2)
        return q, n2

    def _module(self, name: str) -> torch.nn.Module:
        m = self._modules.get(name)
        if m is None:
            m = self._modules[name] = self.session.model.get_submodule(name)
        return m
