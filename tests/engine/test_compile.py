"""torch.compile'd models inject exactly as eager ones (issue 9, item 12)."""

from __future__ import annotations

import pytest
import torch

from robuststats.engine import NoiseSpec, inject

OPS = ["matmul_only", "all_ops", ["silu"], ["softmax"]]


def _run(model, call, ids, spec, *, backward: bool = False):
    model.zero_grad()
    with inject(model, spec) as s:
        out = call(ids, labels=ids) if backward else call(ids)
        if backward:
            out.loss.backward()
    grads = [p.grad.clone() for p in model.parameters()] if backward else None
    return out.logits.detach(), s, grads


@pytest.mark.parametrize(
    ("backend", "ops"),
    [("eager", ops) for ops in OPS]
    + [pytest.param("aot_eager", ops, marks=pytest.mark.slow) for ops in OPS[1:]]
    + [("aot_eager", OPS[0])],
    ids=str,
)
def test_compiled_model_matches_eager_under_noise(make_qwen, ids, backend, ops) -> None:
    torch._dynamo.reset()
    model = make_qwen()
    compiled = torch.compile(model, backend=backend)
    clean = compiled(ids).logits.detach()  # compiled outside any session
    spec = NoiseSpec(scale=0.05, ops=ops, seed=4)
    ref, s_ref, _ = _run(model, model, ids, spec)
    out, s_out, _ = _run(model, compiled, ids, spec)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)  # same seed → same noise
    assert s_out.stats.equals(s_ref.stats)
    assert not torch.equal(out, clean)
    # the compiled model is clean again after the session, and still compiled
    torch.testing.assert_close(compiled(ids).logits, clean)


@pytest.mark.parametrize("backend", ["eager", pytest.param("aot_eager", marks=pytest.mark.slow)])
def test_compiled_training_step_matches_eager(make_qwen, ids, backend) -> None:
    torch._dynamo.reset()
    model = make_qwen()
    model.train()
    compiled = torch.compile(model, backend=backend)
    compiled(ids, labels=ids).loss.backward()  # compile forward and backward first
    spec = NoiseSpec(scale=0.05, ops="all_ops", phases="both", seed=2)
    ref, s_ref, g_ref = _run(model, model, ids, spec, backward=True)
    out, s_out, g_out = _run(model, compiled, ids, spec, backward=True)
    assert torch.equal(out, ref)
    assert all(torch.equal(a, b) for a, b in zip(g_ref, g_out))
    assert s_out.stats.equals(s_ref.stats)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_functional_ops_of_a_plain_module(tiny_net, backend) -> None:
    # matmul, bmm, softmax and gelu called as functions in each block's forward
    torch._dynamo.reset()
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(0))
    compiled = torch.compile(tiny_net, backend=backend)
    clean = compiled(x)
    spec = NoiseSpec(scale=0.05, ops=["matmul", "bmm", "softmax", "gelu"], seed=6)
    with inject(tiny_net, spec) as s_ref:
        ref = tiny_net(x)
    with inject(tiny_net, spec) as s_out:
        out = compiled(x)
    assert torch.equal(out, ref) and s_out.stats.equals(s_ref.stats)
    assert s_out.count(op="bmm") == 3 and not torch.equal(out, clean)
    torch.testing.assert_close(compiled(x), clean)


def test_inject_into_the_compiled_wrapper(make_qwen, ids) -> None:
    torch._dynamo.reset()
    model = make_qwen()
    compiled = torch.compile(model, backend="eager")
    spec = NoiseSpec(scale=0.05, seed=1)
    with inject(model, spec) as s_ref:
        ref = model(ids).logits
    with inject(compiled, spec) as s_out:  # the OptimizedModule itself
        out = compiled(ids).logits
    assert torch.equal(out, ref)
    assert s_out.count() == s_ref.count() and s_out.count(op="linear") == 22


@pytest.mark.slow
def test_inductor_when_a_compiler_is_available(make_qwen, ids) -> None:
    torch._dynamo.reset()
    model = make_qwen()
    compiled = torch.compile(model, backend="inductor")
    try:
        clean = compiled(ids).logits.detach()
    except Exception as exc:  # no C compiler or toolchain: nothing to test
        pytest.skip(f"inductor cannot compile on this machine: {type(exc).__name__}")
    spec = NoiseSpec(scale=0.05, ops="all_ops", seed=3)
    ref, s_ref, _ = _run(model, model, ids, spec)
    out, s_out, _ = _run(model, compiled, ids, spec)
    assert torch.equal(out, ref) and s_out.stats.equals(s_ref.stats)
    torch.testing.assert_close(compiled(ids).logits, clean)


def test_compiler_stance_restored_after_sessions(make_qwen, ids) -> None:
    from torch._dynamo.eval_frame import _stance

    before = _stance.stance
    model = make_qwen()
    with inject(model, NoiseSpec(scale=0.05, ops=["silu"])):
        from torch._dynamo import eval_frame

        assert eval_frame._stance.stance == "force_eager"
        with inject(model, NoiseSpec(scale=0.05, ops=["linear"])):
            model(ids)
        assert eval_frame._stance.stance == "force_eager"  # the outer session still open
    assert eval_frame._stance.stance == before
