"""The identity of a run directory: the hash of what determines a study's outcomes.

:func:`run_hash` covers the task, model, trainer, conditions (without descriptions),
evaluation and seeds of a resolved spec (:meth:`StudySpec.resolved`). Hypotheses, analysis
options, the name, version and description are outside it: changing them changes what is
concluded from the outcomes, not the outcomes, so a run directory is re-analysed instead of
recomputed. A ``spec.json`` written before run hashes (format 1) stored the whole resolved
spec, from which its run hash is recomputed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from robuststats._canonical import canonical_sha256
from robuststats.runs.spec import StudySpec

__all__ = ["read_spec_file", "run_hash", "run_scope", "stored_run_hash"]

#: keys of the resolved spec that determine outcomes (what a run directory is for)
_RUN_KEYS = ("task", "model", "trainer", "conditions", "evaluation", "seeds", "spec_format")


def run_scope(resolved: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a resolved spec (:meth:`StudySpec.resolved`) that determines outcomes.

    Task, model, trainer, the conditions (without their descriptions), the evaluation and
    the seeds (which shape the plan). Not the name, version, description, hypotheses or
    analysis options: they change what is concluded from the outcomes, not the outcomes.
    """
    scope = {key: resolved.get(key) for key in _RUN_KEYS}
    conditions = resolved.get("conditions")
    if isinstance(conditions, Mapping):
        scope["conditions"] = {
            name: ({k: v for k, v in c.items() if k != "description"}
                   if isinstance(c, Mapping) else c)
            for name, c in conditions.items()}
    return scope



def run_hash(spec: StudySpec | Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of :func:`run_scope`: the identity of a run directory.

    Accepts a spec or its resolved form (so the hash of an old run directory can be
    recomputed from the spec it stored).
    """
    resolved = spec.resolved() if isinstance(spec, StudySpec) else spec
    return canonical_sha256(run_scope(resolved))



def read_spec_file(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None



def stored_run_hash(stored: Mapping[str, Any] | None) -> str | None:
    """The run hash of a stored ``spec.json``: recorded (format 2), or recomputed from the
    resolved spec a format-1 directory stored; ``None`` when unreadable."""
    if stored is None:
        return None
    if isinstance(stored.get("run_hash"), str):
        return str(stored["run_hash"])
    spec = stored.get("spec")
    return run_hash(spec) if isinstance(spec, Mapping) else None
