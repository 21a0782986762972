"""argparse value types shared by the subcommands: each refuses a bad value with the
message that argparse turns into ``robuststats CMD: error: argument --flag: <message>``.

Every type is made by :func:`checked`: a conversion (``int`` or ``float``) and the rules
the value must pass, each with the message that refuses it (``must be a positive integer,
got '0'``)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeVar

from robuststats.config.bounds import MAX_WORKERS  # one bound for every command

__all__ = ["MAX_WORKERS", "POSITIVE_INT", "alpha", "checked", "int_in", "non_negative_float",
           "non_negative_int", "open_unit", "positive_float", "positive_int",
           "positive_int_up_to", "workers"]

T = TypeVar("T")



def checked(convert: Callable[[str], T], *rules: tuple[Callable[[T], bool], str],
            unreadable: str | None = None) -> Callable[[str], T]:
    """An argparse type: ``convert(text)``, then each ``(accept, message)`` rule in order.

    The first rule the value fails refuses it with ``<message>, got '<text>'``; text that
    ``convert`` cannot read is refused with ``unreadable`` (default: the first rule's
    message).
    """

    def parse(text: str) -> T:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{unreadable or rules[0][1]}, got {text!r}") from None
        for accept, message in rules:
            if not accept(value):
                raise argparse.ArgumentTypeError(f"{message}, got {text!r}")
        return value

    return parse


#: the rule of :data:`positive_int`, for types that add their own rules to it
POSITIVE_INT = (lambda v: v >= 1), "must be a positive integer"

#: an integer >= 1
positive_int = checked(int, POSITIVE_INT)
#: an integer >= 0
non_negative_int = checked(int, ((lambda v: v >= 0), "must be an integer >= 0"))
#: a number strictly between 0 and 1 (a level, a scale, a proportion)
open_unit = checked(float, ((lambda v: 0 < v < 1), "must be a number in (0, 1)"))
#: a finite number > 0
positive_float = checked(float, ((lambda v: math.isfinite(v) and v > 0),
                                 "must be a positive number"))
#: a finite number >= 0 (``nan``, ``inf`` and ``-1`` are refused)
non_negative_float = checked(float, ((lambda v: math.isfinite(v) and v >= 0),
                                     "must be a finite number >= 0"),
                             unreadable="must be a number >= 0")
#: the level of a one-sided test, in (0, 0.5]
alpha = checked(float, ((lambda v: 0 < v <= 0.5), "must be a number in (0, 0.5]"))


def positive_int_up_to(high: int) -> Callable[[str], int]:
    """An integer from 1 to ``high``."""
    return checked(int, POSITIVE_INT, ((lambda v: v <= high), f"must be at most {high:,}"))


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An integer from ``low`` to ``high``."""
    return checked(int, ((lambda v: low <= v <= high),
                         f"must be an integer in [{low}, {high}]"))


#: a number of worker processes, 1 to :data:`MAX_WORKERS`
workers = positive_int_up_to(MAX_WORKERS)
