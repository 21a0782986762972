"""The text of a YAML or JSON file as data: one choice of parser, one account of a syntax error.

A ``.yaml``/``.yml`` file is read with ``yaml.safe_load``, anything else as JSON. A syntax
error comes back as :class:`DataSyntaxError` with the format, the 1-based line (when the
parser gives one) and the parser's reason; each reader words its own message from these,
since the messages name what the file is for.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DataSyntaxError", "parse_data"]

YAML_SUFFIXES = (".yaml", ".yml")


class DataSyntaxError(ValueError):
    """The text is not valid YAML or JSON.

    Attributes
    ----------
    format : str
        ``"YAML"`` or ``"JSON"``.
    line : int or None
        1-based line of the error (always set for JSON; YAML errors without a mark have none).
    reason : str
        The parser's words: ``str(exc)`` for YAML, ``JSONDecodeError.msg`` for JSON.
    """

    def __init__(self, format: str, line: int | None, reason: str) -> None:
        super().__init__(f"not valid {format}: {reason}")
        self.format = format
        self.line = line
        self.reason = reason


def parse_data(text: str, suffix: str) -> Any:
    """``text`` parsed as YAML when ``suffix`` (a file's, e.g. ``".yml"``) names YAML, else
    as JSON; raises :class:`DataSyntaxError`."""
    if suffix.lower() in YAML_SUFFIXES:
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise DataSyntaxError("YAML", None if mark is None else mark.line + 1,
                                  str(exc)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataSyntaxError("JSON", exc.lineno, exc.msg) from None
