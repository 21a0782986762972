"""NaN, inf and subnormal values in every number format, against torchao's reference code.

torchao 0.18's eager references (``_choose_scale_float8`` and friends, ``choose_qparams_affine``,
``to_mx`` / ``to_dtype``, ``NVFP4Tensor.to_nvfp4``) share one rule: a NaN or an infinity
reaches its group's amax, so its scale is NaN or inf and spreads over that scale group (a
whole tensor for a per-tensor scale and for NVFP4's tensor scale), never further; MXFP4
keeps an infinity as ±inf and flushes the rest of its block to 0. These tests compare the
engine with those references bit for bit (NaN positions equal, every other element's bits
equal), check that nothing outside a NaN's scale group changes, and that the Gaussian error
models and the session leave every other element as it was.
"""

from __future__ import annotations

import pytest
import torch

from robuststats.engine._error_models import compute_error, quantize
from robuststats.engine._quantize import fake_quantize

NAN, INF = float("nan"), float("inf")


def _torchao():
    pytest.importorskip("torchao")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torchao.prototype.mx_formats.mx_tensor as mx
        import torchao.prototype.mx_formats.nvfp4_tensor as nv
        import torchao.quantization.quant_primitives as qp
    return qp, mx, nv


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal NaN positions and equal bits (signs of zero included) everywhere else."""
    a, b = a.float(), b.float()
    nan = a.isnan()
    if not torch.equal(nan, b.isnan()):
        return False
    return torch.equal(a[~nan].view(torch.int32), b[~nan].view(torch.int32))


def _special(kind: str, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """8 × 128 values of very different magnitudes with one special value at [0, 5]."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(8, 128, generator=g) * torch.exp(2 * torch.randn(8, 1, generator=g))
    if kind == "subnormal":
        # float32 subnormals (< 2^-126) and tiny normals: blocks whose amax is under
        # 2^-124 take E8M0's smallest scale 2^-127
        x[0] = torch.randn(128, generator=g) * 2.0 ** -130
        x[1, :64] = torch.randn(64, generator=g) * 2.0 ** -126
        x[2, :32] = torch.randn(32, generator=g) * 2.0 ** -140
        x[3, 32:64] = torch.randn(32, generator=g) * 2.0 ** -123
    else:
        x[0, 5] = {"nan": NAN, "inf": INF, "-inf": -INF}[kind]
    return x.to(dtype)


SPECIALS = ["nan", "inf", "-inf", "subnormal"]


def _fp8_ref(qp, x, fmt, granularity, block=32):
    dtype = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}[fmt]
    bs = {"tensor": list(x.shape), "row": [1, x.shape[1]], "block": [1, block]}[granularity]
    scale = qp._choose_scale_float8(x, bs, dtype)
    return qp._dequantize_affine_float8(qp._quantize_affine_float8(x, scale, dtype), scale)


@pytest.mark.parametrize("kind", SPECIALS)
@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("granularity", ["tensor", "row", "block"])
def test_fp8_special_values_match_torchao(kind, fmt, granularity) -> None:
    qp, _, _ = _torchao()
    x = _special(kind)
    if kind == "subnormal" and granularity != "tensor":
        # torchao's scale amax / fmax underflows to 0 for a group of subnormals (0/0 = NaN);
        # here such a group is exact: compare the groups where torchao's scale is positive
        x = x[3:]
    got = fake_quantize(x, fmt, granularity=granularity, block_size=32 if granularity == "block"
                        else None)
    assert _same_bits(got, _fp8_ref(qp, x, fmt, granularity))


@pytest.mark.parametrize("kind", SPECIALS)
@pytest.mark.parametrize("granularity", ["tensor", "row", "block"])
def test_int8_special_values_match_torchao(kind, granularity) -> None:
    qp, _, _ = _torchao()
    x = _special(kind)
    bs = {"tensor": list(x.shape), "row": [1, 128], "block": [1, 32]}[granularity]
    scale, zp = qp.choose_qparams_affine(x, qp.MappingType.SYMMETRIC, bs, torch.int8,
                                         quant_min=-127, quant_max=127)
    q = qp.quantize_affine(x, bs, scale, zp, torch.int8, quant_min=-127, quant_max=127)
    ref = qp.dequantize_affine(q, bs, scale, zp, torch.int8, quant_min=-127, quant_max=127)
    got = fake_quantize(x, "int8", granularity=granularity,
                        block_size=32 if granularity == "block" else None)
    assert _same_bits(got, ref)


def _mx_ref(mx, x):
    scale, data = mx.to_mx(x, torch.float4_e2m1fn_x2, 32)
    return mx.to_dtype(data, scale, torch.float4_e2m1fn_x2, 32, torch.float32)


@pytest.mark.parametrize("kind", SPECIALS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mxfp4_special_values_match_torchao(kind, dtype) -> None:
    _, mx, _ = _torchao()
    x = _special(kind, dtype)
    ref = _mx_ref(mx, x)
    assert _same_bits(fake_quantize(x, "mxfp4"), ref)
    # the output error model rounds ties up (away from zero) instead of to even: the same
    # as torchao on float32 data (no ties), the same as input quantization with ties="away"
    assert _same_bits(quantize(x, "mxfp4"), fake_quantize(x, "mxfp4", ties="away").to(dtype))
    if dtype == torch.float32:
        assert _same_bits(quantize(x, "mxfp4"), ref)


def test_mxfp4_smallest_scale_is_e8m0s_2_pow_minus_127() -> None:
    _, mx, _ = _torchao()
    # amax 2^-125 → ⌊log2⌋ − 2 = −127: E8M0 code 0, the scale 2^-127 (not float32's 2^-126);
    # torchao divides by the scale clamped to 2^-126 and multiplies by 2^-127
    x = torch.zeros(1, 32)
    x[0, :4] = torch.tensor([2.0 ** -125, 2.0 ** -126, -(2.0 ** -127), 3 * 2.0 ** -127])
    scale, _ = mx.to_mx(x, torch.float4_e2m1fn_x2, 32)
    assert scale.view(torch.uint8).item() == 0
    got = fake_quantize(x, "mxfp4")
    assert _same_bits(got, _mx_ref(mx, x))
    assert got[0, :4].tolist() == [2.0 ** -126, 2.0 ** -127, -(2.0 ** -128), 3 * 2.0 ** -128]


@pytest.mark.parametrize("kind", SPECIALS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_nvfp4_special_values_match_torchao(kind, dtype) -> None:
    _, _, nv = _torchao()
    x = _special(kind, dtype)
    if kind == "subnormal":
        x = x[:3]  # the whole tensor tiny: a subnormal per-tensor scale
    pts = nv.per_tensor_amax_to_scale(x.abs().amax())
    ref = nv.NVFP4Tensor.to_nvfp4(x, per_tensor_scale=pts).dequantize(torch.float32)
    assert _same_bits(fake_quantize(x, "nvfp4"), ref)
    assert _same_bits(quantize(x, "nvfp4"), ref.to(dtype))


@pytest.mark.parametrize("kind", ["nan", "inf", "-inf"])
@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2", "int8"])
def test_per_tensor_error_models_spread_like_torchao(kind, fmt) -> None:
    # quantize()'s fp8 and int8 are per-tensor formats: a NaN or infinity makes the whole
    # tensor NaN, as torchao's per-tensor reference does (not a rescaled finite tensor)
    qp, _, _ = _torchao()
    x = _special(kind)
    if fmt == "int8":
        bs = list(x.shape)
        scale, zp = qp.choose_qparams_affine(x, qp.MappingType.SYMMETRIC, bs, torch.int8,
                                             quant_min=-127, quant_max=127)
        q = qp.quantize_affine(x, bs, scale, zp, torch.int8, quant_min=-127, quant_max=127)
        ref = qp.dequantize_affine(q, bs, scale, zp, torch.int8, quant_min=-127, quant_max=127)
    else:
        ref = _fp8_ref(qp, x, fmt, "tensor")
    assert ref.isnan().all() and quantize(x, fmt).isnan().all()


# ------------------------------------------------------------------ without torchao
@pytest.mark.parametrize(("fmt", "granularity", "group"), [
    ("fp8_e4m3", "row", 128), ("fp8_e5m2", "block", 32), ("int8", "row", 128),
    ("int8", "block", 32), ("mxfp4", None, 32),
])
@pytest.mark.parametrize("kind", ["nan", "inf", "-inf"])
def test_a_special_value_changes_nothing_outside_its_group(fmt, granularity, group, kind) -> None:
    clean = _special("subnormal")[3:]  # finite, tiny blocks included
    x = clean.clone()
    x[2, 40] = {"nan": NAN, "inf": INF, "-inf": -INF}[kind]
    bs = 32 if granularity == "block" else None
    a = fake_quantize(clean, fmt, granularity=granularity, block_size=bs)
    b = fake_quantize(x, fmt, granularity=granularity, block_size=bs)
    lo = 40 // group * group
    outside = torch.ones_like(x, dtype=torch.bool)
    outside[2, lo:lo + group] = False
    assert torch.equal(a[outside].view(torch.int32), b[outside].view(torch.int32))
    inside = b[2, lo:lo + group]
    if kind == "nan" or fmt != "mxfp4":
        assert inside.isnan().all()  # the NaN (or inf) scale reaches its whole group
    else:  # MXFP4 keeps ±inf and flushes the rest of its block
        assert inside[40 - lo].item() == x[2, 40].item()
        assert (inside.abs().sum() == INF) and (inside[torch.arange(group) != 40 - lo] == 0).all()


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "int8", "mxfp4", "nvfp4"])
def test_nan_is_never_finite_and_never_rescales_others(fmt) -> None:
    # the bug this guards: a NaN amax failed `amax > 0`, the scale fell back to 1 and every
    # other element of the tensor was quantized with that scale instead
    x = _special("nan")
    q = fake_quantize(x, fmt, granularity="tensor" if fmt in ("fp8_e4m3", "int8") else None)
    assert q[0, 5].isnan()
    if fmt == "mxfp4":  # its block is NaN; the other blocks keep their own scales
        ref = fake_quantize(x.nan_to_num(0.0), fmt)
        assert q[0, :32].isnan().all()
        assert torch.equal(q[1:], ref[1:]) and torch.equal(q[0, 32:], ref[0, 32:])
    else:  # one scale for the whole tensor: all NaN, no finite element with a wrong scale
        assert q.isnan().all()


@pytest.mark.parametrize("kind", ["relative_gaussian", "absolute_gaussian", "systematic_bias"])
def test_elementwise_error_models_keep_a_nan_in_place(kind) -> None:
    y = torch.randn(4, 64, generator=torch.Generator().manual_seed(1))
    z = y.clone()
    z[1, 3] = NAN
    a = compute_error(kind, y, 0.1, torch.Generator().manual_seed(5))
    b = compute_error(kind, z, 0.1, torch.Generator().manual_seed(5))
    mask = torch.ones_like(y, dtype=torch.bool)
    mask[1, 3] = False
    assert torch.equal(a[mask], b[mask])
    assert b[1, 3].isnan() or kind == "absolute_gaussian"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kind", ["relative_gaussian", "absolute_gaussian"])
def test_session_noise_keeps_a_nan_in_its_row(dtype, kind) -> None:
    from robuststats.engine import NoiseSpec, inject

    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 32).to(dtype)
    # 2¹⁷ + elements: the fused chunked path of the CPU noise streams
    x = torch.randn(4200, 64, generator=torch.Generator().manual_seed(2)).to(dtype)
    bad = x.clone()
    bad[7, 3] = NAN
    spec = NoiseSpec(scale=0.05, kind=kind, ops="linear", seed=3)
    outs = []
    for inp in (x, bad):
        with torch.no_grad(), inject(lin, spec) as session:
            outs.append(lin(inp))
    a, b = outs
    assert b[7].isnan().all()  # the NaN input row: every output of that row is NaN
    rows = torch.arange(a.shape[0]) != 7
    assert torch.equal(a[rows], b[rows])  # every other element exactly as without the NaN
    assert session.count(op="linear") == 1
