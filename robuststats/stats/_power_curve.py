"""Tidy power curves (power against n for several discordance rates) for plots and tables."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

from robuststats.errors import InputError
from robuststats.stats._power import power_mcnemar

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["discordance_grid", "power_curve"]

#: discordance rates tried when π_D is unknown (pilot evaluations of noisy vs clean
#: models typically disagree on 5–30 % of items)
DEFAULT_DISCORDANCES = (0.05, 0.10, 0.15, 0.20, 0.30, 0.40)


def discordance_grid(effect: float, extra: Sequence[float] = ()) -> list[float]:
    """π_D values worth tabulating for ``effect``: δ itself (its floor), then the defaults.

    ``π_D = δ`` means every discordant item favours the better condition, the
    smallest possible discordance and hence the smallest n.
    """
    values = {round(float(effect), 10)}
    values.update(round(float(v), 10) for v in (*DEFAULT_DISCORDANCES, *extra) if v > effect)
    return sorted(v for v in values if 0 < v < 1)


def power_curve(
    effect: float,
    *,
    discordances: Sequence[float],
    n_values: Sequence[int],
    alpha: float = 0.05,
    alternative: str = "two-sided",
    method: str = "connor",
    repeats: int = 1,
    icc: float = 0.0,
    baseline: float | None = None,
) -> pd.DataFrame:
    """Power of McNemar's test for each (π_D, n); columns ``discordance, n, power``.

    Designs that are impossible (π_D < δ, or not compatible with ``baseline``) are
    left out of the table rather than filled with NaN.
    """
    import pandas as pd

    if len(n_values) == 0 or len(discordances) == 0:
        raise InputError("`n_values` and `discordances` must not be empty.")
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for pi_d in discordances:
            for n in n_values:
                try:
                    r = power_mcnemar(
                        effect,
                        int(n),
                        None,
                        baseline=baseline,
                        discordance=pi_d,
                        alpha=alpha,
                        alternative=alternative,
                        method=method,
                        repeats=repeats,
                        icc=icc,
                    )
                except InputError:
                    break
                rows.append({"discordance": float(pi_d), "n": int(n), "power": r.power})
    return pd.DataFrame(rows, columns=["discordance", "n", "power"])
