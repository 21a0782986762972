"""robuststats: statistically sound noise-robustness experiments on neural networks.

Subpackages (imported on first use, so ``import robuststats`` stays cheap):

- :mod:`robuststats.engine`  bundled noisy-ops engine (torch; ``NoiseSpec``, ``inject``)
- :mod:`robuststats.stats`   paired tests, bootstrap, power, multiplicity, verdicts
- :mod:`robuststats.study`   study files, plans, executors, trainers, tasks
- :mod:`robuststats.results` versioned result store
"""

from __future__ import annotations

import importlib
from typing import Any

from robuststats._quiet import quiet_import_chatter
from robuststats._version import __version__
from robuststats.errors import InputError, RobuststatsError

# the import boundary: torchao's failed extension loads and torch's register_constant
# deprecation, logged when transformers imports torchao, are not shown to a user of the
# package (robuststats._quiet); nothing else of any logger is touched
quiet_import_chatter()

__all__ = ["InputError", "RobuststatsError", "__version__", "engine", "results", "stats", "study"]

_SUBPACKAGES = {"engine", "stats", "study", "results", "report", "search"}


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"robuststats.{name}")
    raise AttributeError(f"module 'robuststats' has no attribute {name!r}")
