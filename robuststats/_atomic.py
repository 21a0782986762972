"""File-system primitives of the run directory: atomic file writes and model staging.

A file written with :func:`atomic_write_bytes` appears only through ``os.replace`` of a fully
written and fsynced temporary file in the same directory, so readers see the old file or all
of the new one, never part of it; the directory entry is fsynced too (best effort), so the
rename survives a power loss where the file system allows it.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ModelStaging", "atomic_write_bytes"]


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
