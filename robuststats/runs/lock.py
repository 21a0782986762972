"""One process at a time per run directory: an exclusive ``flock`` on ``<run dir>/lock``.

The kernel releases an ``flock`` when its holder dies, however it dies (SIGKILL included),
so a lock left by a killed run never blocks anyone; the PID written into the file is only
there to name the holder in the refusal. Worker processes never hold it (they are
spawned, not forked, so they do not inherit the descriptor) and die with their parent.
On a platform without ``fcntl`` (Windows) nothing is locked.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from robuststats.errors import InputError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = ["RunInUseError", "RunLock"]


class RunInUseError(InputError):
    """Another live process holds the run directory's lock."""


class RunLock:
    """An exclusive lock on one run directory, held until :meth:`release` (or death)."""

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path = path
        self._fd = fd

    @classmethod
    def acquire(cls, run_dir: Path) -> RunLock:
        """Take the lock of ``run_dir`` (which must exist) or raise :class:`RunInUseError`
        naming the holder's PID."""
        path = Path(run_dir) / "lock"
        if fcntl is None:  # pragma: no cover - not POSIX
            return cls(path, None)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe(_read_holder(fd))
            os.close(fd)
            raise RunInUseError(
                f"the run directory {str(run_dir)!r} is in use by {holder}: wait for that "
                "run to finish, or choose another --runs directory.") from None
        except BaseException:
            os.close(fd)
            raise
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode() + b"\n", 0)
        return cls(path, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Give the lock back (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None or fcntl is None:
            return
        try:
            os.ftruncate(fd, 0)  # no stale PID left behind for a reader to puzzle over
        except OSError:
            pass
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def __del__(self) -> None:
        # a lock object dropped without release: close the descriptor (which unlocks)
        fd = getattr(self, "_fd", None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


def _read_holder(fd: int) -> dict[str, object]:
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _describe(holder: dict[str, object]) -> str:
    if "pid" not in holder:
        return "another process"
    where = f" on {holder['host']}" if holder.get("host") not in (None, socket.gethostname()) \
        else ""
    since = f", running since {holder['since']}" if holder.get("since") else ""
    return f"process {holder['pid']}{where}{since}"
