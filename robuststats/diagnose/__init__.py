"""The diagnostic probe: noise as an oscilloscope, with statistics (``robuststats diagnose``).

Three levels (seeds 003 and 004), each answered with intervals and multiplicity-adjusted
tests instead of fixed thresholds on single runs:

- **operator**: noise in one op type at a time (``linear``, ``softmax``, ``rms_norm``, ...);
- **layer** and **window**: noise in one decoder layer at a time, and in windows of k
  consecutive layers, with an interval on each window's interaction (avalanche);
- **channel**: running per-channel activation magnitudes at the inputs of chosen modules.

``run_diagnosis(spec)`` runs a study's diagnosis and writes a versioned result;
:func:`target_table`, :func:`avalanche_table` and :func:`channel_table` are pure functions
of stored outcomes and channel statistics. See ``docs/diagnose.md``.

Names load on first use: the spec and the statistics need no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robuststats._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "protection_plan": "robuststats.diagnose._report",
    "DiagnoseSpec": "robuststats.config.diagnose",
    "LEVELS": "robuststats.config.diagnose",
    "Target": "robuststats.diagnose._targets",
    "operator_targets": "robuststats.diagnose._targets",
    "layer_targets": "robuststats.diagnose._targets",
    "window_targets": "robuststats.diagnose._targets",
    "CLEAN": "robuststats.diagnose._statistics",
    "target_table": "robuststats.diagnose._statistics",
    "avalanche_table": "robuststats.diagnose._statistics",
    "interaction": "robuststats.diagnose._statistics",
    "ChannelStats": "robuststats.diagnose._channels",
    "channel_table": "robuststats.diagnose._channels",
    "capture_channels": "robuststats.diagnose._channels",
    "DiagnosisPlan": "robuststats.diagnose._plan",
    "Diagnosis": "robuststats.diagnose._runner",
    "resolve_plan": "robuststats.diagnose._plan",
    "probe_model": "robuststats.diagnose._probe",
    "run_diagnosis": "robuststats.diagnose._runner",
    "write_diagnosis": "robuststats.diagnose._report",
    "sensitivity_profile": "robuststats.diagnose._report",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # static analysers see the real names
    from robuststats.config.diagnose import LEVELS, DiagnoseSpec  # noqa: F401
    from robuststats.diagnose._channels import (  # noqa: F401
        ChannelStats,
        capture_channels,
        channel_table,
    )
    from robuststats.diagnose._report import sensitivity_profile, write_diagnosis  # noqa: F401
    from robuststats.diagnose._runner import (  # noqa: F401
        Diagnosis,
        DiagnosisPlan,
        probe_model,
        resolve_plan,
        run_diagnosis,
    )
    from robuststats.diagnose._statistics import (  # noqa: F401
        CLEAN,
        avalanche_table,
        interaction,
        target_table,
    )
    from robuststats.diagnose._targets import (  # noqa: F401
        Target,
        layer_targets,
        operator_targets,
        window_targets,
    )


__getattr__, __dir__ = lazy_exports("robuststats.diagnose", _EXPORTS, globals())
