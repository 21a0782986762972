"""Env-var sessions, nesting, threads and gradient checkpointing."""

from __future__ import annotations

import json
import threading

import pytest
import torch

from robuststats.engine import (
    ENV_VAR,
    NoiseSpec,
    apply_from_env,
    inject,
    spec_from_env,
    stop_from_env,
)
from robuststats.errors import InputError


def test_env_inline_json_and_path(make_qwen, ids, tmp_path) -> None:
    model = make_qwen()
    clean = model(ids).logits
    env = {ENV_VAR: json.dumps({"scale": 0.05, "ops": ["linear"], "seed": 2})}
    session = apply_from_env(model, environ=env)
    assert session is not None
    noisy = model(ids).logits
    assert stop_from_env(model) is session
    assert session.count(op="linear") == 22 and not torch.equal(clean, noisy)
    assert torch.equal(model(ids).logits, clean)
    path = tmp_path / "noise.yaml"
    path.write_text("scale: 0.05\nops: [linear]\nseed: 2\n")
    apply_from_env(model, environ={ENV_VAR: str(path)})
    again = model(ids).logits
    stop_from_env(model)
    assert torch.equal(again, noisy)  # same spec, same seed → same noise


def test_env_unset_and_errors(make_qwen, monkeypatch) -> None:
    model = make_qwen()
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert apply_from_env(model) is None and stop_from_env(model) is None
    with pytest.raises(InputError, match=rf"`{ENV_VAR}` holds invalid JSON"):
        spec_from_env({ENV_VAR: "{scale: 1"})
    with pytest.raises(InputError, match=rf"`{ENV_VAR}`: `scale` must be a non-negative"):
        spec_from_env({ENV_VAR: '{"scale": -1}'})
    with pytest.raises(InputError, match="does not exist"):
        spec_from_env({ENV_VAR: "/nonexistent/noise.yaml"})


def test_nested_inner_replaces_outer_and_outer_resumes(make_qwen, ids) -> None:
    model = make_qwen()
    with inject(model, NoiseSpec(scale=0.05, ops=["linear"], seed=1)) as outer:
        model(ids)
        with inject(model, NoiseSpec(scale=0.05, ops=["softmax"], layers=[0])) as inner:
            model(ids)
        model(ids)
        assert model.config._attn_implementation == "sdpa"  # inner's attention switch undone
    assert outer.count(op="linear") == 2 * 22 and outer.count(op="softmax") == 0
    assert inner.count(op="softmax") == 1 and inner.count(op="linear") == 0
    assert "forward" not in model.lm_head.__dict__


def test_session_is_per_thread(make_qwen, ids) -> None:
    model = make_qwen()
    clean = model(ids).logits
    results: dict[str, torch.Tensor] = {}
    ready, done = threading.Event(), threading.Event()

    def other() -> None:
        ready.wait()
        results["other"] = model(ids).logits  # no session in this thread
        done.set()

    t = threading.Thread(target=other)
    t.start()
    with inject(model, NoiseSpec(scale=0.05, ops=["linear"])) as s:
        ready.set()
        done.wait(timeout=60)
        results["main"] = model(ids).logits
    t.join()
    assert torch.equal(results["other"], clean)
    assert not torch.equal(results["main"], clean)
    assert s.count(op="linear") == 22


def test_two_threads_two_sessions(make_qwen, ids) -> None:
    model = make_qwen()
    out: dict[int, torch.Tensor] = {}
    barrier = threading.Barrier(2)

    def worker(seed: int) -> None:
        with inject(model, NoiseSpec(scale=0.05, ops=["linear"], seed=seed)):
            barrier.wait()
            out[seed] = model(ids).logits
            barrier.wait()

    threads = [threading.Thread(target=worker, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with inject(model, NoiseSpec(scale=0.05, ops=["linear"], seed=1)):
        solo = model(ids).logits
    assert torch.equal(out[1], solo)  # the other thread's session did not interfere
    assert "forward" not in model.lm_head.__dict__


@pytest.mark.parametrize("generator", ["mt", "philox"])
@pytest.mark.parametrize("phases", ["forward", "both"])
def test_gradient_checkpointing_replays_forward_noise(make_qwen, ids, phases, generator) -> None:
    model = make_qwen()
    model.train()
    spec = NoiseSpec(scale=0.05, ops="all_ops", phases=phases, seed=3, generator=generator)

    def grads(checkpointing: bool):
        model.zero_grad()
        if checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_disable()
        with inject(model, spec) as s:
            model(ids, labels=ids).loss.backward()
        return [p.grad.clone() for p in model.parameters()], s

    with pytest.warns(FutureWarning):  # transformers 5 renamed the switch
        g1, s1 = grads(True)
        g0, s0 = grads(False)
    assert all(torch.equal(a, b) for a, b in zip(g0, g1))  # same noise in the recompute
    assert s0.stats.equals(s1.stats)  # recomputed forwards are not counted twice
    assert s1.unreplayed == 0
