"""Aligning conditions (or condition × noise-level series) item by item."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from robuststats._validation import check_choice
from robuststats.errors import InputError
from robuststats.outcomes._schema import DROPPED_COLUMNS, HOLE_POLICIES
from robuststats.outcomes._schema import plain as _plain

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

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


def align_by_condition(outcomes: pd.DataFrame, series: Sequence[tuple[str, float]], *,
                       holes: str = "raise") -> tuple[dict[Any, np.ndarray], tuple[str, ...]]:
    """Per-seed arrays of ``series`` when conditions do not share their seeds.

    The series of one condition are aligned with each other (:func:`align_series`, rows =
    that condition's training seeds); different conditions may have different seeds and
    numbers of seeds (independent runs). Only items every condition has are kept. Returns
    the arrays keyed by ``(condition, eval_noise)`` and the shared item ids.
    """
    by_condition: dict[str, list[tuple[str, float]]] = {}
    for cond, level in series:
        by_condition.setdefault(cond, []).append((cond, level))
    parts = {cond: align_series(outcomes, group, by="seed", holes=holes)
             for cond, group in by_condition.items()}
    shared = set.intersection(*(set(p.item_ids) for p in parts.values()))
    if not shared:
        raise InputError(f"no item is shared by the conditions {sorted(by_condition)}; "
                         "nothing to compare.")
    items = tuple(i for i in next(iter(parts.values())).item_ids if i in shared)
    values: dict[Any, np.ndarray] = {}
    for part in parts.values():
        column = {item: j for j, item in enumerate(part.item_ids)}
        keep = [column[i] for i in items]
        for key, arr in part.values.items():
            values[key] = arr[:, keep]
    return values, items


def seed_pairing(outcomes: pd.DataFrame, a: str, b: str, levels: list[float]
                 ) -> tuple[pd.DataFrame, str, bool]:
    """How a's and b's training seeds pair: the outcomes to use, a note, and whether the
    seeds are independent runs.

    Equal seed labels pair row by row. Two or more shared labels: paired on the shared
    seeds, the others left out and named. Fewer shared labels (independent runs labelled
    differently): unpaired, items still paired. One seed each under different labels: the
    two models pair over items.
    """
    at = outcomes["eval_noise"].astype(float).isin([float(v) for v in levels])
    seeds = {c: set(outcomes.loc[at & (outcomes["condition"] == c), "seed"].tolist())
             for c in (a, b)}
    shared = seeds[a] & seeds[b]
    if seeds[a] == seeds[b]:
        return outcomes, "", False
    only = {c: sorted(seeds[c] - shared) for c in (a, b)}
    if len(shared) >= 2:
        keep = ~outcomes["condition"].isin([a, b]) | outcomes["seed"].isin(list(shared))
        note = (f"; paired on the {len(shared)} shared seeds (seeds only in {a!r}: "
                f"{only[a]}, only in {b!r}: {only[b]})")
        return outcomes.loc[keep], note, False
    if len(seeds[a]) == 1 and len(seeds[b]) == 1:
        (sa,), (sb,) = seeds[a], seeds[b]
        relabel = outcomes.copy()
        relabel.loc[relabel["condition"] == b, "seed"] = sa
        return relabel, f"; one model each (seed {sa} of {a!r}, seed {sb} of {b!r})", False
    note = (f"; independent seeds ({a!r}: {sorted(seeds[a])}, {b!r}: {sorted(seeds[b])}), "
            "unpaired")
    return outcomes, note, True
