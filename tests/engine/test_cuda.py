"""The engine on a CUDA device (skipped without one; ``benchmarks/gpu.sh`` runs it).

What differs on a GPU: each noise stream is one Philox generator on the device instead of
the CPU's chunked Mersenne Twisters, the number formats run as CUDA kernels, attention can
take flash/efficient sdpa kernels, and autograd may recompute checkpointed layers on its
device threads. Each test checks the device result against the CPU rule it must follow.
"""

from __future__ import annotations

import pytest
import torch

from robuststats.engine import NoiseSpec, inject
from robuststats.engine._quantize import fake_quantize
from tests.engine.conftest import set_checkpointing

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
DEV = torch.device("cuda")


def _qwen(attn: str = "sdpa", layers: int = 2, dtype: torch.dtype = torch.float32):
    from tests.engine.conftest import tiny_qwen2

    return tiny_qwen2(attn, layers=layers).to(DEV, dtype)


@pytest.fixture
def ids() -> torch.Tensor:
    return torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(1)).to(DEV)


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2", "int8", "mxfp4", "nvfp4"])
@pytest.mark.parametrize("kind", ["finite", "nan", "inf"])
def test_formats_on_cuda_equal_the_cpu(fmt, kind) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 256, generator=g) * torch.exp(2 * torch.randn(16, 1, generator=g))
    x[3, :32] *= 2.0 ** -128  # a subnormal block
    if kind != "finite":
        x[5, 7] = float(kind)
    gran = "row" if fmt in ("fp8_e4m3", "fp8_e5m2", "int8") else None
    cpu = fake_quantize(x, fmt, granularity=gran)
    gpu = fake_quantize(x.to(DEV), fmt, granularity=gran).cpu()
    assert torch.equal(cpu.isnan(), gpu.isnan())
    keep = ~cpu.isnan()
    assert torch.equal(cpu[keep].view(torch.int32), gpu[keep].view(torch.int32))


def test_same_seed_same_noise_and_scale_zero_is_clean(ids) -> None:
    model = _qwen()
    with torch.no_grad():
        clean = model(ids).logits
        with inject(model, NoiseSpec(scale=0.0)):
            zero = model(ids).logits
        runs = []
        for _ in range(2):
            with inject(model, NoiseSpec(scale=0.05, seed=4)) as s:
                runs.append(model(ids).logits)
    assert torch.equal(zero, clean)
    assert torch.equal(runs[0], runs[1]) and not torch.equal(runs[0], clean)
    # matmul_only: 7 linears a layer + lm_head, both attention products per layer
    assert s.count(op="linear") == 15 and s.count(op="attention_scores") == 2


def test_relative_noise_has_the_requested_rms_on_cuda(ids) -> None:
    model = _qwen()
    with torch.no_grad(), inject(model, NoiseSpec(scale=0.05, ops=["linear"])) as s:
        model(ids)
    ratio = s.stats.query("op == 'linear'")["rms_noise_ratio"]
    assert ratio.between(0.04, 0.06).all()


@pytest.mark.parametrize("ops", [["attention_scores"], ["softmax"], ["attention_output"]])
def test_attention_noise_on_cuda(ops, ids) -> None:
    model = _qwen("sdpa")
    with torch.no_grad():
        clean = model(ids).logits
        with inject(model, NoiseSpec(scale=0.05, ops=ops)) as s:
            noisy = model(ids).logits
    assert torch.isfinite(noisy).all() and not torch.equal(noisy, clean)
    assert s.count(op=ops[0]) == 2


def test_backward_noise_and_checkpoint_replay_on_cuda(ids) -> None:
    model = _qwen("eager").train()
    spec = NoiseSpec(scale=0.05, phases="both", seed=3)
    other = torch.randint(0, 64, ids.shape, generator=torch.Generator().manual_seed(2)).to(DEV)

    def grads(checkpointing: bool) -> list[torch.Tensor]:
        set_checkpointing(model, checkpointing)
        with inject(model, spec) as s:
            (model(ids, labels=ids).loss + model(other, labels=other).loss).backward()
        assert s.unreplayed == 0 and s.count(phase="backward") > 0
        return [p.grad.clone() for p in model.parameters() if p.grad is not None]

    plain, ckpt = grads(False), grads(True)
    for a, b in zip(plain, ckpt):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("kind", ["nvfp4", "mxfp4"])
def test_input_quantization_in_bf16_on_cuda(kind, ids) -> None:
    model = _qwen("sdpa", dtype=torch.bfloat16)
    with torch.no_grad():
        clean = model(ids).logits
        with inject(model, NoiseSpec(scale=1.0, kind=kind, target="inputs")) as s:
            out = model(ids).logits
    assert out.dtype == torch.bfloat16 and torch.isfinite(out.float()).all()
    assert not torch.equal(out, clean) and s.count(op="linear") == 15


def test_nan_stays_in_its_row_on_cuda() -> None:
    lin = torch.nn.Linear(64, 32).to(DEV)
    x = torch.randn(300, 64, device=DEV)
    bad = x.clone()
    bad[7, 3] = float("nan")
    outs = []
    for inp in (x, bad):
        with torch.no_grad(), inject(lin, NoiseSpec(scale=0.05, ops="linear", seed=1)):
            outs.append(lin(inp))
    rows = torch.arange(300, device=DEV) != 7
    assert outs[1][7].isnan().all() and torch.equal(outs[0][rows], outs[1][rows])
