"""Shared result types of :mod:`robuststats.stats` and the row layout of ``to_frame``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from robuststats.errors import RobuststatsWarning
from robuststats.glossary import TABLE_COLUMNS

__all__ = [
    "ConfidenceInterval",
    "DegenerateDataWarning",
    "PairEstimate",
    "SeedBootstrapWarning",
    "tidy_row",
]


class SeedBootstrapWarning(RobuststatsWarning):
    """A two-way bootstrap over several training seeds answers a narrower question.

    The seeds × items bootstrap of ``bootstrap_difference``, ``bootstrap_retention`` and
    ``bootstrap_retention_difference`` covered 89.9–91.8 % at a nominal 95 % with 5 seeds
    and seed effects (docs/statistics.md §9). Those functions return the seed-random
    interval by default with several seeds; this warning comes with ``seeds="bootstrap"``,
    which asks for the two-way bootstrap anyway.
    """


class DegenerateDataWarning(RobuststatsWarning):
    """Data are legal but carry (almost) no information for the requested quantity.

    Examples: every item correct under both conditions, no discordant pairs, a clean
    accuracy of zero in a retention ratio. The result that accompanies the warning is
    documented by the function that raises it; it is never a silent NaN.
    """


@dataclass(frozen=True)
class ConfidenceInterval:
    """A two-sided (or one-sided, with an infinite bound) confidence interval."""

    low: float
    high: float

    def __iter__(self):  # allows ``low, high = result.confidence_interval``
        yield self.low
        yield self.high

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


def undefined_retention(names: Sequence[str], clean: Sequence[Any]) -> str | None:
    """The first of ``names`` whose clean outcomes (the matching array of ``clean``) are all
    wrong: its retention, noisy over clean accuracy, is undefined. ``None`` when none is."""
    for name, mat in zip(names, clean):
        if mat.mean() == 0.0:
            return name
    return None


class Record:
    """``to_dict`` of the frozen result dataclasses that are plain fields."""

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields (JSON-serialisable)."""
        return asdict(self)  # type: ignore[call-overload]


class PairEstimate:
    """Methods shared by the pilot estimates of a pair of conditions (frozen dataclasses
    with ``accuracy_b`` and ``confidence_interval`` fields)."""

    @property
    def baseline(self) -> float:
        """``accuracy_b``: the accuracy of the second condition, the power plans' baseline."""
        return self.accuracy_b  # type: ignore[attr-defined]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)  # type: ignore[call-overload]
        ci = self.confidence_interval  # type: ignore[attr-defined]
        d["confidence_interval"] = [ci.low, ci.high]
        return d

    def to_frame(self) -> Any:
        """One-row tidy table; the interval as ``ci_low``, ``ci_high``, ``ci_level``."""
        import pandas as pd

        return pd.DataFrame([tidy_row(self)])


#: result attribute -> glossary column, for every result (attributes keep scipy's option
#: names; tables use the glossary's)
_COLUMN_NAMES = {"confidence_level": "ci_level"}
_INTERVAL_COLUMNS = ("ci_low", "ci_high", "ci_level", "ci_method")


def tidy_row(result: Any, *, rename: Mapping[str, str] | None = None,
             drop: tuple[str, ...] = (), table: str | None = None) -> dict[str, Any]:
    """One flat row of a result dataclass for ``to_frame``, in glossary names.

    The ``confidence_interval`` field becomes ``ci_low``/``ci_high``, followed by
    ``ci_level`` (from ``confidence_level``) and ``ci_method`` when the result has them.
    ``rename`` maps further attribute names to glossary columns. With ``table``, the
    columns that table declares (:data:`robuststats.glossary.TABLE_COLUMNS`) come first in
    the declared order and the others follow in field order.
    """
    names = {**_COLUMN_NAMES, **(rename or {})}
    cols: list[tuple[str, Any]] = []
    interval: dict[str, Any] = {}
    for f in fields(result):
        if f.name in drop:
            continue
        column, value = names.get(f.name, f.name), getattr(result, f.name)
        if f.name == "confidence_interval":
            interval["ci_low"], interval["ci_high"] = value.low, value.high
            cols.append(("", None))  # the interval's columns go here, side by side
        elif column in _INTERVAL_COLUMNS:
            interval[column] = value
        else:
            cols.append((column, value))
    if ("", None) not in cols:
        cols.append(("", None))
    row: dict[str, Any] = {}
    for column, value in cols:
        if column:
            row[column] = value
        else:
            row.update({k: interval[k] for k in _INTERVAL_COLUMNS if k in interval})
    if table is not None:
        declared = [c for c in TABLE_COLUMNS[table] if c in row]
        row = {**{c: row[c] for c in declared}, **{k: v for k, v in row.items()
                                                   if k not in declared}}
    return row
