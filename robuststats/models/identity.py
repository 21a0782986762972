"""A checkpoint directory's identity: the SHA-256 of the files a model is loaded from.

Anything stored that names a checkpoint (a divergence capture, a study run's evaluated
checkpoint, a command trainer's cached pointer, a gate result) records
:func:`checkpoint_identity` of it, and checks it where the checkpoint is used again
(:func:`identity_difference`): a path says where a model was, not which model it is. A
checkpoint moved to another directory or machine keeps its identity; one replaced by
another of the same architecture, re-saved in another dtype, or given another tokenizer
does not.

What is hashed: the weight files the loader reads (``model.safetensors`` or the shards
its index names, else ``pytorch_model.bin`` or its shards, and the index itself), the
model's ``config.json`` (and ``generation_config.json``), and the tokenizer's files
(:data:`TOKENIZER_FILES` and the files saved beside them). Each file is read in 1 MiB
blocks, never loaded whole; the identity's ``sha256`` is the SHA-256 of the sorted lines
``name<TAB>role<TAB>sha256``, so it does not depend on the directory's name or place.
The weights' dtype is read from the safetensors headers (the config's ``dtype`` for a
PyTorch ``.bin``), so a checkpoint re-saved in another dtype is named as such.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any

from robuststats._sha256 import sha256_file as file_sha256
from robuststats.errors import InputError
from robuststats.models.model import TOKENIZER_FILES
from robuststats.models.weights import weight_file

__all__ = ["IDENTITY_FORMAT", "checkpoint_identity", "differing_roles", "file_sha256",
           "identity_difference"]

#: the format of a recorded identity (the files hashed and how they are combined)
IDENTITY_FORMAT = 1

_CONFIG_FILES = ("config.json", "generation_config.json")
#: files a tokenizer saves beside its vocabulary
_TOKENIZER_EXTRA = ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                    "merges.txt", "chat_template.jinja", "chat_template.json")
#: safetensors dtype names -> torch's
_ST_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
              "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "I64": "int64",
              "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool"}
_ROLES = ("weights", "config", "tokenizer")


def _weight_files(directory: Path) -> list[Path]:
    first = weight_file(directory)
    if first is None:
        return []
    if not first.name.endswith(".index.json"):
        return [first]
    try:
        data = json.loads(first.read_text(encoding="utf-8"))
        names = list(dict.fromkeys(str(v) for v in data["weight_map"].values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        # a damaged index: the shards beside it by transformers' naming, so that the
        # difference is named as the index's, not as every shard missing
        stem, _, suffix = first.name.partition(".")
        names = sorted(p.name for p in directory.glob(f"{stem}-*.{suffix.split('.')[0]}"))
    return [first, *(directory / n for n in names if (directory / n).is_file())]


def _safetensors_dtypes(path: Path) -> set[str]:
    try:
        with open(path, "rb") as fh:
            (length,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(min(length, 100_000_000)))
    except (OSError, ValueError, struct.error):
        return set()
    return {_ST_DTYPES.get(v.get("dtype"), str(v.get("dtype")).lower())
            for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)}


def _weights_dtype(directory: Path, weights: list[Path]) -> str | None:
    dtypes: set[str] = set()
    for path in weights:
        if path.suffix == ".safetensors":
            dtypes |= _safetensors_dtypes(path)
    if not dtypes:  # a PyTorch .bin: what the config says it was saved in
        try:
            config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        value = config.get("dtype") or config.get("torch_dtype") if isinstance(config, dict) \
            else None
        return str(value) if value else None
    return ",".join(sorted(dtypes))


def checkpoint_identity(directory: str | Path, *, key: str = "checkpoint") -> dict[str, Any]:
    """The identity of the checkpoint in ``directory`` (module docstring):
    ``{"format", "sha256", "weights_dtype", "files": {name: {"role", "bytes", "sha256"}}}``.

    Raises :class:`InputError` naming ``key`` when ``directory`` is not a directory or holds
    no weight file.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"`{key}`: {str(directory)!r} is not a directory.")
    weights = _weight_files(directory)
    if not weights:
        raise InputError(f"`{key}`: {str(directory)!r} holds no weight file.")
    chosen: dict[str, str] = {p.name: "weights" for p in weights}
    for name in _CONFIG_FILES:
        chosen.setdefault(name, "config")
    for name in (*TOKENIZER_FILES, *_TOKENIZER_EXTRA):
        chosen.setdefault(name, "tokenizer")
    files: dict[str, dict[str, Any]] = {}
    for name, role in sorted(chosen.items()):
        path = directory / name
        if path.is_file():
            try:
                files[name] = {"role": role, "bytes": path.stat().st_size,
                               "sha256": file_sha256(path)}
            except OSError as exc:
                raise InputError(f"`{key}`: {str(path)!r} cannot be read: "
                                 f"{exc.strerror or exc}.") from None
    lines = "".join(f"{n}\t{f['role']}\t{f['sha256']}\n" for n, f in sorted(files.items()))
    return {"format": IDENTITY_FORMAT, "sha256": hashlib.sha256(lines.encode()).hexdigest(),
            "weights_dtype": _weights_dtype(directory, weights), "files": files}


def identity_difference(recorded: Any, current: dict[str, Any], *,
                        what: str = "the recorded one") -> str | None:
    """How ``current`` (:func:`checkpoint_identity`) differs from ``recorded``, in words
    that name the file (``"its weights file 'model.safetensors' differs ..."``), or None
    when they are the same checkpoint. ``what`` names the recorded side in the sentence.
    A record that is not an identity (absent, another format) is a difference."""
    if not isinstance(recorded, dict) or recorded.get("format") != IDENTITY_FORMAT \
            or not isinstance(recorded.get("files"), dict):
        return f"{what} records no checkpoint identity this version reads"
    if recorded.get("sha256") == current["sha256"]:
        return None
    old, new = recorded["files"], current["files"]
    weights_changed = any(f.get("role") == "weights" and new.get(n) != f
                          for n, f in old.items() if isinstance(f, dict))
    was, now = recorded.get("weights_dtype"), current.get("weights_dtype")
    if weights_changed and was and now and was != now:
        return (f"its weights are saved in {now}, not {was} as in {what}: a checkpoint "
                "re-saved in another dtype holds other weights")
    for role in _ROLES:
        names = sorted({n for n, f in old.items() if isinstance(f, dict)
                        and f.get("role") == role}
                       | {n for n, f in new.items() if f["role"] == role})
        for name in names:
            a, b = old.get(name), new.get(name)
            if b is None:
                return f"its {role} file {name!r} is missing ({what} had one)"
            if not isinstance(a, dict):
                return f"it has a {role} file {name!r} that {what} did not have"
            if a.get("sha256") != b["sha256"]:
                return (f"its {role} file {name!r} differs (SHA-256 {b['sha256'][:12]}... "
                        f"against {str(a.get('sha256'))[:12]}...)")
    return "its files differ"


def differing_roles(recorded: Any, current: dict[str, Any]) -> set[str]:
    """The roles (``weights``, ``config``, ``tokenizer``) of the files that differ between
    two identities, a file present on one side only included."""
    old = recorded.get("files") if isinstance(recorded, dict) else None
    if not isinstance(old, dict):
        return set(_ROLES)
    new = current["files"]
    roles = {f.get("role") for n, f in old.items() if isinstance(f, dict)
             and (n not in new or new[n]["sha256"] != f.get("sha256"))}
    roles |= {f["role"] for n, f in new.items() if not isinstance(old.get(n), dict)}
    return {str(r) for r in roles}
