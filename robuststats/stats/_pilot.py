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

__all__ = [
    "DiscordanceEstimate",
    "PilotPairs",
    "estimate_discordance",
    "estimate_icc",
    "read_pilot",
]

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
    icc : float or None
        With repeated pairs of the same items (``groups``): the intra-item correlation of
        the discordance indicator; ``None`` without repeats.
    design_effect : float
        ``1 + (m̄ − 1)·icc`` (1 without repeats); the interval uses ``n / design_effect``.
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
    icc: float | None = None
    design_effect: float = 1.0

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


def _wilson(p: float, n: float, confidence_level: float) -> tuple[float, float]:
    """Wilson (1927) score interval for a proportion p observed on (effective) n trials."""
    from scipy.stats import norm

    z = float(norm.isf((1 - confidence_level) / 2))
    centre = p + z * z / (2 * n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    scale = 1 + z * z / n
    return max(0.0, (centre - half) / scale), min(1.0, (centre + half) / scale)


def estimate_discordance(
    x: object,
    y: object,
    *,
    groups: object = None,
    confidence_level: float = 0.95,
) -> DiscordanceEstimate:
    """Estimate π_D, δ and the baseline accuracy from paired pilot outcomes.

    Parameters
    ----------
    x, y : array_like of 0/1, shape ``(n_items,)`` or ``(n_seeds, n_items)``
        Outcomes of the two conditions on the same items, aligned element by element.
        With several seeds every (seed, item) pair counts once.
    groups : array_like, optional
        Item id of each pair (flattened like ``x``). Defaults to the column (item) index
        for 2-D input. When items occur more than once, the pairs of an item are
        correlated: the Wilson interval then uses the effective number of pairs
        ``n / deff`` with ``deff = 1 + (m̄ − 1)·ICC``, ICC of the discordance indicator
        within items and ``m̄ = Σmᵢ²/n`` (Kish 1965; the effective-sample-size interval of
        Korn & Graubard 1998, *Survey Methodology* 24, 193–201, here with Wilson's).
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
    if groups is None and np.ndim(x) == 2:
        n_seeds, n_items = np.shape(x)
        groups = np.tile(np.arange(n_items), n_seeds)
    b = int(np.sum((xa == 1) & (ya == 0)))
    c = int(np.sum((xa == 0) & (ya == 1)))
    icc, deff = None, 1.0
    if groups is not None:
        g = np.asarray(groups).ravel()
        if g.size != n:
            raise InputError(f"`groups` must give one item id per pair ({n}), got {g.size}.")
        _, sizes = np.unique(g, return_counts=True)
        if sizes.max() > 1 and sizes.size > 1 and 0 < b + c < n:
            icc = estimate_icc((xa != ya).astype(float), g)
            deff = 1.0 + (float(np.sum(sizes.astype(float) ** 2)) / n - 1.0) * icc
    low, high = _wilson((b + c) / n, n / deff, confidence_level)
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
        icc=icc,
        design_effect=deff,
    )


@dataclass(frozen=True)
class PilotPairs:
    """Aligned outcomes of two conditions read from an outcomes table."""

    x: np.ndarray
    y: np.ndarray
    conditions: tuple[str, str]
    keys: tuple[str, ...]
    n_unpaired: int
    item_ids: np.ndarray | None = None

    def difference_icc(self) -> tuple[float, float] | None:
        """ICC of the paired difference ``y − x`` over repeats of an item, and mean repeats.

        ``None`` when no item is evaluated more than once. See :func:`estimate_icc`.
        """
        if self.item_ids is None:
            return None
        _, counts = np.unique(self.item_ids, return_counts=True)
        if counts.max() < 2:
            return None
        icc = estimate_icc(self.y.astype(float) - self.x.astype(float), self.item_ids)
        return icc, float(counts.mean())


def estimate_icc(values: object, groups: object) -> float:
    """One-way random-effects ANOVA estimate of the intra-class correlation, in [0, 1].

    ``ICC = (MSB − MSW) / (MSB + (m₀ − 1)·MSW)`` with the unbalanced-design group size
    ``m₀ = (N − Σ mᵢ²/N) / (k − 1)`` (Fisher's ICC(1); Shrout & Fleiss 1979; Donner 1986,
    *Int. Stat. Rev.* 54, 67–82). Negative estimates (less agreement within items than
    between them, sampling noise around 0) are reported as 0, the value the design
    effect ``1 + (m − 1)·ICC`` can use.

    For McNemar with repeated evaluations the ICC that matters is that of the paired
    difference ``y − x`` of one evaluation (Obuchowski 1998, *Stat. Med.* 17, 1495–1507;
    Durkalski et al. 2003, *Stat. Med.* 22, 2417–2428): the variance of the summed
    differences of an item with m evaluations is ``m·σ²·(1 + (m − 1)·ICC)``.
    """
    y = np.asarray(values, dtype=float).ravel()
    g = np.asarray(groups).ravel()
    if y.size != g.size or y.size == 0:
        raise InputError(
            f"`values` and `groups` must be non-empty and of equal length, got {y.size} "
            f"and {g.size}."
        )
    _, inverse, sizes = np.unique(g, return_inverse=True, return_counts=True)
    k, total = sizes.size, y.size
    if k < 2 or total == k:
        raise InputError("the ICC needs at least two groups and one group with repeats.")
    means = np.bincount(inverse, weights=y) / sizes
    grand = y.mean()
    msb = float(np.sum(sizes * (means - grand) ** 2) / (k - 1))
    msw = float(np.sum((y - means[inverse]) ** 2) / (total - k))
    m0 = (total - np.sum(sizes.astype(float) ** 2) / total) / (k - 1)
    denominator = msb + (m0 - 1) * msw
    if denominator <= 0:  # every value identical: no variance to apportion
        return 0.0
    return float(min(max((msb - msw) / denominator, 0.0), 1.0))


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
        item_ids=joined.index.get_level_values("item_id").to_numpy(),
    )
