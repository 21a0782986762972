"""Versions and machine facts that every result version records in its manifest."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from robuststats._fields import DEVICE_PATTERN
from robuststats._version import __version__
from robuststats.errors import InputError

__all__ = ["DEVICE_PATTERN", "check_torch_device", "device", "environment"]


def _git_commit() -> dict[str, Any]:
    root = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, capture_output=True, text=True, timeout=10,
                               check=True).stdout.strip() != ""
        return {"git_commit": sha, "git_dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None, "git_dirty": None}


def environment() -> dict[str, Any]:
    """Versions and machine facts for the manifest (without importing torch)."""
    versions = {}
    for dist in ("torch", "transformers", "numpy", "scipy", "pandas", "statsmodels"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    return {"package_version": __version__, **_git_commit(), "versions": versions,
            "python": platform.python_version(), "platform": platform.platform(),
            "cpu_count": os.cpu_count(), "cpu": _cpu_model(), **_cpu_capability()}


def _cpu_model() -> str:
    """The processor's model name (``/proc/cpuinfo`` where there is one)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cpu_capability() -> dict[str, str]:
    """torch's CPU kernel level (``AVX512``, ``AVX2``, ...) when torch is already loaded.

    Trained weights depend on it: the vectorised kernels round differently, and over
    hundreds of training steps that changes item outcomes (docs/studies.md,
    "Reproducibility"). Recorded so two versions from different machines can be told apart.
    """
    torch = sys.modules.get("torch")
    try:
        return {"cpu_capability": str(torch.backends.cpu.get_cpu_capability())} if torch else {}
    except Exception:  # an old or partial torch: nothing to record
        return {}


def device() -> str:
    """Where training and evaluation ran, in words (imports torch)."""
    import torch

    if torch.cuda.is_available():
        return f"cuda ({torch.cuda.get_device_name(0)}), training/eval device chosen by trainer"
    return f"cpu ({platform.processor() or platform.machine()})"


def check_torch_device(dev: str, name: str) -> None:
    """A device that this machine lacks is an :class:`InputError` naming ``name``, raised
    before any compute (``npu`` needs the ``torch_npu`` extension, which registers
    ``torch.npu``). Nothing ever falls back to the CPU in silence."""
    import torch

    if not isinstance(dev, str) or not DEVICE_PATTERN.match(dev):
        raise InputError(f"`{name}` must be cpu, cuda, cuda:N, npu, npu:N, xpu, xpu:N or mps, "
                         f"got {dev!r}.")
    kind, _, index_text = dev.partition(":")
    index = int(index_text) if index_text else 0
    if kind == "npu":
        try:
            import torch_npu  # noqa: F401
        except ImportError:
            raise InputError(f"`{name}`: device {dev!r} needs the torch_npu extension, "
                             "which is not installed here.") from None
    backend = getattr(torch, kind, None) if kind in ("cuda", "npu", "xpu") else None
    if kind in ("cuda", "npu", "xpu"):
        if backend is None or not backend.is_available():
            raise InputError(f"`{name}`: device {dev!r} is not available here "
                             f"(torch.{kind}.is_available() is False).")
        if index >= backend.device_count():
            raise InputError(f"`{name}`: device {dev!r} does not exist "
                             f"({backend.device_count()} {kind.upper()} device(s)).")
    if dev == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise InputError(f"`{name}`: device 'mps' is not available here.")
