"""Real ``robuststats study`` processes with a worker pool, stopped by signals.

After SIGKILL, SIGTERM or Ctrl-C (SIGINT to the whole process group, as a terminal sends
it) on the parent, no worker and no resource tracker may outlive it by more than a few
seconds; SIGTERM and SIGINT stop the run promptly; a rerun resumes without losing or
repeating a cell. While a run holds its run directory, a second run is refused with the
holder's PID; after the holder is killed, its lock blocks no one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from proctable import alive as _alive
from proctable import children as _children
from study_doubles import fake_study

from robuststats.cli import main

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
N_CELLS = 2 * 2 * (1 + 2)  # conditions × seeds × (clean + 2 levels × 1 noise seed)

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                                reason="reads the process table from /proc")


def _wait_until(predicate, timeout: float, step: float = 0.05) -> float | None:
    """Seconds until ``predicate()`` held, or None after ``timeout``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate():
            return time.monotonic() - start
        time.sleep(step)
    return None


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), env.get("PYTHONPATH", "")])
    return env


def _argv(study: Path, tmp_path: Path, workers: int) -> list[str]:
    return ["study", str(study), "--out", str(tmp_path / "results"), "--runs",
            str(tmp_path / "runs"), "--workers", str(workers), "--no-progress"]


def _done_cells(tmp_path: Path) -> set[str]:
    return {p.stem for p in (tmp_path / "runs" / "fake" / "cells").glob("*.parquet")}


@pytest.mark.parametrize("how", [
    "SIGKILL",
    # SIGTERM and SIGINT take the path of tests/study/test_executor.py's interrupt test
    # (fast), here through a real command line and a whole process group
    pytest.param("SIGTERM", marks=pytest.mark.slow),
    pytest.param("SIGINT", marks=pytest.mark.slow)])
def test_workers_die_with_the_parent_and_the_rerun_resumes(how: str, tmp_path: Path,
                                                           monkeypatch, capsys) -> None:
    study = tmp_path / "fake.yaml"
    study.write_text(yaml.safe_dump(fake_study(delay=0.4, n=20, noise_seeds=1)))
    # a session of its own: SIGINT to its process group is what Ctrl-C in a terminal sends
    proc = subprocess.Popen([sys.executable, "-m", "robuststats", *_argv(study, tmp_path, 2)],
                            env=_env(), cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True,
                            # as from a terminal: a runner started in the background (`cmd &`
                            # in a script) inherits SIGINT ignored, which the study honours
                            preexec_fn=_default_sigint)
    try:
        # both workers busy (each has written a cell) and cells still to come
        assert _wait_until(lambda: len(_done_cells(tmp_path)) >= 4, 120) is not None, \
            proc.communicate(timeout=5)
        children = _children(proc.pid)
        assert len(children) >= 2  # two pool workers (and the resource tracker)

        if how == "SIGKILL":
            # the live holder of the run directory refuses a second run, naming its PID
            monkeypatch.chdir(tmp_path)
            monkeypatch.syspath_prepend(str(HERE))
            capsys.readouterr()
            assert main(_argv(study, tmp_path, 1)) == 2
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1
            assert f"is in use by process {proc.pid}, running since" in err

        at_signal = _done_cells(tmp_path)
        sent = time.monotonic()
        if how == "SIGINT":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            os.kill(proc.pid, getattr(signal, how))
        proc.wait(timeout=30)
        stopped = time.monotonic() - sent
        gone = _wait_until(lambda: not any(_alive(c) for c in children), 10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    after = _done_cells(tmp_path)
    print(f"{how}: parent exited after {stopped:.2f} s, children gone after "
          f"{gone if gone is None else round(gone, 2)} s more; cells {len(at_signal)} at the "
          f"signal, {len(after)} after")
    assert gone is not None, f"children still alive: {[c for c in children if _alive(c)]}"
    if how == "SIGKILL":
        assert proc.returncode == -signal.SIGKILL
    else:
        assert proc.returncode == 128 + getattr(signal, how)
        err = proc.stderr.read().decode()
        assert "interrupted by " + how in err and "rerun the same command to resume" in err
        assert "Traceback" not in err
        # prompt: within 2 s on an idle machine; the bound leaves room for a loaded CI box
        assert stopped < 6.0
        # no new work started after the signal: at most the two cells in flight finished
        assert len(after - at_signal) <= 2
    assert 4 <= len(after) < N_CELLS, "the signal came too late to test resuming"

    # the rerun is not blocked by the dead run's lock, and resumes
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(HERE))
    me = os.getpid()
    assert main(_argv(study, tmp_path, 1)) == 0
    events = [json.loads(line) for line in
              (tmp_path / "runs" / "fake" / "events.jsonl").read_text().splitlines()]
    done_now = [e["cell"] for e in events if e["event"] == "cell_done" and e["pid"] == me]
    assert not set(done_now) & after  # nothing finished before is repeated
    assert len(done_now) == len(set(done_now)) == N_CELLS - len(after)  # nothing lost
    manifest = json.loads((tmp_path / "results" / "fake" / "v1" / "manifest.json").read_text())
    assert (manifest["cells_reused"], manifest["cells_run"], manifest["cells_finished"]) == (
        len(after), N_CELLS - len(after), N_CELLS)
    assert len(manifest["cells"]) == N_CELLS
