"""Compare the tables of two result versions cell by cell.

Both sides are read under the glossary's column names (:mod:`robuststats.results._tables`),
so a version written before a column was renamed compares with one written after; a column
that only one side has is reported once, not skipped.
"""

from __future__ import annotations

import math

import pandas as pd

from robuststats.results._store import ResultVersion
from robuststats.results._tables import read_table

__all__ = ["TABLE_KEYS", "diff_versions"]

#: table name -> columns that identify a row (the rest are compared)
TABLE_KEYS: dict[str, list[str]] = {
    "summary": ["condition", "eval_noise"],
    "retention": ["condition", "eval_noise"],
    "tests": ["eval_noise", "a", "b", "role"],
    "hypotheses": ["id"],
    "seeds": ["condition", "seed", "eval_noise"],
    "omnibus": ["eval_noise"],
    "missing": ["condition", "seed", "eval_noise", "noise_seed"],
    "dropped": ["condition", "seed", "eval_noise", "noise_seed", "item_id"],
}


def diff_versions(a: ResultVersion, b: ResultVersion, *, rtol: float = 1e-9,
                  tables: list[str] | None = None) -> pd.DataFrame:
    """Differences between two versions: one row per changed value or unmatched row.

    Columns: ``table``, ``key`` (the row's identifying values), ``column``, ``a``, ``b``.
    Numbers equal within ``rtol`` (relative) count as equal; NaN equals NaN. A column
    present on one side only gives one row with ``key`` empty and ``absent``/``present``.
    """
    rows: list[dict[str, object]] = []
    for table in tables or list(TABLE_KEYS):
        ta, tb = read_table(a, table), read_table(b, table)
        if ta is None and tb is None:
            continue
        if ta is None or tb is None:
            rows.append({"table": table, "key": "", "column": "<table>",
                         "a": "absent" if ta is None else "present",
                         "b": "absent" if tb is None else "present"})
            continue
        keys = [k for k in TABLE_KEYS[table] if k in ta.columns and k in tb.columns]
        for col in ta.columns.symmetric_difference(tb.columns, sort=False):
            rows.append({"table": table, "key": "", "column": col,
                         "a": "present" if col in ta.columns else "absent",
                         "b": "present" if col in tb.columns else "absent"})
        if not keys:  # e.g. an empty table written without columns
            continue
        ia, ib = ta.set_index(keys), tb.set_index(keys)
        for key in ia.index.difference(ib.index):
            rows.append({"table": table, "key": _key(key), "column": "<row>", "a": "present",
                         "b": "absent"})
        for key in ib.index.difference(ia.index):
            rows.append({"table": table, "key": _key(key), "column": "<row>", "a": "absent",
                         "b": "present"})
        common_cols = [c for c in ia.columns if c in ib.columns]
        for key in ia.index.intersection(ib.index):
            ra, rb = ia.loc[key], ib.loc[key]
            # duplicate keys: compare first rows only
            ra = ra.iloc[0] if isinstance(ra, pd.DataFrame) else ra
            rb = rb.iloc[0] if isinstance(rb, pd.DataFrame) else rb
            for col in common_cols:
                if not _same(ra[col], rb[col], rtol):
                    rows.append({"table": table, "key": _key(key), "column": col,
                                 "a": ra[col], "b": rb[col]})
    return pd.DataFrame(rows, columns=["table", "key", "column", "a", "b"])


def _key(key: object) -> str:
    parts = key if isinstance(key, tuple) else (key,)
    return ", ".join(str(p) for p in parts)


def _same(x: object, y: object, rtol: float) -> bool:
    if isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
        fx, fy = float(x), float(y)
        if math.isnan(fx) and math.isnan(fy):
            return True
        return math.isclose(fx, fy, rel_tol=rtol, abs_tol=1e-12)
    if pd.isna(x) and pd.isna(y):  # type: ignore[arg-type]
        return True
    return bool(x == y)
