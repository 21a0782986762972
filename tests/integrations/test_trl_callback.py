"""Noise-aware training in Hugging Face trainers (issue 35, items 1 and 2): the
``NoiseCallback`` in a real ``transformers.Trainer`` and TRL's ``GRPOTrainer`` on a tiny
Qwen2, on the CPU. Skipped without TRL (``pip install robuststats[trl]``)."""

from __future__ import annotations

import json

import pytest

trl = pytest.importorskip("trl")
torch = pytest.importorskip("torch")

from transformers import Trainer, TrainerCallback  # noqa: E402
from trl_helpers import (  # noqa: E402
    grpo_args,
    lm_dataset,
    prompt_dataset,
    saved_tiny,
    tiny,
    trainer_args,
)

from robuststats.errors import InputError  # noqa: E402
from robuststats.integrations.transformers import (  # noqa: E402
    NoiseCallback,
    NoiseProofError,
    add_noise,
    read_noise_proof,
    verify_noise_proof,
)

BOTH = {"scale": 0.05, "phases": "both", "seed": 3}
# TRL's GRPOTrainer computes the LM head's log-probabilities in its own chunked autograd
# function (add_fused_lm_head), which the engine cannot reach: switched off explicitly
GRPO_SPEC = {**BOTH, "layer_scales": {"lm_head": 0}}


def _train(tmp_path, name, spec=BOTH, *, stop_at=None, resume=None, **arg_changes):
    model, tok = tiny()
    data = lm_dataset(tok)
    args = trainer_args(tmp_path / name, eval_strategy="steps", eval_steps=2,
                        per_device_eval_batch_size=8, **arg_changes)
    trainer = Trainer(model=model, args=args, train_dataset=data, eval_dataset=data.select(range(16)))
    callback = add_noise(trainer, spec) if spec is not None else None
    if stop_at is not None:
        trainer.add_callback(_StopAt(stop_at))
    trainer.train(resume_from_checkpoint=resume)
    return trainer, callback


class _StopAt(TrainerCallback):
    def __init__(self, step):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= self.step:
            control.should_training_stop = True


def test_update_noise_is_counted_logged_and_proved_and_evaluation_stays_clean(tmp_path):
    trainer, _ = _train(tmp_path, "run")
    out = tmp_path / "run"
    proof = verify_noise_proof(out)
    for phase in ("forward", "backward"):
        assert proof.counts[("update", "linear", phase)] > 0
    assert {part for part, _, _ in proof.counts} == {"update"}
    ckpt = verify_noise_proof(out / "checkpoint-2")
    assert 0 < ckpt.total("update") < proof.total("update")
    record = json.loads((out / "noise-proof.rank0.json").read_text())
    # 4 optimizer steps of 2 micro-batches each: one update session per step
    assert record["parts"]["update"]["segments"] == 4
    assert record["parts"]["update"]["forward_calls"] == 8
    logged = [h for h in trainer.state.log_history if "loss" in h]
    assert [h["noise/update/injections"] for h in logged] == sorted(
        h["noise/update/injections"] for h in logged)
    assert logged[-1]["noise/update/injections"] == proof.total("update")
    # the evaluation inside training ran clean: its loss equals a clean evaluation of the
    # checkpoint's weights
    eval_at_2 = next(h["eval_loss"] for h in trainer.state.log_history
                     if "eval_loss" in h and h["step"] == 2)
    from transformers import AutoModelForCausalLM

    _, tok = tiny()
    clean = Trainer(model=AutoModelForCausalLM.from_pretrained(out / "checkpoint-2"),
                    args=trainer_args(tmp_path / "clean_eval", per_device_eval_batch_size=8))
    assert clean.evaluate(lm_dataset(tok).select(range(16)))["eval_loss"] == eval_at_2


def test_noise_changes_training_and_a_seed_reproduces_it(tmp_path):
    noisy, _ = _train(tmp_path, "a")
    again, _ = _train(tmp_path, "b")
    clean, _ = _train(tmp_path, "c", spec=None)
    w = {k: v for k, v in noisy.model.state_dict().items()}
    assert all(torch.equal(w[k], v) for k, v in again.model.state_dict().items())
    assert not all(torch.equal(w[k], v) for k, v in clean.model.state_dict().items())


def test_resumed_run_equals_uninterrupted_run_bit_for_bit(tmp_path):
    whole, _ = _train(tmp_path, "whole", gradient_accumulation_steps=2)
    _train(tmp_path, "cut", stop_at=2)
    resumed, _ = _train(tmp_path, "cut", resume=str(tmp_path / "cut" / "checkpoint-2"))
    for k, v in whole.model.state_dict().items():
        assert torch.equal(v, resumed.model.state_dict()[k]), k
    full = read_noise_proof(tmp_path / "whole")
    cont = read_noise_proof(tmp_path / "cut")
    assert full.counts == cont.counts
    assert json.loads((tmp_path / "cut" / "noise-proof.rank0.json").read_text())[
        "resumed_from_step"] == 2


def test_parts_are_named_and_evaluation_needs_a_bound_trainer(tmp_path):
    with pytest.raises(InputError, match=r"`during`.*'rolout'.*did you mean 'rollout'"):
        NoiseCallback(BOTH, during=["rolout"])
    model, tok = tiny()
    trainer = Trainer(model=model, args=trainer_args(tmp_path / "x", max_steps=1),
                      train_dataset=lm_dataset(tok),
                      callbacks=[NoiseCallback(BOTH, during=["update", "evaluation"])])
    with pytest.raises(InputError, match="bind the callback"):
        trainer.train()


def test_evaluation_gets_noise_only_when_asked(tmp_path):
    model, tok = tiny()
    data = lm_dataset(tok).select(range(16))
    trainer = Trainer(model=model, args=trainer_args(tmp_path / "e", per_device_eval_batch_size=8))
    clean = trainer.evaluate(data)["eval_loss"]
    add_noise(trainer, {"scale": 0.05, "seed": 1}, during=["evaluation"])
    noisy = trainer.evaluate(data)["eval_loss"]
    assert noisy != clean
    assert trainer.callback_handler.callbacks[0].record(0)["parts"]["evaluation"]["counts"]


def test_aqn_restores_norm_weights_before_the_optimizer_step(tmp_path):
    # lr 0: the optimizer changes nothing, so any trace of AQN in the weights is a leak
    model, tok = tiny()
    data = lm_dataset(tok)
    trainer = Trainer(model=model, args=trainer_args(tmp_path / "aqn2", learning_rate=0.0),
                      train_dataset=data)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    callback = add_noise(trainer, BOTH, aqn={"sigma_start": 0.05, "sigma_end": 0.01,
                                             "num_stages": 3})
    trainer.train()
    assert callback.aqn.total_steps == 4
    assert any(h.get("noise/aqn_sigma", 0) > 0 for h in trainer.state.log_history)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_bf16_training_injects_and_verifies(tmp_path):
    _train(tmp_path, "bf16", bf16=True)
    proof = verify_noise_proof(tmp_path / "bf16")
    assert proof.counts[("update", "linear", "backward")] > 0


def test_a_model_the_engine_cannot_reach_fails_loudly(tmp_path):
    class Opaque(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(300, 16)
            self.attn = torch.nn.MultiheadAttention(16, 2, batch_first=True)
            self.out = torch.nn.Linear(16, 300)

        def forward(self, input_ids, labels=None):
            h = self.emb(input_ids)
            h = self.attn(h, h, h, need_weights=False)[0]
            logits = self.out(h)
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(),
                                                     ignore_index=-100)
            return {"loss": loss, "logits": logits}

    _, tok = tiny()
    trainer = Trainer(model=Opaque(), args=trainer_args(tmp_path / "o", max_steps=1),
                      train_dataset=lm_dataset(tok))
    add_noise(trainer, BOTH)
    with pytest.raises(InputError, match="MultiheadAttention at module 'attn'"):
        trainer.train()


# ------------------------------------------------------------------ GRPO


def _grpo(tmp_path, name, during, *, reward=None, spec=GRPO_SPEC, bind=True, **changes):
    from trl import GRPOTrainer

    base = tmp_path / "base"
    if not base.exists():
        saved_tiny(base)
    data, items = prompt_dataset()
    from trl_helpers import task

    t = task()
    seen: list[list[str]] = []

    def exact(completions, item, **kwargs):
        seen.append(list(completions))
        return [float(t.score(items[i], c)) for i, c in zip(item, completions)]

    from transformers import AutoTokenizer

    callbacks = [] if bind or during is None else [NoiseCallback(spec, during=during)]
    trainer = GRPOTrainer(model=str(base), reward_funcs=[reward or exact],
                          args=grpo_args(tmp_path / name, **changes), train_dataset=data,
                          processing_class=AutoTokenizer.from_pretrained(base),
                          callbacks=callbacks)
    if bind and during is not None:
        add_noise(trainer, spec, during=during)
    # the first logits of the first rollout (TRL's log-probability passes never call the
    # LM head's forward: they use its weight in a fused kernel)
    first: list = []
    trainer.model.lm_head.register_forward_hook(
        lambda m, a, out: first.append(out.detach().clone()) if not first else None)
    trainer.first_rollout_logits = first
    return trainer, seen


def test_grpo_rollout_stays_clean_unless_named_and_parts_are_counted(tmp_path):
    clean, clean_seen = _grpo(tmp_path, "clean", None)
    clean.train()
    update, update_seen = _grpo(tmp_path, "update", ["update"])
    update.train()
    proof = verify_noise_proof(tmp_path / "update")
    assert {p for p, _, _ in proof.counts} == {"update"}
    assert proof.counts[("update", "linear", "backward")] > 0
    # the first rollout comes before any update: with a clean rollout it is the clean run's
    assert update_seen[0] == clean_seen[0]
    assert torch.equal(update.first_rollout_logits[0], clean.first_rollout_logits[0])
    every, _ = _grpo(tmp_path, "every", ["rollout", "logprob", "update"])
    every.train()
    proof = verify_noise_proof(tmp_path / "every")
    for part in ("rollout", "logprob", "update"):
        assert proof.total(part) > 0, part
    assert proof.counts.get(("rollout", "linear", "backward"), 0) == 0
    assert not torch.equal(every.first_rollout_logits[0], clean.first_rollout_logits[0])
    logged = every.state.log_history[0]
    assert logged["noise/rollout/injections"] > 0 and logged["noise/logprob/injections"] > 0
    # a proof that is asked for a part the run never noised fails
    with pytest.raises(NoiseProofError, match="part 'evaluation' never ran"):
        verify_noise_proof(tmp_path / "update", during=["update", "evaluation"])
    with pytest.raises(NoiseProofError, match=r"part 'rollout' got \d+ injections"):
        verify_noise_proof(tmp_path / "every", during=["update", "logprob"])


def test_unbound_callback_refuses_grpo_sampling(tmp_path):
    trainer, _ = _grpo(tmp_path, "unbound", ["update"], bind=False)
    with pytest.raises(InputError, match="forward without gradients ran inside a training step"):
        trainer.train()


def test_a_raising_reward_function_leaves_no_noise_installed(tmp_path):
    def broken(completions, **kwargs):
        raise ValueError("reward server down")

    trainer, _ = _grpo(tmp_path, "broken", ["rollout", "update"], reward=broken)
    with pytest.raises(ValueError, match="reward server down"):
        trainer.train()
    model = trainer.model
    linear = model.model.layers[0].mlp.down_proj
    assert "forward" not in vars(linear)
    assert model.config._attn_implementation == "sdpa"
    assert not model._forward_pre_hooks or all(
        "robuststats" not in getattr(h, "__module__", "") for h in model._forward_pre_hooks.values())


def test_empty_completions_train_and_verify(tmp_path):
    from transformers import AutoTokenizer

    base = saved_tiny(tmp_path / "base")
    tok = AutoTokenizer.from_pretrained(base)
    only_eos = [i for i in range(len(tok)) if i != tok.eos_token_id]
    trainer, seen = _grpo(tmp_path, "empty", ["update"],
                          generation_kwargs={"suppress_tokens": only_eos})
    trainer.train()
    assert all(c == "" for batch in seen for c in batch)
    verify_noise_proof(tmp_path / "empty")


@pytest.mark.slow
def test_two_processes_each_inject_and_prove(tmp_path):
    """Two ranks under torch's launcher (what ``accelerate launch`` runs for several
    processes; on one CPU machine accelerate itself needs mpirun), DDP with gloo."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).parent
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(here.parents[1]), str(here)])}
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                    "--master_port", "29547", str(here / "ddp_worker.py"), str(tmp_path / "ddp")],
                   env=env, check=True, timeout=600)
    for where in (tmp_path / "ddp", tmp_path / "ddp" / "checkpoint-2"):
        proof = verify_noise_proof(where, world_size=2)
        assert sorted(r["rank"] for r in proof.records) == [0, 1]
        assert all(r["parts"]["update"]["forward_calls"] > 0 for r in proof.records)


@pytest.mark.slow
def test_a_compiled_model_injects_and_trains_as_the_plain_one(tmp_path):
    runs = {}
    for name, options in (("plain", {}),
                          ("compiled", {"torch_compile": True, "torch_compile_backend": "eager"})):
        model, tok = tiny()
        trainer = Trainer(model=model, args=trainer_args(tmp_path / name, max_steps=2, **options),
                          train_dataset=lm_dataset(tok))
        add_noise(trainer, BOTH)
        trainer.train()
        runs[name] = (verify_noise_proof(tmp_path / name).counts, trainer.model.state_dict())
    assert type(trainer.model_wrapped).__name__ == "OptimizedModule"
    assert runs["plain"][0] == runs["compiled"][0]
    for k, v in runs["plain"][1].items():
        assert torch.equal(v, runs["compiled"][1][k]), k
