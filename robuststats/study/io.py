"""Reading item-outcome tables made here or elsewhere (CSV, JSONL, parquet).

Columns (``docs/architecture.md``): ``condition`` (str), ``item_id`` (str) and ``correct``
(0/1) are required; ``seed`` (training seed) defaults to 0, ``eval_noise`` to 0.0 (clean)
and ``noise_seed`` to 0 when absent, i.e. one model per condition evaluated once. ``score``
is optional and kept. Other columns are kept and ignored by the analysis.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from robuststats.errors import InputError

__all__ = ["REQUIRED_COLUMNS", "read_outcomes", "validate_outcomes"]

REQUIRED_COLUMNS = ("condition", "item_id", "correct")
_DEFAULTS: dict[str, object] = {"seed": 0, "eval_noise": 0.0, "noise_seed": 0}
_KEY = ["condition", "seed", "eval_noise", "noise_seed", "item_id"]


def read_outcomes(path: str | Path) -> pd.DataFrame:
    """Read and validate an outcomes file (``.csv``, ``.jsonl``/``.ndjson``, ``.parquet``).

    A result version directory (``outcomes.parquet`` inside) or a run directory (cell
    files under ``cells/``) is accepted as well.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"outcomes path {str(path)!r} does not exist.")
    if path.is_dir():
        if (path / "outcomes.parquet").is_file():
            return read_outcomes(path / "outcomes.parquet")
        cells = sorted((path / "cells").glob("*.parquet"))
        if not cells:
            raise InputError(f"{str(path)!r} holds neither outcomes.parquet nor cells/*.parquet.")
        return validate_outcomes(pd.concat([pd.read_parquet(p) for p in cells],
                                           ignore_index=True), source=str(path))
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            df = pd.read_csv(path, dtype={"condition": str, "item_id": str})
        elif suffix in (".jsonl", ".ndjson"):
            df = pd.DataFrame([json.loads(line) for line in path.read_text().splitlines()
                               if line.strip()])
        elif suffix in (".parquet", ".pq"):
            df = pd.read_parquet(path)
        else:
            raise InputError(f"outcomes file {str(path)!r}: unknown format {suffix!r}; "
                             "use .csv, .jsonl or .parquet.")
    except InputError:
        raise
    except (ValueError, OSError) as exc:
        raise InputError(f"outcomes file {str(path)!r} could not be read: {exc}") from None
    return validate_outcomes(df, source=str(path))


def validate_outcomes(df: pd.DataFrame, *, source: str = "outcomes") -> pd.DataFrame:
    """Check columns, types and uniqueness; fill optional columns; return a clean copy."""
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(f"{source}: missing required column(s) {missing}; found "
                         f"{list(df.columns)}. Required: {list(REQUIRED_COLUMNS)}.")
    if df.empty:
        raise InputError(f"{source}: the outcomes table has no rows.")
    out = df.copy()
    for col, default in _DEFAULTS.items():
        if col not in out.columns:
            out[col] = default
    for col in ("condition", "item_id"):
        if out[col].isna().any():
            raise InputError(f"{source}: column {col!r} has {int(out[col].isna().sum())} "
                             "empty value(s).")
        out[col] = out[col].astype(str)
    correct = out["correct"]
    if correct.dtype == bool:
        correct = correct.astype(int)
    elif correct.dtype == object or pd.api.types.is_string_dtype(correct):
        # CSV writers spell booleans as True/False or true/false
        words = {"true": 1, "false": 0}
        correct = correct.map(lambda v: words.get(v.strip().lower(), v) if isinstance(v, str)
                              else v)
    num = pd.to_numeric(correct, errors="coerce")
    bad = ~num.isin([0, 1])
    if bad.any():
        first = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(f"{source}: column 'correct' must hold 0/1, got "
                         f"{_plain(correct.iloc[first])!r} in row {first + 1} "
                         f"({int(bad.sum())} bad value(s)).")
    out["correct"] = num.astype("int8")
    for col, kind in (("seed", "int64"), ("noise_seed", "int64"), ("eval_noise", "float64")):
        conv = pd.to_numeric(out[col], errors="coerce")
        if conv.isna().any() or (kind == "int64" and (conv % 1 != 0).any()):
            row = int(np.flatnonzero((conv.isna() | (conv % 1 != 0)).to_numpy())[0])
            raise InputError(f"{source}: column {col!r} must be "
                             f"{'an integer' if kind == 'int64' else 'a number'}, got "
                             f"{_plain(out[col].iloc[row])!r} in row {row + 1}.")
        out[col] = conv.astype(kind)
    if ((out["eval_noise"] < 0) | (out["eval_noise"] >= 1)).any():
        raise InputError(f"{source}: column 'eval_noise' must lie in [0, 1).")
    if "score" in out.columns:
        out["score"] = pd.to_numeric(out["score"], errors="coerce")
    dup = out.duplicated(_KEY)
    if dup.any():
        row = out.loc[dup, _KEY].iloc[0].to_dict()
        raise InputError(f"{source}: {int(dup.sum())} duplicate row(s) for the same "
                         f"(condition, seed, eval_noise, noise_seed, item_id), e.g. {row}.")
    return out.sort_values(_KEY, kind="stable").reset_index(drop=True)


def _plain(value: object) -> object:
    # numpy scalars print as np.int64(2); show the value as a person wrote it
    return value.item() if isinstance(value, np.generic) else value
