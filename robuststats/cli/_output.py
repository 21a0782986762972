"""One formatter for every command: ``--format {table,json}`` and fixed number formats.

Every command prints through :func:`emit`. ``table`` is for people (fixed columns, fixed
number formats); ``json`` is for programs and carries the same records plus whatever
settings make the output reproducible. Number formats, everywhere:

* accuracies, retentions and their differences in percent (``85.5``), one decimal;
* p-values to 3 significant digits (``0.0412``, ``1.00``, ``3.10e-05``);
* intervals as ``[low, high]`` followed by their level (``[-13.5, 10.3] 95%``).

The number formats, :func:`render_table` and :func:`to_jsonable` live in
:mod:`robuststats._format` (shared with ``report.md`` and the library's reports) and are
re-exported here.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from robuststats._format import (
    fmt_ci,
    fmt_level,
    fmt_noise,
    fmt_p,
    fmt_pct,
    fmt_value,
    render_table,
    to_jsonable,
)

__all__ = [
    "FORMATS",
    "add_format_option",
    "emit",
    "fmt_ci",
    "fmt_level",
    "fmt_noise",
    "fmt_p",
    "fmt_pct",
    "fmt_value",
    "render_table",
    "to_jsonable",
]

FORMATS = ("table", "json")


def add_format_option(parser: argparse.ArgumentParser) -> None:
    """Add the one ``--format {table,json}`` option (default ``table``)."""
    parser.add_argument("--format", choices=FORMATS, default="table",
                        help="table: aligned text for people (default); json: one JSON "
                             "document for programs")




def emit(fmt: str, *, data: Any, text: str | Callable[[], str]) -> None:
    """Print ``data`` as one JSON document, or ``text`` (a string or a function making it)."""
    if fmt == "json":
        print(json.dumps(to_jsonable(data), indent=2, allow_nan=False))
    else:
        print(text() if callable(text) else text)
