"""Bundled noisy-ops engine: scoped, verified noise injection into torch models.

```python
from robuststats.engine import NoiseSpec, inject
spec = NoiseSpec(scale=0.05, phases="forward", ops="matmul_only", seed=0)
with inject(model, spec) as session:
    loss = model(**batch).loss
    loss.backward()
session.stats  # counts and realised RMS noise ratio per layer × op × phase
```

See ``docs/engine.md`` for the spec fields, ops, error models and guarantees.
"""

from __future__ import annotations

from robuststats.engine._aqn import AQNPerturbation, AQNSchedule, aqn_perturb
from robuststats.engine._env import ENV_VAR, apply_from_env, spec_from_env, stop_from_env
from robuststats.engine._error_models import quantize
from robuststats.engine._inject import Injection, inject, required_ops
from robuststats.engine._session import InjectionVerificationError, NoiseSession
from robuststats.engine._spec import ALL_OPS, KINDS, OP_PRESETS, PHASES, NoiseSpec

__all__ = [
    "ALL_OPS",
    "ENV_VAR",
    "KINDS",
    "OP_PRESETS",
    "PHASES",
    "AQNPerturbation",
    "AQNSchedule",
    "Injection",
    "InjectionVerificationError",
    "NoiseSession",
    "NoiseSpec",
    "apply_from_env",
    "aqn_perturb",
    "inject",
    "quantize",
    "required_ops",
    "spec_from_env",
    "stop_from_env",
]
