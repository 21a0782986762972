"""YAML with line numbers, and validation errors that name the key path and its line.

:func:`load_yaml_with_lines` parses a study file and records the 1-based line of every key
path (``("conditions", "E8b", "train_noise", "scale") -> 14``), refusing duplicate keys.
:func:`pydantic_message` turns a pydantic ``ValidationError`` into one line of the form
``studies/x.yaml: conditions.E8b.train_noise.scale (line 14): <what is wrong>.``

Values validated by the engine or the statistics (``NoiseSpec``, ``AQNSchedule``,
``Hypothesis``) raise :class:`~robuststats.errors.InputError` whose message names the
offending field in backticks (the package-wide convention of ``robuststats._validation``)
or says ``unknown ... key 'x'``; :func:`keyed` reads that field back so the error points at
the exact key and line, not only at the mapping that holds it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import yaml
from pydantic import ValidationError

from robuststats.errors import InputError

__all__ = ["KeyPath", "KeyedError", "keyed", "load_yaml_with_lines", "location",
           "pydantic_message"]

KeyPath = tuple[str | int, ...]
LineMap = Mapping[KeyPath, int]


class KeyedError(ValueError):
    """A validation error that knows its key path below the value being validated."""

    def __init__(self, path: KeyPath, message: str) -> None:
        super().__init__(message)
        self.path = path


_FIELD = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)")
_UNKNOWN = re.compile(r"unknown (?:[\w-]+ )?key '([^']+)'")
#: what the engine and statistics put before a message about one of their keys
_OWNER = re.compile(r"^(?:hypothesis '[^']*'|noise spec|AQN schedule): ")


def keyed(exc: Exception, keys: Iterable[str]) -> KeyedError:
    """``exc`` (raised while building a value from a mapping) as a :class:`KeyedError`.

    The key is the first backticked field of the message that is one of ``keys``, or the
    key an ``unknown key 'x'`` message names; without either, the error stays on the
    mapping itself.
    """
    message = _OWNER.sub("", str(exc))
    known = set(keys)
    unknown = _UNKNOWN.search(message)
    if unknown is not None:
        return KeyedError((unknown.group(1),), message)
    for name in _FIELD.findall(message):
        if name in known:
            return KeyedError((name,), message)
    return KeyedError((), message)


# ---------------------------------------------------------------------- YAML with lines
class _LineLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (a silent overwrite hides a typo)."""


def load_yaml_with_lines(text: str, source: str = "<string>") -> tuple[Any, dict[KeyPath, int]]:
    """Parse YAML; return the data and a map ``key path -> 1-based line``."""
    loader = _LineLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise InputError(f"{source}: the study file is empty.")
        lines: dict[KeyPath, int] = {}
        _walk(node, (), lines, source)
        data = loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"{source}{where}: invalid YAML: {problem}.") from None
    finally:
        loader.dispose()
    return data, lines


def _walk(node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int], source: str) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = key_node.value
            if key in seen:
                raise InputError(f"{source} (line {key_node.start_mark.line + 1}): duplicate "
                                 f"key {'.'.join(map(str, (*path, key)))!r}.")
            seen.add(key)
            lines[(*path, key)] = key_node.start_mark.line + 1
            _walk(value_node, (*path, key), lines, source)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*path, i), lines, source)


# ---------------------------------------------------------------------- messages
def line_for(path: KeyPath, lines: LineMap) -> int | None:
    """Line of ``path``, or of its longest known prefix (a missing key is reported at its
    parent's line); ``None`` when nothing below the top level is known."""
    for end in range(len(path), -1, -1):
        line = lines.get(tuple(path[:end]))
        if line is not None and (end > 0 or len(path) == 0):
            return line
    return None


def location(source: str | None, path: KeyPath, lines: LineMap) -> str:
    """``source: key.path (line N)``, each part only when known."""
    key = ".".join(str(p) for p in path) or "<top level>"
    line = line_for(path, lines)
    parts = [source] if source else []
    parts.append(f"{key} (line {line})" if line is not None else key)
    return ": ".join(parts)


def _format(source: str | None, path: KeyPath, message: str, lines: LineMap) -> str:
    return f"{location(source, path, lines)}: {message}"


def _sentence(text: str) -> str:
    return text if text.endswith((".", "?", "!")) else text + "."


def pydantic_message(exc: ValidationError, source: str | None, lines: LineMap,
                     suggest: Callable[[KeyPath], str]) -> str:
    """One line for the first problem of ``exc``; ``suggest(path)`` completes an unknown key."""
    # an unknown key is usually a typo that also explains a "missing" one: report it first
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    err = errors[0]
    # pydantic appends the member type of a union to loc ('int', 'list[int]'): drop it
    path = tuple(p for p in err["loc"]
                 if not (isinstance(p, str) and ("[" in p or p in ("int", "float", "str"))))
    extra = f" ({len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    ctx_err = (err.get("ctx") or {}).get("error")
    if isinstance(ctx_err, KeyedError):
        return _sentence(_format(source, (*path, *ctx_err.path), str(ctx_err), lines) + extra)
    kind = err["type"]
    if kind == "extra_forbidden":
        return _format(source, path, "unknown key", lines) + suggest(path)
    if kind == "missing":
        return _format(source, path, "required key is missing", lines) + "."
    message = err["msg"].removeprefix("Value error, ")
    value = err.get("input")
    shown = "" if isinstance(value, (dict, list)) else f", got {value!r}"
    return _format(source, path, f"{message}{shown}", lines) + extra + "."
