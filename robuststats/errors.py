"""Exception and warning types shared by every subpackage."""

from __future__ import annotations


class RobuststatsError(Exception):
    """Base class of every error raised on purpose by robuststats."""


class InputError(RobuststatsError, ValueError):
    """A user-supplied value, file or option is invalid.

    The message names the parameter (or key and line) and the bad value. The CLI turns
    it into a one-line error with exit code 2.
    """


class RobuststatsWarning(UserWarning):
    """Base class of robuststats warnings."""
