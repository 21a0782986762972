"""Turn an item-outcomes table into aligned ``(n_seeds, n_items)`` arrays.

The outcomes table has one row per ``(condition, seed, eval_noise, noise_seed, item_id)``
with ``correct`` in {0, 1} (see ``docs/architecture.md``). Conditions are paired by item:
every condition must have been evaluated on the same ``item_id``s, under the same training
seeds (and, for stratified McNemar tests, the same noise seeds).

Two layouts:

* ``by="seed"``: one row per training seed; each item's value is its mean over noise
  seeds (a proportion in [0, 1] when there are several noisy re-evaluations). This is
  what the bootstrap uses: repeated noisy evaluations of one item are clustered, so they
  are averaged rather than counted as independent items.
* ``by="stratum"``: one 0/1 row per ``(seed, noise_seed)``; what the stratified McNemar
  test uses, with each stratum a set of matched pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from robuststats.stats._common import InputError, check_choice

__all__ = ["REQUIRED_COLUMNS", "AlignedOutcomes", "align_conditions", "validate_outcomes"]

REQUIRED_COLUMNS = ("condition", "seed", "eval_noise", "noise_seed", "item_id", "correct")
_KEY = ["condition", "seed", "eval_noise", "noise_seed", "item_id"]


@dataclass(frozen=True)
class AlignedOutcomes:
    """Outcomes of several conditions at one noise level, aligned item by item.

    ``values[condition]`` has shape ``(n_rows, n_items)``; ``rows`` names each row (a seed
    for ``by="seed"``, a ``(seed, noise_seed)`` tuple for ``by="stratum"``), ``item_ids``
    each column, identical for every condition.
    """

    values: dict[str, np.ndarray]
    rows: tuple
    item_ids: tuple[str, ...]
    eval_noise: float
    by: str


def validate_outcomes(outcomes: pd.DataFrame) -> pd.DataFrame:
    """Check columns, 0/1 ``correct`` and duplicate keys; return the table unchanged."""
    if not isinstance(outcomes, pd.DataFrame):
        raise InputError(f"`outcomes` must be a pandas DataFrame, got {type(outcomes).__name__}.")
    missing = [c for c in REQUIRED_COLUMNS if c not in outcomes.columns]
    if missing:
        raise InputError(
            f"`outcomes` lacks required column(s) {missing}; expected {list(REQUIRED_COLUMNS)}."
        )
    correct = pd.to_numeric(outcomes["correct"], errors="coerce")
    bad = ~correct.isin([0, 1])
    if bad.any():
        value = outcomes["correct"][bad].iloc[0]
        value = value.item() if isinstance(value, np.generic) else value
        raise InputError(
            f"`outcomes.correct` must be 0/1, got {value!r} in row {outcomes.index[bad][0]}."
        )
    dup = outcomes.duplicated(subset=_KEY, keep=False)
    if dup.any():
        row = outcomes.loc[dup, _KEY].iloc[0].to_dict()
        raise InputError(f"`outcomes` has duplicate rows for key {row}.")
    return outcomes


def _select_noise(outcomes: pd.DataFrame, eval_noise: float) -> pd.DataFrame:
    levels = np.asarray(outcomes["eval_noise"], dtype=float)
    mask = np.isclose(levels, float(eval_noise), rtol=1e-9, atol=1e-12)
    if not mask.any():
        available = sorted({float(v) for v in levels})
        raise InputError(f"`eval_noise` {eval_noise!r} is not in the outcomes; available: {available}.")
    return outcomes.loc[mask]


def _matrix(rows: pd.DataFrame, condition: str, by: str) -> pd.DataFrame:
    sub = rows.loc[rows["condition"] == condition]
    if sub.empty:
        return sub
    index = ["seed"] if by == "seed" else ["seed", "noise_seed"]
    wide = sub.pivot_table(index=index, columns="item_id", values="correct", aggfunc="mean")
    if wide.isna().to_numpy().any():
        holes = wide.isna()
        row, col = np.argwhere(holes.to_numpy())[0]
        raise InputError(
            f"condition {condition!r}: item {wide.columns[col]!r} is missing for "
            f"{dict(zip(index, np.atleast_1d(wide.index[row]).tolist()))}; items must be aligned."
        )
    if by == "seed":
        # every item must be evaluated under the same number of noise seeds in every seed
        counts = sub.groupby(["seed", "item_id"]).size()
        expected = int(counts.max())
        short = counts[counts != expected]
        if not short.empty:
            (seed, item), got = short.index[0], int(short.iloc[0])
            seed = seed.item() if isinstance(seed, np.generic) else seed
            raise InputError(
                f"condition {condition!r}: item {item!r} under seed {seed!r} has {got} "
                f"evaluation(s), others have {expected} (noise seeds must match); "
                "cannot align items."
            )
    return wide.sort_index(axis=0).sort_index(axis=1)


def align_conditions(
    outcomes: pd.DataFrame, conditions: Sequence[str], eval_noise: float, *, by: str = "seed",
    validate: bool = True,
) -> AlignedOutcomes:
    """Aligned outcome arrays of ``conditions`` at ``eval_noise`` (see module docstring).

    Raises :class:`InputError` naming the condition, seed or item when a condition is
    absent, when items or seeds differ between conditions, or when a cell is missing.
    ``validate=False`` skips :func:`validate_outcomes` for a table already checked.
    """
    check_choice(by, "by", ("seed", "stratum"))
    if validate:
        validate_outcomes(outcomes)
    rows = _select_noise(outcomes, eval_noise)
    present = set(outcomes["condition"].unique())
    wides: dict[str, pd.DataFrame] = {}
    for cond in conditions:
        if cond not in present:
            raise InputError(
                f"condition {cond!r} is not in the outcomes; available: {sorted(present)}."
            )
        wide = _matrix(rows, cond, by)
        if wide.empty:
            raise InputError(f"condition {cond!r} has no outcomes at eval_noise {eval_noise!r}.")
        wides[cond] = wide
    first, ref = next(iter(wides.items()))
    for cond, wide in wides.items():
        if list(wide.columns) != list(ref.columns):
            only_ref = sorted(set(ref.columns) - set(wide.columns))[:5]
            only_this = sorted(set(wide.columns) - set(ref.columns))[:5]
            raise InputError(
                f"items differ between conditions {first!r} and {cond!r} at eval_noise "
                f"{eval_noise!r}: only in {first!r}: {only_ref}, only in {cond!r}: {only_this}."
            )
        if list(wide.index) != list(ref.index):
            raise InputError(
                f"seeds differ between conditions {first!r} and {cond!r} at eval_noise "
                f"{eval_noise!r}: {list(ref.index)} vs {list(wide.index)}."
            )
    return AlignedOutcomes(
        values={c: w.to_numpy(dtype=float) for c, w in wides.items()},
        rows=tuple(ref.index),
        item_ids=tuple(str(i) for i in ref.columns),
        eval_noise=float(eval_noise),
        by=by,
    )
