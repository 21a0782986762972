"""Input validation shared by every public function (scipy's ``_iv`` pattern).

Each public function validates its arguments through these checkers, so every message has
one form: the parameter in backticks, what it must be, and the bad value::

    `n_resamples` must be a positive integer, got -3.
    `method` must be one of 'exact', 'mid-p'; got 'exakt' (did you mean 'exact'?).

Argument order is always ``(value, name, ...)``. Each checker returns the value converted
to its canonical type, or raises :class:`robuststats.errors.InputError`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np

from robuststats.errors import InputError, closest_match

__all__ = [
    "check_choice",
    "check_confidence_level",
    "check_int",
    "check_n_resamples",
    "check_number",
    "check_probability",
    "check_rng",
]


def _show(value: Any) -> str:
    if isinstance(value, np.generic):
        value = value.item()
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_choice(value: Any, name: str, choices: Iterable[str]) -> str:
    """``value`` if it is one of ``choices``; otherwise list them, with a "did you mean"."""
    options = tuple(choices)
    if isinstance(value, str) and value in options:
        return value
    listed = ", ".join(repr(c) for c in options)
    hint = closest_match(value, options) if isinstance(value, str) else None
    tail = f" (did you mean {hint!r}?)" if hint else ""
    raise InputError(f"`{name}` must be one of {listed}; got {_show(value)}{tail}.")


def check_number(value: Any, name: str, *, low: float | None = None,
                 high: float | None = None, low_open: bool = False,
                 high_open: bool = False) -> float:
    """A finite real number within the given bounds, as ``float``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(f"`{name}` must be a number, got {_show(value)}.")
    v = float(value)
    if not math.isfinite(v):
        raise InputError(f"`{name}` must be a finite number, got {_show(value)}.")
    below = low is not None and (v <= low if low_open else v < low)
    above = high is not None and (v >= high if high_open else v > high)
    if below or above:
        left = "(" if low_open else "["
        right = ")" if high_open else "]"
        lo = "-inf" if low is None else f"{low:g}"
        hi = "inf" if high is None else f"{high:g}"
        raise InputError(f"`{name}` must lie in {left}{lo}, {hi}{right}, got {_show(value)}.")
    return v


def check_probability(value: Any, name: str, *, open_interval: bool = True) -> float:
    """A probability in (0, 1) (``open_interval``) or [0, 1]."""
    return check_number(value, name, low=0.0, high=1.0, low_open=open_interval,
                        high_open=open_interval)


def check_confidence_level(value: Any, name: str = "confidence_level") -> float:
    """A confidence level in the open interval (0, 1)."""
    return check_probability(value, name)


def check_int(value: Any, name: str, *, low: int | None = None,
              high: int | None = None) -> int:
    """An integer (not a bool, not a float) within ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"`{name}` must be an integer, got {_show(value)}.")
    v = int(value)
    if (low is not None and v < low) or (high is not None and v > high):
        if high is None and low == 1:
            raise InputError(f"`{name}` must be a positive integer, got {_show(value)}.")
        lo = "-inf" if low is None else str(low)
        hi = "inf" if high is None else str(high)
        raise InputError(f"`{name}` must be an integer in [{lo}, {hi}], got {_show(value)}.")
    return v


def check_n_resamples(value: Any, name: str = "n_resamples") -> int:
    """A positive number of resamples."""
    return check_int(value, name, low=1)


def check_rng(value: Any, name: str = "rng") -> np.random.Generator:
    """A :class:`numpy.random.Generator` from a Generator, an int seed or None.

    Never touches numpy's global seed.
    """
    if isinstance(value, np.random.Generator):
        return value
    if value is None or (isinstance(value, numbers.Integral) and not isinstance(value, bool)
                         and int(value) >= 0):
        return np.random.default_rng(value)
    raise InputError(f"`{name}` must be a numpy Generator, a non-negative int seed or None, "
                     f"got {_show(value)}.")
