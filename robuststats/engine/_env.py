"""Apply a noise spec given by environment variable, for worker processes.

``ROBUSTSTATS_NOISE`` holds either inline JSON (a value starting with ``{``) or the path
of a YAML/JSON spec file. ``apply_from_env(model)`` opens an :func:`inject` session in the
calling thread and keeps it open; ``stop_from_env(model)`` closes it (verifying it) and
returns the session with its statistics.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from robuststats.engine._spec import NoiseSpec
from robuststats.errors import InputError

if TYPE_CHECKING:  # torch is imported only when a session is opened
    from torch import nn

    from robuststats.engine._inject import Injection
    from robuststats.engine._session import NoiseSession

__all__ = ["ENV_VAR", "apply_from_env", "spec_from_env", "stop_from_env"]

ENV_VAR = "ROBUSTSTATS_NOISE"
_OPEN: dict[int, Injection] = {}


def spec_from_env(environ: Mapping[str, str] | None = None) -> NoiseSpec | None:
    """The spec in ``ROBUSTSTATS_NOISE`` (``None`` when unset or empty)."""
    env = os.environ if environ is None else environ
    raw = env.get(ENV_VAR, "").strip()
    if not raw:
        return None
    if raw.startswith("{"):
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"`{ENV_VAR}` holds invalid JSON ({exc.msg} at char {exc.pos}).") from None
        try:
            return NoiseSpec.from_dict(data)
        except InputError as exc:
            raise InputError(f"`{ENV_VAR}`: {exc}") from None
    return NoiseSpec.from_file(raw)


def apply_from_env(
    model: nn.Module, *, environ: Mapping[str, str] | None = None, verify: bool | str = True
) -> NoiseSession | None:
    """Open a session on ``model`` from ``ROBUSTSTATS_NOISE``; ``None`` when it is unset.

    A session already opened this way on ``model`` is stopped first.
    """
    from robuststats.engine._inject import inject

    spec = spec_from_env(environ)
    if id(model) in _OPEN:
        stop_from_env(model)
    if spec is None:
        return None
    injection = inject(model, spec, verify=verify)
    session = injection.__enter__()
    _OPEN[id(model)] = injection
    return session


def stop_from_env(model: nn.Module) -> NoiseSession | None:
    """Close the session :func:`apply_from_env` opened on ``model`` (``None`` if none).

    Raises :class:`~robuststats.engine.InjectionVerificationError` like ``inject`` would.
    """
    injection = _OPEN.pop(id(model), None)
    if injection is None:
        return None
    injection.__exit__(None, None, None)
    return injection.session
