"""YAML with line numbers, and validation errors that name the key path and its line.

:func:`load_yaml_with_lines` parses a study file and records the 1-based line of every key
path (``("conditions", "E8b", "train_noise", "scale") -> 14``), refusing duplicate keys.
:func:`pydantic_message` turns a pydantic ``ValidationError`` into one line of the form
``studies/x.yaml: conditions.E8b.train_noise.scale (line 14): <what is wrong>.``; when the
file has several problems, that line counts the others and :func:`pydantic_problems` gives
one line each (the error's ``details``, which the CLI prints below its one error line).

Values validated by the engine or the statistics (``NoiseSpec``, ``AQNSchedule``,
``Hypothesis``) raise :class:`~robuststats.errors.InputError` whose message names the
offending field in backticks (the package-wide convention of ``robuststats._validation``)
or says ``unknown ... key 'x'``; :func:`keyed` reads that field back so the error points at
the exact key and line, not only at the mapping that holds it.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from robuststats.errors import InputError

__all__ = ["MAX_DEPTH", "MAX_FILE_BYTES", "MAX_VALUES", "KeyPath", "KeyedError",
           "check_document", "component_key", "display", "keyed", "load_yaml_with_lines", "location",
           "pydantic_message", "pydantic_problems", "read_study_text", "validate_keyed"]

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
#: Bounds of a study file, far above any real study (``studies/e8_matrix.yaml``: 4 KiB,
#: depth 5, about 150 values) and far below what hurts a machine. YAML aliases make a
#: small file describe a huge document ("billion laughs"): the bound on values counts
#: every alias as the full copy it stands for.
MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_VALUES = 100_000


class _LimitError(yaml.MarkedYAMLError):
    """A bound of the study file was exceeded (reported like a YAML error, with its line)."""


class _LineLoader(yaml.SafeLoader):
    """SafeLoader that bounds nesting while it composes (PyYAML's composer recurses) and
    turns bad literals (``2001-13-45``, an int of 5000 digits) into marked errors."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _LimitError(problem=f"values are nested more than {MAX_DEPTH} levels "
                                  "deep", problem_mark=self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:
            raise _LimitError(problem=f"cannot read the value {_clip(node.value)}: {exc}",
                              problem_mark=node.start_mark) from None


def _clip(value: Any, width: int = 40) -> str:
    """A short ``repr`` of a value for a message."""
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not hide the real error
        text = f"<{type(value).__name__}>"
    return text if len(text) <= width else text[: width - 3] + "..."


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a document whose aliases expand past :data:`MAX_VALUES` values or refer to
    themselves; iterative, so a deep alias chain cannot exhaust the stack."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in _children(node))
            if sizes[key] > MAX_VALUES:
                raise _LimitError(problem=f"the document expands to more than {MAX_VALUES:,} "
                                  "values (through aliases)", problem_mark=node.start_mark)
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise _LimitError(problem="an alias refers to a value that contains it",
                              problem_mark=node.start_mark)
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in on_path:
                raise _LimitError(problem="an alias refers to a value that contains it",
                                  problem_mark=child.start_mark)
            if id(child) not in sizes:
                stack.append((child, False))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def read_study_text(path: str | Path, *, what: str = "study file") -> str:
    """The UTF-8 text of a study file, at most :data:`MAX_FILE_BYTES`; every problem (no
    such file, a directory, too big, not UTF-8) is one :class:`InputError` line."""
    shown = _short(str(path))
    try:
        # stat before open: opening a FIFO or a terminal would wait for a writer
        regular = stat.S_ISREG(os.stat(path).st_mode)
        if regular:
            with open(path, "rb") as fh:
                data = fh.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise InputError(f"{what} {shown} does not exist.") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InputError(f"{what} {shown} cannot be read: {reason}.") from None
    if not regular:
        raise InputError(f"{what} {shown} is not a regular file.")
    if len(data) > MAX_FILE_BYTES:
        raise InputError(f"{what} {shown} is larger than {MAX_FILE_BYTES // 1024} KiB; a study "
                         "file describes a study, it does not hold data.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"{display(str(path))} (line {line}): not UTF-8 text (byte "
                         f"0x{data[exc.start]:02x}).") from None


def _short(text: str, width: int = 120) -> str:
    """``repr`` of a path for a message, its middle cut when it is very long."""
    shown = repr(text)
    return shown if len(shown) <= width else f"{shown[: width // 2]}...{shown[-width // 2:]}"


def load_yaml_with_lines(text: str, source: str = "<string>") -> tuple[Any, dict[KeyPath, int]]:
    """Parse YAML; return the data and a map ``key path -> 1-based line``.

    Bounded: nesting deeper than :data:`MAX_DEPTH`, more than :data:`MAX_VALUES` values
    after alias expansion, a recursive alias, a key that is a list or mapping and
    duplicate keys each give one :class:`InputError` line that names the line.
    """
    source = display(source)
    if len(text) > MAX_FILE_BYTES:
        raise InputError(f"{source}: the study text is longer than {MAX_FILE_BYTES:,} "
                         "characters.")
    loader = None
    try:
        loader = _LineLoader(text)  # the reader already refuses NUL and control bytes
        node = loader.get_single_node()
        if node is None:
            raise InputError(f"{source}: the study file is empty.")
        _check_expansion(node)
        lines: dict[KeyPath, int] = {}
        _walk(node, (), lines, source)
        data = loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        if isinstance(exc, yaml.reader.ReaderError):
            where = f" (line {text.count(chr(10), 0, exc.position) + 1})"
            char = exc.character if isinstance(exc.character, int) else ord(exc.character)
            problem = f"the control character U+{char:04X} is not allowed in YAML"
        problem = " ".join(str(problem).split())
        raise InputError(f"{source}{where}: invalid YAML: {problem}.") from None
    finally:
        if loader is not None:
            loader.dispose()
    return data, lines


def _walk(node: yaml.Node, path: KeyPath, lines: dict[KeyPath, int], source: str) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                what = "list" if isinstance(key_node, yaml.SequenceNode) else "mapping"
                raise InputError(f"{source} (line {line}): a key must be a name, not a {what}"
                                 f" (under {'.'.join(map(str, path)) or 'the top level'}).")
            key = key_node.value
            if key in seen:
                raise InputError(f"{source} (line {line}): duplicate "
                                 f"key {'.'.join(map(str, (*path, key)))!r}.")
            seen.add(key)
            lines[(*path, key)] = line
            _walk(value_node, (*path, key), lines, source)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*path, i), lines, source)


# ---------------------------------------------------------------------- plain documents
# Text a study may hold: no control characters but tab and line breaks in values (a folded
# description ends in a newline), none at all in keys (they become paths and table
# labels), and no lone surrogates anywhere (they cannot be written as UTF-8).
_BAD_IN_VALUE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_BAD_IN_KEY = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def check_document(data: Any) -> None:
    """Refuse a study document (the mapping a file or a program gives) that is nested
    deeper than :data:`MAX_DEPTH`, holds more than :data:`MAX_VALUES` values or has a
    control character in a key or a string; raises :class:`KeyedError` at the key.

    Iterative, and shared or cyclic containers count once per reference, so neither a
    deep nor a self-referencing document can exhaust the stack.
    """
    count = 0
    stack: list[tuple[Any, KeyPath]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise KeyedError((), f"the document holds more than {MAX_VALUES:,} values")
        if isinstance(value, str):
            bad = _BAD_IN_VALUE.search(value)
            if bad is not None:
                raise KeyedError(path, f"text must not contain the control character "
                                 f"U+{ord(bad.group()):04X}")
            continue
        if isinstance(value, Mapping):
            children: list[tuple[Any, KeyPath]] = []
            for key, item in value.items():
                if isinstance(key, str) and (bad := _BAD_IN_KEY.search(key)) is not None:
                    raise KeyedError(path, f"key {key!r} must not contain the control "
                                     f"character U+{ord(bad.group()):04X}")
                children.append((item, (*path, key)))
        elif isinstance(value, (list, tuple)):
            children = [(item, (*path, i)) for i, item in enumerate(value)]
        else:
            continue
        if children and len(path) >= MAX_DEPTH:
            raise KeyedError(path, f"values are nested more than {MAX_DEPTH} levels deep")
        stack.extend(reversed(children))


def display(text: str) -> str:
    """``text`` for a one-line message: as is when printable, else its ``repr``."""
    return text if text.isprintable() else repr(text)


# ---------------------------------------------------------------------- messages
def component_key(section: str, message: str) -> KeyPath:
    """The key of the study file an error from building the task or trainer is about."""
    model = re.search(r"`model\.(\w+)`", message)
    if model is not None:  # the trainer's model sizes come from the top-level `model`
        return ("model", model.group(1))
    unknown = re.search(r"unknown parameter '([^']+)'", message)
    if unknown is not None:
        return (section, "params", unknown.group(1))
    if re.match(r"(unknown \w+ |cannot load |`\w+` name must)", message):
        return (section, "name")
    field = re.search(r"`(\w+)`", message)
    if field is not None:
        return (section, "params", field.group(1))
    return (section,)



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
    key = ".".join(display(str(p)) for p in path) or "<top level>"
    line = line_for(path, lines)
    parts = [display(source)] if source else []
    parts.append(f"{key} (line {line})" if line is not None else key)
    return ": ".join(parts)


def _format(source: str | None, path: KeyPath, message: str, lines: LineMap) -> str:
    return f"{location(source, path, lines)}: {message}"


def validate_keyed(cls: Any, data: Any, *, source: str | None, lines: LineMap | None,
                   suggest: Callable[[KeyPath], str], what: str) -> Any:
    """``cls`` (a pydantic model with ``_lines`` and ``_source``) validated from ``data``,
    remembering the line of every key; any problem is one :class:`InputError` naming the
    key path and its line. ``what`` names the document when ``source`` is unknown."""
    if not isinstance(data, Mapping):
        raise InputError(f"{display(source or what)}: the top level must be a mapping "
                         f"of keys, got {type(data).__name__}.")
    line_map = dict(lines or {})
    try:
        spec = cls.model_validate(dict(data))
    except ValidationError as exc:
        raise InputError(pydantic_message(exc, source, line_map, suggest),
                         details=pydantic_problems(exc, line_map, suggest)) from None
    spec._lines = line_map
    spec._source = source
    return spec


def _sentence(text: str) -> str:
    return text if text.endswith((".", "?", "!")) else text + "."


def pydantic_message(exc: ValidationError, source: str | None, lines: LineMap,
                     suggest: Callable[[KeyPath], str]) -> str:
    """One line for the first problem of ``exc``; ``suggest(path)`` completes an unknown key.
    When there are more, the line ends with their count; :func:`pydantic_problems` lists
    them."""
    errors = _ordered(exc)
    more = (f" ({len(errors) - 1} more problem(s), listed below)" if len(errors) > 1
            else "")
    return _problem(errors[0], source, lines, suggest, more)


def pydantic_problems(exc: ValidationError, lines: LineMap,
                      suggest: Callable[[KeyPath], str]) -> list[str]:
    """Every problem of ``exc`` after the first, one line each, without the file name
    (``evaluation.noise_seeds (line 12): must be at most 64, got 100.``)."""
    return [_problem(err, None, lines, suggest, "") for err in _ordered(exc)[1:]]


def _ordered(exc: ValidationError) -> list[Any]:
    # an unknown key is usually a typo that also explains a "missing" one: report it first
    return sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")


def _problem(err: Any, source: str | None, lines: LineMap, suggest: Callable[[KeyPath], str],
             more: str) -> str:
    # pydantic appends the member type of a union to loc ('int', 'list[int]'): drop it
    path = tuple(p for p in err["loc"]
                 if not (isinstance(p, str) and ("[" in p or p in ("int", "float", "str"))))
    ctx_err = (err.get("ctx") or {}).get("error")
    if isinstance(ctx_err, KeyedError):
        return _sentence(_format(source, (*path, *ctx_err.path), str(ctx_err), lines) + more)
    kind = err["type"]
    if kind == "extra_forbidden":
        return _format(source, path, "unknown key", lines) + suggest(path) + more
    if kind == "missing":
        return _format(source, path, "required key is missing", lines) + more + "."
    message = err["msg"].removeprefix("Value error, ")
    value = err.get("input")
    shown = "" if isinstance(value, (dict, list)) or ", got " in message else f", got {_clip(value, 60)}"
    return _format(source, path, f"{message}{shown}", lines) + more + "."
