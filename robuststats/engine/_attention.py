"""The engine's attention function, registered with transformers' ``AttentionInterface``.

sdpa and flash attention never call ``softmax`` or ``matmul`` from Python, so noise on
attention internals needs the computation spelled out. While a session requests
``attention_scores``, ``softmax`` or ``attention_output``, the model's
``config._attn_implementation`` points here (and back when the last such session closes).
Per call, the cheapest path that can carry the requested noise is taken:

- no attention noise at this layer (or no session in this thread): the model's own
  implementation (transformers' ``sdpa_attention_forward`` for an sdpa model), else the
  engine's eager path without noise;
- forward noise on ``attention_output`` only, for an sdpa model: sdpa, then noise on
  ``P·V`` (same cost as sdpa);
- otherwise the eager computation, as each model's ``eager_attention_forward`` writes it
  (GQA, ``scaling``, logit soft-capping, attention sinks, float32 softmax, dropout), in
  query blocks of bounded size: memory O(T·block) instead of O(T²), and under a causal
  mask without padding each block only reads the keys it can see. The noisy ops are

  - ``attention_scores``: ``Q·Kᵀ·scaling`` (before soft-capping and the mask);
  - ``softmax``: the probabilities; positions the mask excludes stay exactly 0, so an
    additive error model cannot move probability onto future tokens or padding;
  - ``attention_output``: ``P·V``.

Masks come from transformers' ``sdpa_mask`` (registered under the same name with
``AttentionMaskInterface``): a boolean mask, or ``None`` for a plain causal mask.

Variants the eager path does not know are refused: :func:`check_supported` at
``inject()``, from the signature of the model's ``eager_attention_forward``, and once per
attention class and call signature, a comparison with that function on a slice of the
real inputs (:class:`UnsupportedAttentionError` when they differ).

Longer than 400 lines on purpose: the interception, its per-model equivalence check and the
backends' products must change together; apart, a change to one would silently stop
matching the others.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from robuststats.engine._autograd import BackwardNoise
from robuststats.engine._error_models import ZERO_PRESERVING_KINDS
from robuststats.engine._model_map import OUTSIDE
from robuststats.errors import RobuststatsError

if TYPE_CHECKING:
    from torch import nn

    from robuststats.engine._install import Installation
    from robuststats.engine._model_map import ModelMap
    from robuststats.engine._session import NoiseSession

__all__ = [
    "ATTENTION_OPS",
    "NAME",
    "UnsupportedAttentionError",
    "check_supported",
    "noisy_attention_forward",
    "owners_add",
    "owners_remove",
    "register",
    "switch",
    "unswitch",
]

NAME = "robuststats_noisy"
ATTENTION_OPS = ("attention_scores", "softmax", "attention_output")
#: Largest number of score elements (batch · heads · block rows · keys) held at once by the
#: blocked eager path: 2²² (16 MiB in float32, reused by the allocator; the fastest of
#: 2²⁰–2²⁴ measured at 4k tokens). The block size depends on shapes only, so the noise a
#: seed draws does not depend on the machine.
BLOCK_ELEMENTS = 1 << 22
_MIN_BLOCK = 16
#: parameters of a model's ``eager_attention_forward`` that the engine reproduces
_KNOWN_PARAMS = frozenset(
    {"module", "query", "key", "value", "attention_mask", "scaling", "dropout", "softcap"}
)

_LOCK = threading.RLock()
#: id(attention module) → installations that own it, innermost last (a model and its own
#: submodule can both hold sessions)
_OWNERS: dict[int, list[Installation]] = {}
#: id(config) → [config, original implementation, number of installations switching it]
_SWITCHED: dict[int, list[Any]] = {}
#: (attention class, variant kwargs, dtype) → whether the eager path matched the model's
_CHECKED: dict[tuple[Any, ...], bool] = {}
_registered = False


class UnsupportedAttentionError(RobuststatsError, RuntimeError):
    """The engine's attention cannot reproduce a model's attention variant."""


def register() -> None:
    """Register the attention and mask functions under :data:`NAME` (idempotent)."""
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, noisy_attention_forward)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    _registered = True


# --- installation bookkeeping (order-independent, so sessions may close in any order) -----


def switch(cfg: Any) -> None:
    """Point ``cfg._attn_implementation`` at the engine (reference-counted per config)."""
    with _LOCK:
        rec = _SWITCHED.get(id(cfg))
        if rec is None or rec[0] is not cfg:
            rec = _SWITCHED[id(cfg)] = [cfg, cfg._attn_implementation, 0]
        rec[2] += 1
        cfg._attn_implementation = NAME


def unswitch(cfg: Any) -> None:
    """Undo one :func:`switch`; the last one restores the original implementation."""
    with _LOCK:
        rec = _SWITCHED.get(id(cfg))
        if rec is None or rec[0] is not cfg:
            return
        rec[2] -= 1
        if rec[2] <= 0:
            del _SWITCHED[id(cfg)]
            cfg._attn_implementation = rec[1]


def original_implementation(module: nn.Module) -> str | None:
    cfg = getattr(module, "config", None)
    rec = _SWITCHED.get(id(cfg))
    return rec[1] if rec is not None and rec[0] is cfg else None


def owners_add(module: nn.Module, inst: Installation) -> None:
    with _LOCK:
        _OWNERS.setdefault(id(module), []).append(inst)


def owners_remove(module: nn.Module, inst: Installation) -> None:
    with _LOCK:
        owners = _OWNERS.get(id(module))
        if owners and inst in owners:
            owners.remove(inst)
        if not owners:
            _OWNERS.pop(id(module), None)


def _session_for(module: nn.Module) -> tuple[Installation | None, NoiseSession | None]:
    """The innermost installation owning ``module`` with a session active in this thread."""
    owners = _OWNERS.get(id(module), ())
    for inst in reversed(owners):
        s = inst.active()
        if s is not None:
            return inst, s
    return (owners[-1] if owners else None), None


# --- refusing what the eager path cannot reproduce -----------------------------------------


def _reference(cls: type) -> Any:
    return getattr(sys.modules.get(cls.__module__), "eager_attention_forward", None)


def check_supported(mm: ModelMap) -> None:
    """Refuse (``UnsupportedAttentionError``) a model whose attention the engine cannot
    reproduce: its module has no ``eager_attention_forward`` to follow, or that function
    takes an input the engine does not handle (e.g. a position bias or a head mask)."""
    seen: set[type] = set()
    for m in mm.attention:
        cls = type(m)
        if cls in seen:
            continue
        seen.add(cls)
        ref = _reference(cls)
        if ref is None:
            raise UnsupportedAttentionError(
                f"attention ops cannot be injected into {cls.__name__}: its module "
                f"{cls.__module__!r} defines no eager_attention_forward to reproduce. "
                "Request ops outside attention (e.g. ops=['linear'])."
            )
        params = [
            p.name for p in inspect.signature(ref).parameters.values()
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        ]
        unknown = [p for p in params[4:] if p not in _KNOWN_PARAMS]
        if unknown:
            raise UnsupportedAttentionError(
                f"attention ops cannot be injected into {cls.__name__}: its eager attention "
                f"takes {unknown[0]!r}, which the engine's attention does not reproduce. "
                "Request ops outside attention (e.g. ops=['linear'])."
            )


def _self_check(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None,
    causal: bool,
    scaling: float,
    kwargs: dict[str, Any],
) -> None:
    """Compare the eager path with the model's own ``eager_attention_forward`` on a slice
    of the real inputs (≤ 16 queries and keys), once per class, variant and dtype."""
    variant = tuple(sorted(k for k in ("softcap", "s_aux") if kwargs.get(k) is not None))
    sig = (type(module), variant, query.dtype)
    if _CHECKED.get(sig):
        return
    ref = _reference(type(module))
    if ref is None:  # check_supported refused it at inject(); a model swapped afterwards
        raise UnsupportedAttentionError(
            f"attention ops cannot be injected into {type(module).__name__}: no "
            "eager_attention_forward to reproduce."
        )
    n, m = min(query.shape[2], 16), min(key.shape[2], 16)
    q, k, v = query[:, :, :n].detach(), key[:, :, :m].detach(), value[:, :, :m].detach()
    if mask is not None:
        allowed = mask[:, :, :n, :m]
    elif causal:
        allowed = torch.ones(n, m, dtype=torch.bool, device=q.device).tril_()[None, None]
    else:
        allowed = None
    additive = None
    if allowed is not None:
        if allowed.dtype == torch.bool:
            additive = torch.zeros(allowed.shape, dtype=q.dtype, device=q.device)
            additive.masked_fill_(~allowed, torch.finfo(q.dtype).min)
        else:
            additive = allowed
    with torch.no_grad():
        expected, _ = ref(module, q, k, v, additive, scaling=scaling, dropout=0.0, **kwargs)
        got = _blocked(module, None, OUTSIDE, "", {}, q, k, v, allowed, False, scaling, 0.0,
                       kwargs, False)[0].transpose(1, 2)
    tol = 1e-4 if q.dtype in (torch.float32, torch.float64) else 2e-2
    if expected.shape != got.shape or not torch.allclose(
        expected.float(), got.float(), rtol=tol, atol=tol
    ):
        diff = (
            (expected.float() - got.float()).abs().max().item()
            if expected.shape == got.shape else f"shape {tuple(expected.shape)}"
        )
        raise UnsupportedAttentionError(
            f"attention ops cannot be injected into {type(module).__name__}: the engine's "
            f"attention differs from the model's own eager attention (max difference {diff}). "
            "Request ops outside attention (e.g. ops=['linear'])."
        )
    _CHECKED[sig] = True


# --- the attention function ------------------------------------------------------------------


def _repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    # (batch, kv_heads, seq, dim) → (batch, kv_heads·n_rep, seq, dim), grouped-query attention
    if n_rep == 1:
        return x
    b, h, s, d = x.shape
    return x[:, :, None, :, :].expand(b, h, n_rep, s, d).reshape(b, h * n_rep, s, d)


def block_rows(batch_heads: int, q_len: int, kv_len: int) -> int:
    """Query rows per block of the eager path: a function of the shapes only."""
    rows = BLOCK_ELEMENTS // max(batch_heads * kv_len, 1)
    if rows >= q_len:
        return q_len
    return max(_MIN_BLOCK, 1 << max(rows.bit_length() - 1, 0))


def noisy_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attention with noisy scores, probabilities and output; returns ``(out, probs)``
    with ``out`` of shape ``(batch, seq, heads, head_dim)`` as transformers expects
    (``probs`` is ``None`` when sdpa or more than one query block computed it)."""
    inst, session = _session_for(module)
    if scaling is None:
        scaling = getattr(module, "scaling", None) or query.shape[-1] ** -0.5
    layer, name = OUTSIDE, ""
    scales: dict[str, tuple[float, float]] = {}
    if session is not None and inst is not None:
        layer = inst.map.layer_of.get(id(module), OUTSIDE)
        name = inst.map.names.get(id(module), "")
        scales = {op: s for op in ATTENTION_OPS if (s := session.scales(op, layer, name)) != (0.0, 0.0)}
    softcap = kwargs.get("softcap")
    sinks = kwargs.get("s_aux")
    original = original_implementation(module)
    plain = softcap is None and sinks is None
    if original == "sdpa" and plain and set(scales) <= {"attention_output"} and (
        scales.get("attention_output", (0.0, 0.0))[1] == 0.0
    ):
        # the engine's own sdpa call: not a product the model hides from verification
        with _engine_attention(inst):
            return _sdpa(module, session, layer, scales, query, key, value, attention_mask,
                         scaling, dropout, kwargs)

    q_len = query.shape[2]
    is_causal = kwargs.get("is_causal")
    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    causal = attention_mask is None and q_len > 1 and bool(is_causal)
    if causal and key.shape[2] > q_len:  # as sdpa: an empty static-cache prefill
        key, value = key[:, :, :q_len], value[:, :, :q_len]
    with _engine_attention(inst):
        # once per class and variant: never a silent difference from the model's attention
        _self_check(module, query, key, value, attention_mask, causal, scaling, kwargs)
        out, probs = _blocked(module, session, layer, name, scales, query, key, value,
                              attention_mask, causal, scaling, dropout, kwargs, True)
    return out.transpose(1, 2).contiguous(), probs


@contextlib.contextmanager
def _engine_attention(inst: Any) -> Iterator[None]:
    """Marks this thread as inside the engine's attention: its products (and its own sdpa
    call) are the engine's, not the model's hidden ones."""
    flag = inst.tls if inst is not None else None
    if flag is not None:
        flag.in_attention = True
    try:
        yield
    finally:
        if flag is not None:
            flag.in_attention = False


def _sdpa(
    module: nn.Module,
    session: NoiseSession | None,
    layer: int,
    scales: dict[str, tuple[float, float]],
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float,
    kwargs: dict[str, Any],
) -> tuple[torch.Tensor, None]:
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    out, _ = sdpa_attention_forward(module, query, key, value, attention_mask,
                                    dropout=dropout, scaling=scaling, **kwargs)
    fs = scales.get("attention_output", (0.0, 0.0))[0]
    if session is None or fs <= 0.0:
        return out, None
    # noise drawn in the (batch, heads, seq, dim) layout of P·V, as the eager path does
    noisy = session.forward_noise(out.transpose(1, 2), layer, "attention_output", fs)
    return noisy.transpose(1, 2).contiguous(), None


def _blocked(
    module: nn.Module,
    session: NoiseSession | None,
    layer: int,
    name: str,
    scales: dict[str, tuple[float, float]],
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None,
    causal: bool,
    scaling: float,
    dropout: float,
    kwargs: dict[str, Any],
    count: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Eager attention in query blocks; ``out`` is ``(batch, heads, q_len, head_dim)``.

    Without an autograd graph to protect, each block's scores and probabilities are
    updated in place (the same arithmetic as the out-of-place form, without a fresh
    allocation per step)."""
    n_rep = getattr(module, "num_key_value_groups", None) or query.shape[1] // key.shape[1]
    key = _repeat_kv(key, n_rep)
    value = _repeat_kv(value, n_rep)
    softcap = kwargs.get("softcap")
    sinks = kwargs.get("s_aux")
    no = (0.0, 0.0)
    s_fs, s_bs = scales.get("attention_scores", no)
    p_fs, p_bs = scales.get("softmax", no)
    o_fs, o_bs = scales.get("attention_output", no)
    grad = torch.is_grad_enabled()
    tracked = grad and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in (query, key, value, sinks)
    )
    if session is not None and tracked:
        # backward noise on whole operands, so a gradient summed over blocks (grad_K,
        # grad_V) gets one error, as in the unblocked product
        if s_bs > 0.0:
            query = _bnoise(query, session, layer, "attention_scores", s_bs)
            key = _bnoise(key, session, layer, "attention_scores", s_bs)
        if o_bs > 0.0:
            value = _bnoise(value, session, layer, "attention_output", o_bs)
    # A power-of-two scaling (head_dim 64, 128, 256: 1/8, 1/√128 is not) commutes exactly
    # with every rounding of the product, so it goes on Q (T·d multiplications) instead of
    # on each block of scores (T² of them): bitwise the model's (Q·Kᵀ)·scaling.
    folded = _power_of_two(scaling)
    if folded:
        query = query * scaling
    # an error model that maps 0 to 0 leaves masked (zero) probabilities at 0 by itself
    zero_safe = session is not None and session.kind in ZERO_PRESERVING_KINDS
    b, h, q_len, _ = query.shape
    kv_len = key.shape[2]
    rows = block_rows(b * h, q_len, kv_len)
    offset = kv_len - q_len  # causal masks align the last query with the last key
    outs, probs = [], None
    # Untracked blocks reuse two buffers (scores in the model's dtype, float32 probabilities)
    # instead of allocating blocks of a new size each step, which the allocator keeps
    # resident: the same kernels write the same values, into memory already there.
    cpu = query.device.type == "cpu"
    reuse = cpu and not tracked and sinks is None and rows < q_len
    if reuse:
        s_buf = query.new_empty(b * h * rows * kv_len)
        p_buf = s_buf if query.dtype == torch.float32 else s_buf.new_empty(
            s_buf.shape, dtype=torch.float32)
    for i0 in range(0, q_len, rows):
        i1 = min(i0 + rows, q_len)
        first = count and i0 == 0
        k_end = min(kv_len, i1 + offset) if causal else kv_len
        q_c, k_c, v_c = query[:, :, i0:i1], key[:, :, :k_end], value[:, :, :k_end]
        shape = (b, h, i1 - i0, k_end)
        if reuse:
            n_el = math.prod(shape)
            scores = torch.matmul(q_c, k_c.transpose(2, 3), out=s_buf[:n_el].view(shape))
        else:
            scores = torch.matmul(q_c, k_c.transpose(2, 3))
        if not folded:
            scores = scores * scaling if tracked else scores.mul_(scaling)
        if s_fs > 0.0:
            scores = session.forward_noise(scores, layer, "attention_scores", s_fs, count=first)  # type: ignore[union-attr]
        if softcap is not None:
            if tracked:
                scores = torch.tanh(scores / softcap) * softcap
            else:
                scores = scores.div_(softcap).tanh_().mul_(softcap)
        hidden = None  # True where the mask hides a key from a query, from column c0 on
        c0 = 0
        if causal:
            # keys before the block's first query are visible to all its rows: only the
            # diagonal square needs masking (in place; a tracked tensor gets it whole)
            c0 = 0 if tracked else min(i0 + offset, k_end)
            rows_i = torch.arange(i0 + offset, i1 + offset, device=query.device)[:, None]
            hidden = torch.arange(c0, k_end, device=query.device)[None, :] > rows_i
        elif mask is not None:
            block = mask[:, :, i0:i1, :k_end]
            if block.dtype == torch.bool:
                hidden = ~block
            else:  # an additive float mask passed in by hand
                scores = scores + block if tracked else scores.add_(block)
                hidden = block <= torch.finfo(block.dtype).min / 2
        if hidden is not None and (mask is None or mask.dtype == torch.bool):
            lowest = torch.finfo(scores.dtype).min
            if tracked:
                scores = scores.masked_fill(hidden, lowest)
            else:
                scores[..., c0:].masked_fill_(hidden, lowest)
        if p_bs > 0.0 and tracked and scores.requires_grad:
            scores = BackwardNoise.apply(scores, session, layer, "softmax", p_bs, first)
        if sinks is None and not tracked and cpu:
            # in place, what F.softmax(dtype=float32) runs on a CPU (widen, then the float32
            # kernel; CUDA has a half-to-float kernel of its own): bitwise equal, one block fewer
            if scores.dtype == torch.float32:
                pf = scores
            elif reuse:
                pf = p_buf[:n_el].view(shape).copy_(scores)
            else:
                pf = scores.float()
            p = torch.ops.aten._softmax.out(pf, -1, False, out=pf)
        elif sinks is None:
            p = F.softmax(scores, dim=-1, dtype=torch.float32)
        else:  # attention sinks (GPT-OSS): an extra logit per head that takes probability
            sink = sinks.reshape(1, -1, 1, 1).expand(b, -1, i1 - i0, -1)
            combined = torch.cat([scores, sink], dim=-1)
            combined = combined - combined.max(dim=-1, keepdim=True).values
            p = F.softmax(combined, dim=-1, dtype=combined.dtype)[..., :-1]
        del scores
        if p_fs > 0.0:  # in the softmax's precision (float32), rounded once below
            p = _noisy_probs(session, p, None if zero_safe else hidden, c0, causal, layer,  # type: ignore[arg-type]
                             p_fs, first)
        if sinks is None and reuse and p.dtype != query.dtype:
            p = s_buf[:n_el].view(shape).copy_(p)  # the scores' buffer is free by now
        elif sinks is None:
            p = p.to(query.dtype)
        p = F.dropout(p, p=dropout, training=module.training).to(value.dtype)
        if o_bs > 0.0 and tracked and p.requires_grad:
            p = BackwardNoise.apply(p, session, layer, "attention_output", o_bs, first)
        out = torch.matmul(p, v_c)
        if o_fs > 0.0:
            out = session.forward_noise(out, layer, "attention_output", o_fs, count=first)  # type: ignore[union-attr]
        outs.append(out)
        if i1 == q_len and i0 == 0:
            probs = p
    if len(outs) == 1:
        return outs[0], probs
    return torch.cat(outs, dim=2), None


def _power_of_two(x: float) -> bool:
    return x > 0.0 and math.isfinite(x) and math.frexp(x)[0] == 0.5


def _bnoise(t: torch.Tensor, session: NoiseSession, layer: int, op: str, scale: float) -> torch.Tensor:
    return BackwardNoise.apply(t, session, layer, op, scale, True) if t.requires_grad else t


def _noisy_probs(
    session: NoiseSession,
    p: torch.Tensor,
    hidden: torch.Tensor | None,
    c0: int,
    causal: bool,
    layer: int,
    scale: float,
    count: bool,
) -> torch.Tensor:
    """Noise on probabilities that leaves masked positions at exactly 0 (a query row the
    mask hides entirely keeps its clean values: it attends nowhere). ``hidden`` covers
    the columns from ``c0`` on."""
    noisy = session.forward_noise(p, layer, "softmax", scale, count=count)
    if hidden is None:
        return noisy
    if not causal:  # a causal row always sees its own key; other masks may hide a row
        hidden = hidden & ~hidden.all(dim=-1, keepdim=True)
    if noisy.requires_grad:
        return noisy.masked_fill(hidden, 0.0)
    noisy[..., c0:].masked_fill_(hidden, 0.0)
    return noisy
