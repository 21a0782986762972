"""The run directory: resolved spec, cached models, one file per finished cell, failures.

Layout of ``<runs>/<study name>/``::

    lock                   flock held by the one process running the study (holds its PID)
    spec.json              resolved spec, its run hash and spec hash (what the run is for)
    cells/<cell key>.parquet   item outcomes of one finished cell (written atomically)
    cells/<cell key>.json      the cell's record: SHA-256 of its rows and its row count
    injections/<cell key>.parquet  the evaluation's injection counts per layer × op × phase
    models/<condition>__s<seed>/   cached trained model (directory renamed into place)
    failures/<cell key>.txt    traceback of a cell that failed in the latest attempt
    events.jsonl           one line per cell finished or failed (who, when, how long)
    progress/<condition>__s<seed>.json  a job's training steps and cell seconds so far,
                           rewritten by its worker while it runs (for the progress bar)

Every path inside the run directory is built here; the executor and the runner ask the
ledger.

Why it is safe to kill at any moment: a cell file appears only through ``os.replace`` of a
fully written and fsynced temporary file in the same directory, so a cell file either
holds the complete table or does not exist. A cell's injection file and its record are
written (the same way) before its cell file, so every finished cell has a record and,
when evaluated by the builtin evaluator, an injection file. A model directory appears only
through ``os.rename`` of a complete temporary directory.

Why a damaged cell is never reused: on reading, a cell must parse, carry its own keys and
0/1 outcomes, match its record (row count and SHA-256 of the rows, see
:mod:`robuststats.outcomes`) and hold exactly the items of the plan. A cell that
fails is moved to ``corrupt/`` with a :class:`CellIntegrityWarning` naming it, and runs
again.

What the run directory is for: :func:`run_hash`, the hash of the part of the spec that
determines outcomes (task, model, trainer, conditions, evaluation, seeds). Hypotheses,
analysis options and descriptions are outside it: changing them re-analyses the cells
without training or evaluating anything.

Longer than 400 lines on purpose: :class:`RunLedger` is the only code that builds paths
inside a run directory (a test checks it), so every file of a run is written, checked
and set aside in one place.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from robuststats._atomic import ModelStaging, atomic_write_bytes
from robuststats.errors import InputError, RobuststatsWarning
from robuststats.outcomes import cell_digest, empty_outcomes
from robuststats.runs.cellframes import (
    INJECTION_COLUMNS,
    cell_frame,
    check_cell_frame,
    check_injection_frame,
    injection_frame,
    items_problem,
)
from robuststats.runs.lock import RunLock
from robuststats.runs.modelseal import MARKER, model_problem, seal_model
from robuststats.runs.plan import Cell, TrainJob
from robuststats.runs.runhash import read_spec_file, run_hash, run_scope, stored_run_hash
from robuststats.runs.spec import StudySpec

__all__ = ["INJECTION_COLUMNS", "RUN_FORMAT", "CellIntegrityWarning", "ModelStaging",
           "RunLedger", "atomic_write_bytes", "first_line", "last_line", "run_hash",
           "run_scope"]

#: format of ``spec.json``: 1 had one hash of the whole spec and no cell records; 2 adds
#: ``run_hash`` (the outcome-determining part) and a record per cell
RUN_FORMAT = 2
#: entries of a run directory that ``--fresh`` keeps: the lock its caller holds
_KEEP_ON_FRESH = ("lock",)


class CellIntegrityWarning(RobuststatsWarning):
    """A stored cell was unreadable, altered or did not match the plan; it runs again."""


class RunLedger:
    """The resumable on-disk record of one study run.

    :meth:`open` takes the run directory's lock and holds it until :meth:`close` (or the
    end of a ``with`` block, or the process). ``RunLedger(root)`` alone (as the worker
    processes use it) takes no lock.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.cells_dir = self.root / "cells"
        self.injections_dir = self.root / "injections"
        self.models_dir = self.root / "models"
        self.failures_dir = self.root / "failures"
        self.progress_dir = self.root / "progress"
        self._lock: RunLock | None = None
        # a run directory written before cells had records: its valid cells are adopted
        self._adopt_unrecorded = False

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(cls, root: str | Path, spec: StudySpec, *, fresh: bool = False) -> RunLedger:
        """Lock, open (or create) the run directory for ``spec``.

        A second process is refused while the first holds the lock (:class:`RunInUseError`,
        naming its PID). An existing run whose :func:`run_hash` differs from ``spec``'s is
        refused unless ``fresh``, which deletes it (models included) and starts over. A run
        with the same run hash but other hypotheses or analysis options is reused as it is:
        ``spec.json`` then records the new spec.
        """
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        lock = RunLock.acquire(root)
        try:
            ledger = cls(root)
            ledger._lock = lock
            ledger._prepare(spec, fresh=fresh)
        except BaseException:
            lock.release()
            raise
        return ledger

    def _prepare(self, spec: StudySpec, *, fresh: bool) -> None:
        spec_file = self.root / "spec.json"
        digest = run_hash(spec)
        stored = read_spec_file(spec_file) if spec_file.exists() else None
        if fresh:
            # --fresh discards the run whatever it was for, the same run hash included
            _clear(self.root)
            stored = None
        elif stored is not None or spec_file.exists():
            old = stored_run_hash(stored)
            if old is None:
                raise InputError(
                    f"the run directory {str(self.root)!r} has an unreadable spec.json: "
                    "pass --fresh to discard that run and start over, or choose another "
                    "--runs directory.")
            if old != digest:
                raise InputError(
                    f"the run directory {str(self.root)!r} belongs to a different version "
                    f"of study {spec.name!r} (run hash {old[:12]}, now "
                    f"{digest[:12]}): the task, model, trainer, conditions, evaluation or "
                    "seeds changed (in the study file or on the command line). Pass "
                    "--fresh to discard that run and start over, or choose another "
                    "--runs directory.")
        for d in (self.cells_dir, self.injections_dir, self.models_dir, self.failures_dir):
            d.mkdir(parents=True, exist_ok=True)
        self._adopt_unrecorded = stored is not None and stored.get("run_format", 1) < RUN_FORMAT
        spec_hash = spec.spec_hash()
        if stored is None or stored.get("run_format", 1) < RUN_FORMAT \
                or stored.get("spec_hash") != spec_hash:
            payload = {"run_format": RUN_FORMAT, "run_hash": digest, "spec_hash": spec_hash,
                       "spec": spec.resolved(),
                       "created": (stored or {}).get("created", _now())}
            if stored is not None:
                payload["updated"] = _now()
            atomic_write_bytes(spec_file, json.dumps(payload, indent=2).encode())
            if stored is not None and stored.get("spec_hash") != spec_hash:
                # same outcomes, other hypotheses or analysis: re-analysed, nothing recomputed
                self.log_event({"event": "spec_updated", "spec_hash": spec_hash,
                                "previous_spec_hash": stored.get("spec_hash")})
            if stored is not None and stored.get("run_format", 1) < RUN_FORMAT:
                self.log_event({"event": "run_format_upgraded", "run_format": RUN_FORMAT,
                                "previous_run_format": stored.get("run_format", 1)})
        self._sweep_temporaries()

    def close(self) -> None:
        """Release the run directory's lock (idempotent)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> RunLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def existing(cls, root: str | Path) -> RunLedger:
        root = Path(root)
        if not (root / "spec.json").is_file():
            raise InputError(f"{str(root)!r} is not a run directory (no spec.json).")
        return cls(root)

    def spec_dict(self) -> dict[str, Any]:
        return json.loads((self.root / "spec.json").read_text())["spec"]

    def run_hash(self) -> str | None:
        """The run hash recorded in ``spec.json`` (recomputed for a format-1 directory)."""
        return stored_run_hash(read_spec_file(self.root / "spec.json"))

    def _sweep_temporaries(self) -> None:
        # leftovers of a killed writer: never read as results, safe to remove (the lock
        # guarantees that no other process is writing here)
        for directory in (self.cells_dir, self.injections_dir, self.failures_dir,
                          self.progress_dir):
            for tmp in directory.glob(".*.tmp"):
                tmp.unlink(missing_ok=True)
        for tmp in self.models_dir.glob(".tmp-*"):
            shutil.rmtree(tmp, ignore_errors=True)

    # ------------------------------------------------------------------ cells
    def cell_path(self, cell: Cell) -> Path:
        return self.cells_dir / f"{cell.key}.parquet"

    def record_path(self, cell: Cell) -> Path:
        """The cell's record: SHA-256 of its rows and their count, written with the cell."""
        return self.cells_dir / f"{cell.key}.json"

    def injections_path(self, cell: Cell) -> Path:
        return self.injections_dir / f"{cell.key}.parquet"

    def failure_path(self, cell: Cell) -> Path:
        return self.failures_dir / f"{cell.key}.txt"

    def write_cell(self, cell: Cell, outcomes: pd.DataFrame, *, seconds: float,
                   injections: pd.DataFrame | Sequence[Mapping[str, Any]] | None = None,
                   items: Sequence[str] | None = None) -> None:
        """Store the item outcomes of a finished cell atomically and log the event.

        ``items`` (the plan's item ids) must be exactly the items of ``outcomes`` when
        given; a mismatch is an error of the cell, never a stored result. ``injections``
        (the evaluator's ``injection_stats``: a frame or records with the engine's stats
        columns; empty for a clean cell) is stored first, so a finished cell never lacks
        the record of the noise it was evaluated under. ``None`` (an evaluator that reports
        no counts) stores nothing. The cell's record (SHA-256 of its rows, row count) is
        written before the cell file.
        """
        df = cell_frame(cell, outcomes)
        if items is not None and (problem := items_problem(df, items)):
            raise ValueError(f"the evaluator's outcomes do not match the plan: {problem}")
        digest = cell_digest(df)
        event: dict[str, Any] = {"event": "cell_done", "cell": cell.key, "rows": len(df),
                                 "sha256": digest, "seconds": round(seconds, 3)}
        if injections is not None:
            stats = injection_frame(cell, injections)
            atomic_write_bytes(self.injections_path(cell), stats.to_parquet(index=False))
            event["injections"] = int(stats["count"].sum())
        self._write_record(cell, digest, len(df))
        atomic_write_bytes(self.cell_path(cell), df.to_parquet(index=False))
        self.clear_failure(cell)
        self.log_event(event)

    def _write_record(self, cell: Cell, digest: str, rows: int) -> None:
        record = {"cell": cell.key, "sha256": digest, "rows": rows, "written": _now()}
        atomic_write_bytes(self.record_path(cell), json.dumps(record).encode())

    def read_record(self, cell: Cell) -> dict[str, Any] | None:
        """The cell's record (``sha256``, ``rows``), or ``None`` when absent or unreadable."""
        try:
            record = json.loads(self.record_path(cell).read_text())
        except (OSError, ValueError):
            return None
        if not (isinstance(record, dict) and isinstance(record.get("sha256"), str)
                and isinstance(record.get("rows"), int)):
            return None
        return record

    def read_cell(self, cell: Cell, *, items: Sequence[str] | None = None
                  ) -> pd.DataFrame | None:
        """The stored outcomes of ``cell``, or ``None`` when absent or not valid.

        Valid: readable, this cell's keys, 0/1 outcomes, the rows and SHA-256 of its
        record, and (when ``items``, the plan's item ids, is given) exactly those items.
        An invalid file is moved to ``corrupt/`` with a :class:`CellIntegrityWarning`
        naming the cell and what was wrong, so the cell runs again.
        """
        path = self.cell_path(cell)
        if not path.exists():
            return None
        try:
            df = pd.read_parquet(path)
            check_cell_frame(cell, df)
        except Exception as exc:
            self._set_aside(cell, f"unreadable or not this cell's file ({first_line(exc)})")
            return None
        record = self.read_record(cell)
        if record is None and not self._adopt_unrecorded:
            problem: str | None = "it has no record of its checksum"
        elif record is not None and record["rows"] != len(df):
            problem = f"it holds {len(df)} rows, its record says {record['rows']}"
        elif record is not None and record["sha256"] != cell_digest(df):
            problem = "its rows changed after it was written (SHA-256 differs from its record)"
        else:
            problem = items_problem(df, items) if items is not None else None
        if problem is not None:
            self._set_aside(cell, problem)
            return None
        if record is None:
            # a cell of a run directory from before records were kept: valid and complete
            # by every other check, so it is adopted (recorded) instead of recomputed
            self._write_record(cell, cell_digest(df), len(df))
            self.log_event({"event": "cell_adopted", "cell": cell.key, "rows": len(df)})
        return df

    def read_injections(self, cell: Cell) -> pd.DataFrame | None:
        """The stored injection counts of ``cell``, or ``None`` when absent or not valid."""
        path = self.injections_path(cell)
        if not path.exists():
            return None
        try:
            df = pd.read_parquet(path)
            check_injection_frame(cell, df)
        except Exception:
            # moved aside: the cell is then named as lacking an injection record
            self._quarantine(path)
            return None
        return df

    def _set_aside(self, cell: Cell, problem: str) -> None:
        for path in (self.cell_path(cell), self.record_path(cell)):
            self._quarantine(path)
        warnings.warn(f"cell {cell.key}: {problem}; moved to "
                      f"{self.root / 'corrupt'} and run again.", CellIntegrityWarning,
                      stacklevel=3)
        self.log_event({"event": "cell_set_aside", "cell": cell.key, "reason": problem})

    def _quarantine(self, path: Path) -> None:
        # never read as a result again, but kept for a person to inspect
        if not path.exists():
            return
        quarantine = self.root / "corrupt"
        quarantine.mkdir(exist_ok=True)
        os.replace(path, quarantine / f"{path.parent.name}-{path.name}."
                                      f"{int(time.time() * 1000)}")

    def finished(self, cells: Iterable[Cell], *, items: Sequence[str] | None = None
                 ) -> set[Cell]:
        """The ``cells`` with a valid stored file (:meth:`read_cell`); others are set aside."""
        return {c for c in cells if self.read_cell(c, items=items) is not None}

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

    def outcomes(self, cells: Iterable[Cell], *, items: Sequence[str] | None = None
                 ) -> pd.DataFrame:
        """The outcomes of the valid stored ``cells`` (invalid ones are set aside)."""
        frames = [df for c in cells if (df := self.read_cell(c, items=items)) is not None]
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

    # ------------------------------------------------------------------ job progress
    def progress_path(self, job: TrainJob) -> Path:
        return self.progress_dir / f"{job.key}.json"

    def write_progress(self, job: TrainJob, record: Mapping[str, Any]) -> None:
        """Replace ``job``'s progress record (a small JSON object) in one ``os.replace``;
        not fsynced: it is rewritten every half second and only feeds the progress bar."""
        path = self.progress_path(job)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(dict(record)), encoding="utf-8")
        os.replace(tmp, path)

    def read_progress(self, job: TrainJob) -> dict[str, Any] | None:
        """``job``'s progress record, or None when there is none (or it cannot be read)."""
        try:
            record = json.loads(self.progress_path(job).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) else None

    def clear_progress(self, job: TrainJob) -> None:
        """Forget ``job``'s progress of an earlier execution (it is about to run again)."""
        self.progress_path(job).unlink(missing_ok=True)

    # ------------------------------------------------------------------ models
    def model_dir(self, job: TrainJob) -> Path:
        return self.models_dir / job.key

    def model_path(self, job: TrainJob) -> Path:
        """The saved model of a published job (what ``trainer.load`` reads)."""
        return self.model_dir(job) / "model"

    def model_ready(self, job: TrainJob) -> bool:
        return (self.model_dir(job) / MARKER).is_file()

    def stage_model(self, job: TrainJob) -> ModelStaging:
        """A fresh private directory to train and save ``job``'s model in."""
        return ModelStaging(Path(tempfile.mkdtemp(prefix=f".tmp-{job.key}-",
                                                  dir=self.models_dir)))

    def model_problem(self, job: TrainJob) -> str | None:
        """What changed in a published model since it was sealed, or None."""
        return model_problem(self.model_dir(job))

    def set_aside_model(self, job: TrainJob, problem: str) -> None:
        """Move a changed published model to ``corrupt/`` (it is trained again)."""
        self._quarantine(self.model_dir(job))
        warnings.warn(f"model {job.key}: {problem}; moved to {self.root / 'corrupt'} and "
                      "trained again.", CellIntegrityWarning, stacklevel=3)
        self.log_event({"event": "model_set_aside", "job": job.key, "reason": problem})

    def publish_model(self, job: TrainJob, staging: ModelStaging) -> Path:
        """Seal a fully saved model directory (:func:`seal_model`) and move it into place
        (first writer wins)."""
        tmpdir = staging.root
        seal_model(tmpdir)
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


def _clear(root: Path) -> None:
    """Delete everything in ``root`` except the lock its caller holds (``--fresh``)."""
    for entry in root.iterdir():
        if entry.name in _KEEP_ON_FRESH:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def first_line(exc: BaseException) -> str:
    """``Type: first line of the message``, for one-line reports of an exception."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def last_line(text: str) -> str:
    """The last non-blank line of ``text`` (a traceback's: the error itself), stripped."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
