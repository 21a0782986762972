"""The tables of one cell: its outcomes and its injection counts, built and checked.

:func:`cell_frame` and :func:`injection_frame` give what the evaluator returned the cell's
keys and the canonical dtypes; the ``check_*`` functions are what a stored file must pass
to be read back as this cell's (:class:`~robuststats.runs.ledger.RunLedger` moves a file
that fails aside).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from robuststats.outcomes import CELL_KEY, COLUMNS, DTYPES
from robuststats.runs.plan import Cell

__all__ = ["INJECTION_COLUMNS", "cell_frame", "check_cell_frame", "check_injection_frame",
           "injection_frame", "items_problem"]

#: the engine's session stats (``NoiseSession.stats``) and their dtypes on disk
_STATS_DTYPES = {"layer": "int64", "op": "object", "phase": "object", "count": "int64",
                 "rms_noise_ratio": "float64", "target_scale": "float64"}
_CELL_KEYS = {c: DTYPES[c] for c in CELL_KEY}
#: columns of the injections table: the cell's keys, then one row per layer × op × phase
INJECTION_COLUMNS = [*_CELL_KEYS, *_STATS_DTYPES]


def cell_frame(cell: Cell, outcomes: pd.DataFrame) -> pd.DataFrame:
    """Outcomes of one cell (``item_id``, ``correct``[, ``score``]) with the cell's keys."""
    for col in ("item_id", "correct"):
        if col not in outcomes.columns:
            raise ValueError(f"the evaluator returned no {col!r} column "
                             f"(columns: {list(outcomes.columns)})")
    if outcomes["item_id"].duplicated().any():
        raise ValueError("the evaluator returned duplicate item_ids")
    df = pd.DataFrame({
        "condition": cell.condition, "seed": cell.seed, "eval_noise": cell.eval_noise,
        "noise_seed": cell.noise_seed, "item_id": outcomes["item_id"].astype(str).to_numpy(),
        "correct": outcomes["correct"].astype("int8").to_numpy(),
    })
    if "score" in outcomes.columns:
        df["score"] = outcomes["score"].astype(float).to_numpy()
    return df.astype({c: DTYPES[c] for c in COLUMNS})


def injection_frame(cell: Cell | None,
                    stats: pd.DataFrame | Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The engine's session stats of one cell with the cell's keys in front."""
    df = pd.DataFrame(stats) if not isinstance(stats, pd.DataFrame) else stats.copy()
    if df.empty:
        df = pd.DataFrame({c: pd.Series(dtype=t) for c, t in _STATS_DTYPES.items()})
    missing = [c for c in _STATS_DTYPES if c not in df.columns]
    if missing:
        raise ValueError(f"the evaluator's injection stats lack columns {missing} "
                         f"(columns: {list(df.columns)})")
    if cell is not None:
        keys = {"condition": cell.condition, "seed": cell.seed, "eval_noise": cell.eval_noise,
                "noise_seed": cell.noise_seed}
    else:
        keys = {}
    for i, (column, value) in enumerate(keys.items()):
        df.insert(i, column, value)
    for column, dtype in _CELL_KEYS.items():
        if column not in df.columns:
            df.insert(list(_CELL_KEYS).index(column), column, pd.Series(dtype=dtype))
    extra = [c for c in df.columns if c not in INJECTION_COLUMNS]
    return df[INJECTION_COLUMNS + extra].astype({**_CELL_KEYS, **_STATS_DTYPES})


def check_injection_frame(cell: Cell, df: pd.DataFrame) -> None:
    missing = [c for c in INJECTION_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"injection file lacks columns {missing}")
    if not df.empty and not ((df["condition"] == cell.condition).all()
                             and (df["seed"] == cell.seed).all()
                             and (df["eval_noise"] == cell.eval_noise).all()
                             and (df["noise_seed"] == cell.noise_seed).all()):
        raise ValueError("injection file belongs to another cell")


def check_cell_frame(cell: Cell, df: pd.DataFrame) -> None:
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing or df.empty:
        raise ValueError(f"cell file lacks columns {missing} or rows")
    if not ((df["condition"] == cell.condition).all() and (df["seed"] == cell.seed).all()
            and (df["eval_noise"] == cell.eval_noise).all()
            and (df["noise_seed"] == cell.noise_seed).all()):
        raise ValueError("cell file belongs to another cell")
    if not df["correct"].isin([0, 1]).all():
        raise ValueError("correct must be 0/1")


def items_problem(df: pd.DataFrame, items: Sequence[str]) -> str | None:
    """What differs between a cell's item ids and the plan's, or ``None``."""
    have = [str(v) for v in df["item_id"]]
    planned = {str(v) for v in items}
    present = set(have)
    if len(have) == len(present) == len(planned) and present == planned:
        return None
    lacking = sorted(planned - present)
    extra = sorted(present - planned)
    parts = [f"it holds {len(have)} rows, the plan has {len(planned)} items"]
    if lacking:
        parts.append(f"{len(lacking)} planned item(s) missing (first: {lacking[0]!r})")
    if extra:
        parts.append(f"{len(extra)} item(s) not in the plan (first: {extra[0]!r})")
    if len(have) != len(present):
        parts.append("duplicate item ids")
    return "; ".join(parts)
