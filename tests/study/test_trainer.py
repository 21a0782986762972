"""Trainers: determinism by seed, learning, training noise through the engine, save/load."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from robuststats.engine import NoiseSpec
from robuststats.errors import InputError
from robuststats.models.evaluate import evaluate
from robuststats.models.tasks import get_task
from robuststats.models.trainer import (
    CheckpointTrainer,
    TrainedModel,
    TrainingCondition,
    available_trainers,
    get_trainer,
)
from robuststats.models.training import training_noise_seed

TINY = {"hidden_size": 32, "num_layers": 1, "num_heads": 4, "num_kv_heads": 2,
        "intermediate_size": 64}



@pytest.fixture(scope="module")
def small_task():
    # two-step problems on 0..5 (579 distinct): every single step also occurs in training,
    # so held-out problems are solvable by composition
    return get_task("arithmetic", n_items=60, n_train=400, n_steps=2, max_value=5, seed=0)


@pytest.fixture(scope="module")
def learned(small_task):
    trainer = get_trainer("builtin", steps=300, lr=5e-3, batch_size=32, train_eval_items=40)
    return trainer.train(small_task, TrainingCondition("E8a"), seed=0)


def _weights(trained):
    return {k: v.clone() for k, v in trained.model.state_dict().items()}


def test_registry_and_parameter_errors():
    assert {"builtin", "checkpoint"} <= set(available_trainers())
    with pytest.raises(InputError, match=r"unknown trainer 'bultin' \(did you mean 'builtin'\?\)"):
        get_trainer("bultin")
    with pytest.raises(InputError, match=r"unknown parameter 'step' for trainer 'builtin' "
                                         r"\(did you mean 'steps'\?\)"):
        get_trainer("builtin", step=3)
    with pytest.raises(InputError, match=r"`steps` must be a positive integer, got -3\."):
        get_trainer("builtin", steps=-3)
    with pytest.raises(InputError, match=r"`lr` must be a positive number, got 0\."):
        get_trainer("builtin", lr=0)
    with pytest.raises(InputError, match=r"`model.hidden_size` must be a positive integer"):
        get_trainer("builtin", model={"hidden_size": -1})
    with pytest.raises(InputError, match=r"trainer 'checkpoint' needs `path`"):
        get_trainer("checkpoint")


def test_same_seed_same_weights_other_seed_other_weights(small_task):
    trainer = get_trainer("builtin", steps=4, batch_size=8, model=TINY, train_eval_items=0)
    cond = TrainingCondition("E8a")
    a = _weights(trainer.train(small_task, cond, seed=1))
    b = _weights(trainer.train(small_task, cond, seed=1))
    c = _weights(trainer.train(small_task, cond, seed=2))
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_training_learns_well_above_chance(small_task, learned):
    test = small_task.items("test")
    # chance: always answering the most frequent test answer
    chance = Counter(i.answer for i in test).most_common(1)[0][1] / len(test)
    accuracy = evaluate(learned, small_task, test)["correct"].mean()
    assert chance <= 0.2
    assert accuracy >= max(0.5, 3 * chance), (accuracy, chance, learned.info["loss"])
    info = learned.info
    assert info["loss"]["final"] < info["loss"]["initial"] / 3
    assert info["train_accuracy"] >= 0.5
    assert info["steps"] == 300 and info["wall_seconds"] > 0
    assert info["condition"] == "E8a" and info["task"]["name"] == "arithmetic"
    assert "injection_stats" not in info


@pytest.mark.parametrize(
    ("phases", "expected"),
    [("both", {"forward", "backward"}), ("forward", {"forward"}), ("backward", {"backward"})],
)
def test_training_noise_is_injected_in_the_requested_phases(small_task, phases, expected):
    trainer = get_trainer("builtin", steps=3, batch_size=8, model=TINY, train_eval_items=0)
    noise = NoiseSpec(scale=0.05, phases=phases, ops="matmul_only", seed=4)
    info = trainer.train(small_task, TrainingCondition("E8x", noise), seed=0).info
    stats = info["injection_stats"]
    assert set(stats["by_phase"]) == expected
    assert all(count > 0 for count in stats["by_phase"].values())
    assert stats["by_op"]["linear"] > 0
    assert stats["total"] == sum(stats["by_phase"].values())
    # the training seed is mixed into the spec's seed
    assert info["train_noise"]["seed"] == training_noise_seed(4, 0) != 4
    assert info["train_noise"]["phases"] == phases


def test_training_noise_is_reproducible_and_seed_dependent(small_task):
    trainer = get_trainer("builtin", steps=3, batch_size=8, model=TINY, train_eval_items=0)
    cond = TrainingCondition("E8b", NoiseSpec(scale=0.05, phases="both"))
    a = _weights(trainer.train(small_task, cond, seed=0))
    b = _weights(trainer.train(small_task, cond, seed=0))
    clean = _weights(trainer.train(small_task, TrainingCondition("E8a"), seed=0))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], clean[k]) for k in a)
    assert training_noise_seed(0, 1) != training_noise_seed(0, 2)
    assert training_noise_seed(1, 0) != training_noise_seed(0, 1)


def test_aqn_perturbs_norm_weights_on_its_schedule(small_task):
    trainer = get_trainer("builtin", steps=12, batch_size=8, model=TINY, train_eval_items=0)
    aqn = {"sigma_start": 0.05, "sigma_end": 0.005, "num_stages": 3}  # no total_steps
    noise = NoiseSpec(scale=0.05, phases="forward")
    a = trainer.train(small_task, TrainingCondition("E5b", noise, aqn), seed=0)
    b = trainer.train(small_task, TrainingCondition("E5b", noise, aqn), seed=0)
    plain = trainer.train(small_task, TrainingCondition("E8c", noise), seed=0)
    info = a.info["aqn"]
    assert info["schedule"]["total_steps"] == 12 and info["sigma_max"] == pytest.approx(0.05)
    # QeRL schedule: a warm-up stage at sigma 0, then perturbed stages
    assert 0 < info["steps_perturbed"] < 12
    wa, wb, wp = _weights(a), _weights(b), _weights(plain)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert not all(torch.equal(wa[k], wp[k]) for k in wa)
    # a schedule written for another length is stretched to the run
    from robuststats.engine import AQNSchedule

    sched = AQNSchedule(total_steps=116, sigma_start=0.05, sigma_end=0.0005)
    info = trainer.train(small_task, TrainingCondition("E5a", None, sched), seed=0).info["aqn"]
    assert info["schedule"]["total_steps"] == 12 and info["requested"]["total_steps"] == 116
    with pytest.raises(InputError, match=r"AQN schedule: unknown key 'sigma' "
                                         r"\(did you mean 'sigma_end'\?\)"):
        trainer.train(small_task, TrainingCondition("E5x", None, {"sigma": 0.1}), seed=0)


def test_trained_model_save_load_and_checkpoint_trainer(tmp_path, small_task, learned):
    path = learned.save(tmp_path / "ckpt" / "E8a" / "seed0")
    assert (path / "training_info.json").is_file()
    assert not list(path.parent.glob(".*tmp*"))  # staging directory renamed away
    loaded = TrainedModel.load(path)
    assert loaded.info["loss"] == learned.info["loss"]
    x = torch.tensor([learned.tokenizer(small_task.items("test")[0].prompt)["input_ids"]])
    with torch.no_grad():
        assert torch.equal(loaded.model(x).logits, learned.model(x).logits)
    with pytest.raises(InputError, match=r"`path` must be a new or empty directory"):
        learned.save(path)

    trainer = get_trainer("checkpoint", path=str(tmp_path / "ckpt" / "{condition}" / "seed{seed}"))
    assert isinstance(trainer, CheckpointTrainer)
    same = trainer.train(small_task, TrainingCondition("E8a"), seed=0)
    assert same.info["trainer"] == "checkpoint" and same.info["checkpoint"] == str(path)
    a = evaluate(same, small_task)
    b = evaluate(learned, small_task)
    assert a["correct"].tolist() == b["correct"].tolist()
    with pytest.raises(InputError, match=r"`path` must be a directory with a saved model"):
        trainer.train(small_task, TrainingCondition("E8b"), seed=0)
    bad = get_trainer("checkpoint", path=str(tmp_path / "{cond}"))
    with pytest.raises(InputError, match=r"may only use \{condition\} and \{seed\}"):
        bad.train(small_task, TrainingCondition("E8a"), seed=0)
