"""Input quantization: what a low-precision matmul kernel does to its operands.

:func:`fake_quantize` returns the dequantized values (float32) of a tensor quantized to one of
:data:`QUANT_FORMATS`; scales are shared by groups of elements along the *contraction*
dimension ``dim`` (the one a matmul sums over):

- ``fp8_e4m3`` / ``fp8_e5m2`` (OCP FP8, Micikevicius et al. 2022, arXiv:2209.05433):
  ``scale = amax / fmax`` (fmax 448 / 57344) per ``tensor``, per ``row`` (one scale per
  row along the contraction dimension: per output channel of a weight, per token of an
  activation) or per ``block`` of ``block_size`` elements (default 128, the 1×128 tiles of
  DeepSeek-V3); ``q = cast(clamp(x / scale)) · scale``.
- ``int8``: symmetric, ``scale = amax / 127`` (per tensor, row or block),
  ``q = clamp(round(x · (1/scale)), −127, 127) · scale`` (Jacob et al. 2018, arXiv:1712.05877).
- ``mxfp4``: OCP Microscaling v1.0: blocks of 32, E8M0 scale
  ``2^(⌊log2 amax⌋ − 2)``, E2M1 elements, saturating at ±6.
- ``nvfp4``: blocks of 16 with an E4M3 block scale and a per-tensor float32 scale
  ``amax / (448 · 6)`` (NVIDIA's two-level NVFP4; the recipe of torchao's ``NVFP4Tensor``).

The arithmetic follows torchao's reference implementations (``_choose_scale_float8`` /
``_quantize_affine_float8``, ``choose_qparams_affine`` / ``quantize_affine`` with range
±127, ``to_mx``, ``nvfp4_quantize``); ``tests/engine/test_quantize.py`` checks them bit for
bit. Beyond torchao, a block format pads a contraction dimension that is not a multiple of
the block with zeros, and any dimension can be the contraction dimension.

Elements round to nearest with the tie rule ``ties``: ``"even"`` (default, as hardware and
torch casts), ``"away"`` (from zero) or ``"zero"`` (toward zero). Scales themselves
(NVFP4's E4M3 block scales) always round to nearest even.
"""

from __future__ import annotations

from itertools import pairwise

import torch

from robuststats.engine._formats import (
    DEFAULT_BLOCK,
    GRANULARITIES,
    QUANT_FORMATS,
    TIES,
    check_format,
)
from robuststats.errors import InputError

__all__ = ["DEFAULT_BLOCK", "GRANULARITIES", "QUANT_FORMATS", "TIES", "fake_quantize"]

# (torch dtype, mantissa bits, smallest normal exponent, largest finite value)
_FP8 = {
    "fp8_e4m3": (torch.float8_e4m3fn, 3, -6, 448.0),
    "fp8_e5m2": (torch.float8_e5m2, 2, -14, 57344.0),
}
_E2M1_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
_E2M1_MAX = 6.0
_E2M1_EMAX = 2  # exponent of the largest E2M1 value, 6 = 1.5·2²
_E4M3_TINY = 2.0 ** -6  # smallest normal E4M3: NVFP4 block scales are clamped to it
_F32_TINY = torch.finfo(torch.float32).tiny


def fake_quantize(
    x: torch.Tensor,
    fmt: str,
    *,
    granularity: str | None = None,
    block_size: int | None = None,
    ties: str = "even",
    dim: int = -1,
) -> torch.Tensor:
    """Quantize ``x`` to ``fmt`` and back; returns float32 values of the same shape.

    Parameters
    ----------
    x : torch.Tensor
        Floating-point tensor.
    fmt : str
        One of :data:`QUANT_FORMATS`.
    granularity : {"tensor", "row", "block"}, optional
        Scale sharing along ``dim``; default per format (``tensor`` for fp8/int8,
        ``block`` for mxfp4/nvfp4, whose blocks of 32/16 are fixed).
    block_size : int, optional
        Elements per block for ``granularity="block"`` (default 128 for fp8/int8).
    ties : {"even", "away", "zero"}
        Tie rule of round-to-nearest.
    dim : int
        The contraction dimension (``-1`` for activations and ``nn.Linear`` weights,
        ``-2`` for the right operand of ``a @ b``).
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise InputError(f"`x` must be a floating-point torch.Tensor, got "
                         f"{getattr(x, 'dtype', type(x).__name__)}.")
    granularity, block_size = check_format(fmt, granularity, block_size, ties)
    if x.ndim == 0:
        raise InputError("`x` must have at least one dimension (the contraction dimension).")
    if not -x.ndim <= dim < x.ndim:
        raise InputError(f"`dim` must index a dimension of a {x.ndim}-d tensor, got {dim}.")
    return _fake_quantize(x, fmt, granularity, block_size, ties, dim)


def _fake_quantize(x: torch.Tensor, fmt: str, granularity: str, block_size: int, ties: str,
                   dim: int = -1) -> torch.Tensor:
    """:func:`fake_quantize` without validation (the session validated its spec once)."""
    with torch.no_grad():
        moved = dim not in (-1, x.ndim - 1)
        xf = x.detach().float()
        if moved:
            xf = xf.movedim(dim, -1)
        n = xf.shape[-1]
        if granularity == "tensor":
            groups = xf.reshape(1, -1)
        elif granularity == "row":
            groups = xf.reshape(-1, n)
        else:
            pad = (-n) % block_size
            padded = torch.nn.functional.pad(xf, (0, pad)) if pad else xf
            groups = padded.reshape(-1, block_size)
        if fmt == "nvfp4":
            q = _nvfp4(groups, ties)
        elif fmt == "mxfp4":
            q = _mxfp4(groups, ties)
        elif fmt == "int8":
            q = _int8(groups, ties)
        else:
            q = _fp8(groups, fmt, ties)
        if granularity == "block":
            q = q.reshape(*xf.shape[:-1], -1)[..., :n]
        q = q.reshape(xf.shape)
        if moved:
            q = q.movedim(-1, dim)
        return q.contiguous()


# ---------------------------------------------------------------- element rounding
def _round_ties(t: torch.Tensor, ties: str) -> torch.Tensor:
    """Round to the nearest integer with the tie rule (exact for |t| < 2²³)."""
    if ties == "even":
        return torch.round(t)
    if ties == "away":
        return torch.sign(t) * torch.floor(t.abs() + 0.5)
    return torch.sign(t) * torch.ceil(t.abs() - 0.5)


def _round_float(v: torch.Tensor, mbits: int, emin: int, fmax: float, ties: str) -> torch.Tensor:
    """Round float32 ``v`` to a floating-point grid with ``mbits`` mantissa bits, subnormals
    below ``2^emin``, saturating at ``fmax``."""
    _, e = torch.frexp(v)
    ulp = torch.exp2((e - 1).clamp_(min=emin).sub_(mbits).float())
    return _round_ties(v / ulp, ties).mul_(ulp).clamp_(-fmax, fmax)


def _e2m1_bounds(ties: str, device: torch.device) -> torch.Tensor:
    # midpoints between E2M1 values; a value equal to a midpoint goes down with
    # bucketize(right=False), so midpoints whose tie rounds up move one ulp down
    grid = _E2M1_GRID
    mids = torch.tensor([(a + b) / 2 for a, b in pairwise(grid)], dtype=torch.float32)
    if ties == "away":
        up = torch.ones(len(mids), dtype=torch.bool)
    elif ties == "zero":
        up = torch.zeros(len(mids), dtype=torch.bool)
    else:  # even: up when the upper neighbour has an even mantissa (1.0, 2.0, 4.0 …)
        up = torch.tensor([i % 2 == 0 for i in range(1, len(grid))])
    mids = torch.where(up, torch.nextafter(mids, torch.zeros_like(mids)), mids)
    return mids.to(device)


_E2M1_CACHE: dict[tuple[str, torch.device], tuple[torch.Tensor, torch.Tensor]] = {}


def _round_e2m1(v: torch.Tensor, ties: str) -> torch.Tensor:
    """Round float32 ``v`` to E2M1 (±{0, .5, 1, 1.5, 2, 3, 4, 6}), saturating at ±6."""
    key = (ties, v.device)
    hit = _E2M1_CACHE.get(key)
    if hit is None:
        hit = _E2M1_CACHE[key] = (_e2m1_bounds(ties, v.device),
                                  torch.tensor(_E2M1_GRID, dtype=torch.float32, device=v.device))
    bounds, grid = hit
    return grid[torch.bucketize(v.abs(), bounds)].copysign_(v)


def _div(a: torch.Tensor, b: float) -> torch.Tensor:
    """``a / b`` rounded as an IEEE division on every device. CUDA turns a division by a
    Python number into a multiplication by its rounded reciprocal (one ulp off for 448, 127
    or 6 on some values); a divisor on ``a``'s own device keeps the true quotient there,
    which is what the CPU computes either way."""
    return a / torch.full((), b, dtype=a.dtype, device=a.device)


# ---------------------------------------------------------------- formats on (groups, size)
def _fp8(g: torch.Tensor, fmt: str, ties: str) -> torch.Tensor:
    dtype, mbits, emin, fmax = _FP8[fmt]
    scale = _div(g.abs().amax(dim=-1, keepdim=True), fmax)
    # a zero scale (an all-zero group, or one whose amax / fmax underflows) becomes 1, which
    # is exact for zeros; a NaN or inf scale stays and spreads over its group as in torchao
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    v = (g / scale).clamp_(-fmax, fmax)
    if ties == "even":
        q = v.to(dtype).float()
    else:
        q = _round_float(v, mbits, emin, fmax, ties)
    return q.mul_(scale)


def _int8(g: torch.Tensor, ties: str) -> torch.Tensor:
    amax = g.abs().amax(dim=-1, keepdim=True)
    scale = _div(amax, 127.0).clamp_(min=_F32_TINY)
    # + 0: an integer code has no sign of zero (torchao's −0.3·Δ dequantizes to +0.0)
    return _round_ties(g * (1.0 / scale), ties).clamp_(-127, 127).add_(0.0).mul_(scale)


def _mxfp4(g: torch.Tensor, ties: str) -> torch.Tensor:
    amax = g.abs().amax(dim=-1, keepdim=True)
    # ⌊log2 amax⌋ from the float32 exponent bits (as torchao's to_mx, FLOOR mode), clamped
    # to E8M0's range: the smallest scale is 2^-127 (code 0), a NaN amax gives the NaN code
    pow2 = ((amax.view(torch.int32) >> 23) & 0xFF) - 127
    scale = torch.exp2((pow2 - _E2M1_EMAX).clamp_(-127, 127).float())
    scale = torch.where(torch.isnan(amax), amax, scale)
    # the elements are computed against the scale clamped at the smallest normal float32
    # (2^-126), as torchao's to_mx does; the stored 2^-127 multiplies them back
    return _round_e2m1(g / scale.clamp(min=_F32_TINY), ties).mul_(scale)


def _nvfp4(g: torch.Tensor, ties: str) -> torch.Tensor:
    amax = g.abs().amax()
    pts = _div(amax, 448.0 * _E2M1_MAX)  # per-tensor float32 scale
    # all zeros (or an underflowing scale): any scale is exact; NaN and inf stay, as in torchao
    pts = torch.where(pts == 0, torch.ones_like(pts), pts)
    block_amax = g.abs().amax(dim=-1, keepdim=True)
    s8 = (_div(block_amax, _E2M1_MAX) / pts).clamp_(_E4M3_TINY, 448.0)
    s8 = s8.to(torch.float8_e4m3fn).float()
    data = (g * ((1.0 / pts) / s8)).clamp_(-_E2M1_MAX, _E2M1_MAX)
    return _round_e2m1(data, ties).mul_(pts * s8)
