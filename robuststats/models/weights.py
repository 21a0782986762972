"""The weight files of a saved checkpoint, checked before anything loads them (no torch here).

transformers loads ``model.safetensors`` (or the shards of ``model.safetensors.index.json``)
when present, else ``pytorch_model.bin`` (or its shards) through
``torch.load(weights_only=True)``. That loader never runs code from a pickle, but a file it
refuses ends in torch's own error once a worker loads the model, in the middle of a run.
:func:`check_weights` reads what the loader will read, without loading or executing any of
it, and refuses a file with one line naming it and the reason:

- safetensors: the header (its length, its JSON, each tensor's dtype, shape and byte range,
  and that the ranges cover the data exactly);
- a PyTorch ``.bin`` (``torch.save``'s zip archive, or its legacy format): every pickle
  instruction is disassembled (:mod:`pickletools`), never executed; an instruction or a
  global (a function or class the pickle would call, ``posix.system`` say) that weights-only
  loading refuses is named;
- an index (``*.index.json``): JSON whose ``weight_map`` names shard files beside it, each
  checked in turn.

Every command checks its checkpoints with it before any evaluation: the study's preflight
and ``--check`` (through :func:`robuststats.models.checkpoints.resolve_checkpoint`), the
gate, the probe, the divergence report's model directories, and :func:`load_pretrained`.
"""

from __future__ import annotations

import json
import math
import pickletools
import re
import struct
import zipfile
from pathlib import Path
from typing import IO

from robuststats.errors import InputError, first_message_line

__all__ = ["WEIGHT_FILES", "check_weights", "weight_file"]

#: weight files of a checkpoint in the order transformers prefers them (one must be present)
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")

#: pickle instructions torch's weights-only unpickler executes (any other is refused there)
_OPCODES = frozenset({
    "GLOBAL", "NEWOBJ", "REDUCE", "BUILD", "APPEND", "APPENDS", "SETITEM", "SETITEMS", "MARK",
    "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "NONE", "NEWFALSE", "NEWTRUE", "EMPTY_TUPLE",
    "EMPTY_LIST", "EMPTY_DICT", "EMPTY_SET", "BININT", "BININT1", "BININT2", "BINFLOAT",
    "BINUNICODE", "SHORT_BINSTRING", "BINPERSID", "BINGET", "LONG_BINGET", "BINPUT",
    "LONG_BINPUT", "LONG1", "PROTO", "STOP"})
#: globals weights-only loading allows outside torch's tensor, storage and dtype names
_GLOBALS = frozenset({
    "collections.OrderedDict", "collections.Counter", "torch.nn.parameter.Parameter",
    "torch.serialization._get_layout", "torch.Size", "torch.Tensor", "torch.device",
    "_codecs.encode", "builtins.bytearray", "builtins.set", "builtins.complex",
    "torch._tensor._rebuild_from_type_v2", "torch.per_tensor_affine",
    "torch.per_tensor_symmetric", "torch.per_channel_affine", "torch.per_channel_symmetric",
    "torch.per_channel_affine_float_qparams"})
#: torch's tensor rebuild functions, dtypes, and tensor and storage classes
_TORCH_GLOBAL = re.compile(
    r"torch\._utils\._rebuild_\w+"
    r"|torch\.(u?int\d*|float\d*(_\w+)?|bfloat16|complex\d*|c?half|c?float|c?double|bool"
    r"|short|long|q(u)?int\w+|bits\w+)"
    r"|torch(\.cuda|\.storage)?\.\w+(Storage|Tensor)")
#: Python 2 names of a protocol-2 pickle, as torch maps them (``__builtin__.set``)
_PY2_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg"}
#: the first pickle of torch's legacy (pre-zip) format: its magic number
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
#: a pickle string longer than this is not part of a weights pickle (a read bound)
_MAX_STRING = 1 << 28
#: bits per element of safetensors' dtypes
_DTYPE_BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
               "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32,
               "I64": 64, "U64": 64, "F64": 64, "C64": 64, "F4": 4, "F6_E2M3": 6,
               "F6_E3M2": 6}
#: safetensors' own bound on its JSON header
_MAX_HEADER = 100_000_000


class _Refused(Exception):
    """A weight file the loader would refuse; the message is the reason."""


def weight_file(directory: Path) -> Path | None:
    """The weight file transformers would read in ``directory`` (the first of
    :data:`WEIGHT_FILES` present), or None."""
    for name in WEIGHT_FILES:
        if (directory / name).is_file():
            return directory / name
    return None


def check_weights(directory: str | Path, *, key: str) -> Path:
    """Check the weights transformers would load from ``directory``; returns their file.

    Raises :class:`InputError` ``"`key`: 'DIR/pytorch_model.bin' cannot be loaded: <reason>."``
    when they are absent, unreadable, malformed, or a pickle weights-only loading refuses.
    Reads headers and pickles only, never tensor data, and never runs a pickle.
    """
    directory = Path(directory)
    path = weight_file(directory)
    if path is None:
        raise InputError(f"`{key}`: {str(directory)!r} has no weights (one of "
                         f"{', '.join(WEIGHT_FILES)}).")
    try:
        files = _shards(path) if path.name.endswith(".index.json") else [path]
    except _Refused as exc:
        raise InputError(f"`{key}`: {str(path)!r} cannot be loaded: {exc}.") from None
    for file in files:
        try:
            if file.suffix == ".safetensors":
                _check_safetensors(file)
            else:
                _check_torch_file(file)
        except _Refused as exc:
            raise InputError(f"`{key}`: {str(file)!r} cannot be loaded: {exc}.") from None
        except OSError as exc:
            raise InputError(f"`{key}`: {str(file)!r} cannot be read: "
                             f"{exc.strerror or exc}.") from None
    return path


def _shards(index: Path) -> list[Path]:
    """The shard files an index names, each a file beside it."""
    try:
        data = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _Refused(f"it is not a JSON index ({first_message_line(exc)})") from None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise _Refused("it has no `weight_map` (parameter -> shard file)")
    suffix = ".safetensors" if index.name.startswith("model.safetensors") else ".bin"
    shards = []
    for name in dict.fromkeys(weight_map.values()):
        if not isinstance(name, str) or Path(name).name != name or name in ("", ".", ".."):
            raise _Refused(f"its weight_map names {name!r}, not a file beside it")
        if not name.endswith(suffix):
            raise _Refused(f"its weight_map names {name!r}, not a {suffix} file")
        if not (index.parent / name).is_file():
            raise _Refused(f"its shard {name!r} does not exist")
        shards.append(index.parent / name)
    return shards


# ---------------------------------------------------------------------- safetensors
def _check_safetensors(path: Path) -> None:
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise _Refused(f"it is not a safetensors file ({size} bytes, no header)")
        (length,) = struct.unpack("<Q", head)
        if length > _MAX_HEADER or 8 + length > size:
            raise _Refused(f"it is not a safetensors file, or it is truncated (a header of "
                           f"{length:,} bytes in a file of {size:,})")
        try:
            header = json.loads(fh.read(length))
        except (ValueError, UnicodeDecodeError) as exc:
            raise _Refused(f"its safetensors header is not JSON ({first_message_line(exc)})") \
                from None
    if not isinstance(header, dict):
        raise _Refused("its safetensors header is not a JSON object")
    data_size = size - 8 - length
    ranges = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict):
            raise _Refused(f"tensor {name!r} has no dtype, shape and offsets")
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), \
            entry.get("data_offsets")
        if not (isinstance(shape, list) and all(_count(d) for d in shape)
                and isinstance(offsets, list) and len(offsets) == 2
                and all(_count(o) for o in offsets) and isinstance(dtype, str)):
            raise _Refused(f"tensor {name!r} has no valid dtype, shape and data_offsets")
        begin, end = offsets
        if not begin <= end <= data_size:
            raise _Refused(f"tensor {name!r} lies outside the file (bytes {begin:,}-{end:,} "
                           f"of {data_size:,}): it is truncated")
        bits = _DTYPE_BITS.get(dtype)
        if bits is not None and math.prod(shape) * bits != (end - begin) * 8:
            raise _Refused(f"tensor {name!r} ({dtype}, shape {shape}) does not fill its "
                           f"{end - begin:,} bytes")
        ranges.append((begin, end, name))
    position = 0
    for begin, end, name in sorted(ranges):
        if begin != position:
            raise _Refused(f"its tensors do not cover the data exactly (tensor {name!r} "
                           f"starts at byte {begin:,}, expected {position:,})")
        position = end
    if position != data_size:
        raise _Refused(f"its tensors cover {position:,} of its {data_size:,} data bytes")


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# ---------------------------------------------------------------------- torch pickles
def _check_torch_file(path: Path) -> None:
    """A ``torch.save`` file: a zip archive with one ``data.pkl``, or the legacy format (a
    magic-number pickle, the protocol, the system info and the object, then raw data)."""
    if zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as archive:
                names = [n for n in archive.namelist()
                         if (n.endswith("/data.pkl") and n.count("/") == 1)
                         or n == "data.pkl"]
                if len(names) != 1:
                    raise _Refused("it is a zip archive without one data.pkl (not a "
                                   "torch.save file)")
                with archive.open(names[0]) as fh:
                    _scan(_Bounded(fh), path)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as exc:
            raise _Refused(f"it is a damaged zip archive ({first_message_line(exc)})") from None
        return
    with open(path, "rb") as fh:
        stream = _Bounded(fh)
        magic = _scan(stream, path)
        if magic != _LEGACY_MAGIC:
            raise _Refused("it is neither torch.save's zip archive nor its legacy format")
        for _ in range(3):  # the protocol, the system info, the object
            _scan(stream, path)


def _scan(stream: IO[bytes], path: Path) -> object:
    """Disassemble one pickle up to its STOP; refuse what weights-only loading refuses.

    Returns the argument of a one-instruction pickle (the legacy format's magic number),
    else None.
    """
    ops = 0
    value: object = None
    try:
        for opcode, arg, _ in pickletools.genops(stream):
            ops += 1
            name = opcode.name
            if name not in _OPCODES:
                raise _Refused(f"its pickle uses the instruction {name}, which weights-only "
                               "loading refuses (it was not written by torch.save)")
            if name == "GLOBAL":
                module, _, attr = str(arg).partition(" ")
                qualified = f"{_PY2_MODULES.get(module, module)}.{attr}"
                if qualified not in _GLOBALS and not _TORCH_GLOBAL.fullmatch(qualified):
                    raise _Refused(f"its pickle would call {qualified}, which weights-only "
                                   "loading refuses (it is not tensor data: the file may be "
                                   "an attempt to run code)")
            if name in ("LONG1", "BININT", "BININT1", "BININT2"):
                value = arg
    except _Refused:
        raise
    except (ValueError, EOFError, struct.error, OverflowError) as exc:
        raise _Refused(f"its pickle cannot be read ({first_message_line(exc)})") from None
    if ops == 0:
        raise _Refused("it is empty")
    return value if ops <= 3 else None  # PROTO, the number, STOP


class _Bounded:
    """A binary stream whose single reads are bounded (a declared string length of 4 GB
    must not allocate 4 GB before the file turns out to be shorter)."""

    def __init__(self, fh: IO[bytes]) -> None:
        self._fh = fh

    def read(self, n: int = -1) -> bytes:
        if n < 0 or n > _MAX_STRING:
            raise ValueError(f"a pickled string of {n:,} bytes")
        return self._fh.read(n)

    def readline(self) -> bytes:
        return self._fh.readline(_MAX_STRING)

    def tell(self) -> int:
        return self._fh.tell()


