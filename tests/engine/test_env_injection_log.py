"""``ROBUSTSTATS_INJECTION_LOG``: env sessions append their counts as JSON lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from robuststats.engine import ENV_VAR, InjectionVerificationError, apply_from_env, stop_from_env
from robuststats.engine._env import INJECTION_LOG_VAR


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_stop_appends_one_line_per_session(make_qwen, ids, tmp_path) -> None:
    log = tmp_path / "inj.jsonl"
    env = {ENV_VAR: json.dumps({"scale": 0.05, "ops": ["linear"], "seed": 2}),
           INJECTION_LOG_VAR: str(log)}
    model = make_qwen()
    apply_from_env(model, environ=env)
    model(ids)
    session = stop_from_env(model)
    apply_from_env(model, environ=env)
    model(ids)
    model(ids)
    stop_from_env(model)
    first, second = _lines(log)
    assert first["pid"] == os.getpid() and first["event"] == "stop"
    assert first["required_ops"] == ["linear"] and first["forward_calls"] == 1
    assert first["backward_ran"] is False and first["phase_scales"]["forward"] == 0.05
    assert sum(r["count"] for r in first["counts"]) == session.count() == 22
    assert {(r["op"], r["phase"]) for r in first["counts"]} == {("linear", "forward")}
    assert sum(r["count"] for r in second["counts"]) == 44


def test_no_variable_no_file(make_qwen, ids, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(INJECTION_LOG_VAR, raising=False)
    model = make_qwen()
    apply_from_env(model, environ={ENV_VAR: json.dumps({"scale": 0.05, "ops": ["linear"]})})
    model(ids)
    stop_from_env(model)
    assert list(tmp_path.iterdir()) == []


def test_failed_verification_is_logged_too(make_qwen, tmp_path) -> None:
    log = tmp_path / "inj.jsonl"
    model = make_qwen()
    apply_from_env(model, environ={ENV_VAR: json.dumps({"scale": 0.05, "ops": ["gelu"]}),
                                   INJECTION_LOG_VAR: str(log)})
    import torch

    model(torch.zeros(1, 4, dtype=torch.long))
    with pytest.raises(InjectionVerificationError, match="op 'gelu'"):
        stop_from_env(model)
    (line,) = _lines(log)
    assert line["required_ops"] == ["gelu"] and line["counts"] == []


@pytest.mark.slow
def test_open_session_is_logged_at_exit(tmp_path) -> None:
    """A process that never stops its session still leaves its counts (atexit)."""
    log = tmp_path / "inj.jsonl"
    script = textwrap.dedent("""
        import torch
        from transformers import Qwen2Config, Qwen2ForCausalLM
        from robuststats.engine import apply_from_env
        cfg = Qwen2Config(vocab_size=64, hidden_size=16, intermediate_size=32,
                          num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1)
        model = Qwen2ForCausalLM(cfg)
        apply_from_env(model)
        model(torch.zeros(1, 4, dtype=torch.long))
    """)
    env = {**os.environ, ENV_VAR: json.dumps({"scale": 0.05, "ops": ["linear"]}),
           INJECTION_LOG_VAR: str(log)}
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=300)
    (line,) = _lines(log)
    assert line["event"] == "exit" and line["forward_calls"] == 1
    assert sum(r["count"] for r in line["counts"]) == 2 * 7 + 1  # 7 linears a layer + lm_head
