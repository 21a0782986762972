"""Existing local checkpoints per condition and seed, evaluated instead of trained.

A condition of a study names its checkpoints with ``checkpoint:``, one string that gives
the directory of each training seed:

- a directory, the same for every seed (a study with one seed);
- a template with ``{seed}`` (and optionally ``{condition}``), with Python format specs:
  ``ckpts/E8b/seed{seed:03d}`` gives ``ckpts/E8b/seed000``, ``seed001``, ...;
- either of them with glob wildcards (``*``, ``?``, ``[...]``), which must then match
  exactly one directory per seed: ``ckpts/E8b/seed{seed:03d}/global_step_*``.

Each directory is a Hugging Face ``save_pretrained`` checkpoint: ``config.json``, weights
in safetensors (or a PyTorch ``.bin``, read with ``torch.load(weights_only=True)``) and
tokenizer files. Everything is checked before anything is computed
(:func:`check_checkpoints`, called by ``robuststats study --check`` and every run), the
weight files included (:func:`~robuststats.models.weights.check_weights`: headers and
pickles read, never executed), with errors that name the key and its line. Loading never runs code from the checkpoint
(``trust_remote_code`` is off) and never downloads.
"""

from __future__ import annotations

import glob
import os
import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robuststats.errors import InputError
from robuststats.models.model import TOKENIZER_FILES
from robuststats.models.weights import WEIGHT_FILES, check_weights

if TYPE_CHECKING:
    from robuststats.models.trainer import TrainedModel

__all__ = [
    "WEIGHT_FILES",
    "CheckpointRef",
    "check_template",
    "load_checkpoint",
    "resolve_checkpoint",
    "template_fields",
]

_FIELDS = ("seed", "condition")
_GLOB = set("*?[")


@dataclass(frozen=True)
class CheckpointRef:
    """The checkpoint of one (condition, seed): the pattern and the directory it names."""

    condition: str
    seed: int
    pattern: str
    path: Path

    def fingerprint(self) -> dict[str, Any]:
        """Name, size and modification time of each weight and config file (recorded with
        the cells, so a checkpoint replaced in place is visible in the run's events)."""
        files = {}
        for entry in sorted(self.path.iterdir()):
            if entry.is_file() and (entry.suffix in (".safetensors", ".bin", ".json")):
                stat = entry.stat()
                files[entry.name] = {"bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        return {"path": str(self.path.resolve()), "pattern": self.pattern, "files": files}


def check_template(pattern: Any, key: str = "checkpoint") -> str:
    """Validate a checkpoint pattern's form (no file system access): a non-empty string
    whose only fields are ``{seed}`` and ``{condition}``, each with a valid format spec."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise InputError(f"`{key}` must be a directory, a glob or a template with {{seed}}, "
                         f"got {pattern!r}.")
    try:
        parsed = list(string.Formatter().parse(pattern))
    except ValueError as exc:
        raise InputError(f"`{key}` {pattern!r} is not a valid template ({exc}); write a "
                         "literal brace as '{{' or '}}'.") from None
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if name not in _FIELDS:
            raise InputError(f"`{key}` {pattern!r} may only use the fields {{seed}} and "
                             f"{{condition}}, got {{{name}}}.")
        if conversion is not None or "{" in (spec or ""):
            raise InputError(f"`{key}` {pattern!r}: field {{{name}}} must have a plain "
                             "format spec such as {seed:03d}.")
    try:
        _format(pattern, "c", 0)
    except (ValueError, TypeError) as exc:
        raise InputError(f"`{key}` {pattern!r}: {exc} (a seed is an integer: "
                         "{seed:03d} writes 000).") from None
    return pattern


def _format(pattern: str, condition: str, seed: int) -> str:
    return pattern.format(seed=int(seed), condition=condition)


def resolve_checkpoint(pattern: str, *, condition: str, seed: int,
                       key: str = "checkpoint") -> CheckpointRef:
    """The checkpoint directory of ``(condition, seed)``, checked to be loadable.

    Raises :class:`InputError` naming ``key``, the seed and the path when the directory is
    missing, a glob matches no directory or several, a file a checkpoint needs is absent,
    or its weights are a file the loader would refuse (:func:`check_weights`: a malformed
    safetensors header, a pickle that would call a function).
    """
    check_template(pattern, key)
    text = os.path.expanduser(_format(pattern, condition, seed))
    where = f"`{key}` (seed {seed})"
    if _GLOB & set(text):
        matches = sorted(m for m in glob.glob(text) if os.path.isdir(m))
        if not matches:
            raise InputError(f"{where}: no directory matches {text!r}.")
        if len(matches) > 1:
            shown = ", ".join(repr(m) for m in matches[:4])
            raise InputError(f"{where}: {text!r} matches {len(matches)} directories "
                             f"({shown}{', ...' if len(matches) > 4 else ''}); it must "
                             "match exactly one.")
        path = Path(matches[0])
    else:
        path = Path(text)
        if not path.is_dir():
            raise InputError(f"{where}: no such directory {text!r}.")
    missing = []
    if not (path / "config.json").is_file():
        missing.append("config.json")
    if not any((path / name).is_file() for name in WEIGHT_FILES):
        missing.append(f"weights (one of {', '.join(WEIGHT_FILES)})")
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        missing.append(f"a tokenizer (one of {', '.join(TOKENIZER_FILES)})")
    if missing:
        raise InputError(f"{where}: {str(path)!r} is not a saved checkpoint: it has no "
                         f"{' and no '.join(missing)}.")
    try:
        check_weights(path, key=key)  # what the loader will read, never executed
    except InputError as exc:
        raise InputError(f"{where}: {str(exc).removeprefix(f'`{key}`: ')}") from None
    return CheckpointRef(condition=condition, seed=int(seed), pattern=pattern, path=path)


def template_fields(pattern: str) -> set[str]:
    """The ``{field}`` names of a checkpoint template."""
    return {name for _, name, _, _ in string.Formatter().parse(pattern) if name}


def load_checkpoint(ref: CheckpointRef) -> TrainedModel:
    """Load the checkpoint as a :class:`~robuststats.models.trainer.TrainedModel` whose
    ``info`` records the pattern, the directory and the weight files' sizes and times."""
    from robuststats.models.trainer import TrainedModel

    trained = TrainedModel.load(ref.path)
    trained.info = {**_plain(trained.info), "trainer": "checkpoint",
                    "condition": ref.condition, "seed": ref.seed,
                    "checkpoint": ref.fingerprint()}
    return trained


def _plain(info: Mapping[str, Any]) -> dict[str, Any]:
    return dict(info) if isinstance(info, Mapping) else {}
