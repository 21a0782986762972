"""Read a version's tables under the glossary's column names, whatever version wrote them.

Versions written before the glossary (``robuststats.glossary``) used other names for a few
columns and left the interval level to the manifest. Reading them through
:func:`normalize_table` gives every reader one vocabulary; the stored files are never
touched (a version is immutable).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from robuststats.glossary import TABLE_COLUMNS, table_names

if TYPE_CHECKING:
    import pandas as pd

    from robuststats.results._store import ResultVersion

__all__ = ["TABLES", "confidence_level", "is_analysis_only", "normalize_table", "read_table",
           "read_tables"]

#: the analysis tables a version may hold, in the glossary's reading order
TABLES: tuple[str, ...] = table_names("analysis", order="reading")

#: table -> {old column name: glossary name}, for versions written before the glossary
_RENAMED: Mapping[str, Mapping[str, str]] = {
    "tests": {"difference": "estimate", "n10": "n_a_only", "n01": "n_b_only"},
    "retention": {"method": "ci_method"},
    # the old hypotheses table named the interval that decided the verdict `test`
    "hypotheses": {"test": "ci_method"},
}


def confidence_level(manifest: Mapping[str, Any]) -> float | None:
    """The analysis' interval level recorded in a manifest (or report meta), or None."""
    level = manifest.get("confidence_level")
    if level is None:
        spec = manifest.get("spec")
        analysis = spec.get("analysis") if isinstance(spec, Mapping) else None
        level = analysis.get("confidence_level") if isinstance(analysis, Mapping) else None
    # a damaged manifest may hold anything here: only a number is a level
    if isinstance(level, bool) or not isinstance(level, (int, float)):
        return None
    return float(level)


def is_analysis_only(manifest: Mapping[str, Any]) -> bool:
    """True for a version written by ``robuststats analyze --out`` (no models were run)."""
    return bool(manifest.get("analysis_only"))


def normalize_table(name: str, df: pd.DataFrame, *,
                    confidence_level: float | None = None) -> pd.DataFrame:
    """``df`` with glossary column names, declared columns first, and a ``ci_level`` column.

    Old names are renamed only where the glossary name is absent. A table with intervals
    but no ``ci_level`` gets ``confidence_level`` (the analysis-wide level from the
    manifest) when it is given; otherwise its level stays unknown rather than assumed.
    """
    out = df.rename(columns={old: new for old, new in _RENAMED.get(name, {}).items()
                             if old in df.columns and new not in df.columns})
    if ("ci_low" in out.columns and "ci_level" not in out.columns
            and confidence_level is not None):
        out = out.assign(ci_level=float(confidence_level))
    if name == "tests" and "role" not in out.columns and len(out.columns):
        # before the seed-random test, every row of the tests table decided `reject`
        out = out.assign(role="decision")
    declared = [c for c in TABLE_COLUMNS.get(name, ()) if c in out.columns]
    return out[declared + [c for c in out.columns if c not in declared]]


def read_table(version: ResultVersion, name: str) -> pd.DataFrame | None:
    """Table ``name`` of ``version`` under glossary names, or None if the version lacks it."""
    import pandas as pd

    from robuststats.errors import InputError

    path = version.path / f"{name}.parquet"
    if not path.is_file():
        return None
    try:
        df = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise InputError(f"{path}: cannot be read ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}); "
                         f"`robuststats results verify` tells whether it changed.") from None
    return normalize_table(name, df, confidence_level=confidence_level(version.manifest))


def read_tables(version: ResultVersion) -> dict[str, pd.DataFrame]:
    """Every analysis table of ``version`` (see :data:`TABLES`) that it holds, normalized."""
    tables = {name: read_table(version, name) for name in TABLES}
    return {name: df for name, df in tables.items() if df is not None}
