"""Input validation shared by every public function (scipy's ``_iv`` pattern).

Each public function validates its arguments through these checkers, so every message has
one form: the parameter in backticks, what it must be, and the bad value, with a hint when
a string is close to a valid choice::

    `n_resamples` must be a positive integer, got -3.
    `method` must be one of 'exact', 'midp', got 'exakt' (did you mean 'exact'?).

Argument order is always ``(value, name, ...)``. Each checker returns the value converted
to its canonical type, or raises :class:`robuststats.errors.InputError`; no other
exception type (``TypeError``, ``OverflowError``, ``KeyError``) escapes for a bad value.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from robuststats.errors import InputError, did_you_mean

__all__ = [
    "as_aligned_outcomes",
    "as_float_array",
    "as_outcomes",
    "as_probabilities",
    "check_choice",
    "check_confidence_level",
    "check_int",
    "check_keys",
    "check_n_resamples",
    "check_number",
    "check_probability",
    "check_rng",
    "check_same_shape",
    "check_str",
]


def _show(value: Any) -> str:
    """A short repr of a bad value for a message (at most 60 characters)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not hide the real error
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def check_choice(value: Any, name: str, choices: Iterable[str]) -> str:
    """``value`` if it is one of ``choices``; otherwise list them, with a "did you mean"."""
    options = tuple(choices)
    if isinstance(value, str) and value in options:
        return value
    listed = ", ".join(repr(c) for c in options)
    raise InputError(
        f"`{name}` must be one of {listed}, got {_show(value)}{did_you_mean(value, options)}."
    )


def check_str(value: Any, name: str, *, empty: bool = False) -> str:
    """A string (non-empty unless ``empty``)."""
    if not isinstance(value, str) or (not empty and not value):
        what = "a string" if empty else "a non-empty string"
        raise InputError(f"`{name}` must be {what}, got {_show(value)}.")
    return value


def check_number(value: Any, name: str, *, low: float | None = None,
                 high: float | None = None, low_open: bool = False,
                 high_open: bool = False) -> float:
    """A finite real number within the given bounds, as ``float``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise InputError(f"`{name}` must be a number, got {_show(value)}.")
    try:
        v = float(value)
    except (OverflowError, ValueError):  # an int beyond the float range
        v = math.inf
    if not math.isfinite(v):
        raise InputError(f"`{name}` must be a finite number, got {_show(value)}.")
    below = low is not None and (v <= low if low_open else v < low)
    above = high is not None and (v >= high if high_open else v > high)
    if below or above:
        if high is None:
            bound = f"{'>' if low_open else '≥'} {low:g}"
        elif low is None:
            bound = f"{'<' if high_open else '≤'} {high:g}"
        else:
            bound = (f"in {'(' if low_open else '['}{low:g}, {high:g}"
                     f"{')' if high_open else ']'}")
        raise InputError(f"`{name}` must be a number {bound}, got {_show(value)}.")
    return v


def check_keys(mapping: Any, name: str, allowed: Sequence[str], *,
               required: Sequence[str] = ()) -> dict[str, Any]:
    """A mapping with string keys among ``allowed`` and every ``required`` key present.

    ``name`` says what the mapping is (``"hypothesis 'H1'"``); the messages read
    ``hypothesis 'H1': unknown key 'relaton' (did you mean 'relation'?); allowed keys: ...``.
    """
    if not isinstance(mapping, Mapping):
        raise InputError(f"{name} must be a mapping, got {type(mapping).__name__}.")
    for key in mapping:
        if key not in allowed:
            listed = ", ".join(repr(k) for k in allowed)
            raise InputError(f"{name}: unknown key {_show(key)}{did_you_mean(key, allowed)}; "
                             f"allowed keys: {listed}.")
    missing = [k for k in required if k not in mapping]
    if missing:
        raise InputError(f"{name}: missing required key(s) {missing}.")
    return dict(mapping)


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
    positive = low == 1 and high is None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        what = "a positive integer" if positive else "an integer"
        raise InputError(f"`{name}` must be {what}, got {_show(value)}.")
    v = int(value)
    if (low is not None and v < low) or (high is not None and v > high):
        if positive:
            raise InputError(f"`{name}` must be a positive integer, got {_show(value)}.")
        lo = "-inf" if low is None else str(low)
        hi = "inf" if high is None else str(high)
        raise InputError(f"`{name}` must be an integer in [{lo}, {hi}], got {_show(value)}.")
    return v


#: resamples beyond this would need terabytes; a larger value is a typo, not a plan
MAX_RESAMPLES = 10**8


def check_n_resamples(value: Any, name: str = "n_resamples") -> int:
    """A positive number of resamples (at most ``MAX_RESAMPLES``)."""
    v = check_int(value, name, low=1)
    if v > MAX_RESAMPLES:
        raise InputError(f"`{name}` must be at most {MAX_RESAMPLES:,}, got {_show(value)}.")
    return v


def check_rng(value: Any, name: str = "rng") -> np.random.Generator:
    """A :class:`numpy.random.Generator` from a Generator, an int seed or None.

    Never touches numpy's global seed.
    """
    if isinstance(value, np.random.Generator):
        return value
    if value is None or (isinstance(value, numbers.Integral)
                         and not isinstance(value, (bool, np.bool_)) and int(value) >= 0):
        return np.random.default_rng(None if value is None else int(value))
    hint = " (an int seed must be ≥ 0)" if isinstance(value, numbers.Integral) else ""
    raise InputError(f"`{name}` must be a numpy Generator, an int seed or None, "
                     f"got {_show(value)}{hint}.")


def _ndim_text(ndim: Sequence[int], shapes: Sequence[str] | None) -> str:
    if shapes:
        return " or ".join(f"{d}-D {s}" for d, s in zip(ndim, shapes))
    return " or ".join(f"{d}-D" for d in ndim)


def as_float_array(value: Any, name: str, *, ndim: int | Sequence[int] | None = None,
                   shapes: Sequence[str] | None = None, what: str = "an array of numbers",
                   low: float | None = None, high: float | None = None,
                   empty: bool = False) -> np.ndarray:
    """``value`` as a finite float64 array with the allowed ``ndim`` and bounds.

    Strings, complex numbers, dates and ragged nesting are refused; bools count as 0/1.
    ``shapes`` names the layout of each allowed ``ndim`` for the message, e.g.
    ``("(n_items,)", "(n_seeds, n_items)")``.
    """
    raw = value
    try:
        arr = np.asarray(value)
        if arr.dtype.kind in "USVcmM":
            raise TypeError
        arr = arr.astype(np.float64)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"`{name}` must be {what}, got {_show(raw)}.") from None
    dims = (ndim,) if isinstance(ndim, int) else tuple(ndim) if ndim is not None else None
    if dims is not None and arr.ndim not in dims:
        raise InputError(
            f"`{name}` must be {_ndim_text(dims, shapes)}, got shape {arr.shape}."
        )
    if arr.size == 0 and not empty:
        raise InputError(f"`{name}` must not be empty, got shape {arr.shape}.")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise InputError(f"`{name}` must not contain NaN or infinite values, "
                         f"got {float(arr[bad].flat[0])!r}.")
    out = np.zeros(arr.shape, dtype=bool)
    if low is not None:
        out |= arr < low
    if high is not None:
        out |= arr > high
    if out.any():
        lo = "-inf" if low is None else f"{low:g}"
        hi = "inf" if high is None else f"{high:g}"
        raise InputError(f"`{name}` must contain values in [{lo}, {hi}], "
                         f"got {float(arr[out].flat[0])!r}.")
    return arr


def as_outcomes(x: Any, name: str, *, binary: bool = False,
                ndim: Sequence[int] = (1, 2)) -> np.ndarray:
    """Item outcomes: a 1-D ``(n_items,)`` or 2-D ``(n_seeds, n_items)`` array of finite
    values in [0, 1], as float64.

    ``binary=True`` additionally requires every value to be 0 or 1.
    """
    shapes = {1: "(n_items,)", 2: "(n_seeds, n_items)"}
    arr = as_float_array(x, name, ndim=ndim, shapes=[shapes.get(d, "") for d in ndim],
                         what="an array of outcomes in [0, 1]", low=0.0, high=1.0)
    if binary:
        bad = (arr != 0) & (arr != 1)
        if bad.any():
            raise InputError(f"`{name}` must contain only 0/1 outcomes, "
                             f"got {float(arr[bad].flat[0])!r}.")
    return arr


def as_probabilities(values: Any, name: str) -> np.ndarray:
    """A 1-D array of probabilities in [0, 1] (may be empty), as float64."""
    return as_float_array(values, name, ndim=1, what="a 1-D array of probabilities",
                          low=0.0, high=1.0, empty=True)


def check_same_shape(arrays: dict[str, np.ndarray], layout: str) -> None:
    """All ``arrays`` (name -> validated array) have one shape, described by ``layout``."""
    shapes = {a.shape for a in arrays.values()}
    if len(shapes) > 1:
        desc = " and ".join(f"{a.shape}" for a in arrays.values())
        names = " and ".join(f"`{k}`" for k in arrays)
        raise InputError(f"{names} must be aligned outcomes of the same shape {layout}, "
                         f"got {desc}.")


def as_aligned_outcomes(arrays: dict[str, object]) -> list[np.ndarray]:
    """Outcome arrays of the same shape, each as ``(n_seeds, n_items)``.

    ``arrays`` maps each argument's name to its value, so a mismatch names both shapes.
    """
    out = [as_outcomes(value, name) for name, value in arrays.items()]
    if len({a.shape for a in out}) > 1:
        desc = ", ".join(f"`{k}` {a.shape}" for k, a in zip(arrays, out))
        raise InputError(
            f"inputs must be aligned (same seeds and items in the same order), got {desc}."
        )
    return [a if a.ndim == 2 else a[None, :] for a in out]
