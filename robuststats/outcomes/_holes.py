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

    ``outcomes`` lacks every dropped item and partial cell; ``missing`` lists the absent
    cells (partial cells set aside included); ``dropped`` records each missing item (one row
    per hole) and each partial cell (no item) with the reason.
    """

    outcomes: pd.DataFrame
    missing: pd.DataFrame
    dropped: pd.DataFrame


def complete(outcomes: pd.DataFrame, *, holes: str = "drop",
             expected: Iterable[Any] | None = None,
             items: Iterable[Any] | None = None) -> Completed:
    """Find the missing cells and the missing items of a validated table.

    ``items`` are the items every cell should hold as the source itself lists them (an
    Inspect log's header: its sample ids); default ``outcomes.attrs["expected_items"]``
    (set by the harness readers). An item listed there that a cell lacks is a hole like any
    other, even when no cell holds it: a record missing from a log is never a silent drop.

    The paired design needs the same items everywhere, so an item missing from any
    present cell is, with ``holes="drop"``, removed from the whole table and recorded;
    with ``holes="raise"`` it is an :class:`InputError` naming the cell and the item. A
    cell holding fewer than half of its condition's items is, with ``holes="drop"``, set
    aside whole instead (recorded in ``dropped`` without an item, and listed as missing):
    dropping what it lacks would drop most of the table.
    Missing cells are never an error here: they are returned for the caller to handle
    (the analysis makes hypotheses that need them INCONCLUSIVE).
    """
    import pandas as pd

    check_choice(holes, "holes", HOLE_POLICIES)
    if items is None:
        items = outcomes.attrs.get("expected_items")
    missing = missing_cells(outcomes, expected)
    records: list[dict[str, Any]] = []
    if holes == "drop":
        outcomes, partial = _set_aside_partial_cells(outcomes)
        if partial:
            records += partial
            cells = pd.DataFrame([{k: r[k] for k in CELL_KEY} for r in partial])
            missing = pd.concat([missing, cells.astype({c: DTYPES[c] for c in CELL_KEY})],
                                ignore_index=True)
    universe = sorted(set(outcomes["item_id"]) | {str(i) for i in (items or ())})
    counts = outcomes.groupby(list(CELL_KEY), sort=True)["item_id"].nunique()
    short = counts[counts < len(universe)]
    item_holes: list[dict[str, Any]] = []
    if len(short):
        per_cell = outcomes.groupby(list(CELL_KEY), sort=True)["item_id"].agg(set)
        for cell in short.index:
            for item in sorted(set(universe) - per_cell[cell]):
                item_holes.append({**dict(zip(CELL_KEY, cell)), "item_id": item})
    if item_holes and holes == "raise":
        first = item_holes[0]
        raise InputError(
            f"item {first['item_id']!r} is missing under condition {first['condition']!r}, "
            f"seed {_plain(first['seed'])}, eval_noise {_plain(first['eval_noise']):g}, "
            f"noise_seed {_plain(first['noise_seed'])} ({len(item_holes)} missing item row(s) "
            "in all); the paired design needs every item in every cell. Use holes='drop' "
            "(--holes drop) to drop such items from every table.")
    records += [{**r, "reason": "item missing in this cell; dropped from every table"}
                for r in item_holes]
    dropped = pd.DataFrame(records, columns=list(DROPPED_COLUMNS))
    if item_holes:
        gone = {r["item_id"] for r in item_holes}
        outcomes = outcomes[~outcomes["item_id"].isin(gone)].reset_index(drop=True)
    return Completed(outcomes, missing, dropped)


def _set_aside_partial_cells(outcomes: pd.DataFrame
                             ) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Remove the cells holding fewer than half of their condition's items; returns the rest
    of the table and one ``dropped`` record per cell removed (``item_id`` empty).

    Such a cell cannot be paired: dropping the items it lacks from every table would empty
    the analysis (one row whose seed was mistyped is a new one-item cell). It is a missing
    cell instead, and only what needs it is INCONCLUSIVE.
    """
    counts = outcomes.groupby(list(CELL_KEY), sort=True)["item_id"].nunique()
    per_condition = outcomes.groupby("condition")["item_id"].nunique()
    records = []
    for cell, n in counts.items():
        of = int(per_condition[cell[0]])
        if 2 * n < of:
            records.append({**dict(zip(CELL_KEY, cell)), "item_id": None,
                            "reason": f"cell holds {n} of its condition's {of} items; set "
                                      "aside as a missing cell"})
    if not records:
        return outcomes, []
    gone = {tuple(r[k] for k in CELL_KEY) for r in records}
    keep = [key not in gone for key in outcomes[list(CELL_KEY)].itertuples(index=False,
                                                                           name=None)]
    return outcomes[keep].reset_index(drop=True), records
