"""The capture file: one run of one model on the items, as a zip archive of NumPy arrays.

Layout (``docs/divergence.md``, "Two machines: capture, then compare"):

- ``chunk-00000/*.npy`` (deflated), ``chunk-00001/*.npy``, ...: one chunk per batch of items, each with
  ``sq_norm``, ``zero_rows``, ``n_rows`` (``(n_sites, n_items)``), ``subset``
  (``(n_sites, n_items, K)``, NaN past an item's ``min(K, n)``), ``sketch`` and
  ``unit_sketch`` (``(n_sites, n_items, k)`` float64). Written as the run goes, so the
  writer holds one batch's sketches, never more;
- ``header.json``, written last: format and version, the model, tokenizer, items,
  condition, sites, sketch parameters, machine, package version, and the chunks with the
  SHA-256 of every member.

The file is written under a temporary name and renamed when complete: an interrupted run
leaves no capture. Reading checks the zip structure, the header and every member's
checksum; a damaged or truncated file is one :class:`InputError` naming the flag.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from robuststats.errors import InputError

__all__ = ["CAPTURE_FORMAT", "CAPTURE_VERSION", "CaptureReader", "CaptureWriter",
           "is_capture"]

CAPTURE_FORMAT = "robuststats.capture"
CAPTURE_VERSION = 1
_ARRAYS = ("sq_norm", "zero_rows", "n_rows", "subset", "sketch", "unit_sketch")
_HEADER = "header.json"
# the trailing dimensions of each array, from the sketch parameters
_TAIL = {"sq_norm": lambda sk: (), "zero_rows": lambda sk: (), "n_rows": lambda sk: (),
         "subset": lambda sk: (sk["subset_size"],),
         "sketch": lambda sk: (sk["projection_dim"],),
         "unit_sketch": lambda sk: (sk["projection_dim"],)}
_MAX_HEADER = 256 << 20


class CaptureWriter:
    """Write a capture chunk by chunk (``add_chunk``), then ``close(header)``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.partial")
        self.zip = zipfile.ZipFile(self.tmp, "w", compression=zipfile.ZIP_DEFLATED,
                                   compresslevel=1,
                                   allowZip64=True)
        self.chunks: list[dict[str, Any]] = []
        self.checksums: dict[str, str] = {}

    def add_chunk(self, start: int, stop: int, arrays: dict[str, np.ndarray]) -> None:
        name = f"chunk-{len(self.chunks):05d}"
        for key in _ARRAYS:
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arrays[key]),
                                      allow_pickle=False)
            data = buf.getvalue()
            member = f"{name}/{key}.npy"
            self.zip.writestr(member, data)
            self.checksums[member] = hashlib.sha256(data).hexdigest()
        self.chunks.append({"name": name, "start": start, "stop": stop})

    def close(self, header: dict[str, Any]) -> int:
        """Write the header, seal the file and move it into place; returns its size."""
        header = {**header, "chunks": self.chunks, "checksums": self.checksums}
        self.zip.writestr(_HEADER, json.dumps(header, indent=1, allow_nan=False,
                                              default=str))
        self.zip.close()
        os.replace(self.tmp, self.path)
        return self.path.stat().st_size

    def abort(self) -> None:
        try:
            self.zip.close()
        finally:
            self.tmp.unlink(missing_ok=True)


def is_capture(path: str | Path) -> bool:
    """True when ``path`` is a file that starts like a zip archive (a capture or a damaged
    one; :class:`CaptureReader` tells which)."""
    p = Path(path)
    if not p.is_file():
        return False
    try:
        with open(p, "rb") as fh:
            return fh.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def _is_int(value: Any, *, low: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


class CaptureReader:
    """A capture file, checked on opening: ``header`` and ``chunk(i)`` arrays."""

    def __init__(self, path: str | Path, *, name: str = "capture") -> None:
        self.path = Path(path)
        self.name = name
        if not self.path.is_file():
            raise InputError(f"`{name}`: capture file {str(path)!r} does not exist.")
        try:
            self.zip = zipfile.ZipFile(self.path)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
            raise InputError(f"`{name}`: {str(path)!r} is not a complete capture file "
                             f"(damaged or truncated: {exc}).") from None
        self.header = self._header()
        self.size = self.path.stat().st_size

    def _fail(self, what: str) -> InputError:
        return InputError(f"`{self.name}`: {str(self.path)!r} {what}.")

    def _read(self, member: str) -> bytes:
        try:
            info = self.zip.getinfo(member)
        except KeyError:
            raise self._fail(f"lacks {member!r} (not a capture, or truncated)") from None
        if member == _HEADER and info.file_size > _MAX_HEADER:
            raise self._fail(f"has an oversized member {member!r}")
        try:
            return self.zip.read(member)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error) as exc:
            raise self._fail(f"is damaged: {member!r} cannot be read ({exc})") from None

    def _header(self) -> dict[str, Any]:
        try:
            header = json.loads(self._read(_HEADER).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise self._fail("has a header that is not JSON") from None
        if not isinstance(header, dict) or header.get("format") != CAPTURE_FORMAT:
            raise self._fail(f"is not a capture (its header's format is not "
                             f"{CAPTURE_FORMAT!r})")
        version = header.get("format_version")
        if version != CAPTURE_VERSION:
            raise self._fail(f"has format_version {version!r}; this package reads "
                             f"{CAPTURE_VERSION}")
        for key, kind in (("items", dict), ("sites", list), ("sketch", dict),
                          ("chunks", list), ("checksums", dict), ("condition", dict),
                          ("model", dict)):
            if not isinstance(header.get(key), kind):
                raise self._fail(f"has no valid {key!r} in its header")
        ids = header["items"].get("ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids) \
                or len(set(ids)) != len(ids):
            raise self._fail("has no list of distinct item ids in its header")
        chunks = header["chunks"]
        if not all(isinstance(c, dict) and isinstance(c.get("name"), str)
                   and _is_int(c.get("start")) and _is_int(c.get("stop")) for c in chunks):
            raise self._fail("has a malformed chunk list in its header")
        stops = [c["stop"] for c in chunks]
        starts = [c["start"] for c in chunks]
        if starts[:1] != [0] or stops[-1:] != [len(ids)] or starts[1:] != stops[:-1] \
                or any(b <= a for a, b in zip(starts, stops, strict=True)):
            raise self._fail("has chunks that do not cover its items")
        for site in header["sites"]:
            if not (isinstance(site, dict) and isinstance(site.get("name"), str)
                    and _is_int(site.get("layer"), low=-1)
                    and isinstance(site.get("module_type"), str)
                    and (site.get("n_features") is None or _is_int(site.get("n_features")))):
                raise self._fail("has a malformed site in its header")
        sketch = header["sketch"]
        if not (_is_int(sketch.get("subset_size")) and _is_int(sketch.get("projection_dim"))
                and _is_int(sketch.get("seed")) and sketch["subset_size"] >= 2
                and sketch["projection_dim"] >= 2):
            raise self._fail("has malformed sketch parameters in its header")
        return header

    @property
    def item_ids(self) -> list[str]:
        return list(self.header["items"]["ids"])

    def chunk(self, index: int) -> dict[str, np.ndarray]:
        """The arrays of chunk ``index``, each checked against its SHA-256."""
        info = self.header["chunks"][index]
        out = {}
        n_sites = len(self.header["sites"])
        n_items = info["stop"] - info["start"]
        for key in _ARRAYS:
            member = f"{info['name']}/{key}.npy"
            data = self._read(member)
            if hashlib.sha256(data).hexdigest() != self.header["checksums"].get(member):
                raise self._fail(f"is damaged: {member!r} does not match its checksum")
            try:
                arr = np.lib.format.read_array(io.BytesIO(data), allow_pickle=False)
            except (ValueError, OSError, EOFError) as exc:
                raise self._fail(f"is damaged: {member!r} is not an array ({exc})") from None
            want = (n_sites, n_items, *_TAIL[key](self.header["sketch"]))
            if arr.shape != want:
                raise self._fail(f"is damaged: {member!r} has shape {arr.shape}, expected "
                                 f"{want}")
            out[key] = arr
        return out

    def chunks(self) -> Iterator[tuple[int, int, dict[str, np.ndarray]]]:
        for i, info in enumerate(self.header["chunks"]):
            yield info["start"], info["stop"], self.chunk(i)

    def close(self) -> None:
        self.zip.close()

    def __enter__(self) -> CaptureReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
