"""Fixed number formats shared by the command line and the report (standard library only).

* accuracies, retentions and their differences in percent (``85.5``), one decimal;
* p-values to 3 significant digits (``0.0412``, ``3.10e-05``);
* intervals as ``[low, high]`` followed by their level (``[-13.5, 10.3] 95%``); the level
  always comes from the data, never from a default;
* inference-noise levels in percent (``5%``).

:func:`render_table` lays records out in fixed columns and :func:`to_jsonable` turns results
into plain JSON types, for the command line and for the reports a library module writes.
Kept free of numpy and pandas so that ``robuststats power`` starts instantly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["fmt_ci", "fmt_level", "fmt_noise", "fmt_p", "fmt_pct", "fmt_value", "is_missing",
           "render_table", "to_jsonable"]


def is_missing(value: Any) -> bool:
    """None, NaN and pandas' NA are missing; anything else (text included) is not."""
    if value is None:
        return True
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        # pandas.NA refuses float() with TypeError and is its own kind of missing
        return type(value).__name__ == "NAType"


def fmt_pct(value: Any, *, signed: bool = False) -> str:
    """A proportion as percent with one decimal (``0.855`` -> ``85.5``); ``-`` if missing."""
    if is_missing(value):
        return "-"
    return f"{100 * float(value):+.1f}" if signed else f"{100 * float(value):.1f}"


def fmt_p(value: Any) -> str:
    """A p-value to 3 significant digits, trailing zeros kept (``0.0300``, ``1.00``,
    ``2.80e-29``); ``-`` if missing."""
    if is_missing(value):
        return "-"
    v = float(value)
    if v == 0:
        return "0"
    return f"{v:#.3g}" if v >= 1e-4 else f"{v:.2e}"


def fmt_level(level: Any) -> str:
    """A confidence level as percent: ``0.95`` -> ``95%``, ``0.9805`` -> ``98.05%``.

    Two decimals at most: a Holm-adjusted level such as 0.98988 must not read as "99%".
    """
    if is_missing(level):
        return "-"
    pct = 100 * float(level)
    text = f"{pct:.2f}"
    if text == "100.00" and pct < 100:  # 0.99999 is not a 100% interval
        text = f"{pct:.6f}"
    return f"{text.rstrip('0').rstrip('.')}%"


def fmt_ci(low: Any, high: Any, level: Any, *, percent: bool = True) -> str:
    """``[low, high] 95%``; bounds in percent unless ``percent=False``; ``-`` if missing."""
    if is_missing(low) or is_missing(high):
        return "-"
    fmt = (lambda v: f"{100 * float(v):.1f}") if percent else (lambda v: f"{float(v):.4g}")
    tail = "" if is_missing(level) else f" {fmt_level(level)}"
    return f"[{fmt(low)}, {fmt(high)}]{tail}"


def fmt_noise(level: Any) -> str:
    """An inference-noise scale in percent: ``0.05`` -> ``5%``; ``-`` if missing."""
    if is_missing(level):
        return "-"
    return f"{100 * float(level):g}%"


def fmt_value(value: Any) -> str:
    """Any other cell: ``-`` if missing, floats to 4 significant digits, else ``str``."""
    if is_missing(value):
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


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
