"""Exception and warning types shared by every subpackage."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class RobuststatsError(Exception):
    """Base class of every error raised on purpose by robuststats."""


class InputError(RobuststatsError, ValueError):
    """A user-supplied value, file or option is invalid.

    The message names the parameter (or key and line) and the bad value. The CLI turns
    it into a one-line error with exit code 2. ``details``: the further problems of the
    same input (a YAML file with several errors), one line each; the CLI lists them below
    its error line.
    """

    def __init__(self, *args: object, details: Iterable[str] = ()) -> None:
        super().__init__(*args)
        self.details: tuple[str, ...] = tuple(details)


class RobuststatsWarning(UserWarning):
    """Base class of robuststats warnings."""


def closest_match(value: object, choices: Iterable[str], *, cutoff: float = 0.6) -> str | None:
    """The choice nearest to a misspelt ``value`` (for "did you mean ...?" hints), or None."""
    close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1, cutoff=cutoff)
    return close[0] if close else None


def did_you_mean(value: object, choices: Iterable[str]) -> str:
    """The one hint format of every message: ``" (did you mean 'x'?)"``, or ``""``.

    Only strings get a hint: a number or a list is not a misspelt name.
    """
    if not isinstance(value, str):
        return ""
    close = closest_match(value, choices)
    return f" (did you mean {close!r}?)" if close else ""


def first_message_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message, or its type's name when it has none."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
