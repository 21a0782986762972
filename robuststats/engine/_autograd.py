"""Autograd pieces: backward noise on the gradients an op's backward produces.

An op ``y = f(a, b, ...)`` gets backward noise by routing each differentiable input
through :class:`BackwardNoise` first: the identity in forward, and in backward it adds
noise to the gradient arriving at that input, i.e. to the *output of the op's backward
computation* (``grad_a``, ``grad_b``; for a linear layer ``grad_input`` and
``grad_weight``). This is the placement of the seeds' ``NoisyMatMul.backward`` without
writing any backward formulas by hand, so broadcasting and views stay autograd's job.

The layer, op and session are stored in ``ctx`` at forward time, so backward noise is
attributed to the layer that produced it, whichever layer ran last in forward.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from robuststats.engine._session import NoiseSession

__all__ = ["BackwardNoise"]


class BackwardNoise(torch.autograd.Function):
    """Identity in forward; ``grad + error(grad)`` in backward."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        t: torch.Tensor,
        session: NoiseSession,
        layer: int,
        op: str,
        scale: float,
        count: bool = True,
    ) -> torch.Tensor:
        ctx.session = session
        ctx.site = (layer, op)
        ctx.scale = scale
        ctx.count = count  # False for the 2nd, 3rd, ... block of one blocked op
        return t.view_as(t)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        session: NoiseSession = ctx.session
        if grad is not None:
            layer, op = ctx.site
            grad = session.backward_noise(grad, layer, op, ctx.scale, count=ctx.count)
        return grad, None, None, None, None, None
