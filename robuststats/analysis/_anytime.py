"""Anytime-valid monitoring of one evaluation: confidence sequences over a stream of items.

For a fixed pair of trained models (a model is one ``(condition, seed)``), every cell both
have (the same ``eval_noise`` and ``noise_seed``) gives a stream of paired items, and
every noisy cell of one model with its clean cell gives another. Each stream runs in the
order the items were evaluated: an item enters once both of its cells hold it, at the
later of its two rows in the source (the ``order`` column, from
``read_outcomes(..., order_column=...)``). The difference of accuracies and the
retention (noisy/clean accuracy) each get the betting confidence sequence of
:mod:`robuststats.stats.sequential` (docs/statistics.md §11, anytime-valid monitoring):
the bounds after every item hold at all item counts at once, so a growing file may be
re-read and the evaluation stopped as soon as a sequence excludes the value it is tested
against. A statement about these trained models on this item stream, not about their
training procedures (the seed-random t of a study answers that).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from robuststats._validation import check_choice, check_number, check_probability
from robuststats.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ANYTIME_COLUMNS", "ANYTIME_STATEMENT", "MONITOR", "Model", "anytime_table",
           "decision", "find_model", "models_of", "order_drift", "order_drift_note",
           "paired_stream", "parse_model", "pick_pair"]

#: columns of the anytime table, in order
ANYTIME_COLUMNS = ("comparison", "model_a", "model_b", "eval_noise", "noise_seed", "items",
                   "estimate", "cs_low", "cs_high", "null", "decided", "direction",
                   "decided_at", "alpha")
#: which comparisons ``anytime_table`` keeps
MONITOR = ("all", "noisy", "difference", "retention")
ANYTIME_STATEMENT = ("anytime-valid confidence sequences (Waudby-Smith & Ramdas 2023): about "
                     "these trained models on this item stream, not about their training "
                     "procedures (the seed-random t of a study answers that); valid when the "
                     "items were evaluated in a random order; each row at level alpha on its "
                     "own (for m rows at once, --alpha alpha/m)")


@dataclass(frozen=True, order=True)
class Model:
    """One trained model: a condition and a training seed."""

    condition: str
    seed: int

    def __str__(self) -> str:
        return f"{self.condition}:{self.seed}"


def find_model(text: str, models: list[Model], flag: str) -> Model | None:
    """``CONDITION`` (a condition with one seed) or ``CONDITION:SEED`` among ``models``;
    None when there is no such model (a condition with several seeds and no seed named is
    an :class:`InputError` naming ``flag``)."""
    by_condition: dict[str, list[Model]] = {}
    for m in models:
        by_condition.setdefault(m.condition, []).append(m)
    if text in by_condition:
        have = by_condition[text]
        if len(have) > 1:
            raise InputError(f"{flag}: condition {text!r} has seeds "
                             f"{', '.join(str(m.seed) for m in have)}: name one as "
                             f"{text}:{have[0].seed}.")
        return have[0]
    condition, _, seed = text.rpartition(":")
    return next((m for m in by_condition.get(condition, ())
                 if seed.isdigit() and m.seed == int(seed)), None)


def models_of(outcomes: pd.DataFrame) -> list[Model]:
    """The ``(condition, seed)`` models of an outcomes table, sorted."""
    return sorted({Model(str(c), int(s))
                   for c, s in outcomes[["condition", "seed"]].itertuples(index=False)})


def parse_model(text: str, models: list[Model], flag: str) -> Model:
    """:func:`find_model`, with a missing model an :class:`InputError` naming ``flag``."""
    found = find_model(text, models, flag)
    if found is None:
        raise InputError(f"{flag}: no model {text!r} in the outcomes (models: "
                         f"{', '.join(map(str, models))}).")
    return found


def pick_pair(outcomes: pd.DataFrame, pair: tuple[str, str] | None,
              flag: str = "--pair") -> tuple[Model, ...]:
    """The monitored models: the two of ``pair``, else the only two (or one) in the
    outcomes; more than two without ``pair`` is an :class:`InputError` naming ``flag``."""
    models = models_of(outcomes)
    if pair is not None:
        chosen = tuple(parse_model(t, models, flag) for t in pair)
        if chosen[0] == chosen[1]:
            raise InputError(f"{flag}: the two models must differ, got {chosen[0]} twice.")
        return chosen
    if len(models) > 2:
        raise InputError(f"{flag}: the outcomes hold {len(models)} models ("
                         f"{', '.join(map(str, models[:6]))}{', ...' if len(models) > 6 else ''}"
                         f"); name the two to monitor with {flag} A B (CONDITION or "
                         "CONDITION:SEED).")
    return tuple(models)


def paired_stream(a: pd.DataFrame, b: pd.DataFrame, order: str
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(item_ids, x, y)``: the items both cells hold, ordered by the later of their two
    positions (``order``; ties by item), with each side's ``correct``."""
    import pandas as pd

    left = a[["item_id", "correct", order]].rename(columns={"correct": "x", order: "at_a"})
    right = b[["item_id", "correct", order]].rename(columns={"correct": "y", order: "at_b"})
    both = pd.merge(left, right, on="item_id", how="inner")
    both["at"] = np.maximum(both["at_a"].to_numpy(), both["at_b"].to_numpy())
    both = both.sort_values(["at", "item_id"], kind="stable")
    return (both["item_id"].to_numpy(), both["x"].to_numpy(dtype=float),
            both["y"].to_numpy(dtype=float))


#: the p-value below which a stream's outcomes are said to drift with their position
ORDER_P = 0.001
#: the fewest paired items the order check looks at
ORDER_MIN_ITEMS = 50


def order_drift(x: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    """Spearman's ρ between an item's position in the stream and its outcomes (``x + y``),
    with its p-value, when the stream drifts (``p < ORDER_P`` over at least
    ``ORDER_MIN_ITEMS`` items); else None. The sequences assume a random item order, under
    which the outcomes do not trend with position: a dataset stored by difficulty or topic
    does (docs/statistics.md §11). A check that can only raise doubt: a random order is
    flagged in 0.1 % of streams, and an order that drifts without a monotone trend is not."""
    from scipy import stats

    n = len(x)
    total = np.asarray(x, dtype=float) + np.asarray(y, dtype=float)
    if n < ORDER_MIN_ITEMS or np.ptp(total) == 0:
        return None
    rho, p = stats.spearmanr(np.arange(n), total)
    return (float(rho), float(p)) if p < ORDER_P else None


def order_drift_note(name: str, drift: tuple[float, float]) -> str:
    """What :func:`order_drift` found, for a warning or a note."""
    rho, p = drift
    return (f"{name}: the outcomes trend with the items' position (Spearman ρ = {rho:+.2f}, "
            f"p = {p:.1g}); the sequence holds for items evaluated in a random order, which "
            "this stream does not look like.")


def decision(low: float, high: float, null: float) -> str:
    """``above``/``below`` when ``[low, high]`` excludes ``null``, else ``""``."""
    if low > null:
        return "above"
    if high < null:
        return "below"
    return ""


def _row(kind: str, a: Model, b: Model | str, cell: tuple[float, int], cs: Any,
         null: float) -> dict[str, Any]:
    # a decision stands from the first item count that reaches it; a set that empties
    # later (a stream in no random order) has NaN bounds, which must not undo it: the
    # bounds shown are the last non-empty ones
    empty = np.flatnonzero(np.isnan(cs.low) | np.isnan(cs.high))
    last = int(empty[0]) - 1 if len(empty) else len(cs.low) - 1
    at = np.flatnonzero((cs.low > null) | (cs.high < null))
    direction = decision(float(cs.low[at[0]]), float(cs.high[at[0]]), null) if len(at) \
        else ""
    low, high = (float(cs.low[last]), float(cs.high[last])) if last >= 0 else \
        (math.nan, math.nan)
    return {"comparison": kind, "model_a": str(a), "model_b": str(b),
            "eval_noise": cell[0], "noise_seed": cell[1], "items": int(cs.n[-1]),
            "estimate": float(cs.estimate[-1]), "cs_low": low,
            "cs_high": high, "null": null, "decided": bool(direction),
            "direction": direction, "decided_at": cs.first_excluding(null),
            "alpha": cs.alpha}


def _cells(rows: pd.DataFrame) -> list[tuple[float, int]]:
    return sorted({(float(e), int(k)) for e, k in
                   rows[["eval_noise", "noise_seed"]].itertuples(index=False)})


def anytime_table(outcomes: pd.DataFrame, *, pair: tuple[str, str] | None = None,
                  alpha: float = 0.05, margin: float = 0.0, retention_null: float = 1.0,
                  monitor: str = "all", order: str = "order",
                  flag: str = "--pair") -> pd.DataFrame:
    """The anytime table (:data:`ANYTIME_COLUMNS`): one row per monitored comparison.

    ``difference`` rows: model A − model B at each cell both have, tested against
    ``margin``; ``retention`` rows: each monitored model's noisy cell over its clean cell
    (``eval_noise`` 0, the same noise seed when there is one, else the lowest), tested
    against ``retention_null``. ``monitor`` keeps some of them (:data:`MONITOR`):
    ``noisy`` every comparison at a noisy level (not the clean difference),
    ``difference`` or ``retention`` one kind. ``order`` names the column of each row's position in the
    source (the stream order). ``decided_at``: the first item count at which the sequence
    excluded the tested value (None: not yet). ``attrs["order_drift"]``: the streams whose
    outcomes trend with their position (:func:`order_drift`), as ``(name, (ρ, p))``.
    """
    import pandas as pd

    from robuststats.stats.sequential import (
        betting_confidence_sequence,
        retention_confidence_sequence,
    )

    alpha = check_probability(alpha, "alpha")
    monitor = check_choice(monitor, "monitor", MONITOR)
    margin = check_number(margin, "margin", low=-1.0, high=1.0)
    retention_null = check_number(retention_null, "retention_null", low=0.0)
    if order not in outcomes.columns:
        raise InputError(f"internal: the outcomes carry no {order!r} column (the stream "
                         "order).")
    models = pick_pair(outcomes, pair, flag)
    rows_of = {m: outcomes[(outcomes["condition"] == m.condition) & (outcomes["seed"] == m.seed)]
               for m in models}
    records, drifts = [], []

    def cell(rows: pd.DataFrame, c: tuple[float, int]) -> pd.DataFrame:
        return rows[(rows["eval_noise"] == c[0]) & (rows["noise_seed"] == c[1])]

    if len(models) == 2 and monitor != "retention":
        a, b = models
        shared = sorted(set(_cells(rows_of[a])) & set(_cells(rows_of[b])))
        for c in (c for c in shared if monitor != "noisy" or c[0] > 0.0):
            _, x, y = paired_stream(cell(rows_of[a], c), cell(rows_of[b], c), order)
            if len(x):
                records.append(_row("difference", a, b, c, betting_confidence_sequence(
                    x, y, alpha=alpha), margin))
                drifts.append((f"{a} − {b} at eval_noise {c[0]:g}", order_drift(x, y)))
    for m in models if monitor != "difference" else ():
        cells = _cells(rows_of[m])
        clean = [c for c in cells if c[0] == 0.0]
        for c in (c for c in cells if c[0] > 0.0 and clean):
            base = next((k for k in clean if k[1] == c[1]), clean[0])
            _, x, y = paired_stream(cell(rows_of[m], c), cell(rows_of[m], base), order)
            if len(x):
                records.append(_row("retention", m, f"{m} clean", c,
                                    retention_confidence_sequence(x, y, alpha=alpha),
                                    retention_null))
                drifts.append((f"retention of {m} at eval_noise {c[0]:g}", order_drift(x, y)))
    table = pd.DataFrame(records, columns=list(ANYTIME_COLUMNS))
    # streams whose outcomes trend with position (:func:`order_drift`), for a warning
    table.attrs["order_drift"] = [(name, d) for name, d in drifts if d is not None]
    return table
