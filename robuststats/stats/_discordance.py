"""Discordance estimation: π_D (with δ and both accuracies) and the ICC from pilot outcomes.

McNemar's power depends on π_D as much as on the effect, and π_D is rarely known in
advance: a small pilot (both conditions on a few hundred items) pins it down. Sign rule,
*first minus second*: ``x`` is condition a, ``y`` condition b, and the effect is
``acc(a) − acc(b)``, as in :func:`robuststats.stats.mcnemar`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from robuststats._validation import check_same_shape
from robuststats.errors import InputError
from robuststats.stats._common import (
    ConfidenceInterval,
    DegenerateDataWarning,
    PairEstimate,
)
from robuststats.stats._parameters import (
    ParameterError,
    as_float_array,
    as_outcomes,
    check_choice,
    check_confidence_level,
    check_number,
)
from robuststats.stats.power import z_upper

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DiscordanceEstimate",
    "PilotPairs",
    "estimate_discordance",
    "estimate_icc",
    "read_pilot",
]


@dataclass(frozen=True)
class DiscordanceEstimate(PairEstimate):
    """π_D estimated from paired 0/1 outcomes, with a Wilson score interval.

    Attributes
    ----------
    discordance : float
        ``(n_a_only + n_b_only) / n``: share of pairs on which the conditions disagree.
    confidence_interval : ConfidenceInterval
        Wilson score interval for π_D (Wilson 1927; Newcombe 1998, method 3).
    effect : float
        Observed δ = acc(a) − acc(b) = (n_a_only − n_b_only) / n (first minus second).
    accuracy_a, accuracy_b : float
        Observed accuracies of ``x`` (condition a) and ``y`` (condition b, the baseline
        that :func:`power_mcnemar` takes; also available as ``baseline``).
    n : int
        Number of pairs.
    n_discordant, n_a_only, n_b_only : int
        ``n_a_only + n_b_only``; ``n_a_only`` = a correct and b wrong; ``n_b_only`` = b
        correct and a wrong.
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
    accuracy_a: float
    accuracy_b: float
    n: int
    n_discordant: int
    n_a_only: int
    n_b_only: int
    confidence_level: float
    method: str = "wilson"
    icc: float | None = None
    design_effect: float = 1.0



def _wilson(p: float, n: float, confidence_level: float) -> tuple[float, float]:
    """Wilson (1927) score interval for a proportion p observed on (effective) n trials."""
    z = z_upper((1 - confidence_level) / 2)
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
    """Estimate π_D, δ = acc(x) − acc(y) and both accuracies from paired pilot outcomes.

    Parameters
    ----------
    x, y : array_like of 0/1, shape ``(n_items,)`` or ``(n_seeds, n_items)``
        Outcomes of conditions a (``x``) and b (``y``) on the same items, aligned element
        by element. With several seeds every (seed, item) pair counts once.
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
    level = check_confidence_level(confidence_level)
    x2, y2 = as_outcomes(x, "x", binary=True), as_outcomes(y, "y", binary=True)
    check_same_shape({"x": x2, "y": y2}, "(n_items,) or (n_seeds, n_items)")
    xa, ya = x2.ravel(), y2.ravel()
    n = int(xa.size)
    if groups is None and x2.ndim == 2:
        n_seeds, n_items = x2.shape
        groups = np.tile(np.arange(n_items), n_seeds)
    a_only = int(np.sum((xa == 1) & (ya == 0)))
    b_only = int(np.sum((xa == 0) & (ya == 1)))
    icc, deff = None, 1.0
    if groups is not None:
        g = _item_ids(groups)
        if g.size != n:
            raise ParameterError("{groups} must give one item id per pair ({n}), got {size}.",
                                 ["groups"], n=n, size=g.size)
        _, sizes = np.unique(g, return_counts=True)
        if sizes.max() > 1 and sizes.size > 1 and 0 < a_only + b_only < n:
            icc = estimate_icc((xa != ya).astype(float), g)
            deff = 1.0 + (float(np.sum(sizes.astype(float) ** 2)) / n - 1.0) * icc
    low, high = _wilson((a_only + b_only) / n, n / deff, level)
    if a_only + b_only == 0:
        warnings.warn(
            f"no discordant pairs among {n}: π_D is estimated as 0; plan with the Wilson "
            f"upper bound {high:.4g} or a larger pilot.",
            DegenerateDataWarning,
            stacklevel=2,
        )
    return DiscordanceEstimate(
        discordance=(a_only + b_only) / n,
        confidence_interval=ConfidenceInterval(float(low), float(high)),
        effect=(a_only - b_only) / n,
        accuracy_a=float(xa.mean()),
        accuracy_b=float(ya.mean()),
        n=n,
        n_discordant=a_only + b_only,
        n_a_only=a_only,
        n_b_only=b_only,
        confidence_level=level,
        icc=icc,
        design_effect=deff,
    )


def _item_ids(groups: object) -> np.ndarray:
    try:
        return np.asarray(groups).ravel()
    except ValueError:  # ragged nesting
        raise ParameterError("{groups} must be a flat sequence of item ids, got "
                             "{given!r:.60}.", ["groups"], given=groups) from None


def estimate_icc(values: object, groups: object) -> float:
    """One-way random-effects ANOVA estimate of the intra-class correlation, in [0, 1].

    ``ICC = (MSB − MSW) / (MSB + (m₀ − 1)·MSW)`` with the unbalanced-design group size
    ``m₀ = (N − Σ mᵢ²/N) / (k − 1)`` (Fisher's ICC(1); Shrout & Fleiss 1979; Donner 1986,
    *Int. Stat. Rev.* 54, 67–82). Negative estimates (less agreement within items than
    between them, sampling noise around 0) are reported as 0, the value the design
    effect ``1 + (m − 1)·ICC`` can use.

    For McNemar with repeated evaluations the ICC that matters is that of the paired
    difference ``x − y`` of one evaluation (Obuchowski 1998, *Stat. Med.* 17, 1495–1507;
    Durkalski et al. 2003, *Stat. Med.* 22, 2417–2428): the variance of the summed
    differences of an item with m evaluations is ``m·σ²·(1 + (m − 1)·ICC)``.
    """
    y = as_float_array(values, "values", empty=True).ravel()
    g = _item_ids(groups)
    if y.size != g.size or y.size == 0:
        raise ParameterError(
            "{values} and {groups} must be non-empty and of equal length, got {size_values} "
            "and {size_groups}.", ["values", "groups"], size_values=y.size, size_groups=g.size)
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


@dataclass(frozen=True)
class PilotPairs:
    """Two conditions' pilot outcomes aligned item by item (:func:`read_pilot`).

    ``x`` (condition a) and ``y`` (condition b) are 0/1 arrays of shape
    ``(n_strata, n_items)``: one row per ``(seed, noise_seed)`` stratum named in
    ``strata``, one column per item named in ``item_ids``. ``dropped`` records the seeds
    and items removed because one condition lacked them (``holes="drop"``).
    """

    x: np.ndarray
    y: np.ndarray
    conditions: tuple[str, str]
    eval_noise: float
    strata: tuple
    item_ids: tuple[str, ...]
    dropped: pd.DataFrame = field(repr=False)

    @property
    def n_pairs(self) -> int:
        return int(self.x.size)

    def difference_icc(self) -> tuple[float, float] | None:
        """ICC of the paired difference ``x − y`` over repeats of an item, and repeats per item.

        ``None`` when every item is evaluated once. See :func:`estimate_icc`.
        """
        n_strata, n_items = self.x.shape
        if n_strata < 2 or n_items < 2:
            return None
        groups = np.tile(np.arange(n_items), n_strata)
        icc = estimate_icc((self.x - self.y).astype(float).ravel(), groups)
        return icc, float(n_strata)


def read_pilot(
    source: str | Path | pd.DataFrame,
    *,
    conditions: tuple[str, str] | list[str] | None = None,
    eval_noise: float | None = None,
    holes: str = "drop",
) -> PilotPairs:
    """Read a pilot's outcomes and align two conditions item by item.

    ``source`` is anything :func:`robuststats.outcomes.read_outcomes` reads (csv, tsv,
    jsonl, parquet, a run directory, a result version, a DataFrame): columns
    ``condition, item_id, correct`` and optionally ``seed, eval_noise, noise_seed``.
    ``conditions`` picks two when the table has more, and fixes the order: the first is
    condition a, the second b (the baseline), compared as a − b; without it the table
    must hold exactly two conditions, taken in sorted order. With several
    ``eval_noise`` levels one must be chosen. The two conditions are paired on every
    ``(seed, noise_seed, item_id)`` by :func:`robuststats.outcomes.align`; with
    ``holes="drop"`` (default) a seed or item that one condition lacks is dropped from
    both and recorded in ``dropped``, with ``holes="raise"`` it is an error naming it.
    """
    from robuststats.outcomes import align, read_outcomes

    check_choice(holes, "holes", ("raise", "drop"))
    table = read_outcomes(source)
    where = f"pilot file {str(source)!r}" if isinstance(source, (str, Path)) else "the pilot"
    levels = sorted({float(v) for v in table["eval_noise"]})
    if eval_noise is None:
        if len(levels) > 1:
            listed = ", ".join(f"{v:g}" for v in levels)
            raise InputError(
                f"{where} has several eval_noise levels ({listed}); choose one (--eval-noise)."
            )
        level = levels[0]
    else:
        wanted = check_number(eval_noise, "eval_noise", low=0.0)
        matches = [v for v in levels if abs(v - wanted) <= 1e-12 + 1e-9 * abs(wanted)]
        if not matches:
            raise InputError(f"{where} has no rows at eval_noise = {eval_noise:g}.")
        level = matches[0]
    present = list(dict.fromkeys(table["condition"]))
    if conditions is None:
        if len(present) != 2:
            raise InputError(
                f"{where} has {len(present)} condition(s) ({', '.join(present)}); choose two "
                f"with --conditions A B."
            )
        chosen = (present[0], present[1])
    else:
        if len(conditions) != 2 or conditions[0] == conditions[1]:
            raise ParameterError(
                "{conditions} must name two different conditions, got {given!r}.",
                ["conditions"], given=conditions)
        for name in conditions:
            if name not in present:
                raise InputError(
                    f"condition {name!r} is not in {where} (it has {', '.join(present)})."
                )
        chosen = (str(conditions[0]), str(conditions[1]))
    aligned = align(table, chosen, level, by="stratum", holes=holes)
    return PilotPairs(
        x=aligned.values[chosen[0]].astype(np.int64),
        y=aligned.values[chosen[1]].astype(np.int64),
        conditions=chosen,
        eval_noise=level,
        strata=aligned.rows,
        item_ids=aligned.item_ids,
        dropped=aligned.dropped,
    )
