"""A real ``robuststats study`` process killed with SIGKILL mid-run, then resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from study_doubles import fake_study

from robuststats.cli import main
from robuststats.results import ResultStore, diff_versions

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
N_CELLS = 2 * 2 * (1 + 2 * 2)  # conditions × seeds × (clean + 2 levels × 2 noise seeds)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), env.get("PYTHONPATH", "")])
    return env


def _study(tmp_path: Path) -> Path:
    path = tmp_path / "fake.yaml"
    path.write_text(yaml.safe_dump(fake_study(delay=0.15, n=30)))
    return path


def _run(study: Path, tmp_path: Path, runs: str) -> list[str]:
    return [sys.executable, "-m", "robuststats", "study", str(study), "--out",
            str(tmp_path / "results"), "--runs", str(tmp_path / runs), "--workers", "1",
            "--no-progress"]


@pytest.mark.slow
def test_sigkill_then_resume_matches_uninterrupted_run(tmp_path: Path, monkeypatch) -> None:
    study = _study(tmp_path)
    cells_dir = tmp_path / "killed" / "fake" / "cells"
    proc = subprocess.Popen(_run(study, tmp_path, "killed"), env=_env(), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if cells_dir.is_dir() and len(list(cells_dir.glob("*.parquet"))) >= 6:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    finished_before = {p.stem for p in cells_dir.glob("*.parquet")}
    assert 6 <= len(finished_before) < N_CELLS, "the kill came too late to test resuming"

    # resume in this process (same code path as the command line)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(HERE))
    resumed_pid = os.getpid()
    assert main(_run(study, tmp_path, "killed")[3:]) == 0

    events = [json.loads(line) for line in
              (tmp_path / "killed" / "fake" / "events.jsonl").read_text().splitlines()]
    done_now = [e["cell"] for e in events if e["event"] == "cell_done" and e["pid"] == resumed_pid]
    # finished cells were reused, not repeated; every other cell ran exactly once
    assert not set(done_now) & finished_before
    assert len(done_now) == len(set(done_now)) == N_CELLS - len(finished_before)
    manifest = json.loads((tmp_path / "results" / "fake" / "v1" / "manifest.json").read_text())
    assert (manifest["cells_reused"], manifest["cells_run"]) == (
        len(finished_before), N_CELLS - len(finished_before))

    # an uninterrupted run elsewhere gives the same tables
    assert main(_run(study, tmp_path, "clean")[3:]) == 0
    store = ResultStore(tmp_path / "results")
    v1, v2 = store.get("fake/v1"), store.get("fake/v2")
    assert diff_versions(v1, v2).empty
    a = pd.read_parquet(v1.path / "outcomes.parquet")
    b = pd.read_parquet(v2.path / "outcomes.parquet")
    assert len(a) == N_CELLS * 30
    pd.testing.assert_frame_equal(a, b)
    # and the same injection record: every noisy cell has its counts, killed or not
    ia = pd.read_parquet(v1.path / "injections.parquet")
    ib = pd.read_parquet(v2.path / "injections.parquet")
    pd.testing.assert_frame_equal(ia, ib)
    assert len(ia.groupby(["condition", "seed", "eval_noise", "noise_seed"])) == 2 * 2 * 2 * 2
    assert v1.manifest["cells_without_injection_counts"] == []


@pytest.mark.slow
def test_changed_study_file_is_refused_unless_fresh(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(HERE))
    study = tmp_path / "fake.yaml"
    study.write_text(yaml.safe_dump(fake_study(n=10, noise_seeds=1)))
    args = ["study", str(study), "--workers", "1", "--no-progress"]
    assert main(args) == 0
    study.write_text(yaml.safe_dump(fake_study(n=12, noise_seeds=1)))
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "belongs to a different version of study 'fake'" in err and "--fresh" in err
    assert main([*args, "--fresh"]) == 0
    # so is a different --seeds on the command line (it changes the resolved spec)
    assert main([*args, "--seeds", "1"]) == 2
