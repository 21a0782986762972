"""Apply a noise spec given by environment variable, for worker processes.

``ROBUSTSTATS_NOISE`` holds either inline JSON (a value starting with ``{``) or the path
of a YAML/JSON spec file. ``apply_from_env(model)`` opens an :func:`inject` session in the
calling thread and keeps it open; ``stop_from_env(model)`` closes it (verifying it) and
returns the session with its statistics.

``ROBUSTSTATS_INJECTION_LOG``, when it names a file, makes every session opened here leave
proof that it injected: when ``stop_from_env`` closes it, or at process exit while it is
still open, one JSON line is appended to that file with the process id, host, the ops the
session had to inject, whether forward and backward ran, and the counts per layer × op ×
phase. A runner that launched the process reads these lines (one per process and model)
and refuses a checkpoint made by processes that injected nothing.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from robuststats.engine._spec import NoiseSpec
from robuststats.errors import InputError

if TYPE_CHECKING:  # torch is imported only when a session is opened
    from torch import nn

    from robuststats.engine._inject import Injection
    from robuststats.engine._session import NoiseSession

__all__ = ["ENV_VAR", "INJECTION_LOG_VAR", "apply_from_env", "spec_from_env", "stop_from_env"]

ENV_VAR = "ROBUSTSTATS_NOISE"
INJECTION_LOG_VAR = "ROBUSTSTATS_INJECTION_LOG"
_OPEN: dict[int, Injection] = {}
#: the injection log each open session writes to (read from the environment it was opened with)
_LOG_PATH: dict[int, str] = {}


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

    env = os.environ if environ is None else environ
    spec = spec_from_env(env)
    if id(model) in _OPEN:
        stop_from_env(model)
    if spec is None:
        return None
    injection = inject(model, spec, verify=verify)
    session = injection.__enter__()
    _OPEN[id(model)] = injection
    log = env.get(INJECTION_LOG_VAR, "").strip()
    if log:
        _LOG_PATH[id(injection)] = log
        _register_exit_log()
    return session


def stop_from_env(model: nn.Module) -> NoiseSession | None:
    """Close the session :func:`apply_from_env` opened on ``model`` (``None`` if none).

    Raises :class:`~robuststats.engine.InjectionVerificationError` like ``inject`` would.
    """
    injection = _OPEN.pop(id(model), None)
    if injection is None:
        return None
    try:
        injection.__exit__(None, None, None)
    finally:
        # the counts are logged whether or not verification passed: the runner decides
        _log_injections(injection, "stop")
    return injection.session


_EXIT_LOG_REGISTERED = False


def _register_exit_log() -> None:
    global _EXIT_LOG_REGISTERED
    if not _EXIT_LOG_REGISTERED:
        atexit.register(_log_open_sessions)
        _EXIT_LOG_REGISTERED = True


def _log_open_sessions() -> None:
    """At interpreter exit: log the sessions nobody stopped (a worker that just ends)."""
    for injection in list(_OPEN.values()):
        _log_injections(injection, "exit")


def _log_injections(injection: Injection, event: str) -> None:
    """Append one JSON line with the session's counts to ``ROBUSTSTATS_INJECTION_LOG``."""
    path = _LOG_PATH.pop(id(injection), "")
    session = injection.session
    if not path or session is None:
        return
    from robuststats.engine._inject import required_ops

    stats = session.stats
    record = {
        "pid": os.getpid(), "host": socket.gethostname(), "event": event,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "required_ops": sorted(required_ops(injection.spec, injection.map)),
        "phase_scales": dict(session.phase_scales),
        "forward_calls": int(session.forward_calls), "backward_ran": bool(session.backward_ran),
        "counts": [{"layer": int(r.layer), "op": str(r.op), "phase": str(r.phase),
                    "count": int(r.count)} for r in stats.itertuples(index=False)],
    }
    line = (json.dumps(record, sort_keys=True) + "\n").encode()
    # one write() on an O_APPEND descriptor: lines of concurrent processes do not interleave
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
