"""The run directory: resolved spec, cached models, one file per finished cell, failures.

Layout of ``<runs>/<study name>/``::

    spec.json              resolved spec and its hash (what the run is for)
    cells/<cell key>.parquet   item outcomes of one finished cell (written atomically)
    models/<condition>__s<seed>/   cached trained model (directory renamed into place)
    failures/<cell key>.txt    traceback of a cell that failed in the latest attempt
    events.jsonl           one line per cell finished or failed (who, when, how long)

Why it is safe to kill at any moment: a cell file appears only through ``os.replace`` of a
fully written and fsynced temporary file in the same directory, so a cell file either
holds the complete table or does not exist; files that fail validation on reading are
moved to ``corrupt/`` and the cell is run again. A model directory appears only through
``os.rename`` of a complete temporary directory.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from robuststats.errors import InputError
from robuststats.study.plan import Cell, TrainJob
from robuststats.study.spec import StudySpec

__all__ = ["OUTCOME_COLUMNS", "RunLedger", "atomic_write_bytes"]

OUTCOME_COLUMNS = ["condition", "seed", "eval_noise", "noise_seed", "item_id", "correct"]


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
        for d in (ledger.cells_dir, ledger.models_dir, ledger.failures_dir):
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
        for tmp in self.cells_dir.glob(".*.tmp"):
            tmp.unlink(missing_ok=True)
        for tmp in self.models_dir.glob(".tmp-*"):
            shutil.rmtree(tmp, ignore_errors=True)

    # ------------------------------------------------------------------ cells
    def cell_path(self, cell: Cell) -> Path:
        return self.cells_dir / f"{cell.key}.parquet"

    def write_cell(self, cell: Cell, outcomes: pd.DataFrame, *, seconds: float) -> None:
        """Store the item outcomes of a finished cell atomically and log the event."""
        df = cell_frame(cell, outcomes)
        atomic_write_bytes(self.cell_path(cell), df.to_parquet(index=False))
        (self.failures_dir / f"{cell.key}.txt").unlink(missing_ok=True)
        self.log_event({"event": "cell_done", "cell": cell.key, "rows": len(df),
                        "seconds": round(seconds, 3)})

    def read_cell(self, cell: Cell) -> pd.DataFrame | None:
        """The stored outcomes of ``cell``, or ``None`` when absent or not valid."""
        path = self.cell_path(cell)
        if not path.exists():
            return None
        try:
            df = pd.read_parquet(path)
            _check_cell_frame(cell, df)
        except Exception:
            quarantine = self.root / "corrupt"
            quarantine.mkdir(exist_ok=True)
            os.replace(path, quarantine / f"{path.name}.{int(time.time() * 1000)}")
            return None
        return df

    def finished(self, cells: Iterable[Cell]) -> set[Cell]:
        return {c for c in cells if self.read_cell(c) is not None}

    def record_failure(self, cell: Cell, traceback_text: str) -> None:
        atomic_write_bytes(self.failures_dir / f"{cell.key}.txt", traceback_text.encode())
        first = traceback_text.strip().splitlines()[-1] if traceback_text.strip() else ""
        self.log_event({"event": "cell_failed", "cell": cell.key, "error": first})

    def failures(self) -> dict[str, str]:
        return {p.stem: p.read_text() for p in sorted(self.failures_dir.glob("*.txt"))}

    def outcomes(self, cells: Iterable[Cell]) -> pd.DataFrame:
        frames = [df for c in cells if (df := self.read_cell(c)) is not None]
        if not frames:
            return pd.DataFrame({c: pd.Series(dtype=t) for c, t in _DTYPES.items()})
        return pd.concat(frames, ignore_index=True)

    # ------------------------------------------------------------------ models
    def model_dir(self, job: TrainJob) -> Path:
        return self.models_dir / job.key

    def model_ready(self, job: TrainJob) -> bool:
        return (self.model_dir(job) / "COMPLETE").is_file()

    def new_model_tmpdir(self, job: TrainJob) -> Path:
        return Path(tempfile.mkdtemp(prefix=f".tmp-{job.key}-", dir=self.models_dir))

    def publish_model(self, job: TrainJob, tmpdir: Path) -> Path:
        """Move a fully saved model directory into place (first writer wins)."""
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


_DTYPES = {"condition": "object", "seed": "int64", "eval_noise": "float64",
           "noise_seed": "int64", "item_id": "object", "correct": "int8"}


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
    return df.astype(_DTYPES)


def _check_cell_frame(cell: Cell, df: pd.DataFrame) -> None:
    missing = [c for c in OUTCOME_COLUMNS if c not in df.columns]
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
