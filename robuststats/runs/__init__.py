"""The run platform under every command: one way to run work that survives a kill.

- a run directory per study, locked while in use (:class:`RunLedger`, :mod:`.lock`), whose
  cells and models are written atomically and checked when read back;
- plans of cells and training jobs (:mod:`.plan`) and their hashes (:mod:`.runhash`);
- executors: in this process, a local spawn pool (:mod:`.executor`, :mod:`.workers`) or Ray
  (:mod:`.ray_executor`), all returning an :class:`ExecutionReport`;
- one worker start-up and thread policy (:mod:`.workers`), SIGTERM handled like Ctrl-C
  (:mod:`.signals`), one progress protocol (:mod:`.progress`), output directories checked
  before any compute (:mod:`.dirs`) and the machine facts of a manifest
  (:mod:`.machine`).

``study``, ``diagnose``, ``search``, ``gate`` and ``divergence`` are features on this
platform; none of them imports another. Names are imported on first use, so importing
the package never imports torch.
"""

from __future__ import annotations

from robuststats._lazy import lazy_exports

# eager: light (no torch), and the function ``plan`` must shadow the submodule ``plan``
from robuststats.runs.plan import Cell, TrainJob, jobs, plan

_LAZY = {
    "StudySpec": "robuststats.runs.spec",
    "RunLedger": "robuststats.runs.ledger",
    "run_hash": "robuststats.runs.ledger",
    "first_line": "robuststats.runs.ledger",
    "last_line": "robuststats.runs.ledger",
    "RunInUseError": "robuststats.runs.lock",
    "ExecutionReport": "robuststats.runs.executor",
    "JobCounts": "robuststats.runs.executor",
    "execute": "robuststats.runs.executor",
    "load_or_train": "robuststats.runs.executor",
    "planned_items": "robuststats.runs.checks",
    "preflight": "robuststats.runs.checks",
    "check_checkpoints": "robuststats.runs.checks",
    "build_task": "robuststats.runs.checks",
    "build_trainer": "robuststats.runs.checks",
    "check_output_dir": "robuststats.runs.dirs",
    "errno_hint": "robuststats.runs.dirs",
    "Interrupted": "robuststats.runs.signals",
    "signals_as_interrupts": "robuststats.runs.signals",
    "device": "robuststats.runs.machine",
    "environment": "robuststats.runs.machine",
    "DiskProgress": "robuststats.runs.progress",
    "Progress": "robuststats.runs.progress",
    "ProgressArg": "robuststats.runs.progress",
    "progress_bar": "robuststats.runs.progress",
    "one_torch_thread": "robuststats.runs.workers",
    "run_pool": "robuststats.runs.workers",
    "spawn_context": "robuststats.runs.workers",
    "stop_processes": "robuststats.runs.workers",
    "worker_init": "robuststats.runs.workers",
    "Run": "robuststats.runs.run",
    "utc_now": "robuststats.runs.run",
}

__all__ = [
    *sorted(_LAZY), "Cell", "TrainJob", "jobs", "plan"]

__getattr__, __dir__ = lazy_exports("robuststats.runs", _LAZY, globals())
