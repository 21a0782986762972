"""Content digests of outcome cells: one SHA-256 per (condition, seed, eval_noise, noise_seed).

A run directory records the digest and row count of every cell file when it is written and
checks both when the cell is reused; a result version's manifest carries the digest of
every cell it was built from, so :func:`~robuststats.results.verify` can trace the version
back to its cells. The digest is of the rows, not of the file's bytes: it is recomputed
from a version's ``outcomes.parquet`` as well as from a run directory's cell file, and a
parquet writer that encodes the same rows differently does not change it.

Canonical form: rows sorted by ``item_id``; for each column of the outcomes schema present
(``score`` is optional) its name, then its values: text as a JSON list of strings, integers
as little-endian int64, floats as little-endian float64 with ``-0.0`` and every NaN written
as one bit pattern. Never imports torch.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

import numpy as np

from robuststats.outcomes._schema import CELL_KEY, COLUMNS

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["cell_digest", "cell_digests", "cell_key"]

_TEXT = ("condition", "item_id")
_FLOAT = ("eval_noise", "score")
_HEADER = b"robuststats cell digest v1\n"


def cell_key(condition: Any, seed: Any, eval_noise: Any, noise_seed: Any) -> str:
    """File-name-safe name of one cell, stable across runs (``E8c__s3__n0.05__ns1``)."""
    return f"{condition}__s{int(seed)}__n{float(eval_noise):g}__ns{int(noise_seed)}"


def cell_digest(df: pd.DataFrame) -> str:
    """SHA-256 (hex) of one cell's rows in the canonical form of the module docstring."""
    h = hashlib.sha256(_HEADER)
    ids = np.asarray([str(v) for v in df["item_id"]], dtype=object)
    order = np.argsort(ids, kind="stable")
    for column in (*COLUMNS, "score"):
        if column not in df.columns:
            continue
        values = df[column].to_numpy()[order]
        h.update(column.encode() + b"\0")
        if column in _TEXT:
            h.update(json.dumps([str(v) for v in values]).encode())
        elif column in _FLOAT:
            a = np.asarray(values, dtype="<f8") + 0.0  # -0.0 + 0.0 is +0.0
            a[np.isnan(a)] = np.nan
            h.update(a.tobytes())
        else:
            h.update(np.asarray(values, dtype="<i8").tobytes())
        h.update(b"\0")
    return h.hexdigest()


def cell_digests(outcomes: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """``{cell key: {"sha256": digest, "rows": n}}`` for every cell of an outcomes table,
    in the order the cells first appear."""
    out: dict[str, dict[str, Any]] = {}
    if outcomes.empty:
        return out
    for key, group in outcomes.groupby(list(CELL_KEY), sort=False, dropna=False):
        out[cell_key(*key)] = {"sha256": cell_digest(group), "rows": len(group)}
    return out
