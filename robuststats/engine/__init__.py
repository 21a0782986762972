"""Bundled noisy-ops engine: scoped, verified noise injection into torch models.

```python
from robuststats.engine import NoiseSpec, inject
spec = NoiseSpec(scale=0.05, phases="forward", ops="matmul_only", seed=0)
with inject(model, spec) as session:
    loss = model(**batch).loss
    loss.backward()
session.stats  # counts and realised RMS noise ratio per layer × op × phase
```

Names load on first use: ``NoiseSpec``, ``AQNSchedule`` and the op/kind tables need no
torch, so a study file can be validated (and ``robuststats analyze`` run) on a machine
without it; ``inject``, ``aqn_perturb`` and the sessions import torch when first touched.

See ``docs/engine.md`` for the spec fields, ops, error models and guarantees.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robuststats._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "INJECTION_LOG_VAR": "robuststats.engine._env",
    "build_model_map": "robuststats.engine._model_map",
    # torch-free
    "ALL_OPS": "robuststats.engine._spec",
    "KINDS": "robuststats.engine._spec",
    "MATMUL_OPS": "robuststats.engine._spec",
    "TARGETS": "robuststats.engine._spec",
    "OP_PRESETS": "robuststats.engine._spec",
    "PHASES": "robuststats.engine._spec",
    "NoiseSpec": "robuststats.engine._spec",
    "AQNSchedule": "robuststats.engine._aqn",
    "ENV_VAR": "robuststats.engine._env",
    "spec_from_env": "robuststats.engine._env",
    # torch
    "AQNPerturbation": "robuststats.engine._aqn",
    "aqn_perturb": "robuststats.engine._aqn",
    "apply_from_env": "robuststats.engine._env",
    "stop_from_env": "robuststats.engine._env",
    "quantize": "robuststats.engine._error_models",
    "fake_quantize": "robuststats.engine._quantize",
    "Injection": "robuststats.engine._inject",
    "inject": "robuststats.engine._inject",
    "required_ops": "robuststats.engine._inject",
    "InjectionVerificationError": "robuststats.engine._session",
    "NoiseSession": "robuststats.engine._session",
    "UnsupportedAttentionError": "robuststats.engine._attention",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # static analysers see the real names
    from robuststats.engine._aqn import AQNPerturbation, AQNSchedule, aqn_perturb  # noqa: F401
    from robuststats.engine._attention import UnsupportedAttentionError  # noqa: F401
    from robuststats.engine._env import (  # noqa: F401
        ENV_VAR,
        apply_from_env,
        spec_from_env,
        stop_from_env,
    )
    from robuststats.engine._error_models import quantize  # noqa: F401
    from robuststats.engine._inject import Injection, inject, required_ops  # noqa: F401
    from robuststats.engine._quantize import fake_quantize  # noqa: F401
    from robuststats.engine._session import InjectionVerificationError, NoiseSession  # noqa: F401
    from robuststats.engine._spec import (  # noqa: F401
        ALL_OPS,
        KINDS,
        MATMUL_OPS,
        OP_PRESETS,
        PHASES,
        TARGETS,
        NoiseSpec,
    )


__getattr__, __dir__ = lazy_exports('robuststats.engine', _EXPORTS, globals())
