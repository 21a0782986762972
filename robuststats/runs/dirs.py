"""Output directories, checked before any compute: every command's ``--out`` and ``--runs``."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from robuststats.errors import InputError

__all__ = ["check_output_dir", "errno_hint", "shown"]

#: bytes written (and fsynced) by the preflight probe: a full disk fails here, not later
PROBE_BYTES = 64 * 1024


def check_output_dir(path: str | Path, name: str) -> Path:
    """``path`` must be a directory, or creatable as one, where files can be written.

    Checks without creating anything that is not there yet: a probe file of
    :data:`PROBE_BYTES` is written, fsynced and removed in ``path`` or in its nearest
    existing ancestor (so a read-only or full file system fails here, before any compute).
    ``name`` (``--out`` or ``out``) leads the one-line :class:`InputError`.
    """
    raw = str(path)
    if not raw or "\0" in raw:
        raise InputError(f"{name} must be a directory path, got {shown(raw)}.")
    target = Path(raw)
    try:
        probe_dir = target
        while not probe_dir.exists():
            if probe_dir.is_symlink():
                raise InputError(f"{name} {shown(raw)}: {shown(probe_dir)} is a dangling "
                                 "symbolic link.")
            parent = probe_dir.parent
            if parent == probe_dir:
                break
            probe_dir = parent
        if not probe_dir.is_dir():
            what = "is not a directory" if probe_dir == target else \
                f"cannot be created: {shown(probe_dir)} is not a directory"
            raise InputError(f"{name} {shown(raw)} {what}.")
        _probe_write(probe_dir)
    except InputError:
        raise
    except OSError as exc:
        where = "" if probe_dir == target else f" (checked in {shown(probe_dir)}, where " \
                                               "it would be created)"
        raise InputError(f"{name} {shown(raw)} is not writable{where}: "
                         f"{exc.strerror or exc}.") from None
    return target


def shown(path: str | Path, limit: int = 120) -> str:
    """A path for a one-line message: quoted, its middle elided past ``limit`` characters."""
    text = str(path)
    if len(text) > limit:
        text = f"{text[: limit // 2]}…{text[-(limit // 2):]} ({len(str(path))} characters)"
    return repr(text)


def errno_hint(exc: OSError) -> str:
    """Why a write failed, in words, for the errors a user can fix (`` (the disk is full)``)."""
    return {errno.ENOSPC: " (the disk is full)", errno.EDQUOT: " (disk quota exceeded)",
            errno.EROFS: " (read-only file system)"}.get(exc.errno or 0, "")


def _probe_write(directory: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".robuststats-probe-", dir=directory)
    try:
        os.write(fd, b"\0" * PROBE_BYTES)
        os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(tmp)
