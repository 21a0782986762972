"""Shared result types and validation helpers of :mod:`robuststats.stats`."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from robuststats.errors import InputError, RobuststatsWarning

__all__ = ["ConfidenceInterval", "DegenerateDataWarning", "InputError", "tidy_row"]


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


# --- validation helpers shared by the paired-test, bootstrap and hypothesis modules ---


def check_confidence_level(confidence_level: float, name: str = "confidence_level") -> float:
    """Return ``confidence_level`` as a float in the open interval (0, 1) or raise."""
    try:
        value = float(confidence_level)
    except (TypeError, ValueError):
        raise InputError(f"`{name}` must be a number in (0, 1), got {confidence_level!r}.") from None
    if not 0.0 < value < 1.0:
        raise InputError(f"`{name}` must be a number in (0, 1), got {confidence_level!r}.")
    return value


def check_n_resamples(n_resamples: int) -> int:
    """Return ``n_resamples`` as a positive int or raise."""
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)):
        raise InputError(f"`n_resamples` must be a positive integer, got {n_resamples!r}.")
    if n_resamples < 1:
        raise InputError(f"`n_resamples` must be a positive integer, got {n_resamples!r}.")
    return int(n_resamples)


def check_rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    """Turn ``rng`` into a :class:`numpy.random.Generator` (never touches the global seed)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, (int, np.integer)) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise InputError(f"`rng` must be a numpy Generator, an int seed or None, got {rng!r}.")


def check_choice(value: str, name: str, choices: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``choices``; otherwise raise naming the options."""
    if value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise InputError(f"`{name}` must be one of {options}, got {value!r}.")
    return value


def as_outcomes(x: object, name: str, *, binary: bool = False) -> np.ndarray:
    """Validate item outcomes: a 1-D or 2-D array of finite values in [0, 1].

    ``binary=True`` additionally requires every value to be 0 or 1. Returns float64.
    """
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise InputError(f"`{name}` must be an array of outcomes in [0, 1], got {x!r}.") from None
    if arr.ndim not in (1, 2):
        raise InputError(
            f"`{name}` must be 1-D (n_items,) or 2-D (n_seeds, n_items), got shape {arr.shape}."
        )
    if arr.size == 0:
        raise InputError(f"`{name}` must not be empty, got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        raise InputError(f"`{name}` must not contain NaN or infinite values.")
    if np.any((arr < 0) | (arr > 1)):
        bad = float(arr[(arr < 0) | (arr > 1)].flat[0])
        raise InputError(f"`{name}` must contain values in [0, 1], got {bad!r}.")
    if binary and np.any((arr != 0) & (arr != 1)):
        bad = float(arr[(arr != 0) & (arr != 1)].flat[0])
        raise InputError(f"`{name}` must contain only 0/1 outcomes, got {bad!r}.")
    return arr


def tidy_row(result: Any, *, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """One flat row of a result dataclass for ``to_frame``: fields in order (less ``drop``),
    the ``confidence_interval`` field replaced by ``ci_low``/``ci_high`` at the end."""
    row = {f.name: getattr(result, f.name) for f in fields(result) if f.name not in drop}
    ci = row.pop("confidence_interval")
    row["ci_low"], row["ci_high"] = ci.low, ci.high
    return row
