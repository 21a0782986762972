"""Number formats of input quantization: names, defaults and option checks (torch-free).

:mod:`robuststats.engine._quantize` implements them; :class:`~robuststats.engine.NoiseSpec`
validates its ``granularity``, ``block_size`` and ``ties`` fields here, without torch.
"""

from __future__ import annotations

from robuststats._fields import check_whole
from robuststats._validation import check_choice
from robuststats.errors import InputError

__all__ = ["DEFAULT_BLOCK", "DEFAULT_GRANULARITY", "GRANULARITIES", "QUANT_FORMATS", "TIES",
           "check_format"]

QUANT_FORMATS: tuple[str, ...] = ("fp8_e4m3", "fp8_e5m2", "int8", "mxfp4", "nvfp4")
GRANULARITIES: tuple[str, ...] = ("tensor", "row", "block")
TIES: tuple[str, ...] = ("even", "away", "zero")

#: block size of each format's ``block`` granularity (fixed by the format for MXFP4, NVFP4)
DEFAULT_BLOCK = {"fp8_e4m3": 128, "fp8_e5m2": 128, "int8": 128, "mxfp4": 32, "nvfp4": 16}
#: granularity used when none is given
DEFAULT_GRANULARITY = {"fp8_e4m3": "tensor", "fp8_e5m2": "tensor", "int8": "tensor",
                       "mxfp4": "block", "nvfp4": "block"}
_FIXED_BLOCK = {"mxfp4": 32, "nvfp4": 16}


def check_format(fmt: str, granularity: str | None, block_size: int | None,
                 ties: str) -> tuple[str, int]:
    """Validate a format's options; returns ``(granularity, block_size)`` with defaults filled."""
    check_choice(fmt, "kind", QUANT_FORMATS)
    check_choice(ties, "ties", TIES)
    if granularity is None:
        granularity = DEFAULT_GRANULARITY[fmt]
    check_choice(granularity, "granularity", GRANULARITIES)
    if fmt in _FIXED_BLOCK:
        if granularity != "block":
            raise InputError(f"`granularity` of {fmt} is 'block' (the format fixes it), "
                             f"got {granularity!r}.")
        if block_size not in (None, _FIXED_BLOCK[fmt]):
            raise InputError(f"`block_size` of {fmt} is {_FIXED_BLOCK[fmt]} (the format fixes "
                             f"it), got {block_size!r}.")
    if block_size is None:
        block_size = DEFAULT_BLOCK[fmt]
    check_whole(block_size, "block_size", low=1)
    if granularity != "block" and block_size != DEFAULT_BLOCK[fmt]:
        raise InputError(f"`block_size` applies to granularity 'block' only, got granularity "
                         f"{granularity!r} with block_size {block_size}.")
    return granularity, block_size
