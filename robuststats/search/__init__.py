"""Adaptive per-layer noise search with Optuna (``robuststats search``; docs/search.md).

```python
from robuststats.search import SearchSpec, run_search
spec = SearchSpec.from_file("studies/adaptive_search.yaml").with_overrides(trials=20)
run = run_search(spec, workers=2)          # resumable: the same call continues the study
run.version.path / "noise_config.yaml"     # NoiseSpec.from_file loads it
```

Loading a search file needs neither torch nor Optuna; both load when a search runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robuststats._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "pointing": "robuststats.search._objective",
    "split_items": "robuststats.search._objective",
    "check_storage": "robuststats.search._storage",
    "default_storage": "robuststats.search._storage",
    "normalise_url": "robuststats.search._storage",
    "SearchSpec": "robuststats.search._spec",
    "SearchSection": "robuststats.search._spec",
    "ReevaluationSpec": "robuststats.search._spec",
    "HeuristicSpec": "robuststats.search._spec",
    "MAX_TRIALS": "robuststats.search._spec",
    "SearchSpace": "robuststats.search._space",
    "Place": "robuststats.search._space",
    "budget": "robuststats.search._space",
    "read_sensitivity": "robuststats.config.sensitivity",
    "heuristic_multipliers": "robuststats.search._sensitivity",
    "SearchRun": "robuststats.search._runner",
    "run_search": "robuststats.search._runner",
    "REEVALUATION_COLUMNS": "robuststats.search._reevaluate",
    "TRIAL_COLUMNS": "robuststats.search._report",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from robuststats.config.sensitivity import read_sensitivity  # noqa: F401
    from robuststats.search._reevaluate import REEVALUATION_COLUMNS  # noqa: F401
    from robuststats.search._report import TRIAL_COLUMNS  # noqa: F401
    from robuststats.search._runner import SearchRun, run_search  # noqa: F401
    from robuststats.search._sensitivity import heuristic_multipliers  # noqa: F401
    from robuststats.search._space import Place, SearchSpace, budget  # noqa: F401
    from robuststats.search._spec import (  # noqa: F401
        MAX_TRIALS,
        HeuristicSpec,
        ReevaluationSpec,
        SearchSection,
        SearchSpec,
    )

__getattr__, __dir__ = lazy_exports("robuststats.search", _EXPORTS, globals())
