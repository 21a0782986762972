"""Tables and curves of the seed-random t test's power over (seeds, items).

``power_seeds_table`` lists, for each number of training seeds, the items that reach a
target power (or, when none do, the most power those seeds give);
``power_seeds_curve`` computes the power over a grid of (seeds, items) for plots. Both
call :func:`robuststats.stats.power_seeds` (formulas and sources: :mod:`._seeds`,
:mod:`._seeds_formulas` and ``docs/power.md``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from robuststats.glossary import TABLE_COLUMNS
from robuststats.stats._parameters import ParameterError, check_int
from robuststats.stats.power._design import PoolSizeWarning
from robuststats.stats.power._seeds import (
    SeedPowerResult,
    TooFewSeedsError,
    check_seeds,
    power_seeds,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DEFAULT_SEEDS", "SeedSettings", "power_seeds_curve", "power_seeds_table"]

#: seed counts :func:`power_seeds_table` tries by default
DEFAULT_SEEDS = (2, 3, 4, 5, 6, 8, 10, 15, 20)


class SeedSettings(TypedDict, total=False):
    """The design and test settings the tables pass on to :func:`power_seeds`, whose
    signature gives their meanings and defaults."""

    discordance: float | None
    seed_sd: float
    icc: float
    baseline: float | None
    correlation: float | None
    alpha: float
    alternative: str
    method: str


def power_seeds_table(
    effect: float,
    *,
    power: float = 0.8,
    seeds: Sequence[int] = DEFAULT_SEEDS,
    pool_size: int | None = None,
    as_frame: bool = True,
    **settings: Unpack[SeedSettings],
) -> pd.DataFrame | list[dict[str, Any]]:
    """Items needed for ``power`` with each number of seeds in ``seeds``.

    One row per seed count, columns ``TABLE_COLUMNS["power_seeds"]``: ``n_seeds``,
    ``n_items`` (empty when no number of items reaches the target: ``max_power`` is the
    most those seeds give), ``n_evaluations`` (= seeds × items per condition), ``power``,
    ``achieved_power``, ``max_power``, ``effect``, ``discordance``, ``seed_sd_difference`` (= ``seed_sd``),
    ``icc``,
    ``dof``, ``standard_error``, ``method``, ``alpha``, ``alternative``, ``pool_size``,
    ``exceeds_pool`` and ``note``. Other arguments (:class:`SeedSettings`) as for
    :func:`power_seeds`.
    """
    try:
        counts = [check_seeds(v, "seeds") for v in seeds]
    except TypeError:
        raise ParameterError("{seeds} must be a sequence of seed counts, got {given!r:.60}.",
                             ["seeds"], given=seeds) from None
    if not counts:
        raise ParameterError("{seeds} must hold at least one seed count, got none.", ["seeds"])
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PoolSizeWarning)  # reported in exceeds_pool
        for k in sorted(set(counts)):
            try:
                r = power_seeds(effect, None, k, power, pool_size=pool_size, **settings)
            except TooFewSeedsError:
                r = power_seeds(effect, 2, k, None, **settings)
                rows.append(_table_row(r, power, None, "more items cannot reach the target "
                                                      "with these seeds"))
                continue
            note = f"exceeds the pool of {pool_size} items" if r.exceeds_pool else ""
            rows.append(_table_row(r, power, r.n_items, note))
    if not as_frame:
        return rows
    import pandas as pd

    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS["power_seeds"]))


def _table_row(r: SeedPowerResult, target: float, n: int | None, note: str) -> dict[str, Any]:
    row = {c: getattr(r, c, None) for c in TABLE_COLUMNS["power_seeds"]}
    row.update(n_items=n, power=float(target), note=note, seed_sd_difference=r.seed_sd,
               n_evaluations=None if n is None else n * r.n_seeds)
    if n is None:
        row.update(achieved_power=None, dof=None, standard_error=None, exceeds_pool=False)
    return row


def power_seeds_curve(
    effect: float,
    *,
    seeds: Sequence[int],
    n_values: Sequence[int],
    **settings: Unpack[SeedSettings],
) -> pd.DataFrame:
    """Power of the seed-random t test for each (seeds, items); columns
    ``n_seeds, n_items, power`` (for plots of power against items, one line per seed
    count). Other arguments (:class:`SeedSettings`) as for :func:`power_seeds`."""
    import pandas as pd

    for name, values in (("seeds", seeds), ("n_values", n_values)):
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise ParameterError.about(name, f" must be a sequence of integers, got {values!r:.60}.")
    counts = [check_seeds(v, "seeds") for v in seeds]
    ns = [check_int(v, "n_values", low=2) for v in n_values]
    if not counts or not ns:
        raise ParameterError("{seeds} and {n_values} must not be empty.", ["seeds", "n_values"])
    rows = [
        {"n_seeds": k, "n_items": n, "power": power_seeds(effect, n, k, None, **settings).power}
        for k in counts for n in ns
    ]
    return pd.DataFrame(rows, columns=["n_seeds", "n_items", "power"])
