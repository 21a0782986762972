"""The schema of the outcomes table: columns, key, dtypes, defaults."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

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


def empty_outcomes() -> pd.DataFrame:
    """A table with the schema and no rows."""
    import pandas as pd

    return pd.DataFrame({c: pd.Series(dtype=DTYPES[c]) for c in COLUMNS})


def plain(value: object) -> object:
    """A numpy scalar as a person wrote it (``np.int64(2)`` prints as ``2``)."""
    return value.item() if hasattr(value, "item") and not isinstance(value, str) else value
