"""The engine's attention function, registered with transformers' ``AttentionInterface``.

sdpa and flash attention never call ``softmax`` or ``matmul`` from Python, so noise on
attention internals needs the computation spelled out. While a session requests
``attention_scores``, ``softmax`` or ``attention_output``, the model's
``config._attn_implementation`` points here (and back afterwards). The computation is
eager attention (as in transformers' ``eager_attention_forward``) with three noisy ops:

- ``attention_scores``: ``Q·Kᵀ·scaling`` (noise on the scaled product, before the mask);
- ``softmax``: the probabilities (float32, as eager attention);
- ``attention_output``: ``P·V``.

Its mask is built by transformers' ``eager_mask`` (an additive float mask), registered
under the same name with ``AttentionMaskInterface``. A thread without a session on the
model gets the same eager computation without noise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from robuststats.engine._model_map import OUTSIDE

if TYPE_CHECKING:
    from robuststats.engine._install import Installation

__all__ = ["NAME", "OWNERS", "noisy_attention_forward", "register"]

NAME = "robuststats_noisy"
#: id(attention module) → installation of the model that owns it (set while installed)
OWNERS: dict[int, Installation] = {}
_registered = False


def register() -> None:
    """Register the attention and mask functions under :data:`NAME` (idempotent)."""
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(NAME, noisy_attention_forward)
    AttentionMaskInterface.register(NAME, eager_mask)
    _registered = True


def _repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    # (batch, kv_heads, seq, dim) → (batch, kv_heads·n_rep, seq, dim), grouped-query attention
    if n_rep == 1:
        return x
    b, h, s, d = x.shape
    return x[:, :, None, :, :].expand(b, h, n_rep, s, d).reshape(b, h * n_rep, s, d)


def noisy_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager attention with noisy scores, softmax and output; returns ``(out, probs)`` with
    ``out`` of shape ``(batch, seq, heads, head_dim)`` as transformers expects."""
    inst = OWNERS.get(id(module))
    session = inst.active() if inst is not None else None
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    n_rep = getattr(module, "num_key_value_groups", None) or query.shape[1] // key.shape[1]
    key = _repeat_kv(key, n_rep)
    value = _repeat_kv(value, n_rep)
    if session is None:
        layer, name = OUTSIDE, ""
    else:
        layer = inst.map.layer_of.get(id(module), OUTSIDE)  # type: ignore[union-attr]
        name = inst.map.names.get(id(module), "")  # type: ignore[union-attr]

    def run(op: str, fn: Any, *tensors: torch.Tensor) -> torch.Tensor:
        if session is None:
            return fn(*tensors)
        return session.apply_op(op, layer, name, fn, tensors)

    if inst is not None:
        inst.tls.in_attention = True
    try:
        scores = run("attention_scores", lambda q, k: torch.matmul(q, k) * scaling,
                     query, key.transpose(2, 3))
        if attention_mask is not None:
            mask = attention_mask[:, :, :, : key.shape[-2]]
            if mask.dtype == torch.bool:  # a boolean mask (True = attend) passed in by hand
                scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
            else:
                scores = scores + mask
        probs = run("softmax", lambda s: F.softmax(s, dim=-1, dtype=torch.float32), scores)
        probs = probs.to(query.dtype)
        probs = F.dropout(probs, p=dropout, training=module.training)
        out = run("attention_output", torch.matmul, probs, value)
    finally:
        if inst is not None:
            inst.tls.in_attention = False
    return out.transpose(1, 2).contiguous(), probs
