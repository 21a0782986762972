"""The Ray executor: the local executor's outcomes, the same ledger, survivable workers."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

ray = pytest.importorskip("ray")

from study_doubles import fake_study  # noqa: E402

from robuststats.cli import main  # noqa: E402
from robuststats.runs.ray_executor import RayExecutor  # noqa: E402
from robuststats.study import RunLedger, StudySpec, plan, run_study  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    """One small local Ray for the module; workers import the doubles from tests/study."""
    path = os.pathsep.join([str(ROOT), str(Path(__file__).parent)])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield
    ray.shutdown()


def _outcomes(run) -> pd.DataFrame:
    return pd.read_parquet(run.version.path / "outcomes.parquet")


@pytest.mark.slow
def test_ray_gives_the_local_executors_outcomes_bit_for_bit(tmp_path: Path) -> None:
    spec = StudySpec.from_dict({**fake_study(), "resources": {"num_cpus": 1}})
    local = run_study(spec, out=tmp_path / "a", runs=tmp_path / "ra", workers=2,
                      progress=False)
    seen: list[int] = []
    remote = run_study(spec, out=tmp_path / "b", runs=tmp_path / "rb",
                       progress=lambda total, initial: seen.append, executor=RayExecutor())
    assert sum(seen) == 20  # the progress bar saw every cell
    assert remote.ok and remote.cells_run == remote.cells_planned == 2 * 2 * 5
    pd.testing.assert_frame_equal(_outcomes(local), _outcomes(remote))
    for name in ("summary", "tests", "hypotheses"):
        pd.testing.assert_frame_equal(pd.read_parquet(local.version.path / f"{name}.parquet"),
                                      pd.read_parquet(remote.version.path / f"{name}.parquet"))
    assert remote.version.manifest["executor"] == "ray"
    pids = {e["pid"] for e in RunLedger(tmp_path / "rb" / "fake").events()
            if e["event"] == "cell_done"}
    assert os.getpid() not in pids  # the cells ran in Ray workers


@pytest.mark.slow
def test_resume_uses_the_same_ledger(tmp_path: Path) -> None:
    failing = StudySpec.from_dict(fake_study(fail=["B__s0__n0.1__ns0"]))
    first = run_study(failing, out=tmp_path / "res", runs=tmp_path / "runs", progress=False,
                      executor=RayExecutor())
    assert not first.ok and first.cells_failed == 1
    assert "injected failure" in (tmp_path / "runs" / "fake" / "failures" /
                                  "B__s0__n0.1__ns0.txt").read_text()
    # rerun into the same run directory: every finished cell is reused, the failed one
    # is retried (and fails again: the failure is part of the spec)
    events_before = len(RunLedger(tmp_path / "runs" / "fake").events())
    again = run_study(failing, out=tmp_path / "res", runs=tmp_path / "runs", progress=False,
                      executor=RayExecutor())
    assert again.cells_reused == again.cells_planned - 1 and again.cells_run == 0
    after = RunLedger(tmp_path / "runs" / "fake").events()[events_before:]
    assert [e["event"] for e in after if e["event"].startswith("cell")] == ["cell_failed"]


@pytest.mark.slow
def test_a_worker_killed_mid_job_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    spec = StudySpec.from_dict(fake_study(delay=0.3, n=10, noise_seeds=1, seeds=1))
    reference = run_study(spec, out=tmp_path / "ref", runs=tmp_path / "rref", workers=1,
                          progress=False)
    runs = tmp_path / "runs"
    events = runs / "fake" / "events.jsonl"
    killed: list[int] = []

    def kill_first_worker() -> None:
        # as soon as a Ray worker has written a cell, kill it with SIGKILL mid-job
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            if events.exists():
                for line in events.read_text().splitlines():
                    e = json.loads(line)
                    if e["event"] == "cell_done" and e["pid"] != os.getpid():
                        os.kill(e["pid"], signal.SIGKILL)
                        killed.append(e["pid"])
                        return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_first_worker)
    killer.start()
    run = run_study(spec, out=tmp_path / "res", runs=runs, progress=False,
                    executor=RayExecutor())
    killer.join()
    assert killed, "no worker was killed"
    assert run.ok and run.cells_failed == 0
    pd.testing.assert_frame_equal(_outcomes(reference), _outcomes(run))
    log = RunLedger(runs / "fake").events()
    done = [e["cell"] for e in log if e["event"] == "cell_done"]
    assert sorted(done) == sorted(c.key for c in plan(spec))  # each cell written once
    resumed = [e for e in log if e["event"] == "job_resumed"]
    assert resumed and resumed[0]["cells_already_written"] >= 1


def test_cli_flags(tmp_path: Path, capsys) -> None:
    study = tmp_path / "s.yaml"
    import yaml

    study.write_text(yaml.safe_dump({**fake_study(seeds=1, noise_seeds=1),
                                     "resources": {"num_cpus": 0.5}}))
    argv = ["study", str(study), "--out", str(tmp_path / "o"), "--runs", str(tmp_path / "r"),
            "--no-progress"]
    assert main([*argv, "--ray-address", "auto"]) == 2
    assert "--ray-address needs --executor ray" in capsys.readouterr().err
    assert main([*argv, "--executor", "ray"]) == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**fake_study(), "resources": {"num_gpu": 1}}))
    assert main(["study", str(bad), "--check"]) == 2
    assert "resources.num_gpu" in capsys.readouterr().err


@pytest.mark.slow
def test_a_sequential_study_runs_ahead_on_ray(tmp_path: Path) -> None:
    # looks after 2, 3 and 4 seeds; A__s2 (look 2) trains only once A__s3 has begun, so
    # the study finishes only if a Ray task of seed 3 started before look 2 was analysed
    from robuststats.study.sequential_run import replay_looks

    data = fake_study(seeds=4, n=400, noise_seeds=1)
    data["evaluation"]["noise_levels"] = [0, 0.1]
    data["hypotheses"][0]["margin"] = 0.10  # undecided: every look runs
    data["trainer"]["params"]["wait_for"] = {"A__s2": "A__s3"}
    data["sequential"] = {"looks": "every", "drive": ["H1"]}
    spec = StudySpec.from_dict({**data, "resources": {"num_cpus": 1}})
    run = run_study(spec, out=tmp_path / "res", runs=tmp_path / "runs", workers=2,
                    progress=False, executor=RayExecutor())
    assert run.ok and run.version.manifest["sequential"]["run_ahead"] == 1
    events = RunLedger(run.run_dir).events()
    kinds = [(e["event"], e.get("job") or e.get("look")) for e in events]
    assert kinds.index(("waited_for", "A__s2")) < kinds.index(("look_analysed", 2))
    outcomes = _outcomes(run)
    assert sorted(outcomes["seed"].unique()) == [0, 1, 2, 3]
    looks = pd.read_csv(run.version.path / "sequential_looks.csv")
    assert looks["n_seeds"].tolist() == [2, 3, 4]
    pd.testing.assert_frame_equal(looks, replay_looks(spec, outcomes), check_dtype=False)
