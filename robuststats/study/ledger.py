"""The run directory: resolved spec, cached models, one file per finished cell, failures.

Layout of ``<runs>/<study name>/``::

    spec.json              resolved spec and its hash (what the run is for)
    cells/<cell key>.parquet   item outcomes of one finished cell (written atomically)
    injections/<cell key>.parquet  the evaluation's injection counts per layer × op × phase
    models/<condition>__s<seed>/   cached trained model (directory renamed into place)
    failures/<cell key>.txt    traceback of a cell that failed in the latest attempt
    events.jsonl           one line per cell finished or failed (who, when, how long)

Every path inside the run directory is built here; the executor and the runner ask the
ledger.

Why it is safe to kill at any moment: a cell file appears only through ``os.replace`` of a
fully written and fsynced temporary file in the same directory, so a cell file either
holds the complete table or does not exist; files that fail validation on reading are
moved to ``corrupt/`` and the cell is run again. A cell's injection file is written (the
same way) before its cell file, so every finished cell evaluated by the builtin evaluator
has one. A model directory appears only through ``os.rename`` of a complete temporary
directory.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from robuststats.errors import InputError
from robuststats.outcomes import CELL_KEY, COLUMNS, DTYPES, empty_outcomes
from robuststats.study.plan import Cell, TrainJob
from robuststats.study.spec import StudySpec

__all__ = ["INJECTION_COLUMNS", "ModelStaging", "RunLedger", "atomic_write_bytes"]

#: the engine's session stats (``NoiseSession.stats``) and their dtypes on disk
_STATS_DTYPES = {"layer": "int64", "op": "object", "phase": "object", "count": "int64",
                 "rms_noise_ratio": "float64", "target_scale": "float64"}
_CELL_KEYS = {c: DTYPES[c] for c in CELL_KEY}
#: columns of the injections table: the cell's keys, then one row per layer × op × phase
INJECTION_COLUMNS = [*_CELL_KEYS, *_STATS_DTYPES]


@dataclass(frozen=True)
class ModelStaging:
    """A private directory where one model is trained and saved before it is published."""

    root: Path

    @property
    def workdir(self) -> Path:
        """Scratch space the trainer may use."""
        return self.root / "work"

    @property
    def model_path(self) -> Path:
        """Where the trained model is saved (``model.save(staging.model_path)``)."""
        return self.root / "model"


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file, or all of the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    # makes the rename itself durable; not supported everywhere, hence best effort
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class RunLedger:
    """The resumable on-disk record of one study run."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.cells_dir = self.root / "cells"
        self.injections_dir = self.root / "injections"
        self.models_dir = self.root / "models"
        self.failures_dir = self.root / "failures"

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(cls, root: str | Path, spec: StudySpec, *, fresh: bool = False) -> RunLedger:
        """Open (or create) the run directory for ``spec``.

        An existing run made from a different resolved spec is refused unless ``fresh``,
        which deletes it (models included) and starts over.
        """
        root = Path(root)
        spec_file = root / "spec.json"
        digest = spec.spec_hash()
        if spec_file.exists():
            try:
                previous = json.loads(spec_file.read_text())
                old = previous["spec_hash"]
            except (OSError, ValueError, KeyError):
                old = None
            if old != digest:
                if not fresh:
                    raise InputError(
                        f"the run directory {str(root)!r} belongs to a different version of "
                        f"study {spec.name!r} (spec hash {str(old)[:12]}, now {digest[:12]}): "
                        "the study file or the command-line overrides changed. Pass --fresh "
                        "to discard that run and start over, or choose another --runs directory."
                    )
                shutil.rmtree(root)
        elif fresh and root.exists():
            shutil.rmtree(root)
        ledger = cls(root)
        for d in (ledger.cells_dir, ledger.injections_dir, ledger.models_dir,
                  ledger.failures_dir):
            d.mkdir(parents=True, exist_ok=True)
        if not spec_file.exists():
            payload = {"spec_hash": digest, "spec": spec.resolved(), "created": _now()}
            atomic_write_bytes(spec_file, json.dumps(payload, indent=2).encode())
        ledger._sweep_temporaries()
        return ledger

    @classmethod
    def existing(cls, root: str | Path) -> RunLedger:
        root = Path(root)
        if not (root / "spec.json").is_file():
            raise InputError(f"{str(root)!r} is not a run directory (no spec.json).")
        return cls(root)

    def spec_dict(self) -> dict[str, Any]:
        return json.loads((self.root / "spec.json").read_text())["spec"]

    def _sweep_temporaries(self) -> None:
        # leftovers of a killed writer: never read as results, safe to remove
        for directory in (self.cells_dir, self.injections_dir, self.failures_dir):
            for tmp in directory.glob(".*.tmp"):
                tmp.unlink(missing_ok=True)
        for tmp in self.models_dir.glob(".tmp-*"):
            shutil.rmtree(tmp, ignore_errors=True)

    # ------------------------------------------------------------------ cells
    def cell_path(self, cell: Cell) -> Path:
        return self.cells_dir / f"{cell.key}.parquet"

    def injections_path(self, cell: Cell) -> Path:
        return self.injections_dir / f"{cell.key}.parquet"

    def failure_path(self, cell: Cell) -> Path:
        return self.failures_dir / f"{cell.key}.txt"

    def write_cell(self, cell: Cell, outcomes: pd.DataFrame, *, seconds: float,
                   injections: pd.DataFrame | Sequence[Mapping[str, Any]] | None = None
                   ) -> None:
        """Store the item outcomes of a finished cell atomically and log the event.

        ``injections`` (the evaluator's ``injection_stats``: a frame or records with the
        engine's stats columns; empty for a clean cell) is stored first, so a finished
        cell never lacks the record of the noise it was evaluated under. ``None`` (an
        evaluator that reports no counts) stores nothing.
        """
        df = cell_frame(cell, outcomes)
        event: dict[str, Any] = {"event": "cell_done", "cell": cell.key, "rows": len(df),
                                 "seconds": round(seconds, 3)}
        if injections is not None:
            stats = injection_frame(cell, injections)
            atomic_write_bytes(self.injections_path(cell), stats.to_parquet(index=False))
            event["injections"] = int(stats["count"].sum())
        atomic_write_bytes(self.cell_path(cell), df.to_parquet(index=False))
        self.clear_failure(cell)
        self.log_event(event)

    def read_cell(self, cell: Cell) -> pd.DataFrame | None:
        """The stored outcomes of ``cell``, or ``None`` when absent or not valid."""
        return self._read(self.cell_path(cell), cell, _check_cell_frame)

    def read_injections(self, cell: Cell) -> pd.DataFrame | None:
        """The stored injection counts of ``cell``, or ``None`` when absent or not valid."""
        return self._read(self.injections_path(cell), cell, _check_injection_frame)

    def _read(self, path: Path, cell: Cell, check: Any) -> pd.DataFrame | None:
        if not path.exists():
            return None
        try:
            df = pd.read_parquet(path)
            check(cell, df)
        except Exception:
            # unreadable or another cell's: move it aside (never read as a result), so the
            # cell runs again (cells) or is named as lacking a record (injections)
            quarantine = self.root / "corrupt"
            quarantine.mkdir(exist_ok=True)
            os.replace(path, quarantine / f"{path.parent.name}-{path.name}."
                                          f"{int(time.time() * 1000)}")
            return None
        return df

    def finished(self, cells: Iterable[Cell]) -> set[Cell]:
        return {c for c in cells if self.read_cell(c) is not None}

    def settled(self, cell: Cell) -> bool:
        """True when ``cell`` has finished or failed in this attempt (for progress)."""
        return self.cell_path(cell).exists() or self.failure_path(cell).exists()

    def clear_failure(self, cell: Cell) -> None:
        """Forget the failure of an earlier attempt (the cell is about to run again)."""
        self.failure_path(cell).unlink(missing_ok=True)

    def record_failure(self, cell: Cell, traceback_text: str) -> None:
        atomic_write_bytes(self.failure_path(cell), traceback_text.encode())
        first = traceback_text.strip().splitlines()[-1] if traceback_text.strip() else ""
        self.log_event({"event": "cell_failed", "cell": cell.key, "error": first})

    def failures(self) -> dict[str, str]:
        return {p.stem: p.read_text() for p in sorted(self.failures_dir.glob("*.txt"))}

    def outcomes(self, cells: Iterable[Cell]) -> pd.DataFrame:
        frames = [df for c in cells if (df := self.read_cell(c)) is not None]
        if not frames:
            return empty_outcomes()
        return pd.concat(frames, ignore_index=True)

    def injections(self, cells: Iterable[Cell]) -> pd.DataFrame:
        """Injection counts of the finished ``cells`` (columns :data:`INJECTION_COLUMNS`).

        One row per cell × layer × op × phase; clean cells contribute no rows. Cells
        without an injection file (evaluated by an external model's own ``evaluate``) are
        absent.
        """
        frames = [df for c in cells if self.cell_path(c).exists()
                  and (df := self.read_injections(c)) is not None and not df.empty]
        if not frames:
            return injection_frame(None, [])
        return pd.concat(frames, ignore_index=True)

    def without_injections(self, cells: Iterable[Cell]) -> list[Cell]:
        """Finished noisy cells with no valid injection record (an evaluator that reports
        no counts, or a cell finished before such records were kept)."""
        return [c for c in cells if not c.is_clean and self.cell_path(c).exists()
                and self.read_injections(c) is None]

    # ------------------------------------------------------------------ models
    def model_dir(self, job: TrainJob) -> Path:
        return self.models_dir / job.key

    def model_path(self, job: TrainJob) -> Path:
        """The saved model of a published job (what ``trainer.load`` reads)."""
        return self.model_dir(job) / "model"

    def model_ready(self, job: TrainJob) -> bool:
        return (self.model_dir(job) / "COMPLETE").is_file()

    def stage_model(self, job: TrainJob) -> ModelStaging:
        """A fresh private directory to train and save ``job``'s model in."""
        return ModelStaging(Path(tempfile.mkdtemp(prefix=f".tmp-{job.key}-",
                                                  dir=self.models_dir)))

    def publish_model(self, job: TrainJob, staging: ModelStaging) -> Path:
        """Move a fully saved model directory into place (first writer wins)."""
        tmpdir = staging.root
        (tmpdir / "COMPLETE").write_text(_now())
        final = self.model_dir(job)
        if final.exists() and not self.model_ready(job):
            shutil.rmtree(final, ignore_errors=True)  # an incomplete leftover
        try:
            os.rename(tmpdir, final)
        except OSError:
            # another process published it first; keep theirs
            shutil.rmtree(tmpdir, ignore_errors=True)
        return final

    # ------------------------------------------------------------------ events
    def log_event(self, event: dict[str, Any]) -> None:
        line = json.dumps({"time": _now(), "pid": os.getpid(), **event}) + "\n"
        # O_APPEND writes of one short line are atomic enough for a log across processes
        with open(self.root / "events.jsonl", "a", encoding="utf-8") as fh:
            fh.write(line)

    def events(self) -> list[dict[str, Any]]:
        path = self.root / "events.jsonl"
        if not path.exists():
            return []
        out = []
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a line cut by a kill
        return out


def cell_frame(cell: Cell, outcomes: pd.DataFrame) -> pd.DataFrame:
    """Outcomes of one cell (``item_id``, ``correct``[, ``score``]) with the cell's keys."""
    for col in ("item_id", "correct"):
        if col not in outcomes.columns:
            raise ValueError(f"the evaluator returned no {col!r} column "
                             f"(columns: {list(outcomes.columns)})")
    if outcomes["item_id"].duplicated().any():
        raise ValueError("the evaluator returned duplicate item_ids")
    df = pd.DataFrame({
        "condition": cell.condition, "seed": cell.seed, "eval_noise": cell.eval_noise,
        "noise_seed": cell.noise_seed, "item_id": outcomes["item_id"].astype(str).to_numpy(),
        "correct": outcomes["correct"].astype("int8").to_numpy(),
    })
    if "score" in outcomes.columns:
        df["score"] = outcomes["score"].astype(float).to_numpy()
    return df.astype({c: DTYPES[c] for c in COLUMNS})


def injection_frame(cell: Cell | None,
                    stats: pd.DataFrame | Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The engine's session stats of one cell with the cell's keys in front."""
    df = pd.DataFrame(stats) if not isinstance(stats, pd.DataFrame) else stats.copy()
    if df.empty:
        df = pd.DataFrame({c: pd.Series(dtype=t) for c, t in _STATS_DTYPES.items()})
    missing = [c for c in _STATS_DTYPES if c not in df.columns]
    if missing:
        raise ValueError(f"the evaluator's injection stats lack columns {missing} "
                         f"(columns: {list(df.columns)})")
    if cell is not None:
        keys = {"condition": cell.condition, "seed": cell.seed, "eval_noise": cell.eval_noise,
                "noise_seed": cell.noise_seed}
    else:
        keys = {}
    for i, (column, value) in enumerate(keys.items()):
        df.insert(i, column, value)
    for column, dtype in _CELL_KEYS.items():
        if column not in df.columns:
            df.insert(list(_CELL_KEYS).index(column), column, pd.Series(dtype=dtype))
    extra = [c for c in df.columns if c not in INJECTION_COLUMNS]
    return df[INJECTION_COLUMNS + extra].astype({**_CELL_KEYS, **_STATS_DTYPES})


def _check_injection_frame(cell: Cell, df: pd.DataFrame) -> None:
    missing = [c for c in INJECTION_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"injection file lacks columns {missing}")
    if not df.empty and not ((df["condition"] == cell.condition).all()
                             and (df["seed"] == cell.seed).all()
                             and (df["eval_noise"] == cell.eval_noise).all()
                             and (df["noise_seed"] == cell.noise_seed).all()):
        raise ValueError("injection file belongs to another cell")


def _check_cell_frame(cell: Cell, df: pd.DataFrame) -> None:
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing or df.empty:
        raise ValueError(f"cell file lacks columns {missing} or rows")
    if not ((df["condition"] == cell.condition).all() and (df["seed"] == cell.seed).all()
            and (df["eval_noise"] == cell.eval_noise).all()
            and (df["noise_seed"] == cell.noise_seed).all()):
        raise ValueError("cell file belongs to another cell")
    if not df["correct"].isin([0, 1]).all():
        raise ValueError("correct must be 0/1")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
