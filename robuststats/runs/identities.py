"""The checkpoints a run directory evaluated, by identity: a path is not a model.

A condition's ``checkpoint:`` names directories by path, and the run hash covers the
path, not the weights: a checkpoint rewritten in place (a CI job saving its newest model
at the same path, another dtype, another tokenizer) would be resumed against cells
evaluated from the old one. The first load of a job's checkpoint records its identity
(:func:`~robuststats.models.identity.checkpoint_identity`: the SHA-256 of its weight,
config and tokenizer files) in ``<run dir>/identities/<condition>__s<seed>.json``; every
later load compares with it, and :func:`check_recorded_checkpoints` compares all of them
before a resumed run computes anything. A difference is one line naming the key, the seed
and the file that differs; the run directory is left as it is (restore the checkpoint,
or start over with ``--fresh``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robuststats._atomic import atomic_write_bytes
from robuststats.errors import InputError

if TYPE_CHECKING:
    from robuststats.runs.plan import TrainJob
    from robuststats.runs.spec import StudySpec

__all__ = ["IDENTITIES", "check_recorded_checkpoints", "checkpoint_seen",
           "recorded_checkpoints"]

#: the directory of a run directory that holds the evaluated checkpoints' identities
IDENTITIES = "identities"


def _record_path(root: Path, job: TrainJob) -> Path:
    return Path(root) / IDENTITIES / f"{job.key}.json"


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _problem(recorded: dict[str, Any], directory: Path, job: TrainJob) -> dict[str, Any]:
    from robuststats.models.identity import checkpoint_identity, identity_difference

    key = f"conditions.{job.condition}.checkpoint"
    current = checkpoint_identity(directory, key=key)
    problem = identity_difference(recorded.get("identity"), current,
                                  what="the one this run directory evaluated")
    if problem is not None:
        raise InputError(f"`{key}` (seed {job.seed}): {str(directory)!r} is not the "
                         f"checkpoint this run directory's cells were evaluated from: "
                         f"{problem}; restore it, or start the run directory over "
                         "(robuststats study --fresh).")
    return current


def checkpoint_seen(root: str | Path, job: TrainJob, directory: str | Path) -> dict[str, Any]:
    """The identity of ``job``'s checkpoint in ``directory``: recorded in the run directory
    ``root`` at its first load, compared with that record at every later one (an
    :class:`InputError` naming the file that differs)."""
    from robuststats.models.identity import checkpoint_identity

    path, directory = _record_path(Path(root), job), Path(directory)
    recorded = _read(path)
    if recorded is not None:
        return _problem(recorded, directory, job)
    identity = checkpoint_identity(directory, key=f"conditions.{job.condition}.checkpoint")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, json.dumps({"path": str(directory.resolve()),
                                         "identity": identity}, indent=1).encode())
    return identity


def check_recorded_checkpoints(root: str | Path, spec: StudySpec) -> int:
    """Before a resumed run computes anything: every checkpoint the run directory ``root``
    recorded is still the one it evaluated (its files hashed again). Returns the number
    checked; raises :class:`InputError` at the first difference."""
    from robuststats.models.checkpoints import resolve_checkpoint
    from robuststats.runs.plan import TrainJob

    checked = 0
    for name, condition in spec.conditions.items():
        pattern = getattr(condition, "checkpoint", None)
        if pattern is None:
            continue
        for seed in spec.seed_list():
            job = TrainJob(name, seed)
            recorded = _read(_record_path(Path(root), job))
            if recorded is None:
                continue
            ref = resolve_checkpoint(pattern, condition=name, seed=seed)
            _problem(recorded, ref.path, job)
            checked += 1
    return checked


def recorded_checkpoints(root: str | Path) -> dict[str, dict[str, str]]:
    """``{job key: {"path", "sha256"}}`` of every checkpoint the run directory ``root``
    evaluated (what a result version records, so that it names its models by hash)."""
    out: dict[str, dict[str, str]] = {}
    folder = Path(root) / IDENTITIES
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        record = _read(path)
        identity = record.get("identity") if record is not None else None
        if isinstance(identity, dict) and isinstance(identity.get("sha256"), str):
            out[path.stem] = {"path": str(record.get("path")), "sha256": identity["sha256"]}
    return out
