"""Sequential studies that train ahead of their looks (``sequential.run_ahead``): seeds in
the order the looks need, a look analysed once ITS seeds have finished, later seeds
stopped when the study stops (their finished cells kept and reported, never analysed), the
same looks as the barrier path, and a killed run resumed without losing or repeating work.
The order of events is read from the run directory (events, progress records), never from
clocks."""

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
from robuststats.errors import InputError
from robuststats.runs import RunLedger
from robuststats.runs.executor import run_job
from robuststats.runs.spec import StudySpec
from robuststats.study import run_study

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def _study(*, seeds: int = 6, margin: float = 0.10, delay: float = 0.0,
           wait_for: dict[str, str] | None = None, **section) -> dict:
    """Two conditions, two cells per model (clean and 10 % noise), a look after every seed
    from 2. The fake A − B is about 0.10: margin 0.10 runs every look, margin 0 stops at
    look 4 (5 seeds)."""
    d = fake_study(seeds=seeds, delay=delay, n=400, noise_seeds=1)
    d["evaluation"]["noise_levels"] = [0, 0.1]
    d["hypotheses"][0]["margin"] = margin
    if wait_for:
        d["trainer"]["params"]["wait_for"] = wait_for
    d["sequential"] = {"looks": "every", "spending": "obf", "drive": ["H1"], **section}
    return d


def _write(tmp_path: Path, data: dict, name: str = "seq.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _cli(study: Path, tmp_path: Path, *, runs: str = "runs", workers: int = 2) -> list[str]:
    return ["study", str(study), "--out", str(tmp_path / "results"), "--runs",
            str(tmp_path / runs), "--workers", str(workers), "--no-progress"]


def _events(root: Path) -> list[dict]:
    return RunLedger(root).events()


def _looks(version: Path) -> pd.DataFrame:
    return pd.read_csv(version / "sequential_looks.csv")


@pytest.mark.parametrize("value", [-1, "2", True, 1.5, 1001])
def test_bad_run_ahead_is_a_one_line_error(tmp_path: Path, value) -> None:
    with pytest.raises(InputError, match=r"sequential\.run_ahead \(line \d+\)") as err:
        StudySpec.from_file(_write(tmp_path, _study(run_ahead=value)))
    assert "\n" not in str(err.value)


def test_run_ahead_default_comes_from_the_workers() -> None:
    from robuststats.config.sequential import run_ahead_seeds

    seq = StudySpec.from_dict(_study()).sequential
    # the fewest seeds whose jobs fill the workers; one worker never runs ahead
    assert [run_ahead_seeds(seq, workers=w, jobs_per_seed=2) for w in (1, 2, 3, 4, 8)] == \
        [0, 1, 2, 2, 4]
    assert run_ahead_seeds(seq, workers=4, jobs_per_seed=1) == 4
    set_ = StudySpec.from_dict(_study(run_ahead=3)).sequential
    assert run_ahead_seeds(set_, workers=2, jobs_per_seed=2) == 3
    assert run_ahead_seeds(set_, workers=1, jobs_per_seed=2) == 0
    # unset, the key stays out of the resolved spec (older studies keep their hash), and
    # it is a run path, not the plan: a re-analysis compares the plans without it
    assert "run_ahead" not in StudySpec.from_dict(_study()).resolved()["sequential"]
    assert set_.plan() == seq.plan() and set_ != seq


class InlineExecutor:
    """An executor whose stream runs its jobs in this process, one per ``completed`` call:
    the first submitted first, or the last first (later seeds then finish before the
    look's own, so a look analysed before its own seeds' jobs would be seen)."""

    name = "inline"

    def __init__(self, last_first: bool) -> None:
        self.last_first = last_first
        self.streams: list[InlineStream] = []

    def stream(self, ledger, spec, *, progress=None):
        self.streams.append(InlineStream(ledger, spec, self.last_first))
        return self.streams[-1]


class InlineStream:
    def __init__(self, ledger, spec, last_first: bool) -> None:
        self.ledger, self.spec, self.last_first = ledger, spec, last_first
        self.queue: list = []
        self.log: list[tuple[str, object]] = []

    def submit(self, job, cells) -> None:
        self.queue.append((job, cells))
        self.log.append(("submit", job))

    def outstanding(self):
        return {job for job, _ in self.queue}

    def completed(self, timeout):
        job, cells = self.queue.pop(-1 if self.last_first else 0)
        return [(job, run_job(str(self.ledger.root), self.spec, job, cells))]

    def stop(self) -> None:
        self.log.append(("stop", sorted(j.seed for j in self.outstanding())))
        self.queue.clear()


@pytest.mark.parametrize(("last_first", "in_flight", "stopped", "ahead"), [
    (False, [[2, 3], [3, 4], [4, 5], [5, 6]], [5, 5, 6, 6], {}),
    (True, [[], [4], [4, 5], []], [], {5: 4, 6: 4}),
])
def test_a_look_waits_for_its_seeds_only_and_decides_as_the_replay(
        tmp_path: Path, monkeypatch, last_first, in_flight, stopped, ahead) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    from robuststats.study.sequential_run import replay_looks

    spec = StudySpec.from_dict(_study(seeds=8, margin=0.0, run_ahead=2))  # stops at look 4
    executor = InlineExecutor(last_first)
    run = run_study(spec, out=tmp_path / "res", runs=tmp_path / "runs", workers=2,
                    progress=False, executor=executor)
    (stream,) = executor.streams
    submitted = [job for what, job in stream.log if what == "submit"]
    # seed by seed in the order of `seeds`, each job once, at most 2 seeds past a look
    assert [(j.seed, j.condition) for j in submitted] == [
        (s, c) for s in range(7) for c in ("A", "B")]
    looks = [e for e in _events(run.run_dir) if e["event"] == "look_analysed"]
    assert [(e["look"], e["n_seeds"]) for e in looks] == [(1, 2), (2, 3), (3, 4), (4, 5)]
    # a look analysed with its own seeds finished, later ones possibly still running
    assert [e["seeds_in_flight"] for e in looks] == in_flight
    # the stop ended the later seeds' jobs still queued; what they finished is kept in
    # the run directory and reported, never analysed
    assert stream.log[-1] == ("stop", stopped)
    assert run.trained_ahead == ahead
    seq = run.version.manifest["sequential"]
    assert (seq["stopped_at_look"], seq["seeds_used"], seq["run_ahead"]) == (4, 5, 2)
    assert seq.get("trained_ahead") == (
        {"seeds": list(ahead), "cells": sum(ahead.values()), "analysed": False}
        if ahead else None)
    outcomes = pd.read_parquet(run.version.path / "outcomes.parquet")
    assert sorted(outcomes["seed"].unique()) == [0, 1, 2, 3, 4]
    assert run.version.manifest["seeds"] == [0, 1, 2, 3, 4]
    assert run.cells_run == 5 * 4  # the analysed seeds' cells; later ones reported apart
    stored = _looks(run.version.path)
    assert stored["decision"].tolist() == ["CONTINUE"] * 3 + ["VERIFIED"]
    # the looks are the replay's (the barrier path's function) on the version's outcomes
    pd.testing.assert_frame_equal(stored, replay_looks(spec, outcomes), check_dtype=False)


@pytest.mark.slow
def test_with_two_workers_a_later_seed_starts_before_the_look(tmp_path: Path,
                                                             monkeypatch) -> None:
    # A__s2 (in look 2, seeds 0-2) trains only once A__s3 has begun: the study finishes
    # only if seed 3 started before look 2 was analysed; in the barrier path A__s2 waits
    # its 60 s out and fails, and look 2 is STOPPED
    monkeypatch.syspath_prepend(str(HERE))
    ahead = _write(tmp_path, _study(wait_for={"A__s2": "A__s3"}), "ahead.yaml")
    assert main(_cli(ahead, tmp_path)) == 0
    root = tmp_path / "runs" / "fake"
    events = _events(root)
    kinds = [(e["event"], e.get("job") or e.get("look")) for e in events]
    assert kinds.index(("waited_for", "A__s2")) < kinds.index(("look_analysed", 2))
    # the barrier path (one process) makes the same looks from the same outcomes
    barrier = _write(tmp_path, _study(), "barrier.yaml")
    assert main(_cli(barrier, tmp_path, runs="barrier", workers=1)) == 0
    a, b = (tmp_path / "results" / "fake" / v for v in ("v1", "v2"))
    pd.testing.assert_frame_equal(_looks(a), _looks(b))
    assert _looks(a)["n_seeds"].tolist() == [2, 3, 4, 5, 6]
    pd.testing.assert_frame_equal(pd.read_parquet(a / "outcomes.parquet"),
                                  pd.read_parquet(b / "outcomes.parquet"))
    barrier_looks = [e for e in _events(tmp_path / "barrier" / "fake")
                     if e["event"] == "look_analysed"]
    assert all(e["seeds_in_flight"] == [] for e in barrier_looks)


@pytest.mark.slow
def test_the_stop_ends_later_seeds_and_reports_what_they_finished(tmp_path: Path,
                                                                  monkeypatch, capsys
                                                                  ) -> None:
    # the study stops at look 4 (seeds 0-4). A__s4 waits for a cell of seed 5 to finish,
    # so seed 5 has trained ahead; A__s6 never trains (it waits for ever): the stop must
    # end it, not wait for it (waited for, it fails after 60 s and is recorded)
    monkeypatch.syspath_prepend(str(HERE))
    study = _write(tmp_path, _study(seeds=8, margin=0.0, run_ahead=2, wait_for={
        "A__s4": "A__s5__n0__ns0", "A__s6": "never"}))
    assert main(_cli(study, tmp_path)) == 0
    out = capsys.readouterr().out
    root = tmp_path / "runs" / "fake"
    v = tmp_path / "results" / "fake" / "v1"
    manifest = json.loads((v / "manifest.json").read_text())
    seq = manifest["sequential"]
    assert seq["stopped_at_look"] == 4 and seq["seeds_used"] == 5
    ahead = seq["trained_ahead"]
    assert ahead["seeds"][0] == 5 and set(ahead["seeds"]) <= {5, 6} and not ahead["analysed"]
    assert f"trained ahead: seed(s) {', '.join(map(str, ahead['seeds']))}" in out
    assert sorted(pd.read_parquet(v / "outcomes.parquet")["seed"].unique()) == [0, 1, 2, 3, 4]
    assert (root / "cells" / "A__s5__n0__ns0.parquet").exists()
    assert not list((root / "cells").glob("A__s6__*.parquet"))
    assert not (root / "failures").exists() or not list((root / "failures").iterdir())
    assert not any(e["event"] == "cell_failed" for e in _events(root))
    assert _looks(v)["decision"].tolist() == ["CONTINUE"] * 3 + ["VERIFIED"]

    # rerun: the finished looks pass again from the stored outcomes, nothing analysed is
    # evaluated again, and the same looks come out
    first = len(_events(root))
    assert main(_cli(study, tmp_path)) == 0
    again = [e for e in _events(root)[first:] if e["event"] == "cell_done"]
    seeds_run_again = {int(e["cell"].split("__s")[1].split("__")[0]) for e in again}
    done = [e["cell"] for e in _events(root) if e["event"] == "cell_done"]
    assert len(done) == len(set(done))  # no cell written twice
    assert seeds_run_again <= {5, 6, 7}
    pd.testing.assert_frame_equal(_looks(v), _looks(tmp_path / "results" / "fake" / "v2"))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), env.get("PYTHONPATH", "")])
    return env


@pytest.mark.slow
def test_a_killed_run_ahead_study_resumes_without_losing_or_repeating(tmp_path: Path,
                                                                      monkeypatch) -> None:
    study = _write(tmp_path, _study(delay=0.1, run_ahead=2))
    root = tmp_path / "killed" / "fake"
    cmd = [sys.executable, "-m", "robuststats", *_cli(study, tmp_path, runs="killed")]
    proc = subprocess.Popen(cmd, env=_env(), cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    looked = []
    while time.monotonic() < deadline:  # kill after look 2, with later seeds under way
        if (root / "events.jsonl").exists():
            looked = [e for e in _events(root) if e["event"] == "look_analysed"]
            if len(looked) >= 2:
                break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert len(looked) >= 2, "the kill came before look 2"
    before = {p.stem for p in (root / "cells").glob("*.parquet")}
    assert len(before) < 2 * 6 * 2, "the kill came after the last cell"

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(HERE))
    pid = os.getpid()
    assert main(_cli(study, tmp_path, runs="killed")) == 0
    events = _events(root)
    done_now = [e["cell"] for e in events if e["event"] == "cell_done" and e["pid"] != pid
                and e["cell"] not in before]
    every = [e["cell"] for e in events if e["event"] == "cell_done"]
    assert len(every) == len(set(every)) == 2 * 6 * 2  # each cell written once in all
    assert not set(done_now) & before
    trained = [e["job"] for e in events if e["event"] == "model_trained"]
    assert len(trained) == len(set(trained))  # each model trained once in all
    # the same looks as an uninterrupted barrier run
    assert main(_cli(_write(tmp_path, _study(delay=0.1), "clean.yaml"), tmp_path,
                     runs="clean", workers=1)) == 0
    a, b = (tmp_path / "results" / "fake" / v for v in ("v1", "v2"))
    pd.testing.assert_frame_equal(_looks(a), _looks(b))


@pytest.mark.slow
def test_analyze_takes_a_study_that_differs_only_in_run_ahead(tmp_path: Path,
                                                              capsys) -> None:
    # `run_ahead` is how the seeds were run, not the plan: the stored looks replay
    v = ROOT / "results" / "e8_sequential" / "v3"
    data = yaml.safe_load((ROOT / "studies" / "e8_sequential.yaml").read_text())
    data["sequential"]["run_ahead"] = 3
    other = _write(tmp_path, data, "run_ahead.yaml")
    assert main(["analyze", str(v), "--study", str(other), "--out", str(tmp_path / "o"),
                 "--format", "json"]) == 0
    capsys.readouterr()
    from robuststats.study.reanalysis import stored_study
    from robuststats.study.sequential_run import replay_looks

    looks = _looks(tmp_path / "o" / "e8_sequential" / "v1")
    replay = replay_looks(stored_study(v), pd.read_parquet(v / "outcomes.parquet"))
    pd.testing.assert_frame_equal(looks, replay, check_dtype=False)


@pytest.mark.slow
def test_a_worker_that_dies_ahead_costs_only_its_own_job(tmp_path: Path,
                                                         monkeypatch) -> None:
    # B__s3's worker dies while training (as under the OOM killer): the pool breaks, every
    # job it held runs again after the cells it wrote, the dead job alone is failed, and
    # the study stops at the look that needs it (seeds 0-3), as the barrier path does
    monkeypatch.syspath_prepend(str(HERE))
    data = _study(seeds=5, delay=0.05)
    data["trainer"]["params"]["crash"] = ["B__s3"]
    run = run_study(StudySpec.from_dict(data), out=tmp_path / "res", runs=tmp_path / "runs",
                    workers=2, progress=False)
    looks = _looks(run.version.path)
    assert looks["decision"].tolist() == ["CONTINUE", "CONTINUE", "STOPPED"]
    assert "2 cell(s) of this look failed" in looks["reason"].iloc[-1]
    missing = run.analysis.missing
    assert sorted(missing["condition"] + "__s" + missing["seed"].astype(str)) == \
        ["B__s3"] * 2
    assert set(missing["error"]) == {"the worker process died"}
    done = [e["cell"] for e in _events(run.run_dir) if e["event"] == "cell_done"]
    assert len(done) == len(set(done))  # nothing written twice by the reruns
    assert {f"{c}__s{s}__n{n}__ns0" for c in "AB" for s in range(3) for n in ("0", "0.1")} \
        <= set(done)
