"""``robuststats study FILE --check``: validate everything a run validates, print the plan,
train nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_study_spec import GOOD, ROOT, write

from robuststats.cli import main


@pytest.fixture
def no_run(monkeypatch: pytest.MonkeyPatch) -> None:
    import robuststats.study.runner as runner

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("--check must not run the study")

    monkeypatch.setattr(runner, "run_study", refuse)


def test_check_prints_the_plan_and_runs_nothing(no_run: None, capsys, tmp_path: Path) -> None:
    assert main(["study", str(ROOT / "studies" / "e8_matrix.yaml"), "--seeds", "5", "--check",
                 "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "study e8_matrix: valid; nothing was run (--check)" in out
    assert "100 cells, 20 model(s) to train, 6 hypothesis(es)" in out  # docs/studies.md
    assert not (tmp_path / "runs").exists() and not (tmp_path / "out").exists()


def test_check_json_carries_the_plan(no_run: None, capsys, tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    assert main(["study", str(path), "--dry-run", "--noise-seeds", "2", "--format",
                 "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # 2 conditions × seeds [4, 7, 9] × (clean + 2 noisy levels × 2 noise seeds)
    assert data["cells_planned"] == 2 * 3 * (1 + 2 * 2)
    assert data["models"] == 6 and data["seeds"] == [4, 7, 9]
    assert data["noise_seeds"] == [0, 1] and data["hypotheses"] == ["H1"]
    assert len(data["spec_hash"]) == 64


@pytest.mark.parametrize(("old", "new", "message"), [
    ("params: {seed: 0}", "params: {seed: 0, max_value: 1000000}",
     r"task.params.max_value \(line 5\): `max_value` must be an integer in \[2, 10,000\]"),
    ("params: {seed: 0}", "params: {seed: 0, n_itemz: 3}",
     r"task.params.n_itemz \(line 5\): unknown parameter 'n_itemz' for task 'arithmetic' "
     r"\(did you mean 'n_items'\?\)"),
    ("name: arithmetic", "name: arithmatic",
     r"task.name \(line 4\): unknown task 'arithmatic' \(did you mean 'arithmetic'\?\)"),
    ("conditions:", "trainer:\n  name: builtin\n  params: {steps: 0}\nconditions:",
     r"trainer.params.steps \(line 8\): `steps` must be a positive integer, got 0"),
    ("conditions:", "model: {num_layers: 1000}\nconditions:",
     r"model.num_layers \(line 6\): `model.num_layers` must be at most 256"),
    ("name: arithmetic\n  params: {seed: 0}", "name: gsm8k\n  params: {path: /no/such.jsonl}",
     r"task.params.path \(line 5\): `path`: no such file '/no/such.jsonl'"),
    ("phases: forward}", "phases: forward, layers: '0-3'}",
     r"conditions.B.train_noise.layers \(line 10\): layer 2 does not exist: the model has 2 "
     r"decoder layers \(0-1\)"),
    ("conditions:", "model: {num_layers: 4}\nconditions:",  # 4 layers: 0-3 exist
     None),
    ("phases: forward}", "phases: forward, layer_scales: {9: 2.0}}",
     r"conditions.B.train_noise.layer_scales \(line 10\): layer 9 does not exist"),
])
def test_task_and_trainer_errors_name_the_key_and_line(no_run: None, capsys, tmp_path: Path,
                                                        old: str, new: str,
                                                        message: str | None) -> None:
    text = GOOD.replace(old, new, 1)
    if message is None:  # the same layers in a deeper model are accepted
        text = text.replace("phases: forward}", "phases: forward, layers: '0-3'}")
        assert main(["study", str(write(tmp_path, text)), "--check"]) == 0
        return
    path = write(tmp_path, text)
    assert main(["study", str(path), "--check"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("robuststats study: error: ")
    assert re.search(message, err), err


def test_flag_overrides_are_bounded_and_name_the_flag(no_run: None, capsys,
                                                      tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("seeds: [4, 7, 9]", "seeds: 3"))
    assert main(["study", str(path), "--check", "--seeds", "5000"]) == 2
    assert capsys.readouterr().err == \
        "robuststats study: error: `seeds` must be at most 1,000, got 5000.\n"
    assert main(["study", str(path), "--check", "--seeds", "1000", "--noise-seeds",
                 "1000"]) == 2
    err = capsys.readouterr().err
    # the plan's size comes from the flags: no line of the file is blamed
    assert "study.yaml: seeds: the plan has 4,002,000 cells" in err and "(line" not in err
    with pytest.raises(SystemExit) as exc:
        main(["study", str(path), "--check", "--workers", "100000"])
    assert exc.value.code == 2
    assert capsys.readouterr().err == ("robuststats study: error: argument --workers: must be "
                                       "at most 256, got '100000' (see 'robuststats study "
                                       "--help')\n")
