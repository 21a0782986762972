"""One bound and one message per count, for every command that takes it (issue 23, item 5).

Before: ``study --n-items 99999999`` was refused (`n_items` must be at most 1,000,000) while
``diagnose --n-items 99999999`` started training, ``diagnose --noise-seeds 99999999`` built a
list of 10^8 noise seeds, ``gate CKPT{seed} --seeds 99999999`` hung resolving 10^8
checkpoints, and ``divergence --items`` took any number. Each is now refused before
anything is built, with the study's message.
"""

from __future__ import annotations

import time

import pytest
import yaml

from robuststats.cli import main

STUDY = {"name": "b", "version": 1,
         "task": {"name": "arithmetic", "params": {"seed": 0, "n_items": 8, "n_train": 40}},
         "conditions": {"A": {}}, "evaluation": {"noise_levels": [0, 0.05], "noise_seeds": 1},
         "seeds": 1}


@pytest.fixture
def study(tmp_path):
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump(STUDY))
    return path


def _refused(capsys, argv, message):
    capsys.readouterr()
    start = time.monotonic()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusal
        code = exc.code
    assert code == 2
    assert time.monotonic() - start < 30  # refused, not started
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert message in err, err


@pytest.mark.parametrize("flag,name,bound", [
    ("--n-items", "n_items", "1,000,000"),
    ("--noise-seeds", "noise_seeds", "1,000"),
    ("--seeds", "seeds", "1,000"),
])
def test_study_and_diagnose_refuse_the_same_count_with_the_same_message(
        study, tmp_path, capsys, flag, name, bound):
    message = f"`{name}` must be at most {bound}, got 99999999."
    _refused(capsys, ["study", str(study), flag, "99999999", "--check"], message)
    _refused(capsys, ["diagnose", str(study), flag, "99999999", "--out", str(tmp_path / "r"),
                      "--runs", str(tmp_path / "runs"), "--no-progress"], message)
    assert not (tmp_path / "runs").exists()


def test_divergence_refuses_more_items_than_a_study_may_have(study, tmp_path, capsys):
    _refused(capsys, ["divergence", str(study), "--items", "99999999", "--candidate", "fp16",
                      "--out", str(tmp_path / "d"), "--runs", str(tmp_path / "runs"),
                      "--no-progress"], "`--items` must be at most 1,000,000, got 99999999.")
    assert not (tmp_path / "runs").exists()


def test_gate_refuses_more_seeds_than_a_study_may_have(tmp_path, capsys):
    _refused(capsys, ["gate", str(tmp_path / "ck{seed}"), "--baseline", str(tmp_path / "v1"),
                      "--max-degradation", "0.1", "--seeds", "99999999"],
             "seeds` must be at most 1,000, got 99999999.")
    many = ",".join(str(s) for s in range(1001))
    _refused(capsys, ["gate", str(tmp_path / "ck{seed}"), "--baseline", str(tmp_path / "v1"),
                      "--max-degradation", "0.1", "--seeds", many],
             "seeds` must list at most 1,000 seeds, got 1,001.")
    _refused(capsys, ["gate", str(tmp_path / "ck{seed}"), "--baseline", str(tmp_path / "v1"),
                      "--max-degradation", "0.1", "--seeds", "0,99999999999"],
             "seeds` must be an integer in [0, 4294967295], got 99999999999.")


def test_every_command_bounds_its_workers_alike(study, tmp_path, capsys):
    for argv in (["study", str(study)], ["diagnose", str(study)],
                 ["gate", "x", "--baseline", "y", "--max-degradation", "0.1"],
                 ["search", str(study)]):
        _refused(capsys, [*argv, "--workers", "257"],
                 "argument --workers: must be at most 256, got '257'")
