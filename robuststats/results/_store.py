"""Immutable, numbered result versions: ``<root>/<study>/v<N>/``.

A version is published only when it is complete. It is written and sealed in a private
temporary directory beside the versions (``<study>/.tmp-v<N>-*``), then renamed to
``v<N>`` in one step. The rename claims the number atomically: renaming a directory onto
an existing *non-empty* directory fails, and a published version is never empty (it holds
at least its manifest), so of two concurrent publishers of ``v<N>`` exactly one succeeds;
the other writes itself again as ``v<N+1>`` (the number is inside the files). ``list``,
``show`` and ``verify`` therefore never meet half a version, and a version is never
overwritten. A temporary left by a killed publisher is recognised by its lock file (an
``flock`` the publisher holds while writing, which dies with it) and removed by the next
publish. ``manifest.json`` records a SHA-256 per file (and per outcome cell) and every file
is made read-only; :func:`verify` recomputes the checksums.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robuststats._sha256 import sha256_file
from robuststats.errors import InputError, closest_match
from robuststats.results._manifest import Manifest
from robuststats.results._seal import record_in_index, with_seal

__all__ = ["MANIFEST", "ResultStore", "ResultVersion", "seal", "sha256_file"]

MANIFEST = "manifest.json"
_VERSION_DIR = re.compile(r"^v(\d+)$")
#: prefix of a version being written (never listed, shown or verified)
_TMP_PREFIX = ".tmp-v"
_TMP_LOCK = ".lock"
#: publish attempts before giving up (each lost race re-writes the version one higher)
_MAX_PUBLISH_ATTEMPTS = 100


@dataclass(frozen=True)
class ResultVersion:
    """One finished version of a study's results."""

    study: str
    number: int
    path: Path
    manifest: dict[str, Any] = field(repr=False)

    @property
    def label(self) -> str:
        return f"{self.study}/v{self.number}"

    @classmethod
    def load(cls, path: str | Path) -> ResultVersion:
        path = Path(path)
        m = _VERSION_DIR.match(path.name)
        mfile = path / MANIFEST
        if m is None or not mfile.is_file():
            raise InputError(f"{str(path)!r} is not a result version (expected "
                             f"<study>/v<N>/ with {MANIFEST}).")
        try:
            manifest = json.loads(mfile.read_text())
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            raise InputError(f"{str(mfile)!r} is not valid JSON: {exc}") from None
        if not isinstance(manifest, dict):
            raise InputError(f"{str(mfile)!r} must hold a JSON object, got "
                             f"{type(manifest).__name__}.")
        return cls(path.parent.name, int(m.group(1)), path, manifest)


class ResultStore:
    """The versioned result tree under ``root`` (default ``results/``)."""

    def __init__(self, root: str | Path = "results") -> None:
        self.root = Path(root)

    def studies(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and self.numbers(p.name))

    def numbers(self, study: str) -> list[int]:
        base = self.root / study
        if not base.is_dir():
            return []
        return sorted(int(m.group(1)) for p in base.iterdir()
                      if (m := _VERSION_DIR.match(p.name)) and p.is_dir())

    def versions(self, study: str) -> list[ResultVersion]:
        """Finished versions (with a manifest), oldest first."""
        out = []
        for n in self.numbers(study):
            path = self.root / study / f"v{n}"
            if (path / MANIFEST).is_file():
                out.append(ResultVersion.load(path))
        return out

    def get(self, ref: str) -> ResultVersion:
        """``study``, ``study/vN``, ``study/latest`` or a path to a version directory."""
        ref = ref.rstrip("/") or ref
        as_path = Path(ref)
        if (as_path / MANIFEST).is_file() or ref.count("/") > 1 or as_path.is_absolute():
            return ResultVersion.load(as_path)  # a path: names what is wrong with it
        study, _, tag = ref.partition("/")
        # only the version asked for is loaded: a damaged sibling must not hide it
        sealed = [n for n in self.numbers(study)
                  if (self.root / study / f"v{n}" / MANIFEST).is_file()]
        if not sealed:
            studies = self.studies()
            hint = closest_match(study, studies)
            tail = (f"; did you mean {hint!r}?" if hint else
                    f" (studies with results: {', '.join(studies) or 'none'}).")
            raise InputError(f"no results for study {study!r} under {str(self.root)!r}{tail}")
        if tag in ("", "latest"):
            return ResultVersion.load(self.root / study / f"v{sealed[-1]}")
        m = _VERSION_DIR.match(tag)
        if m is None:
            raise InputError(f"version {tag!r} must look like v3 or latest.")
        if int(m.group(1)) in sealed:
            return ResultVersion.load(self.root / study / f"v{int(m.group(1))}")
        raise InputError(f"{study}/{tag} does not exist; versions: "
                         f"{', '.join(f'v{n}' for n in sealed)}.")

    def publish(self, study: str, writer: Callable[[Path, int], None],
                manifest: Manifest | dict[str, Any]) -> ResultVersion:
        """Write a complete version and publish it as the next free ``v<N>``.

        ``writer(path, number)`` fills a private temporary directory for version
        ``number``; :func:`seal` adds the manifest; one ``os.rename`` publishes it. If the
        writer (or sealing) fails, nothing is published and the temporary is removed. If
        another process publishes ``v<N>`` first, the version is written again as the next
        number.
        """
        if isinstance(manifest, Manifest):
            manifest = manifest.to_dict()
        base = self.root / study
        base.mkdir(parents=True, exist_ok=True)
        sweep_temporaries(base)
        number = 0
        for _ in range(_MAX_PUBLISH_ATTEMPTS):
            # past the last version, and past any number this call already lost
            number = max((self.numbers(study) or [0])[-1], number) + 1
            with _Staging(base, number) as tmp:
                writer(tmp, number)
                sealed = seal(tmp, study, number, manifest, index=self.root)
                final = base / f"v{number}"
                if _claim(tmp, final):
                    return ResultVersion(study, number, final, sealed.manifest)
        raise OSError(errno.EEXIST, f"could not claim a version number under {base} after "
                                    f"{_MAX_PUBLISH_ATTEMPTS} attempts")

    def write(self, study: str, writer: Callable[[Path], None],
              manifest: Manifest | dict[str, Any]) -> ResultVersion:
        """:meth:`publish` with a writer that needs only the directory."""
        return self.publish(study, lambda path, _number: writer(path), manifest)


class _Staging:
    """A private temporary version directory, guarded by an ``flock`` held while it lives.

    The lock file (``<dir>.lock``) is created and locked before the directory exists, so a
    temporary whose lock can be taken belongs to a dead publisher.
    """

    def __init__(self, base: Path, number: int) -> None:
        self.base, self.number = base, number

    def __enter__(self) -> Path:
        fd, lock = tempfile.mkstemp(prefix=f"{_TMP_PREFIX}{self.number}-", suffix=_TMP_LOCK,
                                    dir=self.base)
        self.fd, self.lock = fd, Path(lock)
        _flock(fd, blocking=True)
        self.path = self.lock.with_name(self.lock.name[: -len(_TMP_LOCK)])
        self.path.mkdir()
        return self.path

    def __exit__(self, *exc: object) -> None:
        # after a successful claim the directory has been renamed away: nothing to remove
        shutil.rmtree(self.path, ignore_errors=True)
        self.lock.unlink(missing_ok=True)
        os.close(self.fd)


def _claim(tmp: Path, final: Path) -> bool:
    """Rename the sealed ``tmp`` to ``final`` unless ``final`` is taken; True when done."""
    if final.exists() and (not final.is_dir() or any(final.iterdir())):
        return False
    try:
        # fails on a non-empty target; an empty ``final`` (a reservation left by an older
        # version of this store) is replaced, which is what it was reserved for
        os.rename(tmp, final)
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
            return False  # taken (ENOTDIR: a file of that name is in the way)
        raise
    return True


def _flock(fd: int, *, blocking: bool) -> bool:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no stale-temporary detection
        return not blocking
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def sweep_temporaries(base: Path) -> list[Path]:
    """Remove the temporaries of dead publishers under ``base`` (one study's directory).

    A temporary is dead when its lock file can be locked (its publisher, which held the
    lock, is gone) or has no lock file. Returns what was removed.
    """
    removed: list[Path] = []
    if not base.is_dir():
        return removed
    for entry in sorted(base.glob(f"{_TMP_PREFIX}*")):
        if entry.name.endswith(_TMP_LOCK):
            continue
        lock = entry.with_name(entry.name + _TMP_LOCK)
        if lock.exists():
            try:
                fd = os.open(lock, os.O_RDWR)
            except FileNotFoundError:
                continue  # its publisher just finished
            try:
                if not _flock(fd, blocking=False):
                    continue  # a live publisher is writing it
                shutil.rmtree(entry, ignore_errors=True)
                lock.unlink(missing_ok=True)
            finally:
                os.close(fd)
        else:
            shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    for lock in base.glob(f"{_TMP_PREFIX}*{_TMP_LOCK}"):
        # a lock whose directory is gone (a publisher killed between the two steps)
        if not lock.with_name(lock.name[: -len(_TMP_LOCK)]).exists():
            try:
                fd = os.open(lock, os.O_RDWR)
            except FileNotFoundError:
                continue
            try:
                if _flock(fd, blocking=False):
                    lock.unlink(missing_ok=True)
            finally:
                os.close(fd)
    return removed


def seal(path: Path, study: str, number: int, manifest: dict[str, Any], *,
         index: Path | None = None) -> ResultVersion:
    """Write ``manifest.json`` with file checksums and its seal (:mod:`._seal`), record
    the seal in the store's index at ``index`` (the store root) when given, and make the
    version read-only."""
    files = {}
    for f in sorted(p for p in path.rglob("*") if p.is_file() and p.name != MANIFEST):
        rel = f.relative_to(path).as_posix()
        files[rel] = {"sha256": sha256_file(f), "bytes": f.stat().st_size}
    sealed = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    full = with_seal({**manifest, "study": study, "version": number, "sealed": sealed,
                      "files": files})
    (path / MANIFEST).write_text(json.dumps(full, indent=2, sort_keys=False, default=str) + "\n")
    if index is not None:
        record_in_index(index, study, number, full["seal"]["root"], sealed)
    for f in path.rglob("*"):
        if f.is_file():
            f.chmod(f.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    return ResultVersion(study, number, path, full)
