"""One formatter for every command: ``--format {table,json}`` and fixed number formats.

Every command prints through :func:`emit`. ``table`` is for people (fixed columns, fixed
number formats); ``json`` is for programs and carries the same records plus whatever
settings make the output reproducible. Number formats, everywhere:

* accuracies, retentions and their differences in percent (``85.5``), one decimal;
* p-values to 3 significant digits (``0.0412``, ``1.00``, ``3.10e-05``);
* intervals as ``[low, high]`` followed by their level (``[-13.5, 10.3] 95%``).

The number formats live in :mod:`robuststats._format` (shared with ``report.md``) and are
re-exported here.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from robuststats._format import fmt_ci, fmt_level, fmt_noise, fmt_p, fmt_pct, fmt_value

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




def render_table(records: Sequence[Mapping[str, Any]], columns: Sequence[str], *,
                 formats: Mapping[str, Callable[[Any], str]] | None = None,
                 headers: Mapping[str, str] | None = None) -> str:
    """Fixed columns, left-aligned text and right-aligned numbers; ``(no rows)`` if empty."""
    if not records:
        return "(no rows)"
    formats = formats or {}
    headers = headers or {}
    cells = [[formats.get(c, fmt_value)(r.get(c)) for c in columns] for r in records]
    head = [headers.get(c, c) for c in columns]
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(head)]
    numeric = [all(_looks_numeric(row[i]) for row in cells) for i in range(len(columns))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric)).rstrip()

    return "\n".join([line(head), *(line(row) for row in cells)])


def _looks_numeric(text: str) -> bool:
    try:
        float(text.replace("%", ""))
    except ValueError:
        return text == "-"
    return True


def to_jsonable(value: Any) -> Any:
    """Plain JSON types from numpy scalars, DataFrames, dataclasses, paths and NaN or
    pandas' NA (-> null)."""
    import dataclasses
    import os

    if hasattr(value, "to_dict") and hasattr(value, "columns"):  # a DataFrame
        return [to_jsonable(r) for r in value.to_dict(orient="records")]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [to_jsonable(v) for v in value]
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return to_jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if type(value).__name__ == "NAType":  # pandas.NA, without importing pandas
        return None
    return value


def emit(fmt: str, *, data: Any, text: str | Callable[[], str]) -> None:
    """Print ``data`` as one JSON document, or ``text`` (a string or a function making it)."""
    if fmt == "json":
        print(json.dumps(to_jsonable(data), indent=2, allow_nan=False))
    else:
        print(text() if callable(text) else text)
