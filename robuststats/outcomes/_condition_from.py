"""Where an Inspect log's condition comes from: the field named by ``condition_from``.

Inspect users compare prompts, solvers or system messages with one model; the condition
is then not the model but a field of the log's header. ``condition_from`` names it:

* ``model`` (the default): ``eval.model`` (``openai/gpt-4o``);
* ``metadata.<key>``: ``eval.metadata[key]`` (``inspect eval --metadata prompt=cot``);
* ``task_args.<key>``: ``eval.task_args[key]`` (``inspect eval -T prompt=cot``);
* ``tag:<prefix>``: the log's one tag that starts with ``prefix``, less the prefix
  (``inspect eval --tags prompt=cot`` with ``tag:prompt=``); ``tag:`` is the log's only tag;
* ``file``: the log's file name without its suffix; ``directory``: the name of the folder
  that holds it (``logs/cot/*.eval``).

A mapping file's ``conditions`` then maps the field's value to a condition name; without
it the value is the condition. Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from robuststats.errors import InputError, did_you_mean

__all__ = ["CONDITION_FIELDS", "check_condition_from", "condition_value"]

#: the forms ``condition_from`` takes
CONDITION_FIELDS = ("model", "metadata.<key>", "task_args.<key>", "tag:<prefix>", "file",
                    "directory")
_PLAIN = ("model", "file", "directory")
_KEYED = ("metadata.", "task_args.")


def check_condition_from(value: Any, where: str) -> str | None:
    """``value`` checked as a ``condition_from`` field (None stays None); ``where`` names
    the key or flag in errors."""
    if value is None:
        return None
    if isinstance(value, str):
        if value in _PLAIN or value.startswith("tag:"):
            return value
        for prefix in _KEYED:
            if value.startswith(prefix) and len(value) > len(prefix):
                return value
    guess = did_you_mean(str(value).split(".")[0], [*_PLAIN, "metadata", "task_args", "tag"])
    raise InputError(f"{where}: {value!r} is not a field a condition can come from{guess}; "
                     f"use one of {', '.join(CONDITION_FIELDS)}.")


def condition_value(log: Any, path: Path, field: str, where: str) -> str:
    """The value of ``field`` (:func:`check_condition_from`) in one log, as text; a log
    that lacks it, or holds a value that is not one word or number, is an error naming the
    field and what the log holds."""
    if field == "model":
        return str(log.eval.model)
    if field == "file":
        return path.name.rsplit(".", 1)[0]
    if field == "directory":
        return path.resolve().parent.name
    if field.startswith("tag:"):
        prefix = field[len("tag:"):]
        tags = [str(t) for t in (log.eval.tags or [])]
        hits = [t for t in tags if t.startswith(prefix)]
        if len(hits) != 1 or (not hits[0][len(prefix):] and prefix):
            held = f"its tags are {tags}" if tags else "it has no tags"
            want = f"one tag starting with {prefix!r}" if prefix else "exactly one tag"
            raise InputError(f"{where}: condition_from {field!r} needs {want}, and {held}.")
        return hits[0][len(prefix):] or hits[0]
    part, key = field.split(".", 1)
    values = getattr(log.eval, part, None) or {}
    if not isinstance(values, Mapping) or key not in values:
        keys = sorted(map(str, values)) if isinstance(values, Mapping) else []
        held = f"its {part} keys are {keys}" if keys else f"it records no {part}"
        raise InputError(f"{where}: condition_from {field!r}: the log has no {part} key "
                         f"{key!r}{did_you_mean(key, keys)}; {held}.")
    value = values[key]
    if isinstance(value, bool) or not isinstance(value, (str, int, float)) or value == "":
        raise InputError(f"{where}: condition_from {field!r} is {str(value)[:80]!r}, not a "
                         "name a condition can take (a word or a number).")
    return str(value)
