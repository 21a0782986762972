"""Sessions: checkpoint recompute across threads, out-of-order closing, inference mode."""

from __future__ import annotations

import threading

import pytest
import torch

from robuststats.engine import NoiseSpec, apply_from_env, inject, stop_from_env
from robuststats.engine._env import ENV_VAR
from robuststats.errors import InputError


def _env(**spec) -> dict[str, str]:
    import json

    return {ENV_VAR: json.dumps(spec)}


def _patched(model: torch.nn.Module) -> list[str]:
    return [n for n, m in model.named_modules() if "forward" in m.__dict__]


def _checkpointed(model: torch.nn.Module) -> torch.nn.Module:
    model.train()
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    return model


def _grads(model: torch.nn.Module, ids: torch.Tensor) -> list[torch.Tensor]:
    model.zero_grad()
    model(ids, labels=ids).loss.backward()
    return [p.grad.clone() for p in model.parameters()]


# --- issue 9, item 3: checkpoint recompute is per thread ------------------------------------


def test_recompute_in_a_thread_without_session_gets_no_noise(make_qwen, ids) -> None:
    model = _checkpointed(make_qwen())
    clean = _grads(model, ids)
    spec = NoiseSpec(scale=0.05, ops="all_ops", phases="forward", seed=3)
    model.activation_checkpointing_disable()
    with inject(model, spec):
        expected_noisy = _grads(model, ids)  # reference without checkpointing
    _checkpointed(model)

    opened, done = threading.Event(), threading.Event()
    holder: dict[str, object] = {}

    def owner() -> None:  # holds a session while the main thread trains without one
        with inject(model, spec) as s:
            holder["session"] = s
            opened.set()
            done.wait(timeout=120)
            holder["grads"] = _grads(model, ids)

    t = threading.Thread(target=owner)
    t.start()
    assert opened.wait(timeout=120)
    try:
        plain = _grads(model, ids)  # no session in this thread: recompute must be clean
    finally:
        done.set()
        t.join()
    session = holder["session"]
    assert all(torch.equal(a, b) for a, b in zip(plain, clean))
    # the other thread's stream was not drained: its own step replays its noise exactly
    assert all(torch.equal(a, b) for a, b in zip(holder["grads"], expected_noisy))
    assert session.unreplayed == 0  # type: ignore[attr-defined]
    assert session.forward_calls == 1  # type: ignore[attr-defined]


def test_recompute_in_a_session_thread_still_replays(make_qwen, ids) -> None:
    model = make_qwen()
    spec = NoiseSpec(scale=0.05, ops=["linear", "silu"], phases="both", seed=5)
    model.train()
    with inject(model, spec) as s0:
        g0 = _grads(model, ids)
    _checkpointed(model)
    with inject(model, spec) as s1:
        g1 = _grads(model, ids)
    assert all(torch.equal(a, b) for a, b in zip(g0, g1))
    assert s1.unreplayed == 0 and s0.stats.equals(s1.stats)
    assert s1.graph_tasks  # the backward was attributed to the session


# --- issue 9, item 10: sessions closed out of order -----------------------------------------


def test_stop_from_env_on_two_models_out_of_order(make_qwen, ids) -> None:
    m1, m2 = make_qwen(seed=0), make_qwen(seed=1)
    clean1, clean2 = m1(ids).logits, m2(ids).logits
    depth = torch._C._len_torch_function_stack()
    s1 = apply_from_env(m1, environ=_env(scale=0.05, ops=["silu", "linear"], seed=1))
    s2 = apply_from_env(m2, environ=_env(scale=0.05, ops=["silu", "softmax"], seed=2))
    m1(ids)
    noisy2 = m2(ids).logits
    assert stop_from_env(m1) is s1  # the first opened closes first
    assert torch.equal(m1(ids).logits, clean1)
    before = s2.count(op="silu")
    again2 = m2(ids).logits  # m2's session must keep injecting, functional ops included
    assert s2.count(op="silu") == before + 3 and s2.count(op="softmax") == 2 * 3
    assert not torch.equal(again2, noisy2)  # fresh draws on the second call
    assert stop_from_env(m2) is s2
    assert torch._C._len_torch_function_stack() == depth  # no mode left behind
    assert torch.equal(m2(ids).logits, clean2)
    assert _patched(m1) == [] and _patched(m2) == []
    assert m2.config._attn_implementation == "sdpa"


@pytest.mark.parametrize("outer_first", [True, False])
def test_model_and_its_own_submodule_close_in_any_order(make_qwen, ids, outer_first) -> None:
    model = make_qwen()
    base = model.model  # the decoder stack inside the causal-LM wrapper
    clean = model(ids).logits
    clean_hidden = base(ids).last_hidden_state
    ops = ["linear", "softmax"]
    s_outer = apply_from_env(model, environ=_env(scale=0.05, ops=ops, seed=1))
    s_inner = apply_from_env(base, environ=_env(scale=0.05, ops=ops, seed=2))
    first, second = (model, base) if outer_first else (base, model)
    survivor = s_inner if outer_first else s_outer
    stop_from_env(first)
    n_linear = survivor.count(op="linear")
    n_softmax = survivor.count(op="softmax")
    if outer_first:
        hidden = base(ids).last_hidden_state  # the submodule's session still injects
        assert not torch.equal(hidden, clean_hidden)
        assert survivor.count(op="linear") == n_linear + 21  # 7 linears × 3 layers
    else:
        logits = model(ids).logits
        assert not torch.equal(logits, clean)
        assert survivor.count(op="linear") == n_linear + 22  # and lm_head
    assert survivor.count(op="softmax") == n_softmax + 3  # attention switch still on
    assert model.config._attn_implementation != "sdpa"
    stop_from_env(second)
    assert _patched(model) == []  # no stale forward patch
    assert model.config._attn_implementation == "sdpa"
    assert torch.equal(model(ids).logits, clean)
    assert s_outer is not None and s_inner is not None


def test_closing_in_another_thread_is_refused(make_qwen, ids) -> None:
    model = make_qwen()
    injection = inject(model, NoiseSpec(scale=0.05, ops=["silu"]))
    session = injection.__enter__()
    errors: list[BaseException] = []

    def close() -> None:
        try:
            injection.__exit__(None, None, None)
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    t = threading.Thread(target=close)
    t.start()
    t.join()
    assert len(errors) == 1 and isinstance(errors[0], InputError)
    assert "closed in the thread that opened it" in str(errors[0])
    assert session.open
    model(ids)
    injection.__exit__(None, None, None)  # the opening thread closes it
    assert not session.open and session.count(op="silu") == 3
    assert _patched(model) == []


def test_nested_sessions_closed_out_of_order_on_one_model(make_qwen, ids) -> None:
    model = make_qwen()
    clean = model(ids).logits
    depth = torch._C._len_torch_function_stack()
    outer = inject(model, NoiseSpec(scale=0.05, ops=["silu"], seed=1))
    inner = inject(model, NoiseSpec(scale=0.05, ops=["silu"], seed=2))
    s_outer = outer.__enter__()
    s_inner = inner.__enter__()
    outer.__exit__(None, None, None)  # the outer one leaves first
    model(ids)
    assert s_inner.count(op="silu") == 3 and s_outer.count(op="silu") == 0
    inner.__exit__(None, None, None)
    assert torch._C._len_torch_function_stack() == depth
    assert torch.equal(model(ids).logits, clean)


# --- issue 9, item 13: inference mode, then training -----------------------------------------


@pytest.mark.parametrize("ops", [["linear"], "all_ops"])
def test_rollout_in_inference_mode_then_training_step(make_qwen, ids, ops) -> None:
    model = make_qwen()
    model.train()
    spec = NoiseSpec(scale=0.05, ops=ops, phases="both", seed=1)
    with inject(model, spec) as s:
        with torch.inference_mode():
            model(ids)  # rollout
        model(ids, labels=ids).loss.backward()  # training step
        with torch.inference_mode():
            model.generate(ids, max_new_tokens=2, do_sample=False, pad_token_id=0)
        model(ids, labels=ids).loss.backward()
    st = s.stats
    assert (st["count"] > 0).all() and st["rms_noise_ratio"].notna().all()
    assert set(st["phase"]) == {"forward", "backward"}
    assert s.forward_calls >= 5  # rollout, step, generate (≥ 2 calls), step
    assert s.count(op="linear", phase="forward", layer=0) == 7 * s.forward_calls
