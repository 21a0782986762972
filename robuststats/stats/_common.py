"""Shared result types and validation helpers of :mod:`robuststats.stats`."""

from __future__ import annotations

from dataclasses import dataclass

from robuststats.errors import InputError, RobuststatsWarning

__all__ = ["ConfidenceInterval", "DegenerateDataWarning", "InputError"]


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
