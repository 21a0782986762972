"""The ``grpo`` study trainer (issue 35, item 3): parameters, noise proof, determinism per
seed and resumption, on a tiny model with a handful of steps. Skipped without TRL."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("trl")
torch = pytest.importorskip("torch")

from robuststats.errors import InputError  # noqa: E402
from robuststats.models.tasks import get_task  # noqa: E402
from robuststats.models.trainer import TrainingCondition, get_trainer  # noqa: E402

TINY = {"warmup_steps": 20, "warmup_batch_size": 16, "steps": 4, "group_size": 2,
        "prompts_per_step": 2, "max_new_tokens": 8, "save_steps": 2,
        "model": {"hidden_size": 32, "intermediate_size": 64}}
E8B = TrainingCondition("E8b", noise={"scale": 0.05, "phases": "both", "seed": 1})


def _task():
    return get_task("arithmetic", n_items=20, n_train=64)


def test_parameters_are_validated_by_name():
    with pytest.raises(InputError, match=r"`during`.*'rolout'.*did you mean 'rollout'"):
        get_trainer("grpo", during=["rolout"])
    with pytest.raises(InputError, match="`group_size`"):
        get_trainer("grpo", group_size=1)
    with pytest.raises(InputError, match=r"unknown parameter 'beat' .*did you mean 'beta'"):
        get_trainer("grpo", beat=0.1)
    with pytest.raises(InputError, match="`beta` must be a number ≥ 0"):
        get_trainer("grpo", beta=-1)


def test_grpo_trains_under_update_noise_with_proof_and_leaves_global_rngs(tmp_path):
    torch_state, py_state = torch.random.get_rng_state(), random.getstate()
    trained = get_trainer("grpo", **TINY).train(_task(), E8B, seed=0, workdir=tmp_path / "w")
    assert torch.equal(torch.random.get_rng_state(), torch_state)
    assert random.getstate() == py_state
    info = trained.info
    assert len(info["reward_curve"]) == 4
    assert info["lm_head_excluded"] is True
    assert info["noise_during"] == ["update"]
    stats = info["injection_stats"]
    assert stats["update/linear/forward"] > 0 and stats["update/linear/backward"] > 0
    assert not any(k.startswith(("rollout/", "logprob/")) for k in stats)
    assert "forward" not in vars(trained.model)  # TRL's fused head is not kept
    out = trained.model(torch.tensor([[3, 4, 5]])).logits
    assert torch.isfinite(out).all()


@pytest.mark.slow
def test_same_seed_same_weights_and_a_resumed_run_matches(tmp_path):
    trainer = get_trainer("grpo", **TINY)
    whole = trainer.train(_task(), E8B, seed=1, workdir=tmp_path / "whole")

    def stop_after_3(step, steps):
        if step == 3:
            raise KeyboardInterrupt  # a killed job, after checkpoint-2 was written

    with pytest.raises(KeyboardInterrupt):
        trainer.train(_task(), E8B, seed=1, workdir=tmp_path / "cut", progress=stop_after_3)
    resumed = trainer.train(_task(), E8B, seed=1, workdir=tmp_path / "cut")
    assert resumed.info["resumed_from"].endswith("checkpoint-2")
    for k, v in whole.model.state_dict().items():
        assert torch.equal(v, resumed.model.state_dict()[k]), k
    # the resumed proof carries the counts of the first two steps
    assert resumed.info["injection_stats"] == whole.info["injection_stats"]
