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
import hashlib
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

from robuststats.errors import InputError, closest_match

__all__ = ["ResultStore", "ResultVersion", "VerifyReport", "sha256_file", "verify"]

MANIFEST = "manifest.json"
_VERSION_DIR = re.compile(r"^v(\d+)$")
#: prefix of a version being written (never listed, shown or verified)
_TMP_PREFIX = ".tmp-v"
_TMP_LOCK = ".lock"
#: publish attempts before giving up (each lost race re-writes the version one higher)
_MAX_PUBLISH_ATTEMPTS = 100


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


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
                manifest: dict[str, Any]) -> ResultVersion:
        """Write a complete version and publish it as the next free ``v<N>``.

        ``writer(path, number)`` fills a private temporary directory for version
        ``number``; :func:`seal` adds the manifest; one ``os.rename`` publishes it. If the
        writer (or sealing) fails, nothing is published and the temporary is removed. If
        another process publishes ``v<N>`` first, the version is written again as the next
        number.
        """
        base = self.root / study
        base.mkdir(parents=True, exist_ok=True)
        sweep_temporaries(base)
        number = 0
        for _ in range(_MAX_PUBLISH_ATTEMPTS):
            # past the last version, and past any number this call already lost
            number = max((self.numbers(study) or [0])[-1], number) + 1
            with _Staging(base, number) as tmp:
                writer(tmp, number)
                sealed = seal(tmp, study, number, manifest)
                final = base / f"v{number}"
                if _claim(tmp, final):
                    return ResultVersion(study, number, final, sealed.manifest)
        raise OSError(errno.EEXIST, f"could not claim a version number under {base} after "
                                    f"{_MAX_PUBLISH_ATTEMPTS} attempts")

    def write(self, study: str, writer: Callable[[Path], None],
              manifest: dict[str, Any]) -> ResultVersion:
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


def seal(path: Path, study: str, number: int, manifest: dict[str, Any]) -> ResultVersion:
    """Write ``manifest.json`` with file checksums and make the version read-only."""
    files = {}
    for f in sorted(p for p in path.rglob("*") if p.is_file() and p.name != MANIFEST):
        rel = f.relative_to(path).as_posix()
        files[rel] = {"sha256": sha256_file(f), "bytes": f.stat().st_size}
    full = {**manifest, "study": study, "version": number,
            "sealed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "files": files}
    (path / MANIFEST).write_text(json.dumps(full, indent=2, sort_keys=False, default=str) + "\n")
    for f in path.rglob("*"):
        if f.is_file():
            f.chmod(f.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    return ResultVersion(study, number, path, full)


@dataclass(frozen=True)
class VerifyReport:
    """Outcome of :func:`verify`.

    Files: whose bytes changed, vanished or appeared since sealing. Cells (versions whose
    manifest records ``cells``): cells of ``outcomes.parquet`` whose rows no longer match
    their recorded SHA-256, recorded cells absent from it, and cells in it that the
    manifest does not record. Run directory (when it still exists and holds the same run):
    recorded cells whose file there differs from the version, or is gone.
    """

    version: str
    changed: list[str]
    missing: list[str]
    extra: list[str]
    cells: int = 0
    cells_changed: list[str] = field(default_factory=list)
    cells_missing: list[str] = field(default_factory=list)
    cells_extra: list[str] = field(default_factory=list)
    run_dir: str | None = None
    run_cells_differ: list[str] = field(default_factory=list)
    run_cells_gone: list[str] = field(default_factory=list)
    run_note: str = ""

    @property
    def ok(self) -> bool:
        """No file or cell of the version changed, and none differs from its run directory.

        A cell gone from the run directory (deleted, or set aside) is reported, not failed:
        the run directory is a cache."""
        return not (self.changed or self.missing or self.extra or self.cells_changed
                    or self.cells_missing or self.cells_extra or self.run_cells_differ)


def verify(version: ResultVersion, *, run_dir: str | Path | None = None,
           trace_run: bool = True) -> VerifyReport:
    """Recompute every file's SHA-256 and every cell's digest and compare with the manifest.

    With ``trace_run``, the cells are also compared with the run directory they came from:
    ``run_dir``, or the manifest's ``run_dir`` (relative paths are read from the current
    directory), when it exists and its ``spec.json`` records the version's run hash.
    """
    recorded: dict[str, Any] = version.manifest.get("files", {})
    if not isinstance(recorded, dict):
        raise InputError(f"{version.label}: the manifest's 'files' must be a mapping, got "
                         f"{type(recorded).__name__}.")
    changed, missing = [], []
    for rel, meta in recorded.items():
        f = version.path / rel
        if not f.is_file():
            missing.append(rel)
        elif not isinstance(meta, dict) or sha256_file(f) != meta.get("sha256"):
            changed.append(rel)
    present = {p.relative_to(version.path).as_posix() for p in version.path.rglob("*")
               if p.is_file() and p.name != MANIFEST}
    extra = sorted(present - set(recorded))
    cells = version.manifest.get("cells")
    if not isinstance(cells, dict) or not cells:
        return VerifyReport(version.label, sorted(changed), sorted(missing), extra)
    found = _version_cells(version)
    cells_changed = sorted(k for k, c in cells.items() if k in found
                           and (not isinstance(c, dict) or found[k] != c.get("sha256")))
    cells_missing = sorted(k for k in cells if k not in found)
    cells_extra = sorted(k for k in found if k not in cells)
    trace = _trace_run(version, cells, run_dir) if trace_run else (None, [], [], "")
    return VerifyReport(version.label, sorted(changed), sorted(missing), extra, len(cells),
                        cells_changed, cells_missing, cells_extra, *trace)


def _version_cells(version: ResultVersion) -> dict[str, str]:
    """Digest of every cell in the version's ``outcomes.parquet`` (empty when unreadable:
    the file checks already name it)."""
    import pandas as pd

    from robuststats.outcomes import cell_digests

    try:
        outcomes = pd.read_parquet(version.path / "outcomes.parquet")
        return {k: v["sha256"] for k, v in cell_digests(outcomes).items()}
    except Exception:
        return {}


def _trace_run(version: ResultVersion, cells: dict[str, Any], run_dir: str | Path | None
               ) -> tuple[str | None, list[str], list[str], str]:
    import pandas as pd

    from robuststats.outcomes import cell_digest

    where = run_dir if run_dir is not None else version.manifest.get("run_dir")
    if not where:
        return None, [], [], "the manifest names no run directory"
    root = Path(str(where))
    spec_file = root / "spec.json"
    if not spec_file.is_file():
        return None, [], [], f"run directory {str(root)!r} is not there any more"
    try:
        run_hash = json.loads(spec_file.read_text()).get("run_hash")
    except (OSError, ValueError, AttributeError):
        run_hash = None
    expected = version.manifest.get("run_hash")
    if expected is None or run_hash != expected:
        return None, [], [], (f"run directory {str(root)!r} now holds another run "
                              f"(run hash {str(run_hash)[:12]}, the version's "
                              f"{str(expected)[:12]})")
    differ, gone = [], []
    for key, meta in cells.items():
        path = root / "cells" / f"{key}.parquet"
        if not path.is_file():
            gone.append(key)
            continue
        try:
            digest = cell_digest(pd.read_parquet(path))
        except Exception:
            digest = None
        if not isinstance(meta, dict) or digest != meta.get("sha256"):
            differ.append(key)
    return str(root), sorted(differ), sorted(gone), ""
