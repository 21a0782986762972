"""Relative Gaussian noise on tracked outputs and on gradients in the philox kernel's one
pass (``PhiloxStream.perturbed``, out of place): bitwise the values of the unfused form
(draw, multiply, add; low precision in float32 and rounded once) and the same counts. The
default stream keeps the unfused form for these tensors."""

from __future__ import annotations

import pytest
import torch

from robuststats.engine import NoiseSpec, inject
from robuststats.engine._philox import TILE, PhiloxStream
from robuststats.engine._rng import CHUNK


@pytest.fixture
def threads():
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


def _unfused(stream, y: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The form the fused pass replaces: draws, ``ε·y``, ``torch.add``; for bf16/fp16 in
    float32 from ``y.float()``, rounded once, the realised error measured after rounding."""
    if y.dtype in (torch.bfloat16, torch.float16):
        yf = y.float()
        e = stream.randn(y.shape, torch.float32).mul_(yf)
        out = torch.add(yf, e, alpha=scale).to(y.dtype)
        realised = out.float() - yf
        return out, torch.stack((yf.double().square().sum(), realised.double().square().sum()))
    e = stream.randn(y.shape, y.dtype).mul_(y)
    out = torch.add(y, e, alpha=scale)
    return out, torch.stack((y.double().square().sum(), (scale * e.double()).square().sum()))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(3, 5), (37, 2 * TILE + 3), (2, CHUNK + 11)])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_out_of_place_pass_is_bitwise_the_unfused_form(threads, dtype, shape, layout) -> None:
    y0 = torch.randn(shape, generator=torch.Generator().manual_seed(3)).to(dtype)
    if layout == "transposed":
        y0 = y0.t()  # a gradient or a view autograd hands over need not be contiguous
    keep = y0.clone()
    results = []
    for n in (1, 2):
        threads(n)
        results.append(PhiloxStream(11).perturbed(y0, 0.05))
    assert torch.equal(y0, keep)  # the input is left as it was
    (out, norms), (out2, norms2) = results
    assert torch.equal(out, out2) and torch.equal(norms, norms2)  # any thread count
    ref, ref_norms = _unfused(PhiloxStream(11), y0, 0.05)
    assert out.dtype == dtype and out.shape == y0.shape and torch.equal(out, ref)
    torch.testing.assert_close(norms, ref_norms, rtol=1e-4, atol=0)  # float32 sums
    # the stream moved on as a draw of that size moves it: the next draw is the same
    s1, s2 = PhiloxStream(11), PhiloxStream(11)
    s1.perturbed(y0, 0.05)
    s2.randn(y0.shape, torch.float32)
    assert torch.equal(s1.randn((7,), torch.float32), s2.randn((7,), torch.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("phases", ["forward", "backward", "both"])
@pytest.mark.parametrize("ops", ["matmul_only", "all_ops"])
def test_training_step_is_bitwise_the_unfused_one(make_qwen, ids, monkeypatch, dtype, phases,
                                                  ops) -> None:
    model = make_qwen("sdpa").to(dtype)
    model.train()
    spec = NoiseSpec(scale=0.05, ops=ops, phases=phases, seed=5, generator="philox")

    def step():
        model.zero_grad()
        with inject(model, spec) as s:
            out = model(ids, labels=ids)
            out.loss.backward()
        return out.logits.detach(), [p.grad.clone() for p in model.parameters()], s.stats

    logits, grads, stats = step()
    with monkeypatch.context() as m:
        m.setattr(PhiloxStream, "perturbed", _unfused)
        ref_logits, ref_grads, ref_stats = step()
    assert torch.equal(logits, ref_logits)
    assert all(torch.equal(a, b) for a, b in zip(grads, ref_grads, strict=True))
    assert stats["count"].tolist() == ref_stats["count"].tolist() and stats["count"].sum() > 0
    assert set(stats["phase"]) == ({"forward", "backward"} if phases == "both" else {phases})
    # the norms are summed in another order (per chunk or tile): equal to float rounding
    torch.testing.assert_close(torch.tensor(stats["rms_noise_ratio"].to_numpy()),
                               torch.tensor(ref_stats["rms_noise_ratio"].to_numpy()),
                               rtol=1e-4, atol=0)


def test_straight_through_gradient_of_a_noisy_output() -> None:
    # the noisy output is a constant to autograd: d(sum(w·noisy))/dx is that of the clean op
    lin = torch.nn.Linear(8, 16, bias=False)
    x = torch.randn(4, 8, requires_grad=True)
    w = torch.randn(4, 16)
    with inject(lin, NoiseSpec(scale=0.2, ops="linear", phases="forward", seed=1)):
        noisy = lin(x)
    (noisy * w).sum().backward()
    assert torch.equal(x.grad, w @ lin.weight)
    assert not torch.equal(noisy.detach(), lin(x).detach())


def test_a_partly_overlapping_output_is_refused() -> None:
    # only the exact alias (in place) is safe for the one-pass kernel
    from robuststats.engine._philox import kernel

    y = torch.randn(4 * TILE)
    with pytest.raises(RuntimeError, match="overlaps the input"):
        kernel().perturb_into(y[:-1], y[1:], 5, 0, 0.05)
    ref = y.clone()
    kernel().perturb_into(ref, ref, 5, 0, 0.05)  # in place: allowed
    out = torch.empty_like(y)
    kernel().perturb_into(y, out, 5, 0, 0.05)
    assert torch.equal(out, ref)
