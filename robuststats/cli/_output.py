"""One formatter for every command: ``--format {table,json}`` and fixed number formats.

Every command prints through :func:`emit`. ``table`` is for people (fixed columns, fixed
number formats); ``json`` is for programs and carries the same records plus whatever
settings make the output reproducible. Number formats, everywhere:

* accuracies, retentions and their differences in percent (``85.5``), one decimal;
* p-values to 3 significant digits (``0.0412``, ``1.00``, ``3.10e-05``);
* intervals as ``[low, high]`` followed by their level (``[-13.5, 10.3] 95%``);
* any other number with :func:`fmt_number` (4 significant digits unless a command's
  column says otherwise).

The number formats, :func:`render_table` and :func:`to_jsonable` live in
:mod:`robuststats._format` (shared with ``report.md`` and the library's reports) and are
re-exported here, as is ``--format`` (:mod:`robuststats.cli._options`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from robuststats._format import fmt_ci as fmt_ci
from robuststats._format import fmt_level as fmt_level
from robuststats._format import fmt_noise as fmt_noise
from robuststats._format import fmt_p as fmt_p
from robuststats._format import fmt_pct as fmt_pct
from robuststats._format import fmt_value as fmt_value
from robuststats._format import is_missing as is_missing
from robuststats._format import render_table as render_table
from robuststats._format import to_jsonable as to_jsonable
from robuststats.cli._options import FORMATS as FORMATS
from robuststats.cli._options import add_format_option as add_format_option

__all__ = [
    "FORMATS",
    "add_format_option",
    "emit",
    "fmt_ci",
    "fmt_level",
    "fmt_noise",
    "fmt_number",
    "fmt_p",
    "fmt_pct",
    "fmt_value",
    "is_missing",
    "render_table",
    "to_jsonable",
]


def fmt_number(value: Any, spec: str = ".4g") -> str:
    """``value`` in the format ``spec`` (``.4g``: 4 significant digits, ``.4f``: 4
    decimals); ``-`` if missing."""
    return "-" if is_missing(value) else format(value, spec)


def emit(fmt: str, *, data: Any, text: str | Callable[[], str]) -> None:
    """Print ``data`` as one JSON document, or ``text`` (a string or a function making it)."""
    if fmt == "json":
        print(json.dumps(to_jsonable(data), indent=2, allow_nan=False))
    else:
        print(text() if callable(text) else text)
