"""Compare the tables of two result versions cell by cell, and summarize the comparison for
a reader: changed verdicts, the largest estimate changes, cells added or missing.

Both sides are read under the glossary's column names (:mod:`robuststats.results._tables`),
so a version written before a column was renamed compares with one written after; a column
that only one side has is reported once, not skipped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from robuststats.results._store import ResultVersion
from robuststats.results._tables import read_table

__all__ = ["ESTIMATES", "TABLE_KEYS", "DiffSummary", "diff_versions", "summarize_diff"]

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


# ---------------------------------------------------------------------- the reader's summary
#: table -> (the column of its estimate, what it is) of the estimates a summary ranks
ESTIMATES: dict[str, tuple[str, str]] = {
    "hypotheses": ("estimate", "hypothesis a − b"),
    "summary": ("accuracy", "accuracy"),
    "retention": ("retention", "retention"),
    "tests": ("estimate", "decision test a − b"),
}


@dataclass(frozen=True)
class DiffSummary:
    """What a reader of two versions wants first (see :func:`summarize_diff`).

    ``verdicts``: hypotheses whose verdict changed and decision tests whose rejection
    changed; ``estimates``: the largest changes of an estimate, with both intervals;
    ``cells_added`` / ``cells_missing``: evaluation cells ``(condition, seed, eval_noise,
    noise_seed)`` in b only / in a only; ``counts``: differences per table; ``compared``:
    rows both versions hold, per table of :data:`ESTIMATES`.
    """

    verdicts: pd.DataFrame
    estimates: pd.DataFrame
    cells_added: list[str]
    cells_missing: list[str]
    counts: dict[str, int]
    compared: dict[str, int]


def summarize_diff(a: ResultVersion, b: ResultVersion, differences: pd.DataFrame, *,
                   top: int = 10) -> DiffSummary:
    """The summary of ``differences`` (from :func:`diff_versions` on ``a`` and ``b``):
    changed verdicts, the ``top`` largest estimate changes (absolute, in the metric's own
    units) of the rows both versions hold, and the cells one version has and the other
    lacks."""
    counts = {str(k): int(v) for k, v in differences.groupby("table", sort=False).size().items()}
    verdicts, estimates = [], []
    compared: dict[str, int] = {}
    for table, (column, what) in ESTIMATES.items():
        ta, tb = read_table(a, table), read_table(b, table)
        if ta is None or tb is None or column not in ta.columns or column not in tb.columns:
            continue
        keys = [k for k in TABLE_KEYS[table] if k in ta.columns and k in tb.columns]
        if table == "tests" and "role" in keys:  # the diagnostic rows decide nothing
            ta, tb = ta[ta["role"] == "decision"], tb[tb["role"] == "decision"]
        both = ta.drop_duplicates(keys).merge(tb.drop_duplicates(keys), on=keys,
                                              suffixes=("_a", "_b"))
        compared[table] = len(both)
        for r in both.to_dict(orient="records"):
            key = _label(table, r)
            verdict = _verdict_change(table, r)
            if verdict is not None:
                verdicts.append({"what": what.split(" a − b")[0], "key": key, **verdict})
            ea, eb = _number(r[f"{column}_a"]), _number(r[f"{column}_b"])
            if math.isnan(ea) or math.isnan(eb) or math.isclose(ea, eb, abs_tol=1e-12):
                continue
            estimates.append({
                "table": table, "key": key, "what": what, "a": ea,
                "a_ci_low": _number(r.get("ci_low_a")), "a_ci_high": _number(r.get("ci_high_a")),
                "a_ci_level": _number(r.get("ci_level_a")), "b": eb,
                "b_ci_low": _number(r.get("ci_low_b")), "b_ci_high": _number(r.get("ci_high_b")),
                "b_ci_level": _number(r.get("ci_level_b")), "change": eb - ea})
    est = pd.DataFrame(estimates, columns=[
        "table", "key", "what", "a", "a_ci_low", "a_ci_high", "a_ci_level", "b", "b_ci_low",
        "b_ci_high", "b_ci_level", "change"])
    if len(est):
        est = est.reindex(est["change"].abs().sort_values(ascending=False, kind="stable")
                          .index).head(top).reset_index(drop=True)
    cells_a, cells_b = _cells(a), _cells(b)
    return DiffSummary(
        verdicts=pd.DataFrame(verdicts, columns=["what", "key", "a", "b"]), estimates=est,
        cells_added=sorted(cells_b - cells_a), cells_missing=sorted(cells_a - cells_b),
        counts=counts, compared=compared)


def _label(table: str, row: dict[str, object]) -> str:
    """A row as a reader names it: ``H3``, ``E8b at 5% noise``, ``E8a − E8b at 0% noise``."""
    from robuststats._format import fmt_noise

    if table == "hypotheses":
        return str(row["id"])
    noise = f" at {fmt_noise(row.get('eval_noise'))} noise"
    if table == "tests":
        return f"{row['a']} − {row['b']}{noise}"
    return f"{row['condition']}{noise}"


def _verdict_change(table: str, row: dict[str, object]) -> dict[str, object] | None:
    column = {"hypotheses": "verdict", "tests": "reject"}.get(table)
    if column is None or f"{column}_a" not in row:
        return None
    va, vb = row[f"{column}_a"], row[f"{column}_b"]
    if _same(va, vb, 0.0):
        return None
    if column == "reject":  # True/False -> words a reader can take in
        va, vb = (("differ" if v else "no difference shown") if not pd.isna(v) else "-"
                  for v in (va, vb))
    return {"a": va, "b": vb}


def _number(value: object) -> float:
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan
    return v


def _cells(version: ResultVersion) -> set[str]:
    """The evaluation cells of ``version``: its manifest's cell digests, or else the
    distinct cell keys of its outcomes table."""
    from robuststats.outcomes import CELL_KEY, cell_key

    cells = version.manifest.get("cells")
    if isinstance(cells, dict) and cells:
        return {str(k) for k in cells}
    path = version.path / "outcomes.parquet"
    if not path.is_file():
        return set()
    try:
        df = pd.read_parquet(path, columns=list(CELL_KEY))
    except Exception:  # an old or foreign outcomes file: no cells to compare
        return set()
    return {cell_key(*r) for r in df.drop_duplicates().itertuples(index=False)}
