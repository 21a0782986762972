"""Start-up chatter of dependencies kept out of the commands' output.

transformers imports torchao whenever it is installed (``transformers.quantizers``), even
for a model that is not quantized. torchao then logs a warning for every compiled extension
built for another Python or GPU (``Failed to load …/_C_mxfp8.cpython-310….so``) and torch
logs a deprecation of ``register_constant`` for torchao's enums. Neither concerns a
robuststats run. The commands (and their worker processes) raise those two loggers to
ERROR before anything imports transformers; a library user's own logging is left alone.
Warnings that matter to the user are robuststats' own, typed (``robuststats.errors``).
"""

from __future__ import annotations

import logging

__all__ = ["NOISY_LOGGERS", "quiet_dependencies"]

#: loggers whose warnings at import are noise for a robuststats command
NOISY_LOGGERS: tuple[str, ...] = ("torchao", "torch.utils._pytree")


def quiet_dependencies() -> None:
    """Raise :data:`NOISY_LOGGERS` to ERROR (errors still show)."""
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
