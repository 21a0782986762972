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

from robuststats._lazy import lazy_package

if TYPE_CHECKING:  # the public names, read by static analysers and by lazy_package
    from robuststats.config.diagnose import LEVELS as LEVELS
    from robuststats.config.diagnose import DiagnoseSpec as DiagnoseSpec
    from robuststats.diagnose._channels import ChannelStats as ChannelStats
    from robuststats.diagnose._channels import capture_channels as capture_channels
    from robuststats.diagnose._channels import channel_table as channel_table
    from robuststats.diagnose._report import protection_plan as protection_plan
    from robuststats.diagnose._report import sensitivity_profile as sensitivity_profile
    from robuststats.diagnose._report import write_diagnosis as write_diagnosis
    from robuststats.diagnose._runner import Diagnosis as Diagnosis
    from robuststats.diagnose._runner import DiagnosisPlan as DiagnosisPlan
    from robuststats.diagnose._runner import probe_model as probe_model
    from robuststats.diagnose._runner import resolve_plan as resolve_plan
    from robuststats.diagnose._runner import run_diagnosis as run_diagnosis
    from robuststats.diagnose._statistics import CLEAN as CLEAN
    from robuststats.diagnose._statistics import avalanche_table as avalanche_table
    from robuststats.diagnose._statistics import interaction as interaction
    from robuststats.diagnose._statistics import target_table as target_table
    from robuststats.diagnose._targets import Target as Target
    from robuststats.diagnose._targets import layer_targets as layer_targets
    from robuststats.diagnose._targets import operator_targets as operator_targets
    from robuststats.diagnose._targets import window_targets as window_targets

__getattr__, __dir__ = lazy_package(globals())
