"""Immutable, numbered result versions: ``<root>/<study>/v<N>/``.

A version number is reserved with an exclusive ``os.mkdir`` (which fails if the directory
exists), never with ``os.rename`` onto a path (Linux lets a rename replace an empty
directory silently). Two concurrent runs therefore always get distinct numbers. Once the
files are written, ``manifest.json`` records a SHA-256 per file and every file is made
read-only; :func:`verify` recomputes the checksums.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robuststats.errors import InputError, closest_match

__all__ = ["ResultStore", "ResultVersion", "VerifyReport", "sha256_file", "verify"]

MANIFEST = "manifest.json"
_VERSION_DIR = re.compile(r"^v(\d+)$")


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

    def reserve(self, study: str) -> tuple[int, Path]:
        """Create and return the next free ``v<N>`` directory (safe under concurrency)."""
        base = self.root / study
        base.mkdir(parents=True, exist_ok=True)
        n = (self.numbers(study) or [0])[-1] + 1
        while True:
            path = base / f"v{n}"
            try:
                os.mkdir(path)  # atomic and exclusive: exactly one caller creates it
            except FileExistsError:
                n += 1
                continue
            return n, path

    def write(self, study: str, writer: Callable[[Path], None],
              manifest: dict[str, Any]) -> ResultVersion:
        """Reserve a version, let ``writer(path)`` fill it, then seal it with a manifest."""
        number, path = self.reserve(study)
        writer(path)
        return seal(path, study, number, manifest)


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
    """Outcome of :func:`verify`: files whose bytes changed, vanished or appeared."""

    version: str
    changed: list[str]
    missing: list[str]
    extra: list[str]

    @property
    def ok(self) -> bool:
        return not (self.changed or self.missing or self.extra)


def verify(version: ResultVersion) -> VerifyReport:
    """Recompute every file's SHA-256 and compare with the manifest."""
    recorded: dict[str, Any] = version.manifest.get("files", {})
    changed, missing = [], []
    for rel, meta in recorded.items():
        f = version.path / rel
        if not f.is_file():
            missing.append(rel)
        elif sha256_file(f) != meta["sha256"]:
            changed.append(rel)
    present = {p.relative_to(version.path).as_posix() for p in version.path.rglob("*")
               if p.is_file() and p.name != MANIFEST}
    extra = sorted(present - set(recorded))
    return VerifyReport(version.label, sorted(changed), sorted(missing), extra)
