"""The outcomes table: the one schema every experiment ends in, and every statistic reads.

One row per ``(condition, seed, eval_noise, noise_seed, item_id)`` with ``correct`` in
{0, 1} and an optional ``score`` (``docs/architecture.md``). This module is the only place
that knows the schema. It reads the table from any source, validates it, finds its holes
and aligns conditions item by item. Torch-free, and it never imports the statistics.

Holes come in two kinds:

* a *missing cell*: a whole ``(condition, seed, eval_noise, noise_seed)`` evaluation is
  absent (it failed or was never run). Expected cells come from the study plan or, without
  one, from the cross product present in the data (:func:`missing_cells`);
* a *missing item*: a cell exists but lacks an item that other cells have.

:func:`align` has an explicit policy for both: ``holes="raise"`` names the exact
condition, seed, noise level, noise seed and item; ``holes="drop"`` removes the seed or the
item from every aligned condition and keeps a record of what it dropped (``Aligned.dropped``,
columns of the glossary's ``dropped`` table).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robuststats._validation import check_choice
from robuststats.errors import InputError

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

__all__ = [
    "CELL_KEY",
    "COLUMNS",
    "DTYPES",
    "HOLE_POLICIES",
    "KEY",
    "Aligned",
    "align",
    "align_series",
    "complete",
    "empty_outcomes",
    "missing_cells",
    "read_outcomes",
    "validate_outcomes",
]

#: the key of one row, in table order
KEY: tuple[str, ...] = ("condition", "seed", "eval_noise", "noise_seed", "item_id")
#: the key of one evaluation (a cell of a study)
CELL_KEY: tuple[str, ...] = ("condition", "seed", "eval_noise", "noise_seed")
#: required columns, in table order (``score`` is optional and kept)
COLUMNS: tuple[str, ...] = (*KEY, "correct")
#: canonical dtypes of a validated table
DTYPES: dict[str, str] = {"condition": "object", "seed": "int64", "eval_noise": "float64",
                          "noise_seed": "int64", "item_id": "object", "correct": "int8",
                          "score": "float64"}
#: columns that may be absent from a file: one model per condition, evaluated once, clean
DEFAULTS: dict[str, object] = {"seed": 0, "eval_noise": 0.0, "noise_seed": 0}
HOLE_POLICIES = ("raise", "drop")
DROPPED_COLUMNS = ("condition", "seed", "eval_noise", "noise_seed", "item_id", "reason")

_SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl",
             ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet"}


# ---------------------------------------------------------------------- reading
def read_outcomes(source: str | Path | pd.DataFrame) -> pd.DataFrame:
    """Read and validate an outcomes table.

    ``source`` is a DataFrame, a file (``.csv``, ``.tsv``, ``.jsonl``/``.ndjson``,
    ``.parquet``), a result version directory (``outcomes.parquet`` inside) or a run
    directory (one file per finished cell under ``cells/``).
    """
    import pandas as pd

    if isinstance(source, pd.DataFrame):
        return validate_outcomes(source)
    path = Path(source)
    if not path.exists():
        raise InputError(f"outcomes path {str(path)!r} does not exist.")
    if path.is_dir():
        if (path / "outcomes.parquet").is_file():
            return read_outcomes(path / "outcomes.parquet")
        cells = sorted((path / "cells").glob("*.parquet"))
        if not cells:
            raise InputError(f"{str(path)!r} holds neither outcomes.parquet (a result "
                             "version) nor cells/*.parquet (a run directory).")
        frames = [_read_file(p, "parquet") for p in cells]
        return validate_outcomes(pd.concat(frames, ignore_index=True), source=str(path))
    kind = _SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise InputError(f"outcomes file {str(path)!r}: unknown format {path.suffix!r}; use "
                         ".csv, .tsv, .jsonl or .parquet.")
    return validate_outcomes(_read_file(path, kind), source=str(path))


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


def _read_jsonl(path: Path) -> pd.DataFrame:
    import pandas as pd

    records = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise InputError(f"{path}:{number}: not a JSON object ({exc.msg}); each line "
                                 "of a JSONL outcomes file is one row.") from None
            if not isinstance(record, dict):
                raise InputError(f"{path}:{number}: a JSONL row must be an object, got "
                                 f"{type(record).__name__}.")
            records.append(record)
    return pd.DataFrame.from_records(records)


# ---------------------------------------------------------------------- validation
def validate_outcomes(df: pd.DataFrame, *, source: str = "outcomes") -> pd.DataFrame:
    """Check and normalise an outcomes table; return a clean, sorted copy.

    ``condition``, ``item_id`` and ``correct`` are required. ``seed``, ``eval_noise`` and
    ``noise_seed`` default to 0 when absent; the defaulted columns are named in
    ``attrs["defaulted"]`` and in any duplicate-row error they cause. ``correct`` accepts
    0/1, booleans and the words true/false. Raises :class:`InputError` naming the column,
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


def _plain(value: object) -> object:
    # numpy scalars print as np.int64(2); show the value as a person wrote it
    return value.item() if hasattr(value, "item") and not isinstance(value, str) else value


def empty_outcomes() -> pd.DataFrame:
    """A table with the schema and no rows."""
    import pandas as pd

    return pd.DataFrame({c: pd.Series(dtype=DTYPES[c]) for c in COLUMNS})


# ---------------------------------------------------------------------- holes
def missing_cells(outcomes: pd.DataFrame, expected: Iterable[Any] | None = None
                  ) -> pd.DataFrame:
    """Expected cells absent from ``outcomes`` (columns ``condition, seed, eval_noise,
    noise_seed``).

    ``expected`` holds objects with those four attributes (the study plan's cells). Without
    it, the expected cells are the cross product present in the data: every condition ×
    every seed × every ``(eval_noise, noise_seed)`` pair that occurs, so a study's
    analysis and a later ``analyze`` of its outcomes agree on what is missing.
    """
    import pandas as pd

    cells = outcomes[list(CELL_KEY)].drop_duplicates()
    have = set(cells.itertuples(index=False, name=None))
    if expected is None:
        conditions = list(dict.fromkeys(outcomes["condition"]))
        seeds = sorted(set(outcomes["seed"].tolist()))
        levels = sorted(set(outcomes[["eval_noise", "noise_seed"]]
                            .itertuples(index=False, name=None)))
        wanted = [(c, s, lv, ns) for c in conditions for s in seeds for lv, ns in levels]
    else:
        wanted = [(c.condition, c.seed, float(c.eval_noise), c.noise_seed) for c in expected]
    rows = [dict(zip(CELL_KEY, cell)) for cell in wanted if cell not in have]
    return pd.DataFrame(rows, columns=list(CELL_KEY)).astype(
        {c: DTYPES[c] for c in CELL_KEY})


@dataclass(frozen=True)
class Completed:
    """An outcomes table with its holes resolved by one policy.

    ``outcomes`` lacks every dropped item; ``missing`` lists the absent cells; ``dropped``
    records each missing item (one row per hole) with the reason.
    """

    outcomes: pd.DataFrame
    missing: pd.DataFrame
    dropped: pd.DataFrame


def complete(outcomes: pd.DataFrame, *, holes: str = "drop",
             expected: Iterable[Any] | None = None) -> Completed:
    """Find the missing cells and the missing items of a validated table.

    The paired design needs the same items everywhere, so an item missing from any
    present cell is, with ``holes="drop"``, removed from the whole table and recorded;
    with ``holes="raise"`` it is an :class:`InputError` naming the cell and the item.
    Missing cells are never an error here: they are returned for the caller to handle
    (the analysis makes hypotheses that need them INCONCLUSIVE).
    """
    import pandas as pd

    check_choice(holes, "holes", HOLE_POLICIES)
    missing = missing_cells(outcomes, expected)
    universe = sorted(set(outcomes["item_id"]))
    counts = outcomes.groupby(list(CELL_KEY), sort=True)["item_id"].nunique()
    short = counts[counts < len(universe)]
    records: list[dict[str, Any]] = []
    if len(short):
        per_cell = outcomes.groupby(list(CELL_KEY), sort=True)["item_id"].agg(set)
        for cell in short.index:
            for item in sorted(set(universe) - per_cell[cell]):
                records.append({**dict(zip(CELL_KEY, cell)), "item_id": item})
    if records and holes == "raise":
        first = records[0]
        raise InputError(
            f"item {first['item_id']!r} is missing under condition {first['condition']!r}, "
            f"seed {_plain(first['seed'])}, eval_noise {_plain(first['eval_noise']):g}, "
            f"noise_seed {_plain(first['noise_seed'])} ({len(records)} missing item row(s) "
            "in all); the paired design needs every item in every cell. Use holes='drop' "
            "(--holes drop) to drop such items from every table.")
    dropped = pd.DataFrame(
        [{**r, "reason": "item missing in this cell; dropped from every table"}
         for r in records], columns=list(DROPPED_COLUMNS))
    if records:
        gone = {r["item_id"] for r in records}
        outcomes = outcomes[~outcomes["item_id"].isin(gone)].reset_index(drop=True)
    return Completed(outcomes, missing, dropped)


# ---------------------------------------------------------------------- alignment
@dataclass(frozen=True)
class Aligned:
    """Outcomes of several series aligned item by item.

    ``values[key]`` has shape ``(n_rows, n_items)``: a row per training seed
    (``by="seed"``, each item's mean over noise seeds, a proportion when there are several
    noisy re-evaluations) or per ``(seed, noise_seed)`` stratum (``by="stratum"``, 0/1).
    ``rows`` names the rows and ``item_ids`` the columns, identical for every series.
    ``dropped`` records the seeds and items removed under ``holes="drop"``.
    """

    values: dict[Any, np.ndarray]
    rows: tuple
    item_ids: tuple[str, ...]
    by: str
    dropped: pd.DataFrame = field(repr=False)


def align(outcomes: pd.DataFrame, conditions: Sequence[str], eval_noise: float, *,
          by: str = "seed", holes: str = "raise") -> Aligned:
    """Aligned ``(n_rows, n_items)`` arrays of ``conditions`` at ``eval_noise``.

    ``values`` is keyed by condition. See :func:`align_series` for the rules.
    """
    aligned = align_series(outcomes, [(c, eval_noise) for c in conditions], by=by,
                           holes=holes)
    return Aligned({c: aligned.values[(c, eval_noise)] for c in conditions}, aligned.rows,
                   aligned.item_ids, by, aligned.dropped)


def align_series(outcomes: pd.DataFrame, series: Sequence[tuple[str, float]], *,
                 by: str = "seed", holes: str = "raise") -> Aligned:
    """Aligned arrays of ``(condition, eval_noise)`` series, keyed by that pair.

    Every series must cover the same rows (training seeds, or ``(seed, noise_seed)``
    strata) and items, and with ``by="seed"`` every item of a row the same number of noise
    seeds. A row or item that some series lacks is a hole: ``holes="raise"`` names it
    (condition, seed, eval_noise, noise_seed, item); ``holes="drop"`` removes that row or
    item from every series and records it in ``dropped``. A series absent altogether is
    always an error.
    """
    import numpy as np
    import pandas as pd

    check_choice(by, "by", ("seed", "stratum"))
    check_choice(holes, "holes", HOLE_POLICIES)
    if by == "stratum" and len({lv for _, lv in series}) > 1:
        raise InputError("`by='stratum'` aligns one noise level at a time; noise seeds of "
                         "different levels do not pair.")
    index = ["seed"] if by == "seed" else ["seed", "noise_seed"]
    levels = np.asarray(outcomes["eval_noise"], dtype=float)
    tables: dict[tuple[str, float], pd.DataFrame] = {}
    subs: dict[tuple[str, float], pd.DataFrame] = {}
    for cond, level in series:
        mask = (outcomes["condition"] == cond).to_numpy() & np.isclose(
            levels, float(level), rtol=1e-9, atol=1e-12)
        sub = outcomes.loc[mask]
        if sub.empty:
            present = sorted(set(outcomes["condition"]))
            at = sorted({float(v) for v in outcomes.loc[outcomes["condition"] == cond,
                                                          "eval_noise"]})
            where = (f"condition {cond!r} is not in the outcomes (conditions: {present})"
                     if cond not in present else
                     f"condition {cond!r} has no outcomes at eval_noise {float(level):g} "
                     f"(levels: {at})")
            raise InputError(f"{where}.")
        tables[(cond, level)] = sub.pivot_table(index=index, columns="item_id",
                                                values="correct", aggfunc="mean")
        subs[(cond, level)] = sub
    all_rows = sorted(set().union(*(t.index for t in tables.values())))
    all_items = sorted(set().union(*(t.columns for t in tables.values())))
    dropped: list[dict[str, Any]] = []
    holes_found = _holes(tables, subs, all_rows, all_items, by)
    if holes_found and holes == "raise":
        (cond, level), row, item, why, noise_seed = holes_found[0]
        seed = row if by == "seed" else row[0]
        where = (f"condition {cond!r}, seed {_plain(seed)}, eval_noise {float(level):g}"
                 + (f", noise_seed {_plain(noise_seed)}" if noise_seed is not None else ""))
        what = f"item {item!r}" if item is not None else "every item"
        raise InputError(f"{what} is missing for {where} ({why}); "
                         f"{len(holes_found)} hole(s) in all. Items must be aligned across "
                         "conditions; use holes='drop' to drop them with a record.")
    bad_rows = {row for _, row, item, _, _ in holes_found if item is None}
    bad_items = {item for _, row, item, _, _ in holes_found if item is not None
                 and row not in bad_rows}
    for (cond, level), row, item, why, noise_seed in holes_found:
        if item is not None and row in bad_rows:
            continue
        seed = row if by == "seed" else row[0]
        noise_seed = pd.NA if noise_seed is None else noise_seed
        dropped.append({"condition": cond, "seed": seed, "eval_noise": float(level),
                        "noise_seed": noise_seed, "item_id": item if item is not None
                        else pd.NA,
                        "reason": (f"{why}; item dropped from the comparison"
                                   if item is not None else
                                   f"{why}; seed dropped from the comparison")})
    rows = [r for r in all_rows if r not in bad_rows]
    items = [i for i in all_items if i not in bad_items]
    if not rows or not items:
        raise InputError(f"no {'seed' if not rows else 'item'} is shared by the series "
                         f"{[f'{c}@{lv:g}' for c, lv in series]}; nothing to compare.")
    values = {key: t.reindex(index=rows, columns=items).to_numpy(dtype=float)
              for key, t in tables.items()}
    return Aligned(values, tuple(rows), tuple(str(i) for i in items), by,
                   pd.DataFrame(dropped, columns=list(DROPPED_COLUMNS)))


def _holes(tables: dict[tuple[str, float], pd.DataFrame],
           subs: dict[tuple[str, float], pd.DataFrame], rows: list, items: list, by: str
           ) -> list[tuple[tuple[str, float], Any, Any, str, Any]]:
    """Every (series, row, item, why, noise_seed) that breaks the alignment.

    ``item`` None means the whole row (a missing cell); ``noise_seed`` names the missing
    evaluation where it is known.
    """
    import numpy as np

    found = []
    for key, table in tables.items():
        sub = subs[key]
        for row in rows:
            if row not in table.index:
                ns = row[1] if by == "stratum" else None
                found.append((key, row, None, "cell missing", ns))
        present = table.reindex(index=[r for r in rows if r in table.index], columns=items)
        for r_i, c_i in np.argwhere(present.isna().to_numpy()):
            row = present.index[r_i]
            ns = row[1] if by == "stratum" else None
            found.append((key, row, present.columns[c_i], "item missing", ns))
        if by == "seed":
            counts = sub.groupby(["seed", "item_id"]).size()
            per_seed = sub.groupby("seed")["noise_seed"].nunique()
            short = counts[counts.to_numpy() < per_seed.reindex(
                counts.index.get_level_values("seed")).to_numpy()]
            for seed, item in short.index:  # rare: name the missing noise seed
                rows_of_seed = sub[sub["seed"] == seed]
                got = set(rows_of_seed.loc[rows_of_seed["item_id"] == item, "noise_seed"])
                lacking = sorted(set(rows_of_seed["noise_seed"]) - got)
                found.append((key, seed, item, f"evaluation under noise_seed "
                              f"{lacking[0]} missing", lacking[0]))
    return found
