"""Power across designs: the π_D sweep (``power_table``) and power curves (``power_curve``).

McNemar's power depends on the discordance π_D as much as on the effect, and π_D is
rarely known before a pilot: these tables show how much it matters.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from robuststats.errors import InputError
from robuststats.glossary import TABLE_COLUMNS
from robuststats.stats._parameters import ParameterError, check_int, check_probability
from robuststats.stats.power._design import check_effect
from robuststats.stats.power._mcnemar import power_mcnemar, power_two_proportions

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DEFAULT_DISCORDANCES", "POWER_TABLE_COLUMNS", "PairedSettings", "discordance_grid",
           "power_curve", "power_table"]

#: discordance rates tried when π_D is unknown (pilot evaluations of noisy vs clean
#: models typically disagree on 5–30 % of items)
DEFAULT_DISCORDANCES = (0.05, 0.10, 0.15, 0.20, 0.30, 0.40)


class PairedSettings(TypedDict, total=False):
    """The design and test settings :func:`power_table` passes on to
    :func:`power_mcnemar`, whose signature gives their meanings and defaults."""

    baseline: float | None
    alpha: float
    alternative: str
    method: str | None
    repeats: int
    icc: float
    pool_size: int | None


#: those of :class:`PairedSettings` the unpaired row passes on to :func:`power_two_proportions`
_UNPAIRED_SETTINGS = ("baseline", "alpha", "alternative", "pool_size")

#: declared column order of :func:`power_table` (the glossary's ``TABLE_COLUMNS["power"]``)
POWER_TABLE_COLUMNS = TABLE_COLUMNS["power"]


def discordance_grid(effect: float, extra: Sequence[float] = ()) -> list[float]:
    """π_D values worth tabulating for ``effect``: δ itself (its floor), then the defaults.

    ``π_D = δ`` means every discordant item favours the better condition, the
    smallest possible discordance and hence the smallest n.
    """
    values = {round(float(effect), 10)}
    values.update(round(float(v), 10) for v in (*DEFAULT_DISCORDANCES, *extra) if v > effect)
    return sorted(v for v in values if 0 < v < 1)


def _row(r: Any, note: str) -> dict[str, Any]:
    row = {c: getattr(r, c, None) for c in POWER_TABLE_COLUMNS}
    row["note"] = note
    return row


def power_table(
    effect: float,
    n: int | None = None,
    power: float | None = None,
    *,
    discordances: Sequence[float] | None = None,
    unpaired: bool = True,
    as_frame: bool = True,
    **settings: Unpack[PairedSettings],
) -> pd.DataFrame | list[dict[str, Any]]:
    """Items needed (or power) for ``effect`` across discordance rates π_D.

    Exactly one of ``n`` and ``power`` must be None: the table solves for the number of
    items at ``power``, or gives the power with ``n`` items, for each π_D. The other
    arguments (:class:`PairedSettings`) are those of :func:`power_mcnemar`.

    Parameters
    ----------
    effect : float
        Size δ of the accuracy difference acc(a) − acc(b), in (0, 1).
    discordances : sequence of float, optional
        The π_D to tabulate. Default: δ itself (every discordant item favours the better
        condition, the fewest items possible) and those of 0.05, 0.1, 0.15, 0.2, 0.3, 0.4
        above δ; of these, designs that ``baseline`` makes impossible are left out. Given
        explicitly, an impossible π_D is an error.
    unpaired : bool
        Add one row for the unpaired design (different items per condition, pooled
        two-proportion z-test, :func:`power_two_proportions`) for comparison.
    as_frame : bool
        Return a :class:`pandas.DataFrame` (default) or a list of records with the same
        keys (no pandas import: what ``robuststats power`` prints).

    Returns
    -------
    DataFrame or list of dict
        One row per design, columns :data:`POWER_TABLE_COLUMNS` in that order:
        ``design`` (``paired``/``unpaired``), ``method``, ``discordance``, ``effect``,
        ``baseline``, ``n``, ``power`` (the target, or the power at ``n``),
        ``achieved_power``, ``n_evaluations``, ``n_effective``, ``repeats``, ``icc``,
        ``design_effect``, ``alpha``, ``alternative``, ``solved_for``, ``pool_size``,
        ``exceeds_pool``, ``min_repeats`` (see :class:`PowerResult`) and ``note``. The
        unpaired row has no discordance; its ``n`` is per condition.

    Examples
    --------
    >>> table = power_table(0.03, power=0.8)
    >>> table.loc[table.discordance == 0.2, "n"].item()
    1742
    """
    delta = check_effect(effect)
    if (n is None) == (power is None):
        raise ParameterError(
            "Exactly one of {n}, {power} must be None (the table solves for it); got "
            "{count} None.", ["n", "power"], count=int(n is None) + int(power is None))
    explicit = discordances is not None
    if explicit:
        grid = [check_probability(v, "discordances") for v in discordances]  # type: ignore[union-attr]
        if not grid:
            raise ParameterError("{discordances} must hold at least one π_D, got none.",
                                 ["discordances"])
    else:
        grid = discordance_grid(delta)
    rows: list[dict[str, Any]] = []
    errors: list[InputError] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the pool is reported in exceeds_pool and the note
        for pi_d in grid:
            try:
                r = power_mcnemar(delta, n, power, discordance=pi_d, **settings)
            except InputError as exc:
                if explicit:
                    raise
                errors.append(exc)  # e.g. a (π_D, baseline) combination that cannot be
                continue
            notes = []
            if abs(r.discordance - r.effect) < 1e-12:
                notes.append("π_D = δ: every discordant item favours the better condition")
            if r.exceeds_pool:
                notes.append(f"exceeds the pool of {r.pool_size} items")
            rows.append(_row(r, "; ".join(notes)))
        if not rows:
            raise errors[0]  # every π_D failed: the inputs themselves are impossible
        if unpaired:
            shared = {k: v for k, v in settings.items() if k in _UNPAIRED_SETTINGS}
            u = power_two_proportions(delta, n, power, method="pooled", **shared)  # type: ignore[arg-type]
            p_a = u.baseline - u.effect if u.alternative == "less" else u.baseline + u.effect
            note = (f"different items per condition (n per condition); accuracies "
                    f"{p_a:.3g} vs {u.baseline:.3g}")
            if settings.get("baseline") is None:
                note += ", the largest-variance case"
            if u.exceeds_pool:
                note += f"; exceeds the pool of {u.pool_size} items"
            rows.append(_row(u, note))
    if not as_frame:
        return rows
    import pandas as pd

    return pd.DataFrame(rows, columns=list(POWER_TABLE_COLUMNS))


def power_curve(
    effect: float,
    *,
    discordances: Sequence[float],
    n_values: Sequence[int],
    alpha: float = 0.05,
    alternative: str = "two-sided",
    method: str | None = None,
    repeats: int = 1,
    icc: float = 0.0,
    baseline: float | None = None,
) -> pd.DataFrame:
    """Power of McNemar's test for each (π_D, n); columns ``discordance, n, power``.

    For plots of power against n. Designs that are impossible (π_D < δ, or not
    compatible with ``baseline``) are left out of the table rather than filled with NaN.
    """
    import pandas as pd

    delta = check_effect(effect)
    for name, values in (("n_values", n_values), ("discordances", discordances)):
        # a 0-d array has __len__ yet no length: ask for one, do not guess from attributes
        try:
            sized = not isinstance(values, (str, bytes)) and len(values) >= 0
        except TypeError:
            sized = False
        if not sized:
            raise ParameterError.about(name, f" must be a sequence of numbers, got {values!r:.60}.")
    if len(n_values) == 0 or len(discordances) == 0:
        raise ParameterError("{n_values} and {discordances} must not be empty.",
                             ["n_values", "discordances"])
    ns = [check_int(v, "n_values", low=1) for v in n_values]
    grid = [check_probability(v, "discordances") for v in discordances]
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for pi_d in grid:
            for n in ns:
                try:
                    r = power_mcnemar(delta, n, None, baseline=baseline, discordance=pi_d,
                                      alpha=alpha, alternative=alternative, method=method,
                                      repeats=repeats, icc=icc)
                except InputError:
                    break
                if math.isfinite(r.power):
                    rows.append({"discordance": float(pi_d), "n": n, "power": r.power})
    return pd.DataFrame(rows, columns=["discordance", "n", "power"])
