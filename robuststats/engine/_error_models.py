"""Error models: what a noisy op adds to its exact result ``y``.

Every model returns the *error* tensor ``e`` (so the noisy result is ``y + e``); the
session adds it in place where autograd allows and records ``‖e‖² / ‖y‖²``.

Stochastic models (draw from the session's own noise streams, ``_rng.NoiseStream``):

- ``relative_gaussian``: ``e = s·|y|·ε``, ε ~ N(0, 1). Same law as ``y·(1 + s·ε)`` because
  ``sign(y)·ε`` is again N(0, 1); RMS relative error = s.
- ``absolute_gaussian``: ``e = s·ε`` (independent of ``y``).

Deterministic models (no randomness, same input → same error):

- ``systematic_bias``: ``e = s·|y|``. Every error has the same (positive) sign, like a
  round-up rounding mode: errors add up linearly over a sum instead of as √n.
- ``fp8_e4m3`` / ``fp8_e5m2``: per-tensor scaled cast, ``q(y) = cast(y·c)/c`` with
  ``c = fmax / max|y|`` (fmax 448 for E4M3, 57344 for E5M2), via torch float8 dtypes
  (OCP FP8 formats, Micikevicius et al. 2022, arXiv:2209.05433).
- ``int8``: per-tensor symmetric fake quantization ``q(y) = round(y/Δ)·Δ``,
  ``Δ = max|y| / 127``, clipped to [−127, 127] (Jacob et al. 2018, arXiv:1712.05877).
- ``nvfp4``: NVIDIA's two-level NVFP4 (blocks of 16, E4M3 block scale, float32 tensor scale;
  :mod:`robuststats.engine._quantize`, round to nearest even).
- ``mxfp4``: OCP Microscaling MXFP4 (OCP MX spec v1.0, 2023): blocks of 32 along the last
  dimension share an E8M0 scale ``X = 2^(⌊log2 max|v|⌋ − 2)``; elements are E2M1
  (magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6), round to nearest, saturating at 6.

For the deterministic formats ``e = s·(q(y) − y)``: ``scale = 1`` is the format itself,
0 is exact, values in between interpolate. Measured RMS relative errors on N(0, 1) data
are in ``docs/engine.md`` and are asserted by ``tests/engine/test_error_models.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

import torch

from robuststats._validation import check_choice, check_number
from robuststats.engine._rng import NoiseStream, randn
from robuststats.errors import InputError

if TYPE_CHECKING:
    from robuststats.engine._philox import PhiloxStream

__all__ = ["ERROR_MODELS", "FORMATS", "compute_error", "error_tensor", "quantize"]

#: the deterministic number formats that :func:`quantize` implements
FORMATS = ("fp8_e4m3", "fp8_e5m2", "int8", "mxfp4", "nvfp4")

_FP8 = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}
_MX_BLOCK = 32


def _amax(y: torch.Tensor) -> torch.Tensor:
    # clamp keeps an all-zero tensor from dividing by zero (its quantization is exact)
    return y.detach().abs().amax().float().clamp_min(torch.finfo(torch.float32).tiny)


def _quant_fp8(y: torch.Tensor, kind: str) -> torch.Tensor:
    dtype = _FP8[kind]
    fmax = torch.finfo(dtype).max
    # c = fmax / max|y| must stay finite: for an all-zero (or sub-1e-36) tensor, fmax / tiny
    # overflows to inf and 0·inf = NaN. Clamping max|y| at fmax / float32-max keeps c
    # finite; such a tensor then quantizes exactly (zero stays zero).
    amax = y.detach().abs().amax().float().clamp_min(fmax / torch.finfo(torch.float32).max)
    c = fmax / amax
    yf = y.float()
    return ((yf * c).to(dtype).float() / c).to(y.dtype)


def _quant_int8(y: torch.Tensor) -> torch.Tensor:
    delta = _amax(y) / 127.0
    yf = y.float()
    return (torch.round(yf / delta).clamp_(-127, 127) * delta).to(y.dtype)


def _quant_mxfp4(y: torch.Tensor) -> torch.Tensor:
    # input quantization's MXFP4 (torchao's to_mx, bit for bit, NaN and inf included) with
    # this error model's tie rule: a magnitude halfway between two E2M1 values rounds up
    return _quant_blocks(y, "mxfp4", _MX_BLOCK, "away")


def _check_tensor(y: object, name: str = "y") -> torch.Tensor:
    if not isinstance(y, torch.Tensor):
        raise InputError(f"`{name}` must be a torch.Tensor, got {type(y).__name__}.")
    if not y.is_floating_point():
        raise InputError(f"`{name}` must be a floating-point tensor, got dtype {y.dtype}.")
    return y


def quantize(y: torch.Tensor, kind: str) -> torch.Tensor:
    """Fake-quantize ``y`` with a deterministic format (``fp8_e4m3``, ``fp8_e5m2``, ``int8``,
    ``mxfp4``, ``nvfp4``); same shape and dtype as ``y``.

    An unknown ``kind`` (``"fp16"``) raises :class:`~robuststats.errors.InputError` that
    lists the formats.
    """
    check_choice(kind, "kind", FORMATS)
    return _quantize(_check_tensor(y), kind)


def _quantize(y: torch.Tensor, kind: str) -> torch.Tensor:
    # unvalidated: the injection hot path calls this for every perturbed op
    if kind in _FP8:
        return _quant_fp8(y, kind)
    if kind == "int8":
        return _quant_int8(y)
    if kind == "nvfp4":
        return _quant_nvfp4(y)
    return _quant_mxfp4(y)


def _quant_nvfp4(y: torch.Tensor) -> torch.Tensor:
    return _quant_blocks(y, "nvfp4", 16, "even")


def _quant_blocks(y: torch.Tensor, fmt: str, block: int, ties: str) -> torch.Tensor:
    from robuststats.engine._quantize import _fake_quantize

    if y.ndim == 0:
        return _quant_blocks(y.reshape(1), fmt, block, ties).reshape(())
    return _fake_quantize(y, fmt, "block", block, ties).to(y.dtype)


# ``g``: the session's noise stream (a NoiseStream, or a PhiloxStream with the same
# ``randn``; both thread-count independent) or, through the public ``compute_error``, a
# plain torch.Generator. A string: the philox module is imported only where it is used
Gen: TypeAlias = "NoiseStream | PhiloxStream | torch.Generator | None"


def _relative_gaussian(y: torch.Tensor, s: float, g: Gen) -> torch.Tensor:
    e = randn(y.shape, g, y.dtype, y.device)
    return e.mul_(y.detach().abs()).mul_(s)


def _absolute_gaussian(y: torch.Tensor, s: float, g: Gen) -> torch.Tensor:
    return randn(y.shape, g, y.dtype, y.device).mul_(s)


def _systematic_bias(y: torch.Tensor, s: float, g: torch.Generator | None) -> torch.Tensor:
    return y.detach().abs().mul_(s)


def _format(kind: str) -> Callable[[torch.Tensor, float, torch.Generator | None], torch.Tensor]:
    def error(y: torch.Tensor, s: float, g: torch.Generator | None) -> torch.Tensor:
        yd = y.detach()
        e = _quantize(yd, kind).sub_(yd)
        return e if s == 1.0 else e.mul_(s)

    return error


ERROR_MODELS: dict[str, Callable[[torch.Tensor, float, torch.Generator | None], torch.Tensor]] = {
    "relative_gaussian": _relative_gaussian,
    "absolute_gaussian": _absolute_gaussian,
    "systematic_bias": _systematic_bias,
    "fp8_e4m3": _format("fp8_e4m3"),
    "fp8_e5m2": _format("fp8_e5m2"),
    "int8": _format("int8"),
    "mxfp4": _format("mxfp4"),
    "nvfp4": _format("nvfp4"),
}

#: Kinds whose error does not depend on a random draw.
DETERMINISTIC_KINDS = frozenset({"systematic_bias", "fp8_e4m3", "fp8_e5m2", "int8", "mxfp4",
                                 "nvfp4"})

#: Kinds whose error is exactly 0 where ``y`` is exactly 0 (multiplicative, or a format that
#: represents 0): noise by them leaves a zero probability at zero without a mask.
ZERO_PRESERVING_KINDS = DETERMINISTIC_KINDS | {"relative_gaussian"}


def compute_error(
    kind: str, y: torch.Tensor, scale: float, generator: torch.Generator | None
) -> torch.Tensor:
    """The error tensor ``e`` of error model ``kind`` for exact result ``y`` (no grad)."""
    check_choice(kind, "kind", ERROR_MODELS)
    _check_tensor(y)
    check_number(scale, "scale", low=0.0)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise InputError(f"`generator` must be a torch.Generator or None, got "
                         f"{type(generator).__name__}.")
    return error_tensor(kind, y, float(scale), generator)


def error_tensor(kind: str, y: torch.Tensor, scale: float, generator: Gen) -> torch.Tensor:
    """:func:`compute_error` without validation, for the session's hot path (the session
    checked ``kind`` and ``scale`` once, through its ``NoiseSpec``)."""
    with torch.no_grad():
        return ERROR_MODELS[kind](y, scale, generator)
