"""Start-up chatter of dependencies kept out of the package's output.

transformers imports torchao whenever it is installed (``transformers.quantizers``), even
for a model that is not quantized. torchao then logs a warning for every compiled extension
built for another Python or GPU (``Failed to load …/_C_mxfp8.cpython-310….so``) and torch
logs a deprecation of ``register_constant`` for torchao's enums. Neither concerns a
robuststats user. Two layers keep them out:

* ``import robuststats`` (the package's import boundary) adds a filter to those two
  loggers that drops exactly these two messages (:func:`quiet_import_chatter`): the Python
  API (``robuststats.engine``) is quiet when robuststats is imported before transformers,
  and every other record of those loggers, and the user's own logging, is left alone;
* the commands (and their worker processes) also raise the two loggers to ERROR before
  anything imports transformers (:func:`quiet_dependencies`).

Warnings that matter to the user are robuststats' own, typed (``robuststats.errors``).
"""

from __future__ import annotations

import logging
import re

__all__ = ["CHATTER", "NOISY_LOGGERS", "quiet_dependencies", "quiet_import_chatter"]

#: loggers whose warnings at import are noise for a robuststats command
NOISY_LOGGERS: tuple[str, ...] = ("torchao", "torch.utils._pytree")
#: logger -> the message of the chatter it logs at import (and nothing else of it)
CHATTER: dict[str, re.Pattern[str]] = {
    "torchao": re.compile(r"^Failed to load \S+\.so\b"),
    "torch.utils._pytree": re.compile(r"register_constant\(\) on Enum subclasses is "
                                      r"deprecated"),
}


class _DropChatter(logging.Filter):
    """Drops the records of one logger whose message matches its chatter pattern."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        super().__init__()
        self.pattern = pattern

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is not ours to judge
            return True
        return self.pattern.search(message) is None


def quiet_import_chatter() -> None:
    """Add the chatter filter to each of :data:`CHATTER`'s loggers (once)."""
    for name, pattern in CHATTER.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropChatter) for f in logger.filters):
            logger.addFilter(_DropChatter(pattern))


def quiet_dependencies() -> None:
    """Raise :data:`NOISY_LOGGERS` to ERROR (errors still show)."""
    quiet_import_chatter()
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
