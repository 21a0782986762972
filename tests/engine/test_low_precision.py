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
        assert float((q - y).abs().max()) <= value


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
