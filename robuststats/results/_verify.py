"""``verify``: recompute a version's checksums, its seal and its cells, and trace the cells
back to the run directory they came from."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robuststats.errors import InputError
from robuststats.results._seal import index_roots, manifest_root, spec_hash_of
from robuststats.results._store import MANIFEST, ResultVersion, sha256_file

__all__ = ["VerifyReport", "verify"]


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
    #: the manifest no longer matches its own seal (``None``: sealed before seals existed)
    manifest_changed: bool | None = None
    #: the stored ``spec_hash`` is not the hash of the stored spec (``None``: no spec)
    spec_hash_changed: bool | None = None
    #: the store's index: "match", "differs" (it records other roots for this version),
    #: "absent" (no line for it) or None (no index beside the version, or no seal)
    index: str | None = None

    @property
    def ok(self) -> bool:
        """No file, cell or byte of the manifest changed, the index agrees, and no cell
        differs from its run directory.

        A cell gone from the run directory (deleted, or set aside) is reported, not failed:
        the run directory is a cache. A version copied out of its store (no index beside
        it) or absent from the index is checked against its own seal only (reported)."""
        return not (self.changed or self.missing or self.extra or self.cells_changed
                    or self.cells_missing or self.cells_extra or self.run_cells_differ
                    or self.manifest_changed or self.spec_hash_changed
                    or self.index == "differs")


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
    seal = _seal_checks(version)
    cells = version.manifest.get("cells")
    if not isinstance(cells, dict) or not cells:
        return VerifyReport(version.label, sorted(changed), sorted(missing), extra, **seal)
    found = _version_cells(version)
    cells_changed = sorted(k for k, c in cells.items() if k in found
                           and (not isinstance(c, dict) or found[k] != c.get("sha256")))
    cells_missing = sorted(k for k in cells if k not in found)
    cells_extra = sorted(k for k in found if k not in cells)
    trace = _trace_run(version, cells, run_dir) if trace_run else (None, [], [], "")
    return VerifyReport(version.label, sorted(changed), sorted(missing), extra, len(cells),
                        cells_changed, cells_missing, cells_extra, *trace, **seal)


def _seal_checks(version: ResultVersion) -> dict[str, Any]:
    """The manifest against its seal and the store's index, and ``spec_hash`` against the
    stored spec (:mod:`robuststats.results._seal`)."""
    m = version.manifest
    out: dict[str, Any] = {}
    if "spec" in m and isinstance(m.get("spec_hash"), str):
        out["spec_hash_changed"] = spec_hash_of(m["spec"]) != m["spec_hash"]
    block = m.get("seal")
    if block is None:
        return out
    root = manifest_root(m)
    out["manifest_changed"] = not isinstance(block, dict) or block.get("root") != root
    roots = index_roots(version.path.parent.parent, version.study, version.number)
    if roots is not None:
        out["index"] = "match" if root in roots else ("differs" if roots else "absent")
    return out


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
