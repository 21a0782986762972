"""The seal of a result version: one digest over everything it records, kept twice.

A version's ``manifest.json`` lists the SHA-256 of every file (and of every outcome cell).
The seal closes the loop on the manifest itself:

- ``root`` = SHA-256 of the canonical JSON of the manifest without its ``seal`` block
  (keys sorted, no whitespace). Any changed byte of any file changes that file's digest in
  the manifest, and any edit of the manifest (a hypothesis, ``cells_planned``, the
  environment) changes ``root``;
- the root is written into the manifest (``seal.root``) and appended, before the version
  is published, as one line of the store's append-only index (``<root>/index.jsonl``:
  study, version, root, time). An editor who recomputes the manifest's own root still
  disagrees with the index.

On :func:`verify <robuststats.results.verify>` the root is recomputed and compared with
both, and ``spec_hash`` is recomputed from the stored ``spec`` (SHA-256 of its canonical
JSON, as :meth:`StudySpec.spec_hash <robuststats.runs.StudySpec.spec_hash>` computes it).

What the seal cannot detect: someone with write access who rewrites a file, every digest
that covers it, the manifest's root *and* the index line consistently. It is a check of
integrity against accidents and casual edits, not a signature (docs/studies.md).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from robuststats._canonical import canonical_sha256

__all__ = ["INDEX", "SEAL_FORMAT", "index_roots", "manifest_root", "record_in_index",
           "seal_problem", "spec_hash_of", "with_seal"]

#: the store's append-only index of seals, one JSON object a line
INDEX = "index.jsonl"
#: format of the ``seal`` block (versions sealed before it have none)
SEAL_FORMAT = 1


def manifest_root(manifest: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``manifest`` without its ``seal`` block."""
    return canonical_sha256({k: v for k, v in manifest.items() if k != "seal"})


def spec_hash_of(spec: Any) -> str:
    """The ``spec_hash`` of a stored (resolved) spec, as ``StudySpec.spec_hash`` takes it."""
    return canonical_sha256(spec)


def with_seal(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """``manifest`` as it reads back from its JSON file, plus its ``seal`` block."""
    plain = json.loads(json.dumps(dict(manifest), default=str))
    plain.pop("seal", None)
    return {**plain, "seal": {"format": SEAL_FORMAT, "algorithm": "sha256",
                              "root": manifest_root(plain)}}


def record_in_index(store_root: Path, study: str, number: int, root: str, sealed: str) -> None:
    """Append one line to the store's index in a single ``O_APPEND`` write (concurrent
    publishers cannot interleave a line) and fsync it before the version is published."""
    line = json.dumps({"study": study, "version": number, "root": root, "sealed": sealed},
                      separators=(",", ":")) + "\n"
    fd = os.open(store_root / INDEX, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def index_roots(store_root: Path, study: str, number: int) -> set[str] | None:
    """The roots the index records for ``study/v<number>`` (a lost publish race can leave
    one that no version has), or None when the store has no index. Damaged lines are
    skipped: a version whose line is damaged is reported as absent from the index."""
    path = store_root / INDEX
    if not path.is_file():
        return None
    roots: set[str] = set()
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and rec.get("study") == study \
                    and rec.get("version") == number and isinstance(rec.get("root"), str):
                roots.add(rec["root"])
    return roots


def seal_problem(manifest: Mapping[str, Any]) -> str | None:
    """Why ``manifest`` cannot be trusted as sealed, or None: its seal no longer matches
    it, or its ``spec_hash`` is not the hash of its ``spec``. (The index is consulted by
    :func:`~robuststats.results.verify`, which knows where the store is.)"""
    block = manifest.get("seal")
    if block is not None and (not isinstance(block, dict)
                              or block.get("root") != manifest_root(manifest)):
        return "manifest.json changed after it was sealed"
    if "spec" in manifest and isinstance(manifest.get("spec_hash"), str) \
            and spec_hash_of(manifest["spec"]) != manifest["spec_hash"]:
        return "its spec changed after it was sealed (spec_hash is not the spec's hash)"
    return None
