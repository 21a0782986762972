"""Missing cells and missing items of an outcomes table, resolved by one policy."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from robuststats._validation import check_choice
from robuststats.errors import InputError
from robuststats.outcomes._schema import CELL_KEY, DROPPED_COLUMNS, DTYPES, HOLE_POLICIES
from robuststats.outcomes._schema import plain as _plain

if TYPE_CHECKING:
    import pandas as pd

# ---------------------------------------------------------------------- holes
def missing_cells(outcomes: pd.DataFrame, expected: Iterable[Any] | None = None
                  ) -> pd.DataFrame:
    """Expected cells absent from ``outcomes`` (columns ``condition, seed, eval_noise,
    noise_seed``).

    ``expected`` holds objects with those four attributes (the study plan's cells). Without
    it, the expected cells are the cross product present in the data within each
    condition: every seed of the condition × every ``(eval_noise, noise_seed)`` pair the
    condition has. A seed missing at one level of its condition is a hole; a condition
    with fewer seeds than another (an unequal design, or independent runs labelled
    differently) or with one noise seed where others have several (a deterministic error
    model) is not.
    """
    import pandas as pd

    cells = outcomes[list(CELL_KEY)].drop_duplicates()
    have = set(cells.itertuples(index=False, name=None))
    if expected is None:
        wanted = []
        for cond in dict.fromkeys(outcomes["condition"]):
            sub = cells.loc[cells["condition"] == cond]
            seeds = sorted(set(sub["seed"].tolist()))
            levels = sorted(set(sub[["eval_noise", "noise_seed"]]
                                .itertuples(index=False, name=None)))
            wanted += [(cond, s, lv, ns) for s in seeds for lv, ns in levels]
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
