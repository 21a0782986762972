"""Convolutions are matrix products (issue 9, item 7's rule: a preset reaches every product).

A convolution multiplies its weight with the input's patches (im2col), so ``nn.Conv1d`` /
``2d`` / ``3d`` (and transposed ones) are product modules: ``linear`` ops under every preset,
with output noise, backward noise on ``grad_input`` and ``grad_weight``, and input
quantization along their contraction dimensions. transformers' Mamba-family mixers (Jamba,
Bamba, GraniteMoeHybrid, LFM2) do not call their ``conv1d`` module but pass its weight to
``causal_conv1d_fn``; those products are booked under the convolution's name as well.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from robuststats.engine import InjectionVerificationError, NoiseSpec, fake_quantize, inject
from robuststats.errors import InputError


def cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, groups=2),
        nn.Flatten(), nn.Linear(8 * 6 * 6, 4),
    )


@pytest.fixture
def images() -> torch.Tensor:
    return torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))


def test_matmul_only_reaches_every_convolution(images) -> None:
    model = cnn()
    clean = model(images)
    with torch.no_grad(), inject(model, NoiseSpec(scale=0.05, seed=3)) as s:
        noisy = model(images)
    # two convolutions and one linear, one layer each (the root is an nn.Sequential)
    assert s.count(op="linear") == 3 and set(s.stats["layer"]) == {0, 2, 4}
    assert s.stats["rms_noise_ratio"].between(0.03, 0.07).all(), s.stats
    assert not torch.allclose(noisy, clean)


def test_convolution_output_noise_is_relative(images) -> None:
    conv = nn.Conv1d(4, 6, 3)
    x = torch.randn(2, 4, 64, generator=torch.Generator().manual_seed(2))
    y = conv(x).detach()
    with torch.no_grad(), inject(conv, NoiseSpec(scale=0.1, ops="linear", seed=1)) as s:
        noisy = conv(x)
    rel = (noisy - y) / y
    assert abs(rel.std().item() - 0.1) < 0.01 and abs(rel.mean().item()) < 0.01
    assert s.count(op="linear") == 1


def test_convolution_gets_backward_noise_on_input_and_weight(images) -> None:
    model = cnn()
    model(images).square().sum().backward()
    clean = [p.grad.clone() for p in model[0].parameters()]
    model.zero_grad()
    with inject(model, NoiseSpec(scale=0.05, phases="backward", seed=2)) as s:
        model(images).square().sum().backward()
    # grad_input and grad_weight of each of the 3 products (the first conv's grad_input
    # is not needed: the images do not require grad)
    assert s.count(op="linear", phase="backward") == 5
    w = model[0].weight.grad
    rel = ((w - clean[0]).norm() / clean[0].norm()).item()
    assert 0.01 < rel < 0.3  # errors of 5 % on the products the gradient passed through


def test_a_multiplier_of_zero_switches_a_convolution_off(images) -> None:
    model = cnn()
    clean = model[0](images)
    spec = NoiseSpec(scale=0.05, layer_scales={"0": 0.0})
    with torch.no_grad(), inject(model, spec) as s:
        assert torch.equal(model[0](images), clean)
        model(images)
    assert s.count(op="linear") == 2 and 0 not in set(s.stats["layer"])


@pytest.mark.parametrize(("kind", "granularity"), [("fp8_e4m3", "row"), ("nvfp4", None)])
def test_inputs_target_quantizes_a_convolution_along_its_contraction(kind, granularity) -> None:
    torch.manual_seed(0)
    conv = nn.Conv1d(32, 16, 3, padding=1)
    x = torch.randn(2, 32, 10, generator=torch.Generator().manual_seed(4))
    spec = NoiseSpec(scale=1.0, kind=kind, target="inputs", ops="linear", granularity=granularity)
    with torch.no_grad(), inject(conv, spec) as s:
        got = conv(x)
    w = conv.weight.detach()
    # activations: scales along the channels; weights: along (in_channels, kernel) flattened
    qx = fake_quantize(x, kind, granularity=granularity, dim=1)
    qw = fake_quantize(w.reshape(16, -1), kind, granularity=granularity).reshape(w.shape)
    assert torch.equal(got, F.conv1d(qx, qw, conv.bias.detach(), padding=1))
    assert s.count(op="linear") == 1 and s.stats["rms_noise_ratio"].between(0.01, 0.2).all()


def test_inputs_target_on_gpt2_conv1d_contracts_the_right_dimension() -> None:
    # regression: GPT-2's Conv1D keeps its weight as (in, out) and computes
    # addmm(bias, x, W); input quantization crashed on it (it ran F.linear(x, W)) and
    # weight-only quantization blocked W along its output dimension
    from transformers.pytorch_utils import Conv1D

    torch.manual_seed(0)
    layer = Conv1D(48, 32)  # nf=48 outputs, nx=32 inputs: weight (32, 48)
    x = torch.randn(4, 5, 32, generator=torch.Generator().manual_seed(5))
    w, b = layer.weight.detach(), layer.bias.detach()
    spec = NoiseSpec(scale=1.0, kind="fp8_e4m3", target="inputs", ops="linear", granularity="row")
    with torch.no_grad(), inject(layer, spec):
        got = layer(x)
    qx = fake_quantize(x.reshape(-1, 32), "fp8_e4m3", granularity="row")
    qw = fake_quantize(w, "fp8_e4m3", granularity="row", dim=-2)
    assert torch.equal(got, torch.addmm(b, qx, qw).reshape(4, 5, 48))
    with torch.no_grad(), inject(layer, NoiseSpec(scale=1.0, kind="nvfp4", target="weights",
                                                  ops="linear")):
        got = layer(x)
    qw = fake_quantize(w, "nvfp4", dim=-2)
    assert torch.equal(got, torch.addmm(b, x.reshape(-1, 32), qw).reshape(4, 5, 48))


def test_operand_targets_on_an_unknown_product_are_refused() -> None:
    class Bil(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(4, 4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.einsum("bi,ij->bj", x, self.w)

    model = Bil()
    with pytest.raises(InputError, match=r"cannot act on the operands of einsum in module ''"):
        with torch.no_grad(), inject(model, NoiseSpec(scale=1.0, kind="int8", target="inputs",
                                                      ops="linear")):
            model(torch.randn(2, 4))


def jamba() -> nn.Module:
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model(
        "jamba", vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, attn_layer_period=2, attn_layer_offset=1,
        expert_layer_period=2, expert_layer_offset=1, num_experts=2, mamba_d_state=4,
        mamba_dt_rank=4, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AutoModelForCausalLM.from_config(cfg).eval()


def test_mamba_conv_weight_used_by_its_mixer_is_a_linear_op_of_the_conv(ids) -> None:
    pytest.importorskip("transformers")
    model = jamba()
    conv = "model.layers.0.mamba.conv1d"  # its mixer passes conv1d.weight to F.conv1d
    with torch.no_grad(), inject(model, NoiseSpec(scale=0.05, ops="linear")) as on:
        model(ids)
    with torch.no_grad(), inject(model, NoiseSpec(scale=0.05, ops="linear",
                                                  layer_scales={conv: 0.0})) as off:
        model(ids)
    assert on.count(op="linear", layer=0) == off.count(op="linear", layer=0) + 1
    # decoding steps take causal_conv1d_update, another F.conv1d on the same weight
    with torch.no_grad(), inject(model, NoiseSpec(scale=0.05, ops="linear",
                                                  layer_scales={"model.layers.0.mamba.in_proj": 0.0,
                                                                "model.layers.0.mamba.x_proj": 0.0,
                                                                "model.layers.0.mamba.dt_proj": 0.0,
                                                                "model.layers.0.mamba.out_proj": 0.0,
                                                                "model.layers.0.feed_forward": 0.0},
                                                  layers=[0])) as gen:
        model.generate(ids[:1], max_new_tokens=3, do_sample=False)
    assert gen.count(op="linear") == 3  # the prefill and two decoding steps: the conv only


def test_conv_weight_in_an_unseen_kernel_fails_verification(monkeypatch, ids) -> None:
    pytest.importorskip("transformers")
    import sys

    model = jamba()
    module = sys.modules[type(model.model.layers[0].mamba).__module__]

    def kernel(x, weight, bias=None, activation=None, **kw):  # a custom kernel: not a torch call
        with torch._C.DisableTorchFunction():
            out = F.conv1d(x, weight.unsqueeze(1), bias, padding=weight.shape[-1] - 1,
                           groups=x.shape[1])[..., : x.shape[-1]]
        return F.silu(out)

    monkeypatch.setattr(module, "causal_conv1d_fn", kernel)
    with pytest.raises(InjectionVerificationError,
                       match=r"op 'linear' at module 'model.layers.0.mamba.conv1d' \(its weights "
                             r"reached no product"):
        with torch.no_grad(), inject(model, NoiseSpec(scale=0.05, ops="linear")):
            model(ids)
