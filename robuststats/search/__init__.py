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

from robuststats._lazy import lazy_package

if TYPE_CHECKING:  # the public names, read by static analysers and by lazy_package
    from robuststats.config.sensitivity import read_sensitivity as read_sensitivity
    from robuststats.search._objective import pointing as pointing
    from robuststats.search._objective import preflight as preflight
    from robuststats.search._objective import split_items as split_items
    from robuststats.search._reevaluate import REEVALUATION_COLUMNS as REEVALUATION_COLUMNS
    from robuststats.search._report import TRIAL_COLUMNS as TRIAL_COLUMNS
    from robuststats.search._runner import SearchRun as SearchRun
    from robuststats.search._runner import run_search as run_search
    from robuststats.search._sensitivity import heuristic_multipliers as heuristic_multipliers
    from robuststats.search._space import Place as Place
    from robuststats.search._space import SearchSpace as SearchSpace
    from robuststats.search._space import budget as budget
    from robuststats.search._spec import MAX_TRIALS as MAX_TRIALS
    from robuststats.search._spec import HeuristicSpec as HeuristicSpec
    from robuststats.search._spec import ReevaluationSpec as ReevaluationSpec
    from robuststats.search._spec import SearchSection as SearchSection
    from robuststats.search._spec import SearchSpec as SearchSpec
    from robuststats.search._storage import check_storage as check_storage
    from robuststats.search._storage import default_storage as default_storage
    from robuststats.search._storage import normalise_url as normalise_url

__getattr__, __dir__ = lazy_package(globals())
