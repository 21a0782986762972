"""Numerics: zero and tiny tensors under the fp8 formats, and noise in bf16/fp16 outputs."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from robuststats.engine import NoiseSpec, inject, quantize

FORMATS = ["fp8_e4m3", "fp8_e5m2", "int8", "mxfp4"]


@pytest.mark.parametrize("kind", FORMATS)
@pytest.mark.parametrize("value", [0.0, 1e-39, 1e-30])
def test_formats_keep_zero_and_tiny_tensors_finite(kind, value) -> None:
    # fp8's scale fmax / max|y| overflowed for max|y| below ~1e-36 (448 / tiny = inf; 0·inf = NaN)
    y = torch.full((4, 64), value)
    q = quantize(y, kind)
    assert torch.isfinite(q).all()
    if value == 0.0:
        assert torch.equal(q, y)
    else:
        # at most the value itself (float32's, not Python's 1e-39): MXFP4's smallest E8M0
        # scale 2^-127 flushes a block of float32 subnormals to 0, as torchao's to_mx does
        assert float((q - y).abs().max()) <= y[0, 0].item()


class LoRALinear(nn.Module):
    """``base(x) + B(A(x))`` with ``B`` zero-initialised, as LoRA starts training."""

    def __init__(self, base: nn.Linear, r: int = 4) -> None:
        super().__init__()
        self.base = base
        self.lora_A = nn.Linear(base.in_features, r, bias=False)
        self.lora_B = nn.Linear(r, base.out_features, bias=False)
        nn.init.zeros_(self.lora_B.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.lora_B(self.lora_A(x))


@pytest.mark.parametrize("kind", ["fp8_e4m3", "fp8_e5m2"])
def test_fp8_on_zero_lora_b_is_finite_forward_and_backward(make_qwen, ids, kind) -> None:
    model = make_qwen()
    for layer in model.model.layers:
        layer.self_attn.q_proj = LoRALinear(layer.self_attn.q_proj)
        layer.self_attn.v_proj = LoRALinear(layer.self_attn.v_proj)
    model.train()
    with inject(model, NoiseSpec(scale=1.0, kind=kind, phases="both", ops=["linear"])) as s:
        loss = model(ids, labels=ids).loss
        loss.backward()
    assert torch.isfinite(loss)
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    # B's output is exactly zero, so is the gradient reaching A's output: both stay zero
    assert all(float(layer.self_attn.q_proj.lora_A.weight.grad.abs().max()) == 0.0
               for layer in model.model.layers)
    assert all(float(layer.self_attn.q_proj.lora_B.weight.grad.abs().max()) > 0.0
               for layer in model.model.layers)
    st = s.stats
    assert st["rms_noise_ratio"].between(0.0, 0.2).all(), st  # finite, fp8-sized
    assert s.count(op="linear", phase="backward") > 0


# --- noise on bf16 / fp16 results ------------------------------------------------------


def _lin(dtype: torch.dtype, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(32, 64)).to(dtype)


def _measured_ratio(noisy: torch.Tensor, clean: torch.Tensor) -> float:
    noisy, clean = noisy.detach().float(), clean.detach().float()
    return float((noisy - clean).norm() / clean.norm())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_sub_ulp_bias_rounds_away_and_stats_say_so(dtype) -> None:
    # half an ulp is 2^-9 to 2^-8 of the value in bf16 (8 significant bits), so a relative
    # bias of 0.001 always rounds away; in fp16 (11 bits) half an ulp is 2^-12 to 2^-11 and
    # part of it survives. The stats report what survived, not the requested scale.
    net = _lin(dtype)
    x = torch.randn(16, 32, generator=torch.Generator().manual_seed(0)).to(dtype)
    clean = net(x)
    with torch.no_grad(), inject(net, NoiseSpec(scale=0.001, kind="systematic_bias",
                                                ops=["linear"])) as s:
        noisy = net(x)
    ratio = float(s.stats["rms_noise_ratio"].iloc[0])
    assert s.stats["target_scale"].iloc[0] == 0.001
    assert ratio == pytest.approx(_measured_ratio(noisy, clean), rel=1e-4, abs=1e-9)
    if dtype == torch.bfloat16:
        assert ratio == 0.0 and torch.equal(noisy, clean)
    else:
        assert 0.0 < ratio < 0.002


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("scale", [0.001, 0.05])
def test_realised_gaussian_noise_is_what_stats_report(dtype, scale) -> None:
    net = _lin(dtype)
    x = torch.randn(64, 32, generator=torch.Generator().manual_seed(1)).to(dtype)
    clean = net(x)
    with torch.no_grad(), inject(net, NoiseSpec(scale=scale, ops=["linear"])) as s:
        noisy = net(x)
    assert noisy.dtype == dtype
    ratio = float(s.stats["rms_noise_ratio"].iloc[0])
    assert ratio == pytest.approx(_measured_ratio(noisy, clean), rel=1e-4)
    if scale == 0.05:  # far above an ulp: the requested scale survives
        assert ratio == pytest.approx(0.05, rel=0.1)
    elif dtype == torch.bfloat16:  # mostly below half an ulp: most of it rounds away
        assert ratio < 0.7 * scale


def test_fp16_stats_do_not_overflow() -> None:
    # outputs of 960 on a 256 × 64 result: ‖y‖ ≈ 1.2e5 > 65504, the fp16 maximum
    net = nn.Sequential(nn.Linear(16, 64, bias=False)).half()
    nn.init.constant_(net[0].weight, 1.0)
    x = torch.full((256, 16), 60.0, dtype=torch.float16)
    with torch.no_grad(), inject(net, NoiseSpec(scale=0.05, ops=["linear"])) as s:
        net(x)
    assert float(s.stats["rms_noise_ratio"].iloc[0]) == pytest.approx(0.05, rel=0.05)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_training_step(make_qwen, ids, dtype) -> None:
    model = make_qwen().to(dtype)
    model.train()
    with inject(model, NoiseSpec(scale=0.05, phases="both", ops="all_ops")) as s:
        model(ids, labels=ids).loss.backward()
    assert all(torch.isfinite(p.grad).all() and p.grad.dtype == dtype
               for p in model.parameters() if p.grad is not None)
    st = s.stats
    assert st["rms_noise_ratio"].between(0.02, 0.1).all(), st



@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_forward_noise_is_straight_through(dtype) -> None:
    # the forward error is a constant to autograd: the input gradient is the clean one
    net = _lin(dtype)
    x = torch.randn(8, 32, generator=torch.Generator().manual_seed(2)).to(dtype)
    w = torch.randn(8, 64, generator=torch.Generator().manual_seed(3)).to(dtype)

    def grad_x(noisy: bool) -> torch.Tensor:
        xx = x.clone().requires_grad_(True)
        if noisy:
            with inject(net, NoiseSpec(scale=0.05, kind="systematic_bias", ops=["linear"])):
                out = net(xx)
            assert not torch.equal(out, net(x))
        else:
            out = net(xx)
        (out * w).sum().backward()
        return xx.grad

    assert torch.equal(grad_x(True), grad_x(False))
