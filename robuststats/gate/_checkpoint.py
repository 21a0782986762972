"""Evaluating a candidate checkpoint under the baseline's protocol.

The baseline's resolved study spec is turned into a one-condition study, ``candidate``,
whose ``checkpoint`` is the candidate (docs/checkpoints.md) and which keeps the baseline's
task, items, error model (the condition's ``eval_kind``/``eval_ops`` included), noise seeds
and batch size, with the gate's noise levels only. It runs through the study machinery
(checkpoint checks before anything is loaded, verified injection, the same evaluator) in a
fresh run directory: a CI checkpoint is often rewritten in place at the same path, and a
run hash covers the path, not the weights, so nothing is ever reused.
"""

from __future__ import annotations

import copy
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robuststats.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

    from robuststats.runs.spec import StudySpec

__all__ = ["candidate_spec", "evaluate_checkpoint", "same_model_note"]


def candidate_spec(spec: dict[str, Any], condition: str, checkpoint: str,
                   seeds: Sequence[int], levels: Sequence[float]) -> StudySpec:
    """The one-condition study that evaluates ``checkpoint`` as the baseline's ``condition``
    was evaluated, at ``levels`` (the clean level added when the baseline has it)."""
    from robuststats.runs.spec import StudySpec

    data = copy.deepcopy(spec)
    base = (data.get("conditions") or {}).get(condition) or {}
    pattern = checkpoint if Path(checkpoint).is_absolute() else str(Path(checkpoint).absolute())
    cond: dict[str, Any] = {"description": "gate candidate", "checkpoint": pattern}
    for key in ("eval_kind", "eval_ops"):
        if base.get(key) is not None:
            cond[key] = base[key]
    data["name"] = f"{data.get('name', 'study')}.gate"
    data["conditions"] = {"candidate": cond}
    data["seeds"] = [int(s) for s in seeds]
    data["hypotheses"] = []
    for key in ("sweep", "diagnose", "spec_format"):
        data.pop(key, None)
    evaluation = dict(data.get("evaluation") or {})
    old = {float(v) for v in evaluation.get("noise_levels") or [0.0]}
    evaluation["noise_levels"] = sorted({float(v) for v in levels} | ({0.0} & old))
    data["evaluation"] = evaluation
    return StudySpec.from_dict(data, source=f"CANDIDATE {checkpoint!r} under the baseline's "
                                            "protocol")


def evaluate_checkpoint(spec: StudySpec, *, runs: str | Path | None = None, workers: int = 1,
                        progress: bool | Callable[[int, int], Any] = False
                        ) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """Evaluate ``spec``'s checkpoint(s); ``(outcomes, injections, facts)``.

    The checkpoints, the task and the evaluator are checked first (one ``InputError``
    naming the problem, nothing loaded). A cell that fails is an ``InputError`` naming the
    cell and the last line of its error: a gate never decides on part of its protocol.
    """
    from robuststats.runs import (
        Run,
        RunLedger,
        check_checkpoints,
        execute,
        last_line,
        plan,
        planned_items,
        preflight,
    )
    from robuststats.runs.identities import recorded_checkpoints

    task = preflight(spec)
    refs = check_checkpoints(spec)
    items = [str(it.item_id) for it in planned_items(spec, task)]
    with tempfile.TemporaryDirectory(prefix="robuststats-gate-") as tmp:
        root = Path(runs) / spec.name if runs is not None else Path(tmp) / spec.name
        with RunLedger.open(root, spec, fresh=True) as ledger:
            cells = plan(spec)
            with Run.progress(progress, len(cells), 0, desc="candidate") as bar:
                report = execute(ledger, spec, cells, workers=workers, progress=bar)
            outcomes = ledger.outcomes(cells, items=items)
            failures = ledger.failures()
            injections = ledger.injections(cells)
            missing = [c for c in cells if c.key in failures]
            if missing or report.cells_failed:
                key = missing[0].key if missing else "?"
                last = last_line(failures.get(key, "")) or "no error recorded"
                raise InputError(f"CANDIDATE: evaluating cell {key} failed "
                                 f"({len(missing) or report.cells_failed} cell(s) in all): "
                                 f"{last}")
            without = [c.key for c in ledger.without_injections(cells)]
            identities = recorded_checkpoints(ledger.root)
    facts = {"checkpoints": {f"{c}__s{s}": str(ref.path) for (c, s), ref in refs.items()},
             # what each path held when it was evaluated (a CI path is rewritten in place)
             "checkpoint_sha256": {k: v["sha256"] for k, v in identities.items()},
             "cells": len(cells), "cells_without_injection_counts": without,
             "run_dir": str(root) if runs is not None else None}
    return outcomes, injections, facts


def same_model_note(facts: dict[str, Any], baseline_models: dict[str, str],
                    baseline: str) -> str | None:
    """A note when a candidate checkpoint is, by its SHA-256, one the baseline's outcomes
    were evaluated from (a path not updated in CI): the gate then compares a model with
    itself."""
    same = sorted(job for job, sha in (facts.get("checkpoint_sha256") or {}).items()
                  if sha in set(baseline_models.values()))
    if not same:
        return None
    return (f"the candidate's checkpoint ({', '.join(same)}) is one the baseline {baseline} "
            "was evaluated from (the same SHA-256 of its weight, config and tokenizer "
            "files): the gate compares a model with itself.")
