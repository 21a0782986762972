"""Storages and trials left behind: stale RUNNING trials are failed and enqueued again once."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from robuststats.errors import InputError
from robuststats.search._storage import (
    check_storage,
    normalise_url,
    open_storage,
    recover_stale,
    stale_reason,
)

optuna = pytest.importorskip("optuna")
S = optuna.trial.TrialState


@pytest.mark.parametrize(("arg", "url"), [
    ("runs/x/search.db", "sqlite:///runs/x/search.db"),
    ("x.sqlite3", "sqlite:///x.sqlite3"),
    ("runs/x.journal", "journal:runs/x.journal"),
    ("j.log", "journal:j.log"),
    ("journal:anything", "journal:anything"),
    ("postgresql://u@h/db", "postgresql://u@h/db"),
])
def test_storage_arguments(arg: str, url: str) -> None:
    assert normalise_url(arg) == url


def test_bad_storage_arguments_name_the_flag(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"--storage 'x\.txt' is neither a URL"):
        normalise_url("x.txt")
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match=r"--storage .*is not a directory"):
        check_storage(f"sqlite:///{tmp_path}/file/s.db")
    with pytest.raises(InputError, match=r"--storage .*is not a valid database URL"):
        check_storage("nosuchdialect+x://::::")


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _study(storage_url: str) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(study_name="s", storage=open_storage(storage_url),
                               direction="maximize")


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_stale_trials_are_failed_and_retried_once(tmp_path: Path, kind: str) -> None:
    url = f"sqlite:///{tmp_path}/s.db" if kind == "sqlite" else f"journal:{tmp_path}/s.journal"
    study = _study(url)
    dist = optuna.distributions.FloatDistribution(0.25, 4.0, log=True)
    host = socket.gethostname()
    # 0: its worker process on this host is gone
    dead = study.ask({"layer_0": dist})
    dead.set_user_attr("baseline", "uniform")
    study._storage.set_trial_system_attr(dead._trial_id, "robuststats:worker",
                                         {"host": host, "pid": _dead_pid(), "start": "1"})
    # 1: a live worker (this process)
    live = study.ask({"layer_0": dist})
    from robuststats.search._storage import worker_identity

    study._storage.set_trial_system_attr(live._trial_id, "robuststats:worker", worker_identity())
    # 2: another host, heartbeat long ago
    remote = study.ask({"layer_0": dist})
    study._storage.set_trial_system_attr(remote._trial_id, "robuststats:worker",
                                         {"host": "elsewhere", "pid": 1})
    study._storage.set_trial_system_attr(remote._trial_id, "robuststats:heartbeat",
                                         time.time() - 3600)
    # 3: finished normally
    done = study.ask({"layer_0": dist})
    study.tell(done, 1.0)

    recovered = recover_stale(study, stale_after=600)
    assert [(r["trial"], r["retry"]) for r in recovered] == [(0, True), (2, True)]
    states = {t.number: t.state for t in study.get_trials()}
    assert states[0] == S.FAIL and states[1] == S.RUNNING and states[2] == S.FAIL
    waiting = study.get_trials(states=(S.WAITING,))
    assert sorted(t.user_attrs["retry_of"] for t in waiting) == [0, 2]
    assert {t.user_attrs["retry_of"]: t.system_attrs["fixed_params"]["layer_0"] for t in waiting} == \
        {0: dead.params["layer_0"], 2: remote.params["layer_0"]}
    assert next(t for t in waiting if t.user_attrs["retry_of"] == 0).user_attrs["baseline"] \
        == "uniform"
    # a second recovery (another resuming process) enqueues nothing more
    assert recover_stale(study, stale_after=600) == []
    assert len(study.get_trials(states=(S.WAITING,))) == 2


def test_interrupted_trials_are_retried(tmp_path: Path) -> None:
    study = _study(f"sqlite:///{tmp_path}/s.db")
    dist = optuna.distributions.FloatDistribution(0.25, 4.0, log=True)
    t = study.ask({"layer_0": dist})
    t.set_user_attr("interrupted", True)
    study.tell(t, state=S.FAIL)
    failed = study.ask({"layer_0": dist})
    study.tell(failed, state=S.FAIL)  # a real failure (an error): not retried
    recovered = recover_stale(study, stale_after=600)
    assert [(r["trial"], r["reason"], r["retry"]) for r in recovered] == \
        [(0, "interrupted", True)]
    assert recover_stale(study, stale_after=600) == []


def test_a_trial_without_a_worker_is_stale_only_after_stale_after(tmp_path: Path) -> None:
    study = _study(f"sqlite:///{tmp_path}/s.db")
    t = study.ask({"x": optuna.distributions.FloatDistribution(0.5, 2.0)})
    frozen = study.get_trials()[t.number]
    assert stale_reason(frozen, stale_after=600) is None
    assert "no heartbeat" in stale_reason(frozen, stale_after=600, now=time.time() + 601)


def test_a_trial_killed_between_its_draws_is_not_run_again(tmp_path: Path) -> None:
    study = _study(f"sqlite:///{tmp_path}/s.db")
    dist = optuna.distributions.FloatDistribution(0.25, 4.0, log=True)
    t = study.ask({"layer_0": dist})  # layer_1 never drawn
    study._storage.set_trial_system_attr(t._trial_id, "robuststats:worker",
                                         {"host": socket.gethostname(), "pid": _dead_pid()})
    recovered = recover_stale(study, stale_after=600, params=["layer_0", "layer_1"])
    assert [(r["trial"], r["retry"]) for r in recovered] == [(0, False)]
    assert study.get_trials()[0].state == S.FAIL
    assert not study.get_trials(states=(S.WAITING,))


def test_a_reused_pid_is_not_the_worker(tmp_path: Path) -> None:
    # the recorded PID runs (it is this process) but started at another time: PID reuse
    import os

    study = _study(f"sqlite:///{tmp_path}/s.db")
    t = study.ask({"x": optuna.distributions.FloatDistribution(0.5, 2.0)})
    study._storage.set_trial_system_attr(t._trial_id, "robuststats:worker",
                                         {"host": socket.gethostname(), "pid": os.getpid(),
                                          "start": "0"})
    frozen = study.get_trials()[0]
    assert "is gone" in stale_reason(frozen, stale_after=600)
