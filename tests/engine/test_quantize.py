"""Input quantization (`fake_quantize`): bit for bit against torchao's reference code.

torchao is a test extra (pinned in pyproject.toml); these comparisons skip without it.
The references are torchao 0.18's eager reference implementations: ``_choose_scale_float8``
/ ``_quantize_affine_float8`` / ``_dequantize_affine_float8`` (FP8 per tensor, row, 1×128
block), ``choose_qparams_affine`` / ``quantize_affine`` / ``dequantize_affine`` (symmetric
int8, range ±127), ``to_mx`` / ``to_dtype`` (MXFP4) and ``NVFP4Tensor.to_nvfp4(...,
per_tensor_scale=per_tensor_amax_to_scale(amax)).dequantize()`` (NVFP4, two-level).
"""

from __future__ import annotations

import pytest
import torch

from robuststats.engine._quantize import _round_e2m1, _round_float, fake_quantize
from robuststats.errors import InputError


@pytest.fixture(scope="module")
def x() -> torch.Tensor:
    # rows of very different magnitude, so per-row and per-block scales matter
    g = torch.Generator().manual_seed(0)
    return torch.randn(64, 256, generator=g) * torch.exp(2 * torch.randn(64, 1, generator=g))


def _torchao():
    pytest.importorskip("torchao")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torchao.prototype.mx_formats.mx_tensor as mx
        import torchao.prototype.mx_formats.nvfp4_tensor as nv
        import torchao.quantization.quant_primitives as qp
    return qp, mx, nv


def _blocks(x: torch.Tensor, granularity: str) -> list[int]:
    return {"tensor": list(x.shape), "row": [1, x.shape[1]], "block": [1, 128]}[granularity]


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("granularity", ["tensor", "row", "block"])
def test_fp8_matches_torchao(x, fmt, granularity) -> None:
    qp, _, _ = _torchao()
    dtype = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}[fmt]
    scale = qp._choose_scale_float8(x, _blocks(x, granularity), dtype)
    ref = qp._dequantize_affine_float8(qp._quantize_affine_float8(x, scale, dtype), scale)
    assert torch.equal(fake_quantize(x, fmt, granularity=granularity), ref)


@pytest.mark.parametrize("granularity", ["tensor", "row", "block"])
def test_int8_matches_torchao(x, granularity) -> None:
    qp, _, _ = _torchao()
    bs = _blocks(x, granularity)
    scale, zp = qp.choose_qparams_affine(x, qp.MappingType.SYMMETRIC, bs, torch.int8,
                                         quant_min=-127, quant_max=127)
    q = qp.quantize_affine(x, bs, scale, zp, torch.int8, quant_min=-127, quant_max=127)
    ref = qp.dequantize_affine(q, bs, scale, zp, torch.int8, quant_min=-127, quant_max=127)
    assert torch.equal(fake_quantize(x, "int8", granularity=granularity), ref)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mxfp4_matches_torchao(x, dtype) -> None:
    _, mx, _ = _torchao()
    xd = x.to(dtype)
    scale, data = mx.to_mx(xd, torch.float4_e2m1fn_x2, 32)
    ref = mx.to_dtype(data, scale, torch.float4_e2m1fn_x2, 32, torch.float32)
    assert torch.equal(fake_quantize(xd, "mxfp4"), ref)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_nvfp4_matches_torchao(x, dtype) -> None:
    _, _, nv = _torchao()
    xd = x.to(dtype)
    pts = nv.per_tensor_amax_to_scale(xd.abs().amax())
    ref = nv.NVFP4Tensor.to_nvfp4(xd, per_tensor_scale=pts).dequantize(torch.float32)
    assert torch.equal(fake_quantize(xd, "nvfp4"), ref)


def test_nvfp4_3d_matches_torchao(x) -> None:
    _, _, nv = _torchao()
    x3 = x.reshape(4, 16, 256)
    pts = nv.per_tensor_amax_to_scale(x3.abs().amax())
    ref = nv.NVFP4Tensor.to_nvfp4(x3, per_tensor_scale=pts).dequantize(torch.float32)
    assert torch.equal(fake_quantize(x3, "nvfp4"), ref)


# ------------------------------------------------------------------ without torchao
def test_contraction_dim_is_a_transpose(x) -> None:
    for fmt in ["fp8_e4m3", "int8", "mxfp4", "nvfp4"]:
        g = "row" if fmt in ("fp8_e4m3", "int8") else None
        a = fake_quantize(x.T, fmt, granularity=g, dim=0)
        assert torch.equal(a, fake_quantize(x, fmt, granularity=g).T)


def test_block_padding_equals_padded_quantization(x) -> None:
    y = x[:, :250]  # 250 = 15 NVFP4 blocks + 10, 7 MXFP4 blocks + 26
    for fmt in ["mxfp4", "nvfp4"]:
        padded = torch.nn.functional.pad(y, (0, 6))
        assert torch.equal(fake_quantize(y, fmt), fake_quantize(padded, fmt)[:, :250])


def test_values_lie_on_the_format_grid(x) -> None:
    q = fake_quantize(x, "int8", granularity="row")
    scale = x.abs().amax(dim=1, keepdim=True) / 127
    steps = q / scale
    assert torch.allclose(steps, steps.round(), atol=1e-4) and steps.abs().max() <= 127.0001
    m = fake_quantize(x, "mxfp4").reshape(64, 8, 32)
    blocks = x.reshape(64, 8, 32)
    scale = torch.exp2(torch.floor(torch.log2(blocks.abs().amax(-1, keepdim=True))) - 2)
    grid = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
    assert torch.isin((m / scale).abs(), grid).all()


def test_rms_errors_order(x) -> None:
    g = torch.randn(256, 1024, generator=torch.Generator().manual_seed(1))
    rms = {f: float((fake_quantize(g, f) - g).norm() / g.norm())
           for f in ["fp8_e4m3", "fp8_e5m2", "int8", "mxfp4", "nvfp4"]}
    # N(0,1): int8 per tensor ~0.011, e4m3 ~0.026, e5m2 ~0.053, NVFP4 < MXFP4 (finer scales)
    assert rms["int8"] < rms["fp8_e4m3"] < rms["fp8_e5m2"] < rms["nvfp4"] < rms["mxfp4"]
    assert rms["nvfp4"] == pytest.approx(0.095, abs=0.01)
    assert rms["mxfp4"] == pytest.approx(0.115, abs=0.01)


def test_tie_rules() -> None:
    # E2M1 midpoints: 0.25 0.75 1.25 1.75 2.5 3.5 5
    mids = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    v = torch.cat([mids, -mids])
    even = torch.tensor([0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0])
    away = torch.tensor([0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
    zero = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0])
    for ties, want in [("even", even), ("away", away), ("zero", zero)]:
        assert torch.equal(_round_e2m1(v, ties), torch.cat([want, -want])), ties
        # a second, independent implementation: the generic floating-point grid rounding
        assert torch.equal(_round_float(v, 1, 0, 6.0, ties), torch.cat([want, -want])), ties
    # int8: 2.5 steps → 2 (even), 3 (away), 2 (zero)
    t = torch.tensor([127.0, 2.5, -2.5, 0.5])  # amax 127 → scale 1
    assert fake_quantize(t, "int8").tolist() == [127, 2, -2, 0]
    assert fake_quantize(t, "int8", ties="away").tolist() == [127, 3, -3, 1]
    assert fake_quantize(t, "int8", ties="zero").tolist() == [127, 2, -2, 0]
    # fp8 e4m3: between 1 and 1.125 the tie 1.0625 → 1 (even), 1.125 (away)
    f = torch.tensor([448.0, 1.0625, 1.1875])  # amax 448 → scale 1
    assert fake_quantize(f, "fp8_e4m3").tolist() == [448.0, 1.0, 1.25]
    assert fake_quantize(f, "fp8_e4m3", ties="away").tolist() == [448.0, 1.125, 1.25]
    assert fake_quantize(f, "fp8_e4m3", ties="zero").tolist() == [448.0, 1.0, 1.125]


def test_generic_fp8_rounding_equals_the_torch_cast(x) -> None:
    v = (x / x.abs().max() * 448).clamp(-448, 448)
    assert torch.equal(_round_float(v, 3, -6, 448.0, "even"), v.to(torch.float8_e4m3fn).float())
    v = (x / x.abs().max() * 57344)
    assert torch.equal(_round_float(v, 2, -14, 57344.0, "even"), v.to(torch.float8_e5m2).float())


def test_zeros_are_exact() -> None:
    z = torch.zeros(4, 32)
    for fmt in ["fp8_e4m3", "fp8_e5m2", "int8", "mxfp4", "nvfp4"]:
        assert torch.equal(fake_quantize(z, fmt), z)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"fmt": "fp4"}, "kind"),
    ({"fmt": "int8", "ties": "up"}, "ties"),
    ({"fmt": "int8", "granularity": "channel"}, "granularity"),
    ({"fmt": "nvfp4", "granularity": "row"}, "granularity` of nvfp4"),
    ({"fmt": "mxfp4", "block_size": 16}, "block_size` of mxfp4 is 32"),
    ({"fmt": "fp8_e4m3", "block_size": 0, "granularity": "block"}, "block_size"),
    ({"fmt": "fp8_e4m3", "block_size": 64}, "granularity 'block' only"),
    ({"fmt": "int8", "dim": 2}, "dim"),
])
def test_bad_options(x, kwargs, match) -> None:
    fmt = kwargs.pop("fmt")
    with pytest.raises(InputError, match=match):
        fake_quantize(x, fmt, **kwargs)


def test_bad_tensor() -> None:
    with pytest.raises(InputError, match="floating-point"):
        fake_quantize(torch.arange(4), "int8")


# ------------------------------------------------------------------ in the engine
def _linear_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.Tanh(), torch.nn.Linear(48, 32))


@pytest.mark.parametrize(("kind", "granularity"), [("fp8_e4m3", "row"), ("int8", "tensor"),
                                                   ("mxfp4", None), ("nvfp4", None)])
def test_inputs_target_is_quantized_operands_in_fp32(kind, granularity) -> None:
    from robuststats.engine import NoiseSpec, inject

    model = _linear_model()
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(2))
    spec = NoiseSpec(scale=1.0, kind=kind, target="inputs", ops="linear", granularity=granularity)
    with torch.no_grad(), inject(model, spec, verify="ops") as session:
        got = model(x)
    h = x
    with torch.no_grad():
        for m in model:
            if isinstance(m, torch.nn.Linear):
                h = torch.nn.functional.linear(fake_quantize(h, kind, granularity=granularity),
                                               fake_quantize(m.weight, kind, granularity=granularity),
                                               m.bias)
            else:
                h = m(h)
        assert torch.equal(got, h)
        assert not torch.equal(got, model(x))
    assert session.count(op="linear") == 2
    assert session.stats["rms_noise_ratio"].between(0, 0.3).all()


def test_scale_interpolates_the_operands() -> None:
    from robuststats.engine import NoiseSpec, inject

    lin = torch.nn.Linear(32, 16, bias=False)
    x = torch.randn(4, 32, generator=torch.Generator().manual_seed(3))
    with torch.no_grad(), inject(lin, NoiseSpec(scale=0.5, kind="mxfp4", target="inputs",
                                                ops="linear")):
        got = lin(x)
    half = [t + 0.5 * (fake_quantize(t, "mxfp4") - t) for t in (x, lin.weight.detach())]
    assert torch.allclose(got, half[0] @ half[1].T, rtol=0, atol=1e-6)


def test_weight_only_nvfp4_on_qwen2_equals_quantized_weights(make_qwen, ids) -> None:
    from robuststats.engine import NoiseSpec, inject

    model = make_qwen("sdpa", layers=2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    spec = NoiseSpec(scale=1.0, kind="nvfp4", target="weights", ops="linear",
                     layer_scales={"lm_head": 0})  # QeRL's NVFP4A16 recipe ignores lm_head
    with torch.no_grad(), inject(model, spec) as session:
        got = model(ids).logits
        again = model(ids).logits
    assert torch.equal(got, again)  # deterministic: the same weights on every call
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # untouched
    n_linear = sum(isinstance(m, torch.nn.Linear) for m in model.modules()) - 1  # lm_head off
    assert session.count(op="linear") == 2 * n_linear
    ratio = session.stats.query("layer >= 0")["rms_noise_ratio"]
    assert ratio.between(0.07, 0.13).all()  # NVFP4 on (random-init) weights
    ref = make_qwen("sdpa", layers=2)
    with torch.no_grad():
        for name, m in ref.named_modules():
            if isinstance(m, torch.nn.Linear) and name != "lm_head":
                m.weight.copy_(fake_quantize(m.weight, "nvfp4"))
        assert torch.equal(ref(ids).logits, got)


def test_inputs_target_reaches_attention_products_and_trains(make_qwen, ids) -> None:
    from robuststats.engine import NoiseSpec, inject

    model = make_qwen("sdpa", layers=2).train()
    spec = NoiseSpec(scale=1.0, kind="fp8_e4m3", target="inputs", granularity="row")
    with inject(model, spec) as session:  # matmul_only: linear and both attention products
        loss = model(ids, labels=ids).loss
        loss.backward()
    assert torch.isfinite(loss)
    counts = session.stats.groupby("op")["count"].sum()
    assert counts["attention_scores"] == counts["attention_output"] == 2
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert session.count(phase="backward") == 0  # straight-through: no backward error model


def test_inputs_target_in_bf16_keeps_dtype(make_qwen, ids) -> None:
    from robuststats.engine import NoiseSpec, inject

    model = make_qwen("eager", layers=2).to(torch.bfloat16)
    spec = NoiseSpec(scale=1.0, kind="nvfp4", target="inputs")
    with torch.no_grad(), inject(model, spec):
        out = model(ids).logits
    assert out.dtype == torch.bfloat16 and torch.isfinite(out.float()).all()


def test_operands_are_never_modified() -> None:
    from robuststats.engine import NoiseSpec, inject

    lin = torch.nn.Linear(32, 16)
    x = torch.randn(4, 32, generator=torch.Generator().manual_seed(3))
    x0, w0 = x.clone(), lin.weight.detach().clone()
    for target, kind in [("inputs", "mxfp4"), ("weights", "nvfp4"), ("weights", "relative_gaussian")]:
        spec = NoiseSpec(scale=0.5, kind=kind, target=target, ops="linear")
        with torch.no_grad(), inject(lin, spec):
            lin(x)
        assert torch.equal(x, x0) and torch.equal(lin.weight, w0), (target, kind)
