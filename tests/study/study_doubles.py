"""Test-only task and trainer doubles for the executor (loaded as ``study_doubles:...``).

The fake model's outcome for an item is a deterministic function of (condition, seed,
noise_seed, item_id, noise level), so reruns and resumed runs must reproduce the exact
tables. ``delay`` slows each evaluation down so a test can kill a run mid-way;
``fail`` makes the named cell keys raise; ``crash`` makes training the named
``<condition>__s<seed>`` kill its own process; ``wait_for`` holds a job's training until
another job has begun or a cell has finished (an order of events, not a time).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from robuststats.engine import NoiseSpec
from robuststats.models.trainer import TrainingCondition

#: accuracy when clean, and the drop per unit of inference-noise scale, per condition
SKILL = {"A": (0.80, 2.0), "B": (0.70, 1.0), "E8a": (0.8, 3.0), "E8b": (0.78, 2.0),
         "E8c": (0.78, 1.0), "E8d": (0.8, 3.0)}


@dataclass(frozen=True)
class FakeItem:
    item_id: str
    prompt: str
    answer: str


class FakeTask:
    name = "fake"

    def __init__(self, n: int = 40) -> None:
        self.n = n

    def items(self, split: str) -> list[FakeItem]:
        return [FakeItem(f"q{i:04d}", f"{i} + 1", str(i + 1)) for i in range(self.n)]


def make_task(**params: Any) -> FakeTask:
    return FakeTask(**params)


def _u(*parts: object) -> float:
    h = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:8], "little") / 2**64


class FakeModel:
    def __init__(self, condition: str, seed: int, delay: float, fail: list[str]) -> None:
        self.condition, self.seed, self.delay, self.fail = condition, seed, delay, fail

    def save(self, path: Path) -> None:
        path.mkdir(parents=True)
        (path / "fake.json").write_text(json.dumps(
            {"condition": self.condition, "seed": self.seed, "delay": self.delay,
             "fail": self.fail}))

    def evaluate(self, task: FakeTask, items: list[FakeItem], *, noise: NoiseSpec | None,
                 noise_seed: int, batch_size: int) -> pd.DataFrame:
        assert noise is None or (isinstance(noise, NoiseSpec) and noise.seed == noise_seed)
        level = 0.0 if noise is None else float(noise.scale)
        key = f"{self.condition}__s{self.seed}__n{level:g}__ns{noise_seed}"
        if key in self.fail:
            raise RuntimeError(f"injected failure in {key}")
        time.sleep(self.delay)
        base, drop = SKILL.get(self.condition, (0.75, 1.0))
        p = base - drop * level + 0.01 * self.seed
        correct = [int(_u(self.condition, self.seed, noise_seed if level else 0, it.item_id,
                          level) < p) for it in items]
        df = pd.DataFrame({"item_id": [it.item_id for it in items], "correct": correct})
        # what the engine would report: one "injection" per item and op, none when clean
        df.attrs["injection_stats"] = [] if noise is None else [
            {"layer": 0, "op": op, "phase": "forward", "count": len(items),
             "rms_noise_ratio": level, "target_scale": level} for op in ("linear", "matmul")]
        return df


class FakeTrainer:
    def __init__(self, delay: float = 0.0, fail: list[str] | None = None,
                 model: dict | None = None, crash: list[str] | None = None,
                 wait_for: dict[str, str] | None = None, wait_seconds: float = 60.0) -> None:
        self.delay, self.fail, self.crash = delay, list(fail or []), list(crash or [])
        self.wait_for, self.wait_seconds = dict(wait_for or {}), wait_seconds
        self.root: Path | None = None

    def bind_run(self, root: Path) -> None:
        self.root = Path(root)

    def train(self, task: FakeTask, condition: TrainingCondition, seed: int,
              workdir: Path) -> FakeModel:
        assert isinstance(condition, TrainingCondition)
        job = f"{condition.name}__s{seed}"
        if job in self.crash:  # as the OOM killer ends a process
            os.kill(os.getpid(), signal.SIGKILL)
        if job in self.wait_for:
            self._wait(job, self.wait_for[job])
        return FakeModel(condition.name, seed, self.delay, self.fail)

    def _wait(self, job: str, other: str) -> None:
        """Train ``job`` only once ``other`` has begun (a job key: its progress record in
        the run directory) or finished (a cell key: its cell file); ``never`` waits for
        ever. Past ``wait_seconds`` the training fails: what it waited for never came."""
        from robuststats.runs import RunLedger

        assert self.root is not None
        sign = self.root / ("cells" if "__n" in other else "progress") / (
            other + (".parquet" if "__n" in other else ".json"))
        deadline = time.monotonic() + self.wait_seconds
        while not sign.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{job} waited {self.wait_seconds} s for {other}")
            time.sleep(0.02)
        RunLedger(self.root).log_event({"event": "waited_for", "job": job, "other": other})

    def load(self, path: Path) -> FakeModel:
        d = json.loads((Path(path) / "fake.json").read_text())
        return FakeModel(d["condition"], d["seed"], d["delay"], d["fail"])


def make_trainer(**params: Any) -> FakeTrainer:
    return FakeTrainer(**params)


def fake_study(name: str = "fake", *, conditions: tuple[str, ...] = ("A", "B"), seeds: int = 2,
               delay: float = 0.0, fail: list[str] | None = None, n: int = 40,
               noise_seeds: int = 2) -> dict[str, Any]:
    """A study dict wired to the doubles."""
    return {
        "name": name, "version": 1,
        "task": {"name": "study_doubles:make_task", "params": {"n": n}},
        "trainer": {"name": "study_doubles:make_trainer",
                    "params": {"delay": delay, "fail": fail or []}},
        "conditions": {c: {"train_noise": None} for c in conditions},
        "evaluation": {"noise_levels": [0, 0.05, 0.1], "noise_seeds": noise_seeds},
        "seeds": seeds,
        "hypotheses": [{"id": "H1", "metric": "accuracy", "a": conditions[0],
                        "b": conditions[1], "eval_noise": 0, "relation": "greater",
                        "margin": 0.0},
                       {"id": "H2", "metric": "retention", "a": conditions[0],
                        "b": conditions[1], "eval_noise": 0.1, "relation": "less",
                        "margin": 0.0}],
        "analysis": {"n_resamples": 200, "multiplicity": "holm"},
    }


def crash_if(i: int, crash: int, seconds: float = 0.3) -> int:
    """A pool call that returns ``i`` after ``seconds``, or kills its process when ``i``
    is ``crash`` (a worker ended by the OOM killer)."""
    if i == crash:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(seconds)
    return i
