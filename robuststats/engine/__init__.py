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

from robuststats._lazy import lazy_package

if TYPE_CHECKING:  # the public names, read by static analysers and by lazy_package
    from robuststats.engine._aqn import AQNPerturbation as AQNPerturbation
    from robuststats.engine._aqn import AQNSchedule as AQNSchedule
    from robuststats.engine._aqn import aqn_perturb as aqn_perturb
    from robuststats.engine._attention import UnsupportedAttentionError as UnsupportedAttentionError
    from robuststats.engine._env import ENV_VAR as ENV_VAR
    from robuststats.engine._env import INJECTION_LOG_VAR as INJECTION_LOG_VAR
    from robuststats.engine._env import apply_from_env as apply_from_env
    from robuststats.engine._env import spec_from_env as spec_from_env
    from robuststats.engine._env import stop_from_env as stop_from_env
    from robuststats.engine._error_models import quantize as quantize
    from robuststats.engine._inject import Injection as Injection
    from robuststats.engine._inject import inject as inject
    from robuststats.engine._inject import required_ops as required_ops
    from robuststats.engine._model_map import build_model_map as build_model_map
    from robuststats.engine._philox import GeneratorUnavailableError as GeneratorUnavailableError
    from robuststats.engine._philox import check_generator as check_generator
    from robuststats.engine._quantize import fake_quantize as fake_quantize
    from robuststats.engine._session import InjectionVerificationError as InjectionVerificationError
    from robuststats.engine._session import NoiseSession as NoiseSession
    from robuststats.engine._spec import ALL_OPS as ALL_OPS
    from robuststats.engine._spec import GENERATORS as GENERATORS
    from robuststats.engine._spec import KINDS as KINDS
    from robuststats.engine._spec import MATMUL_OPS as MATMUL_OPS
    from robuststats.engine._spec import OP_PRESETS as OP_PRESETS
    from robuststats.engine._spec import PHASES as PHASES
    from robuststats.engine._spec import TARGETS as TARGETS
    from robuststats.engine._spec import NoiseSpec as NoiseSpec

__getattr__, __dir__ = lazy_package(globals())
