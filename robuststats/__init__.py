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

from robuststats._version import __version__
from robuststats.errors import InputError, RobuststatsError

__all__ = ["InputError", "RobuststatsError", "__version__", "engine", "results", "stats", "study"]

_SUBPACKAGES = {"engine", "stats", "study", "results", "report", "search"}


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"robuststats.{name}")
    raise AttributeError(f"module 'robuststats' has no attribute {name!r}")
