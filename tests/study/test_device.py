"""The study's device: a key of the file and a flag (``--device``), part of the run (another
device computes other numbers), ``cpu`` the same run as no key, and a device this machine
lacks refused in one line before any compute. The CUDA path itself runs in
``benchmarks/gpu.sh`` (its dry run exercises the same code on the CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from robuststats.cli import main
from robuststats.errors import InputError
from robuststats.runs.machine import check_torch_device
from robuststats.runs.spec import StudySpec

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "studies" / "e8_smoke.yaml"


def test_cpu_is_the_default_run_and_another_device_another_run():
    spec = StudySpec.from_file(SMOKE)
    assert spec.device is None and "device" not in spec.resolved()
    same = spec.with_overrides(device="cpu")
    assert same.device is None and same.spec_hash() == spec.spec_hash()
    gpu = spec.with_overrides(device="cuda:1")
    assert gpu.device == "cuda:1" and gpu.resolved()["device"] == "cuda:1"
    assert gpu.spec_hash() != spec.spec_hash()


def test_a_bad_device_key_names_its_line(tmp_path):
    text = SMOKE.read_text() + "device: gpu0\n"
    path = tmp_path / "study.yaml"
    path.write_text(text)
    line = len(text.splitlines())
    with pytest.raises(InputError, match=rf"device \(line {line}\): must be cpu, cuda, .*"
                                         r"got 'gpu0'"):
        StudySpec.from_file(path)


def test_check_torch_device_refuses_what_is_missing():
    check_torch_device("cpu", "--device")
    with pytest.raises(InputError, match="`--device` must be cpu, cuda"):
        check_torch_device("tpu", "--device")
    with pytest.raises(InputError, match="needs the torch_npu extension"):
        check_torch_device("npu:0", "--device")
    if not torch.cuda.is_available():
        with pytest.raises(InputError, match=r"`--device`: device 'cuda' is not available"):
            check_torch_device("cuda", "--device")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal of a machine without CUDA")
def test_study_on_a_missing_device_is_refused_before_any_compute(tmp_path, capsys):
    code = main(["study", str(SMOKE), "--device", "cuda", "--out", str(tmp_path / "res"),
                 "--runs", str(tmp_path / "runs"), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "`--device`: device 'cuda' is not available" in err[0]
    assert not (tmp_path / "runs").exists() and not (tmp_path / "res").exists()


def test_builtin_training_on_a_named_device_starts_from_the_same_model():
    from robuststats.models.tasks import get_task
    from robuststats.models.trainer import TrainingCondition, get_trainer

    task = get_task("arithmetic", n_items=8, n_train=32, seed=0)
    trainer = get_trainer("builtin", steps=3, batch_size=8, train_eval_items=0)
    cond = TrainingCondition("plain")
    a = trainer.train(task, cond, seed=0).model
    b = trainer.train(task, cond, seed=0, device="cpu")
    assert b.info["device"] == "cpu"
    for (name, p), q in zip(a.named_parameters(), b.model.parameters(), strict=True):
        assert torch.equal(p, q), name
