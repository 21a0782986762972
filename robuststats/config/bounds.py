"""Upper bounds of a study's sizes and the form of its names (docs/studies.md, "Bounds and
plain text").

Each bound is far above any real study and checked when the file is loaded, before anything
is allocated or trained: a value past one of them is a typo, not a plan
(``seeds: 1000000000`` once filled 3 GiB with cells before the first one ran).
"""

from __future__ import annotations

import re
from typing import Any

from robuststats._fields import check_whole

__all__ = ["MAX_BATCH_SIZE", "MAX_CELLS", "MAX_CONDITIONS", "MAX_HYPOTHESES", "MAX_ITEMS",
           "MAX_NAME_LENGTH", "MAX_NOISE_LEVELS", "MAX_NOISE_SEEDS", "MAX_SEEDS", "MAX_VERSION",
           "MAX_WORKERS", "NAME_PATTERN", "check_count", "check_name"]

#: study and condition names: they name directories and cell files
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.\-]*"

#: training seeds (one model each)
MAX_SEEDS = 1_000
#: inference-noise draws per noisy cell
MAX_NOISE_SEEDS = 1_000
#: distinct evaluation noise levels
MAX_NOISE_LEVELS = 100
#: training conditions
MAX_CONDITIONS = 100
#: pre-registered hypotheses
MAX_HYPOTHESES = 1_000
#: cells of the plan: conditions × seeds × (clean levels + noisy levels × noise seeds)
MAX_CELLS = 100_000
#: ``evaluation.n_items`` (GSM8K's test split has 1,319)
MAX_ITEMS = 1_000_000
#: ``evaluation.batch_size``
MAX_BATCH_SIZE = 100_000
#: characters of a study or condition name (and of a hypothesis id)
MAX_NAME_LENGTH = 100
#: ``version`` of a study definition
MAX_VERSION = 1_000_000
#: worker processes of a command (``--workers``)
MAX_WORKERS = 256


def check_count(value: Any, name: str, high: int) -> int:
    """A count given on a command line or to a library call (``seeds``, ``n_items``,
    ``noise_seeds``): an integer in ``[1, high]``, with the same bound and message in
    every command (`` `n_items` must be at most 1,000,000, got 99999999.``)."""
    return check_whole(value, name, low=1, high=high)


def check_name(value: str, what: str) -> str:
    """A directory-safe name: ``[A-Za-z0-9][A-Za-z0-9_.-]*``, at most MAX_NAME_LENGTH."""
    if not isinstance(value, str) or re.fullmatch(NAME_PATTERN, value) is None:
        raise ValueError(f"{what} {value!r} must be letters, digits, '_', '.' or '-', "
                         "starting with a letter or digit")
    if len(value) > MAX_NAME_LENGTH:
        raise ValueError(f"{what} must be at most {MAX_NAME_LENGTH} characters, got "
                         f"{len(value)}")
    return value
