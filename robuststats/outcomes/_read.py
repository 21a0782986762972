"""Reading outcome tables from files and directories, and validating them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from robuststats.errors import InputError
from robuststats.outcomes._schema import COLUMNS, DEFAULTS, KEY
from robuststats.outcomes._schema import plain as _plain

if TYPE_CHECKING:
    import pandas as pd

#: file suffix -> reader
_SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl",
             ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet"}


# ---------------------------------------------------------------------- reading
def read_outcomes(source: str | Path | pd.DataFrame, *,
                  order_column: str | None = None) -> pd.DataFrame:
    """Read and validate an outcomes table.

    ``source`` is a DataFrame, a file (``.csv``, ``.tsv``, ``.jsonl``/``.ndjson``,
    ``.parquet``), a result version directory (``outcomes.parquet`` inside) or a run
    directory (one file per finished cell under ``cells/``). ``order_column``: also keep
    each row's position in the source (0-based, before validation sorts the rows) in a
    column of that name: the order in which a growing file's items were evaluated.
    """
    import pandas as pd

    if isinstance(source, pd.DataFrame):
        return validate_outcomes(_ordered(source, order_column))
    path = Path(source)
    if not path.exists():
        raise InputError(f"outcomes path {str(path)!r} does not exist.")
    if path.is_dir():
        if (path / "outcomes.parquet").is_file():
            return read_outcomes(path / "outcomes.parquet", order_column=order_column)
        cells = sorted((path / "cells").glob("*.parquet"))
        if not cells:
            raise InputError(f"{str(path)!r} holds neither outcomes.parquet (a result "
                             "version) nor cells/*.parquet (a run directory).")
        frames = [_checked_cell(p) for p in cells]
        return validate_outcomes(_ordered(pd.concat(frames, ignore_index=True), order_column),
                                 source=str(path))
    kind = _SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise InputError(f"outcomes file {str(path)!r}: unknown format {path.suffix!r}; use "
                         ".csv, .tsv, .jsonl or .parquet.")
    return validate_outcomes(_ordered(_read_file(path, kind), order_column), source=str(path))


def _ordered(frame: pd.DataFrame, column: str | None) -> pd.DataFrame:
    return frame if column is None else frame.assign(**{column: range(len(frame))})


def _checked_cell(path: Path) -> pd.DataFrame:
    """One cell file of a run directory, checked against the record written beside it
    (``<cell>.json``: row count and SHA-256 of the rows). A cell whose rows changed after it
    was written is refused, naming it; a cell without a record (a run directory from before
    records were kept) is read as it is."""
    from robuststats.outcomes._cells import cell_digest

    df = _read_file(path, "parquet")
    try:
        record = json.loads(path.with_suffix(".json").read_text())
    except (OSError, ValueError):
        return df
    if not isinstance(record, dict) or not isinstance(record.get("sha256"), str):
        return df
    rows = record.get("rows")
    if rows != len(df):
        problem = f"it holds {len(df)} rows, its record says {rows}"
    elif record["sha256"] != cell_digest(df):
        problem = "its rows changed after it was written (SHA-256 differs from its record)"
    else:
        return df
    raise InputError(f"run directory cell {path.stem!r}: {problem}; run the study again to "
                     f"recompute it (robuststats study sets it aside), or delete {str(path)!r}.")


def _read_file(path: Path, kind: str) -> pd.DataFrame:
    import pandas as pd

    text_columns = {"condition": str, "item_id": str}
    try:
        if kind == "csv":
            return pd.read_csv(path, dtype=text_columns)
        if kind == "tsv":
            return pd.read_csv(path, sep="\t", dtype=text_columns)
        if kind == "jsonl":
            return _read_jsonl(path)
        return pd.read_parquet(path)
    except InputError:
        raise
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"outcomes file {str(path)!r} could not be read: {first}") from None


def jsonl_objects(path: Path, *, row: str, hint: str = "") -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line of a JSONL file. A line that is not
    JSON, or not an object, is an :class:`InputError` naming ``path:line``; ``row`` names
    what one line is (``"a JSONL row"``) and ``hint`` ends the not-JSON message."""
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise InputError(f"{path}:{number}: not a JSON object ({exc.msg}){hint}.") \
                    from None
            if not isinstance(record, dict):
                raise InputError(f"{path}:{number}: {row} must be an object, got "
                                 f"{type(record).__name__}.")
            yield number, record


def _read_jsonl(path: Path) -> pd.DataFrame:
    import pandas as pd

    records = [record for _, record in jsonl_objects(
        path, row="a JSONL row", hint="; each line of a JSONL outcomes file is one row")]
    return pd.DataFrame.from_records(records)


# ---------------------------------------------------------------------- validation
def validate_outcomes(df: pd.DataFrame, *, source: str = "outcomes") -> pd.DataFrame:
    """Check and normalise an outcomes table; return a clean, sorted copy.

    ``condition``, ``item_id`` and ``correct`` are required. ``seed``, ``eval_noise`` and
    ``noise_seed`` default to 0 when absent; the defaulted columns are named in
    ``attrs["defaulted"]`` and in any duplicate-row error they cause. ``correct`` accepts
    0/1, booleans and the words true/false; ``seed`` and ``noise_seed`` are integers ≥ 0,
    ``eval_noise`` a number ≥ 0. Raises :class:`InputError` naming the column,
    the first bad row (1-based, as in the file) and the value.
    """
    import numpy as np
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise InputError(f"`outcomes` must be a pandas DataFrame, got {type(df).__name__}.")
    required = ("condition", "item_id", "correct")
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise InputError(f"{source}: missing required column(s) {missing}; found "
                         f"{[str(c) for c in df.columns][:12]}. Required: {list(required)}, "
                         f"optional: {list(DEFAULTS)} and 'score'.")
    if df.empty:
        raise InputError(f"{source}: the outcomes table has no rows.")
    out = df.reset_index(drop=True).copy()
    defaulted = [c for c in DEFAULTS if c not in out.columns]
    for col in defaulted:
        out[col] = DEFAULTS[col]
    for col in ("condition", "item_id"):
        empty = out[col].isna() | (out[col].astype(str).str.strip() == "")
        if empty.any():
            raise InputError(f"{source}: column {col!r} is empty in row "
                             f"{_row(empty)} ({int(empty.sum())} empty value(s)).")
        out[col] = out[col].astype(str)
    # control characters (NUL, line breaks, escapes) cannot name a cell file or a table
    # row; the study spec refuses them in condition names too
    unprintable = out["condition"].str.contains(r"[\x00-\x1f\x7f]", regex=True)
    if unprintable.any():
        raise InputError(f"{source}: column 'condition' holds a control character in row "
                         f"{_row(unprintable)}: "
                         f"{out.loc[unprintable, 'condition'].iloc[0][:80]!r}.")
    out["correct"] = _binary(out["correct"], source)
    for col, integer in (("seed", True), ("noise_seed", True), ("eval_noise", False)):
        conv = pd.to_numeric(out[col], errors="coerce")
        bad = conv.isna() | ~np.isfinite(conv.astype(float))
        if integer:
            bad |= (conv % 1 != 0) | (conv.abs() > 2**62)
        if bad.any():
            first = int(np.flatnonzero(bad.to_numpy())[0])
            raise InputError(f"{source}: column {col!r} must hold "
                             f"{'integers' if integer else 'numbers'}, got "
                             f"{_plain(out[col].iloc[first])!r} in row {first + 1}.")
        out[col] = conv.astype("int64" if integer else "float64")
    if (out["eval_noise"] < 0).any():
        raise InputError(f"{source}: column 'eval_noise' must be ≥ 0, got "
                         f"{float(out['eval_noise'].min())!r} in row "
                         f"{_row(out['eval_noise'] < 0)}.")
    for col in ("seed", "noise_seed"):  # seeds are labels a study draws from: never negative
        negative = out[col] < 0
        if negative.any():
            first = int(np.flatnonzero(negative.to_numpy())[0])
            raise InputError(f"{source}: column {col!r} must be ≥ 0, got "
                             f"{int(out[col].iloc[first])} in row {first + 1}.")
    if "score" in out.columns:
        out["score"] = pd.to_numeric(out["score"], errors="coerce").astype("float64")
    dup = out.duplicated(list(KEY))
    if dup.any():
        row = {k: _plain(v) for k, v in out.loc[dup, list(KEY)].iloc[0].items()}
        hint = (f" The column(s) {defaulted} are absent and were filled with 0: if the file "
                "holds several seeds or noise draws, add them." if defaulted else "")
        raise InputError(f"{source}: {int(dup.sum())} duplicate row(s) for the same "
                         f"({', '.join(KEY)}), first in row {_row(dup)}: {row}.{hint}")
    out = out.sort_values(list(KEY), kind="stable").reset_index(drop=True)
    ordered = [*COLUMNS, *(["score"] if "score" in out.columns else [])]
    out = out[ordered + [c for c in out.columns if c not in ordered]]
    out.attrs["defaulted"] = defaulted
    return out


def _binary(correct: pd.Series, source: str) -> pd.Series:
    import numpy as np
    import pandas as pd

    if correct.dtype == bool:
        return correct.astype("int8")
    if correct.dtype == object or pd.api.types.is_string_dtype(correct):
        words = {"true": 1, "false": 0}
        correct = correct.map(lambda v: words.get(v.strip().lower(), v)
                              if isinstance(v, str) else v)
    num = pd.to_numeric(correct, errors="coerce")
    bad = ~num.isin([0, 1])
    if bad.any():
        first = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(f"{source}: column 'correct' must hold 0/1, got "
                         f"{_plain(correct.iloc[first])!r} in row {first + 1} "
                         f"({int(bad.sum())} bad value(s)).")
    return num.astype("int8")


def _row(mask: pd.Series) -> int:
    import numpy as np

    return int(np.flatnonzero(np.asarray(mask))[0]) + 1
