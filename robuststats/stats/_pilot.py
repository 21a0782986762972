"""Discordant-pair rate π_D (and δ, baseline) from paired pilot outcomes.

McNemar's power depends on π_D as much as on the effect, and π_D is rarely known in
advance: a small pilot (both conditions on a few hundred items) pins it down.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from robuststats.errors import InputError
from robuststats.stats._common import ConfidenceInterval, DegenerateDataWarning

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DiscordanceEstimate", "PilotPairs", "estimate_discordance", "read_pilot"]

#: columns of the outcomes table that identify one evaluation besides the condition
KEY_COLUMNS = ("seed", "eval_noise", "noise_seed", "item_id")


@dataclass(frozen=True)
class DiscordanceEstimate:
    """π_D estimated from paired 0/1 outcomes, with a Wilson score interval.

    Attributes
    ----------
    discordance : float
        ``(b + c) / n``: share of pairs on which the conditions disagree.
    confidence_interval : ConfidenceInterval
        Wilson score interval for π_D (Wilson 1927; Newcombe 1998, method 3).
    effect : float
        Observed δ = acc(y) − acc(x) = (c − b) / n.
    baseline : float
        Observed accuracy of ``x``.
    n : int
        Number of pairs.
    n_discordant, n_x_only, n_y_only : int
        ``b + c``; ``b`` = x correct and y wrong; ``c`` = x wrong and y correct.
    confidence_level : float
    method : str
    """

    discordance: float
    confidence_interval: ConfidenceInterval
    effect: float
    baseline: float
    n: int
    n_discordant: int
    n_x_only: int
    n_y_only: int
    confidence_level: float
    method: str = "wilson"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["confidence_interval"] = [self.confidence_interval.low, self.confidence_interval.high]
        return d

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        row = self.to_dict()
        low, high = row.pop("confidence_interval")
        row["ci_low"], row["ci_high"] = low, high
        return pd.DataFrame([row])


def _as_outcomes(name: str, values: object) -> np.ndarray:
    arr = np.asarray(values)
    if arr.size == 0:
        raise InputError(f"`{name}` must hold at least one 0/1 outcome, got an empty array.")
    if arr.dtype == bool:
        return arr.astype(np.int64).ravel()
    flat = arr.ravel()
    numeric = np.issubdtype(arr.dtype, np.number)
    if not numeric or not np.isin(flat, (0, 1)).all():
        bad = flat[~np.isin(flat, (0, 1))][:3] if numeric else flat[:3]
        raise InputError(
            f"`{name}` must contain only 0/1 outcomes, got values such as {bad.tolist()!r}."
        )
    return arr.astype(np.int64).ravel()


def estimate_discordance(
    x: object, y: object, *, confidence_level: float = 0.95
) -> DiscordanceEstimate:
    """Estimate π_D, δ and the baseline accuracy from paired pilot outcomes.

    Parameters
    ----------
    x, y : array_like of 0/1, shape ``(n_items,)`` or ``(n_seeds, n_items)``
        Outcomes of the two conditions on the same items, aligned element by element.
        With several seeds every (seed, item) pair counts once; pairs of the same item
        are correlated, so the interval is then somewhat too narrow.
    confidence_level : float
        Of the Wilson score interval for π_D.

    Returns
    -------
    DiscordanceEstimate

    Notes
    -----
    With no discordant pair the estimate is 0 and a :class:`DegenerateDataWarning` is
    issued; the Wilson upper bound (≈ z²/(n + z²)) is then the value to plan with.
    """
    if isinstance(confidence_level, bool) or not isinstance(confidence_level, (int, float)):
        raise InputError(f"`confidence_level` must be in (0, 1), got {confidence_level!r}.")
    if not 0 < confidence_level < 1:
        raise InputError(f"`confidence_level` must be in (0, 1), got {confidence_level!r}.")
    if np.shape(x) != np.shape(y):
        raise InputError(
            f"`x` and `y` must be aligned outcomes of the same items, got shapes "
            f"{np.shape(x)} and {np.shape(y)}."
        )
    xa, ya = _as_outcomes("x", x), _as_outcomes("y", y)
    n = int(xa.size)
    b = int(np.sum((xa == 1) & (ya == 0)))
    c = int(np.sum((xa == 0) & (ya == 1)))
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(b + c, n, alpha=1 - confidence_level, method="wilson")
    if b + c == 0:
        warnings.warn(
            f"no discordant pairs among {n}: π_D is estimated as 0; plan with the Wilson "
            f"upper bound {high:.4g} or a larger pilot.",
            DegenerateDataWarning,
            stacklevel=2,
        )
    return DiscordanceEstimate(
        discordance=(b + c) / n,
        confidence_interval=ConfidenceInterval(float(low), float(high)),
        effect=(c - b) / n,
        baseline=float(xa.mean()),
        n=n,
        n_discordant=b + c,
        n_x_only=b,
        n_y_only=c,
        confidence_level=float(confidence_level),
    )


@dataclass(frozen=True)
class PilotPairs:
    """Aligned outcomes of two conditions read from an outcomes table."""

    x: np.ndarray
    y: np.ndarray
    conditions: tuple[str, str]
    keys: tuple[str, ...]
    n_unpaired: int


def _read_table(path: Path) -> pd.DataFrame:
    import pandas as pd

    if not path.is_file():
        raise InputError(f"pilot file {str(path)!r} does not exist.")
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
        if suffix in (".csv", ".txt"):
            return pd.read_csv(path)
        if suffix == ".tsv":
            return pd.read_csv(path, sep="\t")
    except (ValueError, OSError) as exc:  # pandas/pyarrow parse errors
        raise InputError(f"cannot read pilot file {str(path)!r}: {exc}") from exc
    raise InputError(
        f"pilot file {str(path)!r} must be .parquet or .csv (outcomes table), got {suffix!r}."
    )


def read_pilot(
    path: str | Path,
    *,
    conditions: tuple[str, str] | list[str] | None = None,
    eval_noise: float | None = None,
) -> PilotPairs:
    """Read an outcomes table (parquet/CSV) and pair two conditions' outcomes.

    The table has columns ``condition, item_id, correct`` and optionally ``seed,
    eval_noise, noise_seed``; rows of the two conditions are paired on every key column
    present. ``conditions`` picks two when the table has more (or fixes the order:
    ``x`` = first = baseline). With several ``eval_noise`` levels one must be chosen.
    """
    path = Path(path)
    table = _read_table(path)
    missing = [c for c in ("condition", "item_id", "correct") if c not in table.columns]
    if missing:
        raise InputError(
            f"pilot file {str(path)!r} lacks column(s) {', '.join(missing)}; an outcomes "
            f"table has condition, item_id, correct (+ seed, eval_noise, noise_seed)."
        )
    table = table.assign(condition=table["condition"].astype(str))
    if eval_noise is not None:
        if "eval_noise" not in table.columns:
            raise InputError(f"pilot file {str(path)!r} has no eval_noise column to select.")
        table = table[np.isclose(table["eval_noise"].astype(float), float(eval_noise))]
        if table.empty:
            raise InputError(f"pilot file {str(path)!r} has no rows at eval_noise = {eval_noise}.")
    elif "eval_noise" in table.columns and table["eval_noise"].nunique() > 1:
        levels = ", ".join(f"{v:g}" for v in sorted(table["eval_noise"].unique()))
        raise InputError(
            f"pilot file {str(path)!r} has several eval_noise levels ({levels}); choose one "
            f"(--eval-noise)."
        )
    present = list(dict.fromkeys(table["condition"]))
    if conditions is None:
        if len(present) != 2:
            raise InputError(
                f"pilot file {str(path)!r} has {len(present)} condition(s) "
                f"({', '.join(present)}); choose two with --conditions A B."
            )
        chosen = (present[0], present[1])
    else:
        if len(conditions) != 2 or conditions[0] == conditions[1]:
            raise InputError(
                f"`conditions` must name two different conditions, got {conditions!r}."
            )
        for name in conditions:
            if name not in present:
                raise InputError(
                    f"condition {name!r} is not in pilot file {str(path)!r} "
                    f"(it has {', '.join(present)})."
                )
        chosen = (str(conditions[0]), str(conditions[1]))
    keys = tuple(k for k in KEY_COLUMNS if k in table.columns)
    a = table[table["condition"] == chosen[0]].set_index(list(keys))["correct"]
    b = table[table["condition"] == chosen[1]].set_index(list(keys))["correct"]
    for name, part in zip(chosen, (a, b)):
        if part.index.has_duplicates:
            raise InputError(
                f"condition {name!r} has duplicate rows for the same ({', '.join(keys)})."
            )
    joined = a.to_frame("x").join(b.to_frame("y"), how="inner")
    if joined.empty:
        raise InputError(
            f"conditions {chosen[0]!r} and {chosen[1]!r} share no ({', '.join(keys)}) in "
            f"{str(path)!r}: the paired design needs the same items under both."
        )
    n_unpaired = len(a) + len(b) - 2 * len(joined)
    return PilotPairs(
        x=_as_outcomes("correct", joined["x"].to_numpy()),
        y=_as_outcomes("correct", joined["y"].to_numpy()),
        conditions=chosen,
        keys=keys,
        n_unpaired=n_unpaired,
    )
